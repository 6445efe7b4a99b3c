#include "examples/data/line_reader.h"

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace cavs::examples {
namespace {

constexpr size_t kChunkBytes = size_t{64} << 10;

}  // namespace

std::string QuoteForError(std::string_view text, size_t max_bytes) {
  const bool cut = text.size() > max_bytes;
  if (cut) text = text.substr(0, max_bytes);
  return absl::StrCat("'", absl::CHexEscape(AbslView(text)), cut ? "...'" : "'");
}

absl::StatusOr<LineReader> LineReader::OpenFile(const std::string& path, size_t max_line_bytes) {
  LineReader reader(path, max_line_bytes);
  errno = 0;
  reader.file_.reset(std::fopen(path.c_str(), "rb"));
  if (reader.file_ == nullptr) {
    const int err = errno;
    return absl::NotFoundError(
        absl::StrCat("cannot open '", path, "': ", err != 0 ? std::strerror(err) : "unknown"));
  }
  return reader;
}

LineReader LineReader::FromString(std::string_view text, std::string_view name,
                                  size_t max_line_bytes) {
  LineReader reader(std::string(name), max_line_bytes);
  reader.text_ = text;
  reader.eof_ = true;
  return reader;
}

absl::Status LineReader::Fill() {
  buffer_.erase(0, pos_);
  pos_ = 0;
  const size_t old_size = buffer_.size();
  buffer_.resize(old_size + kChunkBytes);
  const size_t got = std::fread(buffer_.data() + old_size, 1, kChunkBytes, file_.get());
  buffer_.resize(old_size + got);
  if (got < kChunkBytes) {
    if (std::ferror(file_.get())) {
      return absl::DataLossError(
          absl::StrCat("read error in '", name_, "' after line ", line_number_));
    }
    eof_ = true;
  }
  return absl::OkStatus();
}

absl::Status LineReader::SkipByteOrderMark() {
  constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";
  at_start_ = false;
  while (file_ && data().size() - pos_ < kUtf8Bom.size() && !eof_) CAVS_RETURN_IF_ERROR(Fill());
  if (data().substr(pos_, kUtf8Bom.size()) == kUtf8Bom) pos_ += kUtf8Bom.size();
  return absl::OkStatus();
}

absl::StatusOr<bool> LineReader::Next(std::string_view* line) {
  if (at_start_) CAVS_RETURN_IF_ERROR(SkipByteOrderMark());
  size_t scanned = pos_;  // bytes before this offset hold no '\n'
  while (true) {
    const std::string_view all = data();
    const size_t newline = all.find('\n', scanned);
    const size_t end = newline == std::string_view::npos ? all.size() : newline;
    if (end - pos_ > max_line_bytes_) {
      ++line_number_;
      return Error(max_line_bytes_ + 1,
                   absl::StrCat("line longer than ", max_line_bytes_, " bytes"));
    }
    if (newline != std::string_view::npos || eof_) {
      if (newline == std::string_view::npos && pos_ == all.size()) return false;
      *line = all.substr(pos_, end - pos_);
      if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
      pos_ = newline == std::string_view::npos ? all.size() : newline + 1;
      ++line_number_;
      return true;
    }
    scanned = all.size() - pos_;
    absl::Status filled = Fill();  // moves the unread bytes to offset 0
    if (!filled.ok()) return filled;
  }
}

absl::StatusOr<std::optional<char>> LineReader::PeekNonBlank() {
  if (at_start_) CAVS_RETURN_IF_ERROR(SkipByteOrderMark());
  size_t i = pos_;  // the byte being looked at; pos_ is the start of its line
  while (true) {
    const std::string_view all = data();
    if (i - pos_ > max_line_bytes_) {
      ++line_number_;
      return Error(max_line_bytes_ + 1,
                   absl::StrCat("line longer than ", max_line_bytes_, " bytes"));
    }
    // A '\r' is blank only as a line's last byte, so a '\r' at the end of the data needs the
    // next chunk (or the end of the file) to tell.
    const bool need_more = i == all.size() || (all[i] == '\r' && i + 1 == all.size());
    if (need_more && !eof_) {
      const size_t offset = i - pos_;
      CAVS_RETURN_IF_ERROR(Fill());  // moves the unread bytes to offset 0
      i = pos_ + offset;
      continue;
    }
    if (i == all.size()) {
      pos_ = i;  // only blank lines were left: Next() now ends the file
      return std::nullopt;
    }
    const char c = all[i];
    if (c == ' ' || c == '\t' || (c == '\r' && (i + 1 == all.size() || all[i + 1] == '\n'))) {
      ++i;
    } else if (c == '\n') {
      pos_ = ++i;  // a blank line, consumed
      ++line_number_;
    } else {
      return c;
    }
  }
}

absl::Status LineReader::Error(size_t column, std::string_view message) const {
  return absl::InvalidArgumentError(
      absl::StrCat(name_, ":", line_number_, ":", column, ": ", AbslView(message)));
}

}  // namespace cavs::examples
