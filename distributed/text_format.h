// The line format shared by distributed/'s text files (strategies, model profiles, cluster
// descriptions): one item per line, whitespace-separated tokens, '#' outside quotes starts a
// comment, and a name containing spaces, quotes or '#' is a C-escaped string in double quotes.
// Options are `key=value` tokens after a line's fixed tokens.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cavs::distributed::internal {

// Splits a line into tokens; "..." is one C-escaped token; '#' outside quotes starts a comment.
// Errors: an unterminated quote, a bad escape.
[[nodiscard]] absl::StatusOr<std::vector<std::string>> TokenizeLine(absl::string_view line);

// `s` as one token: as is, or quoted and C-escaped where it is empty or holds a space, a
// control character, a quote or '#'. TokenizeLine(QuoteToken(s)) == {s}.
std::string QuoteToken(const std::string& s);

// One `key=value` option of a line.
struct LineOption {
  std::string key;
  std::string value;
};

// The options in tokens[first..]: each must be key=value with a key among `allowed`, given at
// most once. Errors name the token ("unknown field 'x' (expected a=, b=)") or the key.
[[nodiscard]] absl::StatusOr<std::vector<LineOption>> ParseLineOptions(
    const std::vector<std::string>& tokens, size_t first, const std::vector<std::string>& allowed);

}  // namespace cavs::distributed::internal
