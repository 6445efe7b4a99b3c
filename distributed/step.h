// DataParallelStep: one data-parallel training step, the one piece that cavs-train, the
// distributed benchmark, the profiler and the strategy trials all run, so that what is
// measured and predicted is what trains.
//
//   zero the gradients -> BeginStep(local count) (the global count's allreduce starts)
//   -> compute(hooks): forward and backward of this rank's slice, loss SUMMED; the hooks call
//      MarkReady as each parameter's gradient becomes final and Poll between long stretches
//   -> MarkReady for whatever compute did not report (latest-created first: backward's order)
//   -> Finish (the global mean gradient) -> the optimizer's step, the same on every rank.
//
// The step knows no engine: `compute` is the caller's (scheduler::Engine::Run with
// RunOptions::on_gradient_ready / on_progress wired to the hooks, in the trainer), so the
// distributed layer keeps depending on core alone. With a null synchronizer (one process) the
// hooks only record their timing and the optimizer steps on the gradients compute left (the
// caller's loss decides whether they are sums or means).
//
// What each step took is returned, and when profiling is on, the time into compute at which
// each parameter's gradient became ready (the hook's timing, for the cost model's overlap).
//
// Thread-safety: one thread at a time (the trainer's).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/optimizer.h"
#include "core/parameter.h"
#include "distributed/synchronizer.h"

namespace cavs::distributed {

// What compute calls: MarkReady by parameter name, and Poll.
struct StepHooks {
  std::function<absl::Status(const std::string& param)> on_gradient_ready;
  std::function<absl::Status()> on_progress;
};

// Seconds each phase took on this rank, and the synchronizer's statistics.
struct StepTimes {
  double compute = 0;  // zeroing, BeginStep and compute
  double hooks = 0;    // of compute, in the synchronizer's MarkReady and Poll (its CPU share)
  // Of compute, the part after the first unit started (0 where none started during compute),
  // and the hooks in it: the share of compute the hooks take while communication overlaps it.
  double overlap = 0;
  double overlap_hooks = 0;
  // The hooks' calls in compute, and of them those in the overlap (StepStats::polls,
  // polls_in_flight, at the end of compute).
  int64_t polls = 0;
  int64_t overlap_polls = 0;
  double finish = 0;     // marking the rest ready, Finish (waiting for the slowest rank)
  double optimizer = 0;  // the optimizer's step
  double total() const { return compute + finish + optimizer; }
  StepStats sync;  // all zero without a synchronizer
  // With profiling on, per parameter (store order):
  // seconds from the start of compute to its gradient's MarkReady, or -1 where compute did not
  // report it (marked after compute);
  std::vector<double> ready_at;
  // row-sparse gradients only (0 for dense): the rows this rank's step touched, and the rows of
  // the synchronized gradient (the union over ranks).
  std::vector<int64_t> touched_rows, union_rows;
  // row-sparse only (empty for dense): the same rows counted below each of SpreadEdges(rows)
  // (entry e: the rows < edges[e]), for the profile's spread.
  std::vector<std::vector<int64_t>> touched_below, union_below;
};

class DataParallelStep {
 public:
  // `sync` may be null (one process). REQUIRES: store, optimizer and sync outlive the step.
  DataParallelStep(core::ParameterStore* store, core::Optimizer* optimizer,
                   GradientSynchronizer* sync);

  // Record when each gradient becomes ready (StepTimes::ready_at).
  void set_profiling(bool on) { profiling_ = on; }
  // Whether the hooks reach the synchronizer (default on): off, every unit starts after
  // compute, none overlapping backward, and a profile's ready_at stays unset (-1: the end of
  // backward, as the synchronizer then sees it).
  // Off trades the overlap for compute without the synchronizer's CPU (starting units, and the
  // transport's work done inside its polls: StepStats::hook_seconds), which on hosts whose
  // cores the ranks share can be the faster step (docs/distributed.md, "The transport's CPU
  // time"). Every strategy gives the same gradients either way.
  void set_overlap(bool on) { overlap_ = on; }
  bool overlap() const { return overlap_; }

  // One step: `local_count` samples (labelled vertices) in this rank's slice, which `compute`
  // runs (forward + backward, summed loss); `compute` is skipped where local_count is 0 and
  // `run_empty` is false (a rank without samples joins with zero gradients). Errors: compute's,
  // the synchronizer's (a dead peer is DeadlineExceeded; the step is then unusable), the
  // optimizer's.
  [[nodiscard]] absl::StatusOr<StepTimes> Run(
      int64_t local_count, const std::function<absl::Status(const StepHooks&)>& compute,
      bool run_empty = false);

  GradientSynchronizer* synchronizer() const { return sync_; }

 private:
  core::ParameterStore* store_;
  core::Optimizer* optimizer_;
  GradientSynchronizer* sync_;
  bool profiling_ = false;
  bool overlap_ = true;
};

}  // namespace cavs::distributed
