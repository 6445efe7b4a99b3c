#include "distributed/step.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"

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
  if (profiling_) times.ready_at.assign(store_->size(), -1.0);
  CAVS_RETURN_IF_ERROR(store_->ZeroGrad());
  // The global count's allreduce starts now and runs during forward and backward.
  if (sync_ != nullptr) CAVS_RETURN_IF_ERROR(sync_->BeginStep(local_count));
  StepHooks hooks;
  hooks.on_gradient_ready = [&](const std::string& name) -> absl::Status {
    const core::Parameter* p = store_->Find(name);
    if (p == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("gradient ready for '", name, "', which is not a parameter of the store"));
    }
    if (profiling_) {
      for (int i = 0; i < store_->size(); ++i) {
        if (store_->parameters()[i].get() == p && times.ready_at[i] < 0) {
          times.ready_at[i] = Since(start);
        }
      }
    }
    return sync_ != nullptr ? sync_->MarkReady(p) : absl::OkStatus();
  };
  hooks.on_progress = [&]() { return sync_ != nullptr ? sync_->Poll() : absl::OkStatus(); };
  if (local_count > 0 || run_empty) CAVS_RETURN_IF_ERROR(compute(hooks));
  times.compute = Since(start);

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

  const auto opt = std::chrono::steady_clock::now();
  CAVS_RETURN_IF_ERROR(optimizer_->Step(*store_));
  times.optimizer = Since(opt);
  return times;
}

}  // namespace cavs::distributed
