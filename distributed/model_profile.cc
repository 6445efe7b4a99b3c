#include "distributed/model_profile.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/shape.h"
#include "core/status.h"
#include "distributed/builders.h"
#include "distributed/text_format.h"

namespace cavs::distributed {

namespace {

using internal::FieldError;
using internal::LineOption;
using internal::NumberRange;
using internal::ParseInteger;
using internal::ParseNumber;

constexpr int kVersion = 1;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr NumberRange kNonNegative{0.0, false, kInf};

std::string Num(double x) { return internal::FormatNumber(x); }

absl::StatusOr<std::vector<int64_t>> ParseShape(absl::string_view value) {
  std::vector<int64_t> dims;
  for (absl::string_view d : absl::StrSplit(value, ',')) {
    absl::StatusOr<int64_t> v = ParseInteger(d, 1, int64_t{1} << 40);
    if (!v.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad dimension '", d, "' in '", value, "' (expected positive integers)"));
    }
    dims.push_back(*v);
  }
  core::Shape shape(dims);
  if (shape.CheckedNumElements() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("shape '", value, "' is too large"));
  }
  return dims;
}

// "k:rows,k:rows": k >= 2 strictly increasing, rows nondecreasing.
absl::StatusOr<std::vector<std::pair<int, double>>> ParseUnion(absl::string_view value) {
  std::vector<std::pair<int, double>> points;
  for (absl::string_view item : absl::StrSplit(value, ',')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(item, absl::MaxSplits(':', 1));
    absl::StatusOr<int64_t> k = ParseInteger(kv.first, 2, 1 << 24);
    absl::StatusOr<double> rows = ParseNumber(kv.second, kNonNegative);
    if (!k.ok() || !rows.ok() || item.find(':') == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad point '", item, "' (expected ranks:rows with ranks >= 2, e.g. 2:310,4:560)"));
    }
    if (!points.empty() && (*k <= points.back().first || *rows < points.back().second)) {
      return absl::InvalidArgumentError(
          absl::StrCat("point '", item, "' after ", points.back().first, ":", points.back().second,
                       " (ranks must increase and rows must not decrease)"));
    }
    points.emplace_back(static_cast<int>(*k), *rows);
  }
  return points;
}

// "row:touched:union,...": rows strictly increasing in (0, rows), fractions nondecreasing in
// [0, 1].
absl::StatusOr<std::vector<ParamProfile::SpreadPoint>> ParseSpread(absl::string_view value,
                                                                   int64_t rows) {
  std::vector<ParamProfile::SpreadPoint> points;
  for (absl::string_view item : absl::StrSplit(value, ',')) {
    std::vector<absl::string_view> parts = absl::StrSplit(item, ':');
    absl::StatusOr<int64_t> row =
        parts.size() == 3 ? ParseInteger(parts[0], 1, rows - 1) : absl::InvalidArgumentError("");
    absl::StatusOr<double> touched =
        parts.size() == 3 ? ParseNumber(parts[1], {0.0, false, 1.0}) : 0.0;
    absl::StatusOr<double> unions =
        parts.size() == 3 ? ParseNumber(parts[2], {0.0, false, 1.0}) : 0.0;
    if (!row.ok() || !touched.ok() || !unions.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad point '", item, "' (expected row:touched:union with 0 < row < ", rows,
                       " and fractions in [0, 1], e.g. 100:0.6:0.4)"));
    }
    if (!points.empty() && (*row <= points.back().row || *touched < points.back().touched ||
                            *unions < points.back().unions)) {
      const ParamProfile::SpreadPoint& b = points.back();
      return absl::InvalidArgumentError(
          absl::StrCat("point '", item, "' after ", b.row, ":", Num(b.touched), ":", Num(b.unions),
                       " (rows must increase and fractions must not decrease)"));
    }
    points.push_back({*row, *touched, *unions});
  }
  return points;
}

struct ParseState {
  ModelProfile profile;
  bool have_version = false;
  absl::flat_hash_map<std::string, int> param_line;
  absl::flat_hash_map<std::string, int> key_line;  // forward_ms, backward_ms, ...
};

// One `param` line's fields after the name.
absl::StatusOr<ParamProfile> ParseParam(const std::vector<std::string>& tokens) {
  CAVS_ASSIGN_OR_RETURN(
      std::vector<LineOption> options,
      internal::ParseLineOptions(
          tokens, 2, {"shape", "grad", "touched", "dup", "union", "spread", "ready_ms"}));
  ParamProfile p;
  p.name = tokens[1];
  std::optional<double> dup;
  bool have_shape = false, have_union = false, have_touched = false;
  std::optional<std::string> spread;  // parsed once the shape is known
  for (const LineOption& o : options) {
    absl::Status s;
    if (o.key == "shape") {
      absl::StatusOr<std::vector<int64_t>> shape = ParseShape(o.value);
      if (shape.ok()) p.shape = *std::move(shape), have_shape = true;
      s = shape.status();
    } else if (o.key == "grad") {
      if (o.value != "dense" && o.value != "sparse") {
        s = absl::InvalidArgumentError(
            absl::StrCat("bad value '", o.value, "' (expected dense or sparse)"));
      }
      p.sparse = o.value == "sparse";
    } else if (o.key == "touched") {
      absl::StatusOr<double> v = ParseNumber(o.value, kNonNegative);
      if (v.ok()) p.touched_rows = *v, have_touched = true;
      s = v.status();
    } else if (o.key == "dup") {
      absl::StatusOr<double> v = ParseNumber(o.value, {0.0, false, 1.0});
      if (v.ok()) dup = *v;
      s = v.status();
    } else if (o.key == "union") {
      absl::StatusOr<std::vector<std::pair<int, double>>> u = ParseUnion(o.value);
      if (u.ok()) p.union_rows = *std::move(u), have_union = true;
      s = u.status();
    } else if (o.key == "spread") {
      spread = o.value;
    } else if (o.key == "ready_ms") {
      absl::StatusOr<double> v = ParseNumber(o.value, kNonNegative);
      if (v.ok()) p.ready_ms = *v;
      s = v.status();
    }
    if (!s.ok()) return FieldError(o.key, s);
  }
  if (!have_shape) return FieldError("shape", absl::InvalidArgumentError("missing"));
  auto dense_only = [&](absl::string_view field, bool given) -> absl::Status {
    if (!given || p.sparse) return absl::OkStatus();
    return FieldError(field, absl::InvalidArgumentError(
                                 "only a row-sparse parameter (grad=sparse) touches rows"));
  };
  CAVS_RETURN_IF_ERROR(dense_only("touched", have_touched));
  CAVS_RETURN_IF_ERROR(dense_only("dup", dup.has_value()));
  CAVS_RETURN_IF_ERROR(dense_only("union", have_union));
  CAVS_RETURN_IF_ERROR(dense_only("spread", spread.has_value()));
  if (spread.has_value()) {
    absl::StatusOr<std::vector<ParamProfile::SpreadPoint>> points = ParseSpread(*spread, p.rows());
    if (!points.ok()) return FieldError("spread", points.status());
    p.spread = *std::move(points);
  }
  if (p.sparse && !have_touched) {
    return FieldError("touched", absl::InvalidArgumentError("missing for grad=sparse"));
  }
  if (dup.has_value() && have_union) {
    return FieldError("dup", absl::InvalidArgumentError("give dup= or union=, not both"));
  }
  const double rows = static_cast<double>(p.rows());
  if (p.touched_rows > rows) {
    return FieldError("touched", absl::InvalidArgumentError(absl::StrCat(
                                     p.touched_rows, " rows of a table of ", p.rows())));
  }
  // dup = the fraction of one rank's rows that a second rank touches too.
  if (dup.has_value()) p.union_rows = {{2, p.touched_rows * (2.0 - *dup)}};
  for (const auto& [k, u] : p.union_rows) {
    if (u < p.touched_rows || u > std::min(rows, k * p.touched_rows) * (1 + 1e-9)) {
      return FieldError(
          "union", absl::InvalidArgumentError(absl::StrCat(
                       k, " ranks touch ", u, " rows: expected at least touched (", p.touched_rows,
                       ") and at most min(table rows ", p.rows(), ", ", k, " x touched)")));
    }
  }
  return p;
}

// The profile's time in ms that directive `key` sets, or nullptr where it sets none.
double ModelProfile::*TimeField(const std::string& key) {
  if (key == "forward_ms") return &ModelProfile::forward_ms;
  if (key == "backward_ms") return &ModelProfile::backward_ms;
  if (key == "optimizer_ms") return &ModelProfile::optimizer_ms;
  if (key == "hooks_ms") return &ModelProfile::hooks_ms;
  if (key == "overlap_ms") return &ModelProfile::overlap_ms;
  if (key == "overlap_hooks_ms") return &ModelProfile::overlap_hooks_ms;
  if (key == "step_ms") return &ModelProfile::step_ms;
  return nullptr;
}

// A cost in [0, max] into *field (`max_name`: the constant the error names).
absl::Status ParseCost(absl::string_view value, double max, const char* max_name, double* field) {
  absl::StatusOr<double> v = ParseNumber(value, kNonNegative);
  if (!v.ok()) return v.status();
  if (*v > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(*v, " is more than ", max, " (see ", max_name, ")"));
  }
  *field = *v;
  return absl::OkStatus();
}

absl::Status ParseLine(const std::vector<std::string>& tokens, int line, ParseState& st) {
  const std::string& key = tokens[0];
  if (!st.have_version && key != "version") {
    return absl::InvalidArgumentError("the first line must be 'version 1'");
  }
  if (key != "param") {
    if (tokens.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", key, "' takes 1 value, got ", tokens.size() - 1));
    }
    if (auto [it, added] = st.key_line.emplace(key, line); !added) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", key, "' given twice (first on line ", it->second, ")"));
    }
  }
  const std::string& value = tokens.size() > 1 ? tokens[1] : key;
  absl::Status s;
  if (key == "version") {
    if (value != absl::StrCat(kVersion)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unsupported version '", value, "' (this build reads version ", kVersion, ")"));
    }
    st.have_version = true;
  } else if (key == "name") {
    st.profile.name = value;
  } else if (key == "strategy" || key == "early_strategy") {
    if (!IsStrategyBuilder(value)) {
      s = absl::InvalidArgumentError(absl::StrCat("'", value, "' is not a strategy builder (",
                                                  absl::StrJoin(StrategyBuilderNames(), ", "),
                                                  ")"));
    }
    (key == "strategy" ? st.profile.strategy : st.profile.early_strategy) = value;
  } else if (key == "poll_cost") {
    s = ParseCost(value, kMaxPollCost, "kMaxPollCost", &st.profile.poll_cost);
  } else if (key == "poll_cost_per_mb") {
    s = ParseCost(value, kMaxPollCostPerMb, "kMaxPollCostPerMb", &st.profile.poll_cost_per_mb);
  } else if (key == "early_compute_ratio") {
    absl::StatusOr<double> v = ParseNumber(value, kNonNegative);
    if (v.ok() && !(*v > 0)) v = absl::InvalidArgumentError("a measured ratio must be positive");
    if (v.ok()) st.profile.early_compute_ratio = *v;
    s = v.status();
  } else if (key == "batch_per_rank") {
    absl::StatusOr<int64_t> v = ParseInteger(value, 0, int64_t{1} << 40);
    if (v.ok()) st.profile.batch_per_rank = *v;
    s = v.status();
  } else if (double ModelProfile::*field = TimeField(key)) {
    absl::StatusOr<double> v = ParseNumber(value, kNonNegative);
    if (v.ok()) st.profile.*field = *v;
    s = v.status();
  } else if (key == "param") {
    if (tokens.size() < 2) return absl::InvalidArgumentError("'param' needs a name");
    if (auto [it, added] = st.param_line.emplace(tokens[1], line); !added) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter '", tokens[1], "' given twice (first on line ", it->second, ")"));
    }
    CAVS_ASSIGN_OR_RETURN(ParamProfile p, ParseParam(tokens));
    st.profile.params.push_back(std::move(p));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown directive '", key,
                     "' (expected version, name, batch_per_rank, forward_ms, backward_ms, "
                     "optimizer_ms, hooks_ms, overlap_ms, overlap_hooks_ms, strategy, step_ms, "
                     "poll_cost, poll_cost_per_mb, early_strategy, early_compute_ratio or "
                     "param)"));
  }
  return s.ok() ? s : FieldError(key, s);
}

}  // namespace

int64_t ParamProfile::rows() const { return core::Shape(shape).Rows(); }

int64_t ParamProfile::cols() const { return core::Shape(shape).Cols(); }

double ParamProfile::UnionRows(int ranks) const {
  if (!sparse || ranks <= 0) return 0.0;
  const double t = touched_rows;
  const double cap = std::min(static_cast<double>(rows()), ranks * t);
  if (ranks == 1 || t <= 0.0) return std::min(t, cap);
  // Points (1, t), then union_rows; with none, no overlap: the line of slope 1.
  std::vector<std::pair<double, double>> pts = {{1.0, t}};
  for (const auto& [k, u] : union_rows) pts.emplace_back(k, std::max(u, t));
  if (pts.size() == 1) pts.emplace_back(2.0, 2.0 * t);
  size_t seg = 1;  // the segment [pts[seg-1], pts[seg]] holding `ranks`, or the last one
  while (seg + 1 < pts.size() && pts[seg].first < ranks) ++seg;
  const auto [k0, u0] = pts[seg - 1];
  const auto [k1, u1] = pts[seg];
  const double slope = std::log(u1 / u0) / std::log(k1 / k0);
  const double u = u0 * std::pow(ranks / k0, slope);
  return std::clamp(u, std::min(t, cap), cap);
}

int ParamProfile::SpreadRanks() const { return union_rows.empty() ? 2 : union_rows.back().first; }

namespace {

// The spread's fraction (touched, or union) of the rows in [0, row), linear between points.
double SpreadFraction(const ParamProfile& p, int64_t row, bool unions) {
  const int64_t rows = p.rows();
  if (row <= 0) return 0.0;
  if (row >= rows) return 1.0;
  if (p.spread.empty()) return static_cast<double>(row) / static_cast<double>(rows);
  int64_t r0 = 0;
  double f0 = 0.0;
  for (const ParamProfile::SpreadPoint& s : p.spread) {
    const double f = unions ? s.unions : s.touched;
    if (row <= s.row) {
      return f0 + (f - f0) * static_cast<double>(row - r0) / static_cast<double>(s.row - r0);
    }
    r0 = s.row;
    f0 = f;
  }
  return f0 + (1.0 - f0) * static_cast<double>(row - r0) / static_cast<double>(rows - r0);
}

// The spread's fraction of the rows in [begin, end): (end - begin) / rows() exactly without
// a spread.
double SpreadShare(const ParamProfile& p, int64_t begin, int64_t end, bool unions) {
  if (p.spread.empty()) return static_cast<double>(end - begin) / static_cast<double>(p.rows());
  return SpreadFraction(p, end, unions) - SpreadFraction(p, begin, unions);
}

}  // namespace

double ParamProfile::TouchedIn(int64_t begin, int64_t end) const {
  if (!sparse) return 0.0;
  return touched_rows * SpreadShare(*this, begin, end, false);
}

namespace {

// Past the spread's ranks k, the union's share of rows [begin, end) at `ranks`: each of the
// spread's segments [lo, hi) grows from its union at k along its own power law, through its
// rows touched by one rank (T_b) and by k (U_b), and never past its own rows: B_b = min(hi - lo,
// U_b (ranks / k)^s_b), s_b = log(U_b / T_b) / log k. A frequent head fills first, so its share
// falls as the tail's grows; at k the shares are the spread's. Linear within a segment.
// A segment no single rank touches grows as the whole table's union does; one whose union at
// k is no more than its touched rows keeps its union. -1 where no segment holds any union.
double UnionSharePast(const ParamProfile& p, int ranks, int64_t begin, int64_t end) {
  const int k = p.SpreadRanks();
  const double t = p.touched_rows, u = p.UnionRows(k);
  const double whole = t > 0 && u > t ? std::log(u / t) / std::log(k) : 0.0;
  const double grow = static_cast<double>(ranks) / k;
  // The part of segment [lo, hi) below `row`.
  auto below = [](int64_t row, int64_t lo, int64_t hi) {
    return std::clamp(static_cast<double>(row - lo) / static_cast<double>(hi - lo), 0.0, 1.0);
  };
  double in = 0.0, sum = 0.0;
  int64_t lo = 0;
  double f_touched = 0.0, f_unions = 0.0;
  for (size_t i = 0; i <= p.spread.size(); ++i) {
    const bool last = i == p.spread.size();
    const int64_t hi = last ? p.rows() : p.spread[i].row;
    const double ft = last ? 1.0 : p.spread[i].touched, fu = last ? 1.0 : p.spread[i].unions;
    const double tb = t * (ft - f_touched), ub = u * (fu - f_unions);
    const double s = tb > 0 ? (ub > tb ? std::log(ub / tb) / std::log(k) : 0.0) : whole;
    const double b = std::min(static_cast<double>(hi - lo), ub * std::pow(grow, s));
    in += b * (below(end, lo, hi) - below(begin, lo, hi));
    sum += b;
    lo = hi;
    f_touched = ft;
    f_unions = fu;
  }
  return sum > 0 ? in / sum : -1.0;
}

}  // namespace

double ParamProfile::UnionIn(int ranks, int64_t begin, int64_t end) const {
  if (!sparse || ranks <= 0) return 0.0;
  const int k = SpreadRanks();
  if (ranks > k && !spread.empty()) {
    if (const double share = UnionSharePast(*this, ranks, begin, end); share >= 0) {
      return UnionRows(ranks) * share;
    }
  }
  const double one = SpreadShare(*this, begin, end, false);
  const double at = SpreadShare(*this, begin, end, true);
  const double w = ranks >= k ? 1.0 : std::log(static_cast<double>(ranks)) / std::log(k);
  return UnionRows(ranks) * (one + (at - one) * w);
}

const ParamProfile* ModelProfile::Find(absl::string_view name) const {
  for (const ParamProfile& p : params) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::vector<int64_t> SpreadEdges(int64_t rows) {
  std::vector<int64_t> edges;
  for (int k = 1; k <= 12; ++k) edges.push_back(rows >> k);
  for (int i = 1; i < 8; ++i) edges.push_back(rows * i / 8);
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  edges.erase(
      std::remove_if(edges.begin(), edges.end(), [&](int64_t e) { return e <= 0 || e >= rows; }),
      edges.end());
  return edges;
}

std::string SerializeModelProfile(const ModelProfile& profile) {
  std::string out =
      absl::StrCat("# cavs model profile (see docs/distributed.md)\nversion ", kVersion, "\nname ",
                   internal::QuoteToken(profile.name), "\nbatch_per_rank ", profile.batch_per_rank,
                   "\nforward_ms ", Num(profile.forward_ms), "\nbackward_ms ",
                   Num(profile.backward_ms), "\noptimizer_ms ", Num(profile.optimizer_ms), "\n");
  if (profile.hooks_ms > 0) absl::StrAppend(&out, "hooks_ms ", Num(profile.hooks_ms), "\n");
  if (profile.overlap_ms > 0) {
    absl::StrAppend(&out, "overlap_ms ", Num(profile.overlap_ms), "\noverlap_hooks_ms ",
                    Num(profile.overlap_hooks_ms), "\n");
  }
  if (!profile.strategy.empty()) {
    absl::StrAppend(&out, "strategy ", profile.strategy, "\nstep_ms ", Num(profile.step_ms), "\n");
  }
  if (profile.poll_cost > 0) absl::StrAppend(&out, "poll_cost ", Num(profile.poll_cost), "\n");
  if (profile.poll_cost_per_mb > 0) {
    absl::StrAppend(&out, "poll_cost_per_mb ", Num(profile.poll_cost_per_mb), "\n");
  }
  if (!profile.early_strategy.empty()) {
    absl::StrAppend(&out, "early_strategy ", profile.early_strategy, "\nearly_compute_ratio ",
                    Num(profile.early_compute_ratio), "\n");
  }
  for (const ParamProfile& p : profile.params) {
    absl::StrAppend(&out, "param ", internal::QuoteToken(p.name),
                    " shape=", absl::StrJoin(p.shape, ","));
    if (p.sparse) {
      absl::StrAppend(&out, " grad=sparse touched=", Num(p.touched_rows));
      if (!p.union_rows.empty()) {
        absl::StrAppend(
            &out, " union=", absl::StrJoin(p.union_rows, ",", [](std::string* o, const auto& kv) {
              absl::StrAppend(o, kv.first, ":", Num(kv.second));
            }));
      }
      if (!p.spread.empty()) {
        absl::StrAppend(&out,
                        " spread=", absl::StrJoin(p.spread, ",", [](std::string* o, const auto& s) {
                          absl::StrAppend(o, s.row, ":", Num(s.touched), ":", Num(s.unions));
                        }));
      }
    }
    if (p.ready_ms.has_value()) absl::StrAppend(&out, " ready_ms=", Num(*p.ready_ms));
    absl::StrAppend(&out, "\n");
  }
  return out;
}

absl::StatusOr<ModelProfile> ParseModelProfile(absl::string_view text, absl::string_view file) {
  ParseState st;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    absl::StatusOr<std::vector<std::string>> tokens = internal::TokenizeLine(line);
    if (!tokens.ok()) return internal::LineError(file, line_number, tokens.status());
    if (tokens->empty()) continue;
    absl::Status s = ParseLine(*tokens, line_number, st);
    if (!s.ok()) return internal::LineError(file, line_number, s);
  }
  auto missing = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": no '", what, "' line"));
  };
  if (!st.have_version) return missing("version 1");
  if (!st.key_line.contains("forward_ms")) return missing("forward_ms");
  if (!st.key_line.contains("backward_ms")) return missing("backward_ms");
  if (st.profile.params.empty()) return missing("param");
  const double compute_ms = st.profile.forward_ms + st.profile.backward_ms;
  // A time that is part of another: the field, its value, the whole, and the whole's value.
  auto within = [&](const std::string& key, double v, absl::string_view whole,
                    double bound) -> absl::Status {
    if (v <= bound) return absl::OkStatus();
    return internal::LineError(
        file, st.key_line[key],
        FieldError(key, absl::InvalidArgumentError(absl::StrCat(v, " is more than the ", whole,
                                                                " it is part of (", bound, ")"))));
  };
  const absl::string_view compute = "compute (forward_ms + backward_ms)";
  CAVS_RETURN_IF_ERROR(within("hooks_ms", st.profile.hooks_ms, compute, compute_ms));
  CAVS_RETURN_IF_ERROR(within("overlap_ms", st.profile.overlap_ms, compute, compute_ms));
  CAVS_RETURN_IF_ERROR(within("overlap_hooks_ms", st.profile.overlap_hooks_ms,
                              "overlap (overlap_ms)", st.profile.overlap_ms));
  CAVS_RETURN_IF_ERROR(within("overlap_hooks_ms", st.profile.overlap_hooks_ms, "hooks (hooks_ms)",
                              st.profile.hooks_ms));
  // The profiled step comes with the strategy it ran under, and is a step: more than nothing;
  // the early steps' ratio with theirs.
  for (const auto& [first, second, why] :
       {std::tuple<std::string, std::string, std::string>{
            "strategy", "step_ms", "the profiled steps' time and the builder they ran under"},
        {"early_strategy", "early_compute_ratio",
         "the early steps' compute and the builder they ran under"}}) {
    const bool has_first = st.key_line.contains(first), has_second = st.key_line.contains(second);
    if (has_first == has_second) continue;
    const std::string& given = has_first ? first : second;
    return internal::LineError(file, st.key_line[given],
                               FieldError(given, absl::InvalidArgumentError(absl::StrCat(
                                                     "needs a '", has_first ? second : first,
                                                     "' line too (", why, " go together)"))));
  }
  if (st.key_line.contains("early_strategy") && !st.key_line.contains("strategy")) {
    return internal::LineError(
        file, st.key_line["early_strategy"],
        FieldError("early_strategy",
                   absl::InvalidArgumentError(
                       "needs a 'strategy' line (the early steps' compute is over the profiled "
                       "strategy's)")));
  }
  const bool has_step = st.key_line.contains("step_ms");
  if (has_step && !(st.profile.step_ms > 0)) {
    return internal::LineError(
        file, st.key_line["step_ms"],
        FieldError("step_ms", absl::InvalidArgumentError("a measured step must take some time")));
  }
  for (const ParamProfile& p : st.profile.params) {
    if (p.ready_ms.has_value() && *p.ready_ms > st.profile.backward_ms) {
      return internal::LineError(
          file, st.param_line[p.name],
          FieldError("ready_ms",
                     absl::InvalidArgumentError(absl::StrCat(
                         *p.ready_ms, " is after the end of backward (backward_ms ",
                         st.profile.backward_ms, " on line ", st.key_line["backward_ms"], ")"))));
    }
  }
  return st.profile;
}

absl::Status AddProfileParameters(const ModelProfile& profile, core::ParameterStore* store) {
  if (store == nullptr) return absl::InvalidArgumentError("AddProfileParameters: no store");
  for (const ParamProfile& p : profile.params) {
    CAVS_RETURN_IF_ERROR(
        store->GetOrCreate(p.name, core::Shape(p.shape), core::Initializer::Zeros(), p.sparse)
            .status());
  }
  return absl::OkStatus();
}

}  // namespace cavs::distributed
