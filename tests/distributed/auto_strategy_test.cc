// --strategy=auto's controller in one process (a world of 1: every builder runs, the trials are
// real steps): the cutoff of a slow builder's trial. Agreement across ranks and training like one
// process are tested under mpirun (mpi_sync_test.cc).
#include "distributed/auto_strategy.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "core/optimizer.h"
#include "distributed/single_communicator.h"
#include "tests/distributed/test_model.h"

namespace cavs::distributed {
namespace {

// The test model's store and an AutoStrategy over one process, SGD, one searched candidate and
// no reserve, the probe at small sizes; `options` sets the rest.
struct Controlled {
  std::unique_ptr<Communicator> comm;
  core::ParameterStore store{5};
  std::unique_ptr<core::Optimizer> sgd;
  std::unique_ptr<AutoStrategy> controller;
};

std::unique_ptr<Controlled> MakeControlled(AutoOptions options) {
  auto c = std::make_unique<Controlled>();
  absl::StatusOr<std::unique_ptr<Communicator>> comm = MakeSingleCommunicator();
  EXPECT_TRUE(comm.ok()) << comm.status();
  if (!comm.ok() || !testing::BuildModel(c->store).ok()) return nullptr;
  c->comm = std::move(*comm);
  c->sgd = *core::MakeOptimizer({.kind = core::OptimizerKind::kSgd, .lr = 0.5f});
  options.candidates = 1;
  options.reserve = 0;
  options.probe = {.small_bytes = 1024, .large_bytes = 64 << 10, .repetitions = 1};
  absl::StatusOr<std::unique_ptr<AutoStrategy>> a =
      AutoStrategy::Create(c->comm.get(), &c->store, c->sgd.get(), options);
  EXPECT_TRUE(a.ok()) << a.status();
  if (!a.ok()) return nullptr;
  c->controller = std::move(*a);
  return c;
}

// A builder whose first two counted trial steps are over `cutoff` times the best measured
// stops there: the ps builder's steps here sleep 200 ms (a step of this model takes well under
// 1 ms), so it is measured from two steps; the others run all their steps unless they too fall
// behind. The two profiled steps sleep 50 ms: the search's cost puts them, and the ps trial's
// 600 ms, where they went.
TEST(AutoStrategyTest, ASlowBuilderStopsAfterTwoCountedSteps) {
  AutoOptions options;
  options.profile_steps = 2;
  options.trial_steps = 4;
  options.cutoff = 1.5;
  std::unique_ptr<Controlled> c = MakeControlled(options);
  ASSERT_NE(c, nullptr);
  AutoStrategy& controller = *c->controller;
  core::ParameterStore& store = c->store;
  const std::vector<int64_t> samples = {0, 1, 2, 3, 4, 5};
  int steps = 0;
  for (; steps < 200 && !controller.decided(); ++steps) {
    const bool slow = controller.synchronizer()->strategy().name == "ps";
    const bool profiled = steps < options.profile_steps;
    absl::StatusOr<StepTimes> t = controller.Run(6, [&](const StepHooks&) -> absl::Status {
      if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (profiled) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      return testing::WriteGradients(testing::ComputeGradSums(store, samples), store);
    });
    ASSERT_TRUE(t.ok()) << t.status();
  }
  ASSERT_TRUE(controller.decided()) << "no decision after " << steps << " steps";
  int trial_steps = 0;
  bool saw_ps = false;
  for (const AutoCandidate& c : controller.candidates()) {
    if (c.measured_s < 0) continue;
    trial_steps += c.measured_steps + 1;   // and the warm-up step
    if (absl::StartsWith(c.name, "ps")) {  // in one process "ps (= ps-lb) (= partitioned-ps)"
      saw_ps = true;
      EXPECT_EQ(c.measured_steps, 2) << controller.Report();
      EXPECT_GE(c.measured_s, 0.2);
    } else {
      EXPECT_GE(c.measured_steps, 2) << c.name;
      EXPECT_LE(c.measured_steps, 3) << c.name;
    }
  }
  EXPECT_TRUE(saw_ps) << controller.Report();
  EXPECT_EQ(steps, 2 + trial_steps);
  EXPECT_FALSE(absl::StartsWith(controller.chosen().name, "ps"));
  EXPECT_TRUE(absl::StrContains(controller.Report(), "cost of the builders' comparison"))
      << controller.Report();
  EXPECT_TRUE(absl::StrContains(controller.Report(), "profile: 2 steps under 'hybrid',"))
      << controller.Report();
  // The sleeps are where they were slept: the profile's two in the search's profile part, the
  // ps trial's three (its first and two counted) in the comparison; what the other steps add on
  // a loaded machine only raises them.
  const double chosen = controller.chosen().measured_s;
  const AutoStrategy::SearchCost& search = controller.search_cost();
  const AutoStrategy::SearchCost& comparison = controller.comparison_cost();
  EXPECT_GE(search.profile_s, 2 * (0.05 - chosen)) << controller.Report();
  EXPECT_LT(search.first_steps_s + search.counted_steps_s, search.profile_s) << controller.Report();
  EXPECT_GE(comparison.first_steps_s, 0.2 - chosen) << controller.Report();
  EXPECT_GE(comparison.counted_steps_s, 0.2 - chosen) << controller.Report();
  // A synchronizer was made for every strategy tried: some time outside the steps.
  EXPECT_GT(search.synchronizers_s, 0) << controller.Report();
  EXPECT_LE(search.synchronizers_s, search.switching_s) << controller.Report();
}

// One slow counted step (a retransmission, a page fault storm) does not stop a builder: the
// ps builder's first counted step sleeps 300 ms, over the cutoff, its others do not (here
// about 30 times the best, under the cutoff of 200), and it runs all its steps, measured at the
// median, a fast step.
TEST(AutoStrategyTest, OneSlowStepDoesNotStopABuilder) {
  AutoOptions options;
  options.profile_steps = 1;
  options.trial_steps = 4;
  options.cutoff = 200;
  std::unique_ptr<Controlled> c = MakeControlled(options);
  ASSERT_NE(c, nullptr);
  AutoStrategy& controller = *c->controller;
  core::ParameterStore& store = c->store;
  const std::vector<int64_t> samples = {0, 1, 2, 3, 4, 5};
  std::string last;
  int under_this = 0;
  for (int steps = 0; steps < 200 && !controller.decided(); ++steps) {
    const std::string name = controller.synchronizer()->strategy().name;
    under_this = name == last ? under_this + 1 : 0;
    last = name;
    const bool outlier = name == "ps" && under_this == 1;
    absl::StatusOr<StepTimes> t = controller.Run(6, [&](const StepHooks&) -> absl::Status {
      if (outlier) std::this_thread::sleep_for(std::chrono::milliseconds(300));
      return testing::WriteGradients(testing::ComputeGradSums(store, samples), store);
    });
    ASSERT_TRUE(t.ok()) << t.status();
  }
  ASSERT_TRUE(controller.decided());
  bool saw_ps = false;
  for (const AutoCandidate& c : controller.candidates()) {
    if (c.measured_s < 0 || !absl::StartsWith(c.name, "ps")) continue;
    saw_ps = true;
    EXPECT_EQ(c.measured_steps, 3) << controller.Report();
    EXPECT_LT(c.measured_s, 0.1) << controller.Report();
  }
  EXPECT_TRUE(saw_ps) << controller.Report();
  // The slow step alone was over the cutoff: the rule of one step would have stopped there.
  EXPECT_GT(0.3, options.cutoff * controller.chosen().measured_s) << controller.Report();
}

}  // namespace
}  // namespace cavs::distributed
