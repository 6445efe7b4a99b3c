// GradientSynchronizer: turns every rank's gradient sums into the global mean gradient on every
// rank, following a Strategy, with communication overlapping backward.
//
// Contract per step. Each rank's gradients hold the SUM of its per-sample (or per-labelled-
// vertex) gradients, and `local_count` is how many samples (vertices) it summed over; a rank that
// ran out of data still takes part, with zero gradients and local_count 0. After Finish(), every
// rank holds, for every parameter,
//       gradient = (sum over ranks of the gradient sums) / (sum over ranks of local_count)
// (zero when the global count is 0): exactly the mean over the union batch, however unevenly it
// was split. Row-sparse gradients come back with the union of the touched rows, sorted, each
// row summed over ranks and scaled the same way.
//
//   sync->BeginStep(local_count);           // starts the global count's allreduce
//   ... backward: sync->MarkReady(p) as each gradient becomes final (optional) ...
//   CAVS_ASSIGN_OR_RETURN(StepStats stats, sync->Finish());
//   optimizer->Step(store);                 // identical on every rank
//
// The strategy is split into units (allreduce buckets, PS shards, sparse tables) ordered the way
// backward finishes gradients: by their earliest-created parameter, latest first. MarkReady
// starts every unit whose parameters are all ready, in that order on every rank (a unit waits
// for the ones before it, as DDP's buckets do), with nonblocking operations, and polls the units
// in flight; so communication runs while backward continues. Finish marks the rest ready and
// waits. A PS shard is reduced to its server and the server's sum is broadcast back as a
// gradient (not as updated parameters), so the optimizer stays where it is and runs the same
// update on every rank; see docs/distributed.md for why.
//
// Failure: a peer that stops answering makes Finish (or MarkReady, while waiting for the global
// count) return DeadlineExceeded after the communicator's timeout without progress, naming the
// units still waiting; the synchronizer and its communicator are then unusable. Gradients of a
// failed step are unspecified.
//
// Thread-safety: one thread at a time (the trainer's). Gradients handed to MarkReady must not
// change until Finish returns.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/parameter.h"
#include "distributed/communicator.h"
#include "distributed/strategy.h"

namespace cavs::distributed {

namespace internal {
class SyncUnit;
}  // namespace internal

// What one step cost this rank.
struct StepStats {
  int64_t local_count = 0;
  int64_t global_count = 0;
  // Traffic of this step under CommStats' model (includes other users of the communicator).
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  int units = 0;                // buckets, PS shards and sparse tables synchronized
  int units_started_early = 0;  // of those, started by MarkReady before Finish
  double finish_seconds = 0;    // time spent in Finish, mostly waiting for peers
  // Time spent in MarkReady and Poll (the hooks, run on the compute's thread before Finish):
  // starting units and polling them, the synchronizer's share of compute.
  double hook_seconds = 0;
  // Of hook_seconds, the time after the first unit's Start ended (of the call that started it,
  // its part after that): the hooks while communication overlaps compute.
  double hook_seconds_in_flight = 0;
  int64_t polls = 0;            // MarkReady and Poll calls before Finish
  int64_t polls_in_flight = 0;  // of those, the calls hook_seconds_in_flight counts
  // Per unit (start order): seconds from BeginStep to its start, and to the poll that found it
  // complete (so a unit's end is seen at the next poll: MarkReady, Poll or Finish's wait).
  std::vector<double> unit_started_at, unit_done_at;
  // Per unit (start order): seconds its Start took (packing, the first messages written).
  std::vector<double> unit_start_seconds;
  // Per unit: seconds from BeginStep to the poll that found each of its stages complete, in
  // order (a PS shard's reduce and broadcast, a row-sparse shard's counts, rows, union count and
  // rows back; a rank may run fewer stages of a unit than another: the server's are its own).
  std::vector<std::vector<double>> unit_stages_done_at;
};

class GradientSynchronizer {
 public:
  // Collective: every rank calls it with its own store. Checks that the strategy fits the store
  // and that all ranks agree on both (VerifyConsistent; an error names the first mismatching
  // parameter, on every rank), then sets up the units and their duplicate communicators.
  // Servers named by host (ps placement=hH.L) are resolved to ranks with the communicator's
  // topology; strategy() returns the resolved strategy. Errors also: a strategy whose
  // world_size differs from the communicator's; staleness > 0 (not supported yet); a server
  // host or local rank that does not exist. REQUIRES: `comm` and `store` outlive the synchronizer,
  // and the store gains no parameters.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<GradientSynchronizer>> Create(
      Communicator* comm, core::ParameterStore* store, const Strategy& strategy);
  ~GradientSynchronizer();

  // Starts a step. REQUIRES: local_count >= 0; the previous step finished.
  [[nodiscard]] absl::Status BeginStep(int64_t local_count);
  // `p`'s gradient is final for this step; starts the units it completes (marking twice is a
  // no-op). Error: `p` is not a parameter of the store; no step begun.
  [[nodiscard]] absl::Status MarkReady(const core::Parameter* p);
  // Drives the units in flight without blocking (MarkReady does too): for long stretches of
  // backward between two MarkReady calls. Error: no step begun, or a failed operation.
  [[nodiscard]] absl::Status Poll();
  // Starts whatever is left, waits for all, and writes the global mean gradients.
  [[nodiscard]] absl::StatusOr<StepStats> Finish();
  // BeginStep + Finish, for trainers that do not overlap.
  [[nodiscard]] absl::StatusOr<StepStats> Synchronize(int64_t local_count);

  const Strategy& strategy() const { return strategy_; }
  int num_units() const { return static_cast<int>(units_.size()); }
  // Units started and not yet complete: a test of overlap.
  int num_in_flight() const;
  // This step's StepStats::hook_seconds so far (the time in MarkReady and Poll since BeginStep).
  double hook_seconds() const { return stats_.hook_seconds; }
  // Of it, StepStats::hook_seconds_in_flight so far; and the calls so far (StepStats::polls,
  // polls_in_flight).
  double hook_seconds_in_flight() const { return stats_.hook_seconds_in_flight; }
  int64_t polls() const { return stats_.polls; }
  int64_t polls_in_flight() const { return stats_.polls_in_flight; }
  // Seconds from BeginStep to the first unit's start this step; -1 before it starts.
  double first_start_seconds() const {
    return stats_.unit_started_at.empty() ? -1.0 : stats_.unit_started_at[0];
  }
  // Units in start order, named: "allreduce bucket 0 (fc/W, fc/b)", "ps 'E' rows [0, 50) ...".
  std::vector<std::string> UnitNames() const;

 private:
  GradientSynchronizer(Communicator* comm, core::ParameterStore* store, Strategy strategy);
  absl::Status BuildUnits();
  // Breaks the communicator on a mid-step error: this rank left the agreed order.
  absl::Status Fail(absl::Status error);
  absl::Status StartReadyUnits();
  absl::StatusOr<float> WaitForScale();
  absl::Status PollInFlight();
  // Adds the time since `start` to the step's hook_seconds and counts a poll.
  void CountHook(absl::Time start);
  absl::Status WaitAll();
  absl::Status PendingError(absl::Duration timeout) const;
  absl::Status WriteSparseResults();

  Communicator* comm_;
  core::ParameterStore* store_;
  Strategy strategy_;
  std::unique_ptr<Communicator> control_;                   // the global count and the buckets
  std::vector<std::unique_ptr<internal::SyncUnit>> units_;  // in start order
  std::vector<std::vector<int>> param_units_;  // per parameter: its units, in start order
  absl::flat_hash_map<const core::Parameter*, int> index_of_;

  // Per step.
  bool in_step_ = false;
  bool finishing_ = false;
  bool count_known_ = false;
  std::vector<bool> ready_;   // per parameter
  std::vector<int> pending_;  // per unit: parameters not yet ready
  std::vector<bool> unit_done_;
  size_t next_unit_ = 0;  // units_[0, next_unit_) have been started
  std::unique_ptr<Work> count_work_;
  core::Tensor count_;  // int64 [1] on control_'s buffer device: local, then global count
  StepStats stats_;
  CommStats stats_at_begin_;
  absl::Time step_start_;
};

}  // namespace cavs::distributed
