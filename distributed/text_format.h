// The line format shared by distributed/'s text files (strategies, model profiles, cluster
// descriptions): one item per line, whitespace-separated tokens, '#' outside quotes starts a
// comment, and a name containing spaces, quotes or '#' is a C-escaped string in double quotes.
// Options are `key=value` tokens after a line's fixed tokens.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
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

// A finite number within a range, for the fields of a line. Errors: "bad value 'x' (expected a
// number > 0)" and the like; the caller adds the field's name (FieldError).
struct NumberRange {
  double min = 0.0;
  bool min_exclusive = false;
  double max = 0.0;  // inclusive; infinity for none
};
[[nodiscard]] absl::StatusOr<double> ParseNumber(absl::string_view value, const NumberRange& range);
// An integer in [min, max].
[[nodiscard]] absl::StatusOr<int64_t> ParseInteger(absl::string_view value, int64_t min,
                                                   int64_t max);

// The shortest text that reads back as exactly `x` ("0.25", "1e-06", "160.33333333333334").
std::string FormatNumber(double x);

// "field 'name': <message>", keeping the code.
absl::Status FieldError(absl::string_view field, const absl::Status& s);
// "<file> line <n>: <message>", keeping the code.
absl::Status LineError(absl::string_view file, int line, const absl::Status& s);

}  // namespace cavs::distributed::internal
