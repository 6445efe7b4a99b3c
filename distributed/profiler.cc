#include "distributed/profiler.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "core/tensor.h"
#include "distributed/stats.h"

namespace cavs::distributed {

absl::StatusOr<ModelProfile> BuildModelProfile(Communicator* comm,
                                               const core::ParameterStore& store,
                                               const std::vector<StepTimes>& all_steps,
                                               int64_t batch_per_rank, const std::string& name) {
  const int n = store.size();
  std::vector<const StepTimes*> steps;
  for (size_t s = all_steps.size() > 1 ? 1 : 0; s < all_steps.size(); ++s) {
    if (static_cast<int>(all_steps[s].ready_at.size()) != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("step ", s, " was not profiled (DataParallelStep::set_profiling)"));
    }
    steps.push_back(&all_steps[s]);
  }
  if (steps.empty()) return absl::InvalidArgumentError("no profiled steps");
  // This rank's medians: forward, backward, optimizer, then per parameter its ready offset
  // (-1: unreported), touched and union rows.
  std::vector<double> forward, backward, optimizer, hooks, overlap, overlap_hooks;
  std::vector<std::vector<double>> ready(n), touched(n), unions(n);
  for (const StepTimes* t : steps) {
    double first = t->compute;
    for (double r : t->ready_at) {
      if (r >= 0) first = std::min(first, r);
    }
    forward.push_back(first);
    backward.push_back(t->compute - first);
    optimizer.push_back(t->optimizer);
    hooks.push_back(t->hooks);
    overlap.push_back(t->overlap);
    overlap_hooks.push_back(t->overlap_hooks);
    for (int i = 0; i < n; ++i) {
      ready[i].push_back(t->ready_at[i] >= 0 ? t->ready_at[i] - first : -1.0);
      touched[i].push_back(static_cast<double>(t->touched_rows[i]));
      unions[i].push_back(static_cast<double>(t->union_rows[i]));
    }
  }
  // Then per row-sparse parameter, summed over the steps: the touched and union rows, and the
  // same below each spread edge (for the spread, pooled over steps and ranks).
  std::vector<int> spread_at(n, -1);
  std::vector<std::vector<int64_t>> edges(n);
  int width = 3 + 3 * n;
  for (int i = 0; i < n; ++i) {
    const core::Parameter& p = *store.parameters()[i];
    if (!p.sparse_grad) continue;
    edges[i] = SpreadEdges(p.value.rows());
    spread_at[i] = width;
    width += 2 + 2 * static_cast<int>(edges[i].size());
  }
  const int hooks_at = width;  // then the overlap and its hooks
  width += 3;
  std::vector<double> mine(width);
  // Adds `counts` (one per edge; a step that counted none adds nothing) at `at`.
  auto add = [](const std::vector<int64_t>& counts, size_t e, double* at) {
    if (counts.size() != e) return;
    for (size_t k = 0; k < e; ++k) at[k] += static_cast<double>(counts[k]);
  };
  for (const StepTimes* t : steps) {
    for (int i = 0; i < n; ++i) {
      if (spread_at[i] < 0) continue;
      const size_t e = edges[i].size();
      double* at = mine.data() + spread_at[i];
      at[0] += static_cast<double>(t->touched_rows[i]);
      at[1] += static_cast<double>(t->union_rows[i]);
      add(t->touched_below[i], e, at + 2);
      add(t->union_below[i], e, at + 2 + e);
    }
  }
  mine[0] = UpperMedian(forward);
  mine[1] = UpperMedian(backward);
  mine[2] = UpperMedian(optimizer);
  mine[hooks_at] = UpperMedian(hooks);
  mine[hooks_at + 1] = UpperMedian(overlap);
  mine[hooks_at + 2] = UpperMedian(overlap_hooks);
  for (int i = 0; i < n; ++i) {
    mine[3 + 3 * i] = UpperMedian(ready[i]);
    mine[4 + 3 * i] = UpperMedian(touched[i]);
    mine[5 + 3 * i] = UpperMedian(unions[i]);
  }
  // Every rank's row (float64 through int64 bits, so that all ranks compute the same doubles).
  const int w = comm != nullptr ? comm->world_size() : 1;
  std::vector<double> rows(static_cast<size_t>(w) * width);
  if (comm != nullptr) {
    core::Tensor row = core::Tensor::Host({width}, core::DType::kInt64);
    std::memcpy(row.raw_data(), mine.data(), width * sizeof(double));
    core::Tensor all = core::Tensor::Host({w * width}, core::DType::kInt64);
    CAVS_RETURN_IF_ERROR(comm->AllGather(row, all));
    std::memcpy(rows.data(), all.raw_data(), rows.size() * sizeof(double));
  } else {
    rows = mine;
  }
  auto at = [&](int rank, int i) { return rows[static_cast<size_t>(rank) * width + i]; };
  auto max_over_ranks = [&](int i) {
    double m = at(0, i);
    for (int q = 1; q < w; ++q) m = std::max(m, at(q, i));
    return m;
  };
  auto mean_over_ranks = [&](int i) {
    double s = 0;
    for (int q = 0; q < w; ++q) s += at(q, i);
    return s / w;
  };
  ModelProfile profile;
  profile.name = name;
  profile.batch_per_rank = batch_per_rank;
  profile.forward_ms = 1e3 * max_over_ranks(0);
  profile.backward_ms = 1e3 * max_over_ranks(1);
  profile.optimizer_ms = 1e3 * max_over_ranks(2);
  {  // the hooks, the overlap and its hooks of one rank: the one with the most hooks
    int most = 0;
    for (int q = 1; q < w; ++q) {
      if (at(q, hooks_at) > at(most, hooks_at)) most = q;
    }
    const double compute_ms = profile.forward_ms + profile.backward_ms;
    profile.hooks_ms = std::min(1e3 * at(most, hooks_at), compute_ms);
    profile.overlap_ms = std::min(1e3 * at(most, hooks_at + 1), compute_ms);
    profile.overlap_hooks_ms =
        std::min({1e3 * at(most, hooks_at + 2), profile.overlap_ms, profile.hooks_ms});
  }
  for (int i = 0; i < n; ++i) {
    const core::Parameter& p = *store.parameters()[i];
    ParamProfile pp;
    pp.name = p.name;
    for (int d = 0; d < p.value.shape().rank(); ++d) pp.shape.push_back(p.value.shape().dim(d));
    if (pp.shape.empty()) pp.shape.push_back(1);
    pp.sparse = p.sparse_grad;
    // Reported by every rank: the slowest rank's offset; by none (or some): end of backward.
    bool reported = true;
    for (int q = 0; q < w; ++q) reported = reported && at(q, 3 + 3 * i) >= 0;
    if (reported) pp.ready_ms = 1e3 * max_over_ranks(3 + 3 * i);
    if (pp.sparse) {
      pp.touched_rows = mean_over_ranks(4 + 3 * i);
      const double union_rows = mean_over_ranks(5 + 3 * i);
      if (w > 1 && union_rows > 0) pp.union_rows.push_back({w, union_rows});
      const int e = static_cast<int>(edges[i].size());
      double touched_sum = 0, union_sum = 0;
      std::vector<double> touched_below(e, 0.0), union_below(e, 0.0);
      for (int q = 0; q < w; ++q) {
        touched_sum += at(q, spread_at[i]);
        union_sum += at(q, spread_at[i] + 1);
        for (int k = 0; k < e; ++k) {
          touched_below[k] += at(q, spread_at[i] + 2 + k);
          union_below[k] += at(q, spread_at[i] + 2 + e + k);
        }
      }
      if (touched_sum > 0 && union_sum > 0) {
        for (int k = 0; k < e; ++k) {
          pp.spread.push_back({edges[i][k], std::min(1.0, touched_below[k] / touched_sum),
                               std::min(1.0, union_below[k] / union_sum)});
        }
      }
    }
    profile.params.push_back(std::move(pp));
  }
  return profile;
}

}  // namespace cavs::distributed
