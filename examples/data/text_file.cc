#include "examples/data/text_file.h"

#include <cerrno>
#include <cstdio>

namespace cavs::examples {

std::optional<WriteFailure> WriteWholeFile(const std::string& path, std::string_view text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return WriteFailure{true, errno != 0 ? errno : EIO};
  const bool written =
      std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0;
  int error = written ? 0 : errno;
  if (std::fclose(f) != 0 && written) error = errno;
  if (written && error == 0) return std::nullopt;
  return WriteFailure{false, error != 0 ? error : EIO};
}

}  // namespace cavs::examples
