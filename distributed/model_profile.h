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
  // When the gradient is final, in ms from the start of backward (the on_gradient_ready hook's
  // offset). Unset: at the end of backward (as on a GPU, where the hooks fire after the batch).
  std::optional<double> ready_ms;

  int64_t rows() const;
  int64_t cols() const;
  int64_t bytes() const { return rows() * cols() * 4; }  // float32
  // Rows touched by `ranks` ranks' steps together: log-log interpolation between the points,
  // extended past the last one along the last segment's power law, never more than the table or
  // than `ranks` * touched_rows, never fewer than touched_rows. 0 for a dense parameter.
  double UnionRows(int ranks) const;

  friend bool operator==(const ParamProfile&, const ParamProfile&) = default;
};

struct ModelProfile {
  std::string name;
  int64_t batch_per_rank = 0;  // samples per rank per step the times were taken at (0: unstated)
  double forward_ms = 0.0;
  double backward_ms = 0.0;
  double optimizer_ms = 0.0;
  std::vector<ParamProfile> params;  // in the parameter store's creation order

  // nullptr if there is no parameter `name`.
  const ParamProfile* Find(absl::string_view name) const;

  friend bool operator==(const ModelProfile&, const ModelProfile&) = default;
};

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
