// Near ties: the labelled vertices whose predicted class float32 rounding may decide. Tests that
// compare the accuracy of two evaluations which differ only by rounding (folded and plain input
// projections; N ranks and one process) allow as many differences as there are near ties, and
// no more: a prediction flips only where the top two logits are closer than the two
// evaluations' logits can differ.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/parameter.h"
#include "core/status.h"
#include "examples/trainer/model_registry.h"
#include "examples/trainer/trainer.h"
#include "scheduler/reference_executor.h"

namespace cavs::trainer::testing {

// The engine's float32 evaluation against the exact one, relative to the largest |logit| of the
// batch: the bound tests/scheduler/engine_test.cc's kTolerance argues for these cells.
inline constexpr double kEvalRoundoff = 1e-5;

struct NearTies {
  int64_t all = 0;    // labelled vertices whose top two logits are within the margin
  int64_t roots = 0;  // of those, roots
};

// The logits of `graphs` for `config`'s model (built as the trainer builds it, the vocabulary
// and classes from `data`) with the parameter values `params`, from the reference executor (in
// double): per graph, [V, classes].
inline absl::StatusOr<std::vector<std::vector<float>>> ReferenceLogits(
    const TrainerConfig& config, const Dataset& data, const scheduler::ParamValues& params,
    const std::vector<scheduler::Graph>& graphs) {
  CAVS_ASSIGN_OR_RETURN(ModelKind kind, ParseModelKind(config.model));
  CAVS_ASSIGN_OR_RETURN(vertex::Function f,
                        MakeModel(kind, {data.vocab_size, config.embed, config.hidden, data.classes,
                                         static_cast<float>(config.dropout)}));
  scheduler::RunOptions options;
  options.training = false;
  options.backward = false;
  options.keep_outputs = true;
  CAVS_ASSIGN_OR_RETURN(scheduler::ReferenceResult r,
                        scheduler::RunReference(f, graphs, params, options));
  return std::move(r.run.outputs);
}

// The values of the store's parameters for `config`'s model, in double.
inline absl::StatusOr<scheduler::ParamValues> Snapshot(const TrainerConfig& config,
                                                       const Dataset& data,
                                                       const core::ParameterStore& store) {
  CAVS_ASSIGN_OR_RETURN(ModelKind kind, ParseModelKind(config.model));
  CAVS_ASSIGN_OR_RETURN(vertex::Function f,
                        MakeModel(kind, {data.vocab_size, config.embed, config.hidden, data.classes,
                                         static_cast<float>(config.dropout)}));
  return scheduler::SnapshotParameters(f, store);
}

// The near ties of two evaluations of `graphs` whose exact logits are `a` and `b` (from
// ReferenceLogits; the same values twice where the parameters are the same) and which the
// engine computes each within kEvalRoundoff of the batch's largest |logit|. A vertex's
// prediction can differ only where a's top two logits are within twice the largest difference
// between the two evaluations: |a - b| plus both roundings.
inline NearTies CountNearTies(const std::vector<scheduler::Graph>& graphs,
                              const std::vector<std::vector<float>>& a,
                              const std::vector<std::vector<float>>& b) {
  double scale = 1e-3, apart = 0;
  for (size_t g = 0; g < a.size(); ++g) {
    for (size_t i = 0; i < a[g].size(); ++i) {
      scale = std::max(scale, std::fabs(double{a[g][i]}));
      apart = std::max(apart, std::fabs(double{a[g][i]} - b[g][i]));
    }
  }
  const double margin = 2 * (apart + 2 * kEvalRoundoff * scale);
  NearTies ties;
  for (size_t g = 0; g < graphs.size(); ++g) {
    const scheduler::Graph& graph = graphs[g];
    if (graph.labels.empty() || graph.num_vertices() == 0) continue;
    const size_t width = a[g].size() / static_cast<size_t>(graph.num_vertices());
    if (width < 2) continue;
    const std::vector<int32_t> roots = graph.Roots();
    for (int32_t v = 0; v < graph.num_vertices(); ++v) {
      if (graph.labels[v] < 0) continue;
      std::vector<float> row(a[g].begin() + v * width, a[g].begin() + (v + 1) * width);
      std::partial_sort(row.begin(), row.begin() + 2, row.end(), std::greater<float>());
      if (row[0] - row[1] > margin) continue;
      ++ties.all;
      if (std::find(roots.begin(), roots.end(), v) != roots.end()) ++ties.roots;
    }
  }
  return ties;
}

}  // namespace cavs::trainer::testing
