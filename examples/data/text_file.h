// Writing a whole text file where a failure must be seen: the write, the flush and the close are
// each checked, since a full disk shows only when the buffer is flushed or the file closed.
// Shared by cavs-gen-treebank and cavs-train's logs, which phrase the error each their own way.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace cavs::examples {

// Why WriteWholeFile failed: the open (else a later step), and the OS's errno (never 0).
struct WriteFailure {
  bool open = false;
  int error = 0;
};

// Writes `text` to `path` (created or truncated); std::nullopt on success.
[[nodiscard]] std::optional<WriteFailure> WriteWholeFile(const std::string& path,
                                                         std::string_view text);

}  // namespace cavs::examples
