// LineReader: reads a text source (a file or an in-memory string) one line at a time, with a
// cap on line length, for the example data readers (SST trees, PTB text, vocabularies).
//
// Invariants: a line never includes its '\n' nor a trailing '\r' (CRLF files read like LF
// files); line numbers are 1-based and count every physical line, blank ones included; a final
// line without '\n' is still a line. A UTF-8 byte order mark (EF BB BF) at the very start of the
// source, which some editors write, is skipped: it is not part of line 1, whose columns count
// from after it. A line longer than the cap is an error naming the source
// and the line, and a file is never held in memory beyond one chunk plus one line, so a
// multi-gigabyte line cannot exhaust memory. Not thread-safe; one reader per thread.
#pragma once

#include <cstddef>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cavs::examples {

// The default cap on one line: 1 MiB.
inline constexpr size_t kDefaultMaxLineBytes = size_t{1} << 20;

// Debian's Abseil has its own string_view type; this bridges std::string_view into absl calls.
inline absl::string_view AbslView(std::string_view s) { return {s.data(), s.size()}; }

// Quotes `text` for an error message: non-printable bytes escaped, at most `max_bytes` shown.
std::string QuoteForError(std::string_view text, size_t max_bytes = 24);

class LineReader {
 public:
  // Opens `path`; NotFound (with the OS reason) if it cannot be opened.
  [[nodiscard]] static absl::StatusOr<LineReader> OpenFile(
      const std::string& path, size_t max_line_bytes = kDefaultMaxLineBytes);
  // Reads from `text`, which must outlive the reader; `name` stands for it in errors.
  static LineReader FromString(std::string_view text, std::string_view name,
                               size_t max_line_bytes = kDefaultMaxLineBytes);

  // Next line into *line (valid until the next call). Returns false at the end of the source,
  // an error for an over-long line or a read failure.
  [[nodiscard]] absl::StatusOr<bool> Next(std::string_view* line);

  // The first byte of the first line that is not blank (only spaces and tabs, and a trailing
  // '\r'), without consuming it: the blank lines before it are consumed (and counted), so the
  // next Next() returns its line. std::nullopt where nothing but blank lines remains. This is
  // how a reader sniffs a file's format: a pipe cannot be opened and read a second time. Over-
  // long and unreadable lines are the errors Next() would give.
  [[nodiscard]] absl::StatusOr<std::optional<char>> PeekNonBlank();

  // 1-based number of the line last returned by Next (0 before the first).
  int line_number() const { return line_number_; }
  // The file path or the name given to FromString.
  const std::string& name() const { return name_; }
  // An InvalidArgument error "name:line:column: message" at the current line.
  absl::Status Error(size_t column, std::string_view message) const;

 private:
  struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  LineReader(std::string name, size_t max_line_bytes)
      : name_(std::move(name)), max_line_bytes_(max_line_bytes) {}
  // The source's bytes (offsets, not views, survive a move of the reader).
  std::string_view data() const { return file_ ? std::string_view(buffer_) : text_; }
  // Drops consumed bytes and appends one chunk of the file to buffer_; sets eof_ at the end.
  absl::Status Fill();
  // Before the first line: skips a UTF-8 byte order mark.
  absl::Status SkipByteOrderMark();

  std::string name_;
  size_t max_line_bytes_;
  std::unique_ptr<std::FILE, FileCloser> file_;  // null for a string source
  std::string buffer_;                           // file data, from the unread line on
  std::string_view text_;                        // a string source's data
  size_t pos_ = 0;                               // first unread byte of buffer_ or text_
  bool eof_ = false;
  bool at_start_ = true;  // nothing read yet: a byte order mark may come
  int line_number_ = 0;
};

}  // namespace cavs::examples
