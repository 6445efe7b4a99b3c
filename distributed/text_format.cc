#include "distributed/text_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"

namespace cavs::distributed::internal {

namespace {

bool NeedsQuotes(absl::string_view s) {
  if (s.empty()) return true;
  for (char c : s) {
    if (!absl::ascii_isgraph(static_cast<unsigned char>(c)) || c == '"' || c == '#') return true;
  }
  return false;
}

}  // namespace

std::string QuoteToken(const std::string& s) {
  return NeedsQuotes(s) ? absl::StrCat("\"", absl::CEscape(s), "\"") : s;
}

absl::StatusOr<std::vector<std::string>> TokenizeLine(absl::string_view line) {
  std::vector<std::string> tokens;
  size_t i = 0;
  while (i < line.size()) {
    const char c = line[i];
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '#') {
      break;
    } else if (c == '"') {
      size_t end = i + 1;
      while (end < line.size() && line[end] != '"') end += line[end] == '\\' ? 2 : 1;
      if (end >= line.size()) return absl::InvalidArgumentError("unterminated quoted name");
      std::string unescaped;
      std::string error;
      if (!absl::CUnescape(line.substr(i + 1, end - i - 1), &unescaped, &error)) {
        return absl::InvalidArgumentError(absl::StrCat("bad escape in quoted name: ", error));
      }
      tokens.push_back(std::move(unescaped));
      i = end + 1;
    } else {
      size_t end = i;
      while (end < line.size() && !absl::ascii_isspace(static_cast<unsigned char>(line[end])) &&
             line[end] != '#') {
        ++end;
      }
      tokens.emplace_back(line.substr(i, end - i));
      i = end;
    }
  }
  return tokens;
}

absl::StatusOr<std::vector<LineOption>> ParseLineOptions(const std::vector<std::string>& tokens,
                                                         size_t first,
                                                         const std::vector<std::string>& allowed) {
  std::vector<LineOption> options;
  for (size_t i = first; i < tokens.size(); ++i) {
    const size_t eq = tokens[i].find('=');
    const std::string key = tokens[i].substr(0, eq);
    if (eq == std::string::npos ||
        std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown field '", tokens[i], "'",
          allowed.empty() ? " (it takes none)"
                          : absl::StrCat(" (expected ", absl::StrJoin(allowed, "=, "), "=)")));
    }
    for (const LineOption& o : options) {
      if (o.key == key) {
        return absl::InvalidArgumentError(absl::StrCat("field '", key, "' given twice"));
      }
    }
    options.push_back({key, tokens[i].substr(eq + 1)});
  }
  return options;
}

absl::StatusOr<double> ParseNumber(absl::string_view value, const NumberRange& range) {
  double v = 0.0;
  const bool in_range = absl::SimpleAtod(value, &v) && std::isfinite(v) &&
                        (range.min_exclusive ? v > range.min : v >= range.min) && v <= range.max;
  if (in_range) return v;
  std::string expected = absl::StrCat(range.min_exclusive ? "> " : ">= ", range.min);
  if (std::isfinite(range.max)) {
    expected =
        absl::StrCat("in ", range.min_exclusive ? "(" : "[", range.min, ", ", range.max, "]");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("bad value '", value, "' (expected a number ", expected, ")"));
}

absl::StatusOr<int64_t> ParseInteger(absl::string_view value, int64_t min, int64_t max) {
  int64_t v = 0;
  if (absl::SimpleAtoi(value, &v) && v >= min && v <= max) return v;
  return absl::InvalidArgumentError(
      absl::StrCat("bad value '", value, "' (expected an integer in [", min, ", ", max, "])"));
}

std::string FormatNumber(double x) {
  char buffer[64];
  const std::to_chars_result r = std::to_chars(buffer, buffer + sizeof(buffer), x);
  return std::string(buffer, r.ptr);
}

absl::Status FieldError(absl::string_view field, const absl::Status& s) {
  return core::Prefixed(absl::StrCat("field '", field, "'"), s);
}

absl::Status LineError(absl::string_view file, int line, const absl::Status& s) {
  return core::Prefixed(absl::StrCat(file, " line ", line), s);
}

}  // namespace cavs::distributed::internal
