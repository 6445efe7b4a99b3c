#include "distributed/step.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "distributed/model_profile.h"

namespace cavs::distributed {

namespace {

double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

DataParallelStep::DataParallelStep(core::ParameterStore* store, core::Optimizer* optimizer,
                                   GradientSynchronizer* sync)
    : store_(store), optimizer_(optimizer), sync_(sync) {}

absl::StatusOr<StepTimes> DataParallelStep::Run(
    int64_t local_count, const std::function<absl::Status(const StepHooks&)>& compute,
    bool run_empty) {
  StepTimes times;
  const auto start = std::chrono::steady_clock::now();
  const int n = store_->size();
  if (profiling_) {
    times.ready_at.assign(n, -1.0);
    times.touched_rows.assign(n, 0);
    times.union_rows.assign(n, 0);
    times.touched_below.assign(n, {});
    times.union_below.assign(n, {});
  }
  // The rows of p's gradient below each spread edge: each row counted at the first edge above
  // it, then summed up the edges.
  auto below = [](const core::Parameter& p) {
    const std::vector<int64_t> edges = SpreadEdges(p.value.rows());
    std::vector<int64_t> count(edges.size() + 1, 0);
    for (int64_t r : p.grad_rows)
      ++count[std::upper_bound(edges.begin(), edges.end(), r) - edges.begin()];
    for (size_t e = 1; e < edges.size(); ++e) count[e] += count[e - 1];
    count.pop_back();  // the rows above the last edge
    return count;
  };
  // The rows this rank touched, read when its gradient is final (before Finish replaces it).
  auto touched = [&](int i) {
    const core::Parameter& p = *store_->parameters()[i];
    if (profiling_ && p.sparse_grad) {
      times.touched_rows[i] = static_cast<int64_t>(p.grad_rows.size());
      times.touched_below[i] = below(p);
    }
  };
  CAVS_RETURN_IF_ERROR(store_->ZeroGrad());
  // The global count's allreduce starts now and runs during forward and backward. The
  // synchronizer's clock (its units' start times) starts as BeginStep is called.
  const double begun = Since(start);
  if (sync_ != nullptr) CAVS_RETURN_IF_ERROR(sync_->BeginStep(local_count));
  StepHooks hooks;
  hooks.on_gradient_ready = [&](const std::string& name) -> absl::Status {
    const core::Parameter* p = store_->Find(name);
    if (p == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("gradient ready for '", name, "', which is not a parameter of the store"));
    }
    // Without overlap the synchronizer sees every gradient after compute, so the profile
    // does too (ready_at unset: at the end of backward).
    if (profiling_ && overlap_) {
      for (int i = 0; i < n; ++i) {
        if (store_->parameters()[i].get() == p && times.ready_at[i] < 0) {
          times.ready_at[i] = Since(start);
          touched(i);
        }
      }
    }
    return sync_ != nullptr && overlap_ ? sync_->MarkReady(p) : absl::OkStatus();
  };
  hooks.on_progress = [&]() {
    return sync_ != nullptr && overlap_ ? sync_->Poll() : absl::OkStatus();
  };
  if (local_count > 0 || run_empty) CAVS_RETURN_IF_ERROR(compute(hooks));
  times.compute = Since(start);
  // The synchronizer times its own hooks; so far in the step, all of them ran inside compute.
  if (sync_ != nullptr) {
    times.hooks = sync_->hook_seconds();
    times.polls = sync_->polls();
    if (const double first = sync_->first_start_seconds(); first >= 0) {
      times.overlap = std::max(0.0, times.compute - (begun + first));
      times.overlap_hooks = std::min(times.overlap, sync_->hook_seconds_in_flight());
      times.overlap_polls = sync_->polls_in_flight();
    }
  }

  if (profiling_) {
    for (int i = 0; i < n; ++i) {
      if (times.ready_at[i] < 0) touched(i);
    }
  }
  const auto finish = std::chrono::steady_clock::now();
  if (sync_ != nullptr) {
    // Whatever compute did not report (all of it on a GPU, or on a rank without samples) is
    // ready now: latest-created first, backward's order (marking twice is a no-op).
    const auto& params = store_->parameters();
    for (auto it = params.rbegin(); it != params.rend(); ++it) {
      CAVS_RETURN_IF_ERROR(sync_->MarkReady(it->get()));
    }
    CAVS_ASSIGN_OR_RETURN(times.sync, sync_->Finish());
  }
  times.finish = Since(finish);
  if (profiling_) {
    for (int i = 0; i < n; ++i) {
      const core::Parameter& p = *store_->parameters()[i];
      if (p.sparse_grad) {
        times.union_rows[i] = static_cast<int64_t>(p.grad_rows.size());
        times.union_below[i] = below(p);
      }
    }
  }

  const auto opt = std::chrono::steady_clock::now();
  CAVS_RETURN_IF_ERROR(optimizer_->Step(*store_));
  times.optimizer = Since(opt);
  return times;
}

}  // namespace cavs::distributed
