// A rank that dies while the others are in a collective: they must get DeadlineExceeded within
// the timeout, from a raw collective, from the gradient synchronizer (a PS served by the dying
// rank on the direct route too), from --strategy=auto's
// trials and from its cluster probe (each error naming what it stopped), and exit normally.
//
// Run by run_peer_exit_test.cmake under `mpirun --mca orte_abort_on_non_zero_status 0`, so that
// Open MPI does not kill the survivors when the last rank exits with status 1 (which also makes
// mpirun's own exit status meaningless). Each survivor prints "cavs-peer-exit: rank R ok" when
// every check passed; the script requires that line from every surviving rank.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/optimizer.h"
#include "distributed/auto_strategy.h"
#include "distributed/builders.h"
#include "distributed/communicator.h"
#include "distributed/synchronizer.h"
#include "tests/distributed/test_model.h"

namespace cavs::distributed {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(2);

// "" if `s` is a DeadlineExceeded containing `text` that took between the timeout and a few
// seconds more; otherwise what is wrong.
std::string CheckDeadline(const absl::Status& s, absl::Duration took, const std::string& text) {
  if (s.code() != absl::StatusCode::kDeadlineExceeded) {
    return absl::StrCat("expected DeadlineExceeded, got ", s.ToString());
  }
  if (s.message().find(text) == std::string::npos) {
    return absl::StrCat("'", text, "' not in: ", s.message());
  }
  if (took < kTimeout || took > kTimeout + absl::Seconds(4)) {
    return absl::StrCat("took ", absl::FormatDuration(took));
  }
  return "";
}

int Run() {
  absl::StatusOr<std::unique_ptr<Communicator>> raw = MakeCommunicator("mpi", {kTimeout});
  absl::StatusOr<std::unique_ptr<Communicator>> for_sync = MakeCommunicator("mpi", {kTimeout});
  absl::StatusOr<std::unique_ptr<Communicator>> for_auto = MakeCommunicator("mpi", {kTimeout});
  absl::StatusOr<std::unique_ptr<Communicator>> for_probe = MakeCommunicator("mpi", {kTimeout});
  absl::StatusOr<std::unique_ptr<Communicator>> for_direct = MakeCommunicator("mpi", {kTimeout});
  if (!raw.ok() || !for_sync.ok() || !for_auto.ok() || !for_probe.ok() || !for_direct.ok()) {
    std::printf("cavs-peer-exit: setup FAILED: %s\n", raw.status().ToString().c_str());
    return 1;
  }
  const int r = (*raw)->rank(), w = (*raw)->world_size();
  core::ParameterStore store(5);
  absl::StatusOr<Strategy> strategy;
  absl::StatusOr<std::unique_ptr<GradientSynchronizer>> sync, direct;
  if (absl::Status s = testing::BuildModel(store); s.ok()) {
    strategy = BuildStrategy("hybrid", store, w);
    if (strategy.ok()) sync = GradientSynchronizer::Create(for_sync->get(), &store, *strategy);
    // Every parameter on the dying rank's server, point to point (PsRoute::kDirect).
    absl::StatusOr<Strategy> on_last = BuildStrategy("ps", store, w);
    if (on_last.ok()) {
      for (ParamStrategy& p : on_last->params) {
        p.sync = ParameterServerSync{.placement = {w - 1}, .route = PsRoute::kDirect};
      }
      direct = GradientSynchronizer::Create(for_direct->get(), &store, *on_last);
    } else {
      direct = on_last.status();
    }
  }
  if (!sync.ok() || !direct.ok()) {
    std::printf("cavs-peer-exit: rank %d setup FAILED: %s %s\n", r,
                sync.status().ToString().c_str(), direct.status().ToString().c_str());
    return 1;
  }
  // --strategy=auto with every rank alive through its probe and its one profiled step; its next
  // step is the first trial's.
  core::ParameterStore auto_store(5);
  std::unique_ptr<core::Optimizer> sgd =
      *core::MakeOptimizer({.kind = core::OptimizerKind::kSgd, .lr = 0.1f});
  AutoOptions auto_options;
  auto_options.profile_steps = 1;
  auto_options.probe = {.small_bytes = 1024, .large_bytes = 16 << 10, .repetitions = 1};
  absl::StatusOr<std::unique_ptr<AutoStrategy>> autos;
  if (absl::Status s = testing::BuildModel(auto_store); s.ok()) {
    autos = AutoStrategy::Create(for_auto->get(), &auto_store, sgd.get(), auto_options);
  } else {
    autos = s;
  }
  const auto no_compute = [](const StepHooks&) { return absl::OkStatus(); };
  if (absl::Status s = autos.ok() ? (*autos)->Run(1, no_compute).status() : autos.status();
      !s.ok()) {
    std::printf("cavs-peer-exit: rank %d auto setup FAILED: %s\n", r, s.ToString().c_str());
    return 1;
  }
  core::Tensor buf = core::Tensor::FromVector({1.0f, 2.0f}, {2});
  if (r == w - 1) {
    // Die while the others wait in the allreduce. (Had it posted its part first, a reduction
    // tree in which it is a leaf could still complete without it: not the case tested here.)
    absl::SleepFor(absl::Milliseconds(300));
    std::fflush(stdout);
    _exit(1);
  }
  absl::Time start = absl::Now();
  const absl::Status raw_status = (*raw)->AllReduce(buf);
  std::string error = CheckDeadline(raw_status, absl::Now() - start, "allreduce #1 float32[2]");
  if (error.empty()) {
    start = absl::Now();
    const absl::Status sync_status = (*sync)->Synchronize(1).status();
    error = CheckDeadline(sync_status, absl::Now() - start, "gradient synchronization on rank");
  }
  if (error.empty()) {
    start = absl::Now();
    const absl::Status direct_status = (*direct)->Synchronize(1).status();
    error = CheckDeadline(direct_status, absl::Now() - start, ", direct");
  }
  if (error.empty()) {
    start = absl::Now();
    const absl::Status trial = (*autos)->Run(1, no_compute).status();
    error = CheckDeadline(trial, absl::Now() - start, "auto strategy: trying 'auto#1");
  }
  if (error.empty()) {
    start = absl::Now();
    const absl::Status probe =
        AutoStrategy::Create(for_probe->get(), &auto_store, sgd.get(), auto_options).status();
    error = CheckDeadline(probe, absl::Now() - start, "auto strategy: probing the cluster: mpi ");
  }
  if (!error.empty()) {
    std::printf("cavs-peer-exit: rank %d FAILED: %s\n", r, error.c_str());
    return 1;
  }
  std::printf("cavs-peer-exit: rank %d ok\n", r);
  return 0;
}

}  // namespace
}  // namespace cavs::distributed

int main() { return cavs::distributed::Run(); }
