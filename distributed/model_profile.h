// ModelProfile: what the cost model (distributed/cost_model.h) needs to know of a model, as
// plain data: per parameter its shape, whether its gradient is dense or row-sparse, for a
// row-sparse one the rows a step touches and how they overlap across ranks, and when in
// backward its gradient is ready; and the compute time of a step at a stated batch per rank.
// Written by a profiler (cavs-train) or by hand, in a line format like the strategy's
// (docs/distributed.md, "Model profiles and cluster descriptions"):
//
//   version 1
//   name sst-tree-lstm
//   batch_per_rank 25
//   forward_ms 9.0
//   backward_ms 14.0
//   optimizer_ms 2.0
//   hooks_ms 3.5                                  (optional, with the next two)
//   overlap_ms 6.0
//   overlap_hooks_ms 2.5
//   strategy hybrid                               (optional, with the next)
//   step_ms 31.2
//   poll_cost 0.8                                 (optional)
//   poll_cost_per_mb 0.0025                       (optional)
//   early_strategy ps-lb                          (optional, with the next)
//   early_compute_ratio 1.42
//   param embedding shape=21701,300 grad=sparse touched=160 dup=0.45 ready_ms=14.0
//   param W shape=300,750 ready_ms=13.5
//   param out_b shape=5 ready_ms=0.3
//
// Parse errors name the file, the line and the field: "sst.txt line 7: field 'shape': ...".
//
// Thread-safety: plain values; functions are pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/parameter.h"

namespace cavs::distributed {

// The largest poll cost a profile may give (c below: 20 units in flight at that would make
// compute 400 times its own work).
inline constexpr double kMaxPollCost = 20.0;
// The largest cost a MB a profile may give (100 ms of compute a MB: 10 MB/s of copies).
inline constexpr double kMaxPollCostPerMb = 0.1;

struct ParamProfile {
  std::string name;
  // The parameter's dimensions, as core::Shape: rows are all but the last, cols the last.
  std::vector<int64_t> shape;
  bool sparse = false;  // row-sparse gradient (an embedding table)
  // Row-sparse only: the mean number of rows one rank's step touches.
  double touched_rows = 0.0;
  // Row-sparse only: the union of the rows touched by the steps of k ranks together, measured
  // or estimated, as (k, rows) points with 2 <= k strictly increasing; (1, touched_rows) is
  // implied. Empty: no overlap (k ranks touch k * touched_rows rows, at most the table).
  std::vector<std::pair<int, double>> union_rows;
  // Row-sparse only: where in the table the rows fall (a vocabulary sorted by frequency puts
  // most of them in its first rows), as points with 0 < row < rows() strictly increasing: the
  // fraction of one rank's touched rows in rows [0, row), and of the union of
  // SpreadRanks() ranks' rows there, each nondecreasing in [0, 1]; (0, 0, 0) and
  // (rows(), 1, 1) are implied, linear between. Empty: spread evenly over the rows.
  struct SpreadPoint {
    int64_t row = 0;
    double touched = 0.0;
    double unions = 0.0;
    friend bool operator==(const SpreadPoint&, const SpreadPoint&) = default;
  };
  std::vector<SpreadPoint> spread;
  // When the gradient is final, in ms from the start of backward (the on_gradient_ready hook's
  // offset). Unset: at the end of backward (as on a GPU, where the hooks fire after the batch).
  std::optional<double> ready_ms;

  int64_t rows() const;
  int64_t cols() const;
  int64_t bytes() const { return rows() * cols() * 4; }  // float32
  // A row of the row-sparse gradient as the units carry it: an int64 id and cols float32s.
  double row_bytes() const { return 8.0 + 4.0 * static_cast<double>(cols()); }
  // Rows touched by `ranks` ranks' steps together: log-log interpolation between the points,
  // extended past the last one along the last segment's power law, never more than the table or
  // than `ranks` * touched_rows, never fewer than touched_rows. 0 for a dense parameter.
  double UnionRows(int ranks) const;
  // The ranks whose union the spread's `unions` fractions describe: the last union_rows point's
  // (the profiled world size), 2 where there is none.
  int SpreadRanks() const;
  // The rows one rank's step touches in rows [begin, end) (touched_rows times the spread's
  // fraction there). REQUIRES: 0 <= begin <= end <= rows().
  double TouchedIn(int64_t begin, int64_t end) const;
  // The union of `ranks` ranks' rows in [begin, end): UnionRows(ranks) times the union's
  // fraction there, which moves from the touched rows' (one rank) to the spread's union (at
  // SpreadRanks()) linearly in log(ranks). Past SpreadRanks() each segment between the
  // spread's points grows along its own power law from one rank to SpreadRanks(), capped at its
  // rows (a frequent head fills, the tail takes the rest), and the fraction is its share.
  double UnionIn(int ranks, int64_t begin, int64_t end) const;

  friend bool operator==(const ParamProfile&, const ParamProfile&) = default;
};

struct ModelProfile {
  std::string name;
  int64_t batch_per_rank = 0;  // samples per rank per step the times were taken at (0: unstated)
  double forward_ms = 0.0;
  double backward_ms = 0.0;
  double optimizer_ms = 0.0;
  // Of forward_ms + backward_ms, the time compute spent in the synchronizer's hooks under the
  // profiled strategy (MarkReady and Poll: starting units and the transport's work in the
  // polls; StepTimes::hooks). 0: none or not measured.
  double hooks_ms = 0.0;
  // Of forward_ms + backward_ms, the part after the profiled strategy's first unit started
  // (StepTimes::overlap), and of hooks_ms the part in it (StepTimes::overlap_hooks). With
  // hooks_ms they give the share of the compute thread's time the hooks take before any unit
  // runs and while units run, which the cost model applies to every strategy's own start
  // times (docs/distributed.md, "The transport's CPU time"). 0: not measured (no hooks).
  double overlap_ms = 0.0;
  double overlap_hooks_ms = 0.0;
  // The builder (StrategyBuilderNames()) the profiled steps ran under, and their measured step
  // time: the median over the steps after the first (a warm-up), the slowest rank's each. The
  // cost model's calibration point at the model's own sizes (CalibrateToProfiledStep). "" and
  // 0: not measured (a profile by hand).
  std::string strategy;
  double step_ms = 0.0;
  // What each unit in flight during compute costs the compute thread, per second of its own
  // work: c, so that with k units in flight compute takes 1 + c k seconds for one of its own
  // (the polls Advance every unit in flight, each a call into the transport, and on shared
  // cores the other ranks' polls take their turns too; docs/distributed.md, "The polls while
  // units are in flight"). In [0, kMaxPollCost]; 0: none.
  double poll_cost = 0.0;
  // What the transport's bytes cost the compute thread while units are in flight during
  // compute: seconds of compute a MB (1e6 bytes) the busiest rank moves in them, each unit's
  // bytes spread evenly over its span (the polls copy a unit's bytes as it moves them; on the
  // test bed's shared cores the other ranks' copies take their turns too). Beside poll_cost:
  // a unit's cost per second in flight is poll_cost + poll_cost_per_mb x its MB a second.
  // In [0, kMaxPollCostPerMb]; 0: none.
  double poll_cost_per_mb = 0.0;
  // Where poll_cost was measured: a builder whose units start early in backward, run for a few
  // steps after the profiled ones, and its measured compute over the profiled strategy's (each
  // the median over the steps after the first of the slowest rank's compute); poll_cost is the
  // c at which the cost model predicts that ratio (CostModel::FitPollCost) on the profiled
  // cluster. "" and 0: not measured (a cost by hand, or none).
  std::string early_strategy;
  double early_compute_ratio = 0.0;
  std::vector<ParamProfile> params;  // in the parameter store's creation order

  // nullptr if there is no parameter `name`.
  const ParamProfile* Find(absl::string_view name) const;

  friend bool operator==(const ModelProfile&, const ModelProfile&) = default;
};

// The rows at which a profiler measures a spread for a table of `rows` rows: rows / 2^k
// (k = 1..12, finer where a frequency-sorted vocabulary's touched rows crowd) and every eighth
// of the table, ascending, each in (0, rows).
std::vector<int64_t> SpreadEdges(int64_t rows);

// The text form (union_rows written as `union=`); ParseModelProfile(Serialize(p)) == p.
std::string SerializeModelProfile(const ModelProfile& profile);

// Parses the text form; `file` names it in errors ("profile.txt line 7: field 'rows': ...").
[[nodiscard]] absl::StatusOr<ModelProfile> ParseModelProfile(absl::string_view text,
                                                             absl::string_view file);

// Adds the profile's parameters (float32, zero-filled, row-sparse where the profile says so) to
// `store`, in order, so that the builders and ValidateStrategy can work on them. They take
// memory like a model's parameters and dense gradients do.
[[nodiscard]] absl::Status AddProfileParameters(const ModelProfile& profile,
                                                core::ParameterStore* store);

}  // namespace cavs::distributed
