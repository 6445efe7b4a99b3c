// --strategy=auto's controller in one process (a world of 1: every builder runs, the trials are
// real steps): the cutoff of a slow builder's trial. Agreement across ranks and training like one
// process are tested under mpirun (mpi_sync_test.cc).
#include "distributed/auto_strategy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "core/optimizer.h"
#include "distributed/builders.h"
#include "distributed/single_communicator.h"
#include "distributed/stats.h"
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

// Runs steps until the controller decides (at most 500) and returns how many ran. Before each
// step `labelled`, where given, says its labelled vertices from its index (else 6), then
// `sleep_ms` is told its strategy's name and says how long the step's compute sleeps.
int RunUntilDecided(Controlled& c, const std::function<int(const std::string&)>& sleep_ms,
                    const std::function<int64_t(int)>& labelled = nullptr) {
  const std::vector<int64_t> samples = {0, 1, 2, 3, 4, 5};
  int steps = 0;
  for (; steps < 500 && !c.controller->decided(); ++steps) {
    const int64_t count = labelled ? labelled(steps) : 6;
    const int ms = sleep_ms(c.controller->synchronizer()->strategy().name);
    absl::StatusOr<StepTimes> t = c.controller->Run(count, [&](const StepHooks&) -> absl::Status {
      if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      return testing::WriteGradients(testing::ComputeGradSums(c.store, samples), c.store);
    });
    EXPECT_TRUE(t.ok()) << t.status();
    if (!t.ok()) break;
  }
  EXPECT_TRUE(c.controller->decided()) << "no decision after " << steps << " steps";
  return steps;
}

// Runs `n` steps (fewer where the controller decides before).
void RunSteps(Controlled& c, int n) {
  const std::vector<int64_t> samples = {0, 1, 2, 3, 4, 5};
  for (int i = 0; i < n && !c.controller->decided(); ++i) {
    absl::StatusOr<StepTimes> t = c.controller->Run(6, [&](const StepHooks&) -> absl::Status {
      return testing::WriteGradients(testing::ComputeGradSums(c.store, samples), c.store);
    });
    ASSERT_TRUE(t.ok()) << t.status();
  }
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
  int step = 0;
  const int steps = RunUntilDecided(*c, [&](const std::string& name) {
    const bool profiled = step++ < options.profile_steps;
    return (name == "ps" ? 200 : 0) + (profiled ? 50 : 0);
  });
  ASSERT_TRUE(controller.decided());
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
  // The profiled step is the second (the first warms up), 50 ms of sleep and the step; one
  // process runs no collective, so the cluster stays as probed.
  EXPECT_EQ(controller.profile().strategy, "hybrid");
  EXPECT_GE(controller.profile().step_ms, 50);
  EXPECT_EQ(controller.step_calibration().unchanged, "it runs no collective");
  EXPECT_TRUE(absl::StrContains(controller.Report(), "calibrated at the profiled step ("))
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

// The trials' noise: every trial step sleeps 40 or 60 ms in turn, so each trial's counted steps
// (two of each) spread 0.2 * sqrt(4 / 3) about their mean, times 1.4826: 0.34 (what else a
// step takes moves it a little); each measured median's standard error is that at its steps.
TEST(AutoStrategyTest, TheReportSaysHowNoisyTheTrialsWere) {
  AutoOptions options;
  options.profile_steps = 1;
  options.trial_steps = 5;
  options.cutoff = 0;
  std::unique_ptr<Controlled> c = MakeControlled(options);
  ASSERT_NE(c, nullptr);
  AutoStrategy& controller = *c->controller;
  int step = 0;
  RunUntilDecided(*c, [&](const std::string&) { return step++ % 2 ? 40 : 60; });
  ASSERT_TRUE(controller.decided());
  EXPECT_GT(controller.spread(), 0.25) << controller.Report();
  EXPECT_LT(controller.spread(), 0.45) << controller.Report();
  int measured = 0;
  for (const AutoCandidate& a : controller.candidates()) {
    if (a.measured_s < 0) {
      EXPECT_EQ(a.standard_error, -1) << a.name;
      continue;
    }
    ++measured;
    EXPECT_EQ(a.measured_steps, 4) << a.name;
    EXPECT_DOUBLE_EQ(a.standard_error, MedianStandardError(controller.spread(), 4)) << a.name;
    // The compute is the sleep (40 or 60 ms), inside the step; the hooks a part of it.
    EXPECT_GE(a.measured_compute_s, 0.040) << a.name;
    EXPECT_LE(a.measured_compute_s, a.measured_s) << a.name;
    EXPECT_GE(a.measured_hooks_s, 0.0) << a.name;
    EXPECT_LE(a.measured_hooks_s, a.measured_compute_s) << a.name;
  }
  EXPECT_GE(measured, 2) << controller.Report();
  const std::string report = controller.Report();
  EXPECT_TRUE(absl::StrContains(report, "se_%")) << report;
  EXPECT_TRUE(absl::StrContains(report, "noise: the counted steps spread")) << report;
  EXPECT_TRUE(absl::StrContains(report, "compute and its hooks, predicted / measured")) << report;
}

// Runs a controller until it decides, each step's compute sleeping 10 ms a labelled vertex,
// `vertices(step)` of them (the steps counted from the first profiled one, 0).
std::unique_ptr<Controlled> DecidedAtWork(AutoOptions options,
                                          const std::function<int64_t(int)>& vertices) {
  options.cutoff = 0;
  std::unique_ptr<Controlled> c = MakeControlled(options);
  if (c == nullptr) return nullptr;
  int64_t now = 0;
  RunUntilDecided(
      *c, [&](const std::string&) { return static_cast<int>(10 * now); },
      [&](int step) { return now = vertices(step); });
  return c;
}

// Trial steps at the profile's work: each step's compute sleeps 10 ms a labelled vertex, the
// profiled ones at 6 vertices (60 ms), the trials' at 4 and 8 in turn (40 and 80 ms). Taken to
// the profile's 6 vertices at its 10 ms a vertex, every counted step is about 60 ms: the spread
// that was the batches' work (0.34 as measured, as in the test above) is gone, and each
// strategy is measured at 60 ms. Without equal_work, the spread is the batches'.
TEST(AutoStrategyTest, TrialStepsAreComparedAtTheProfilesWork) {
  for (const bool equal_work : {true, false}) {
    AutoOptions options;
    options.profile_steps = 3;
    options.trial_steps = 5;
    options.equal_work = equal_work;
    std::unique_ptr<Controlled> c = DecidedAtWork(options, [&](int step) -> int64_t {
      return step < options.profile_steps ? 6 : step % 2 ? 4 : 8;
    });
    ASSERT_NE(c, nullptr);
    AutoStrategy& controller = *c->controller;
    ASSERT_TRUE(controller.decided());
    const std::string report = controller.Report();
    EXPECT_NEAR(controller.work_ref(), 6.0, 1e-9) << report;
    EXPECT_NEAR(controller.work_rate(), 0.010, 0.003) << report;  // s a vertex, and the rest
    EXPECT_GT(controller.raw_spread(), 0.25) << report;
    if (equal_work) {
      EXPECT_LT(controller.spread(), 0.1) << report;
      EXPECT_TRUE(absl::StrContains(report, "equal work: each counted step at the profile's 6 "))
          << report;
    } else {
      EXPECT_EQ(controller.spread(), controller.raw_spread()) << report;
      EXPECT_FALSE(absl::StrContains(report, "equal work:")) << report;
    }
    for (const AutoCandidate& a : controller.candidates()) {
      if (a.measured_s < 0) continue;
      ASSERT_EQ(a.counted_s.size(), a.counted_raw_s.size()) << a.name;
      if (equal_work) EXPECT_NEAR(a.measured_s, 0.060, 0.015) << a.name << "\n" << report;
    }
  }
}

// The profile's step is taken at its own mean work as a trial's are: counted profile steps of
// 4, 8 and 8 labelled vertices at 10 ms a vertex are 66.7 ms each at their mean (6.67), where
// their median as measured is 80 ms; the report gives each profiled step's vertices.
TEST(AutoStrategyTest, TheProfilesStepIsAtItsMeanWork) {
  for (const bool equal_work : {true, false}) {
    AutoOptions options;
    options.profile_steps = 4;
    options.trial_steps = 2;
    options.equal_work = equal_work;
    std::unique_ptr<Controlled> c = DecidedAtWork(options, [&](int step) -> int64_t {
      const int64_t profiled[] = {6, 4, 8, 8};
      return step < options.profile_steps ? profiled[step] : 6;
    });
    ASSERT_NE(c, nullptr);
    AutoStrategy& controller = *c->controller;
    ASSERT_TRUE(controller.decided());
    const std::string report = controller.Report();
    EXPECT_NEAR(controller.work_ref(), 20.0 / 3, 1e-9) << report;
    EXPECT_NEAR(controller.profile().step_ms, equal_work ? 66.7 : 80.0, 6.0) << report;
    EXPECT_TRUE(absl::StrContains(report, " (4) ")) << report;
    EXPECT_EQ(absl::StrContains(report, "counted at its work"), equal_work) << report;
  }
}

// One slow counted step (a retransmission, a page fault storm) does not stop a builder: the
// ps builder's first counted step sleeps 600 ms, over the cutoff of 20 times the best, its
// others sleep 10 ms as every other step does (so that a loaded machine's scheduling does not
// put a step of this sub-millisecond model over the cutoff), and it runs all its steps,
// measured at the median, a fast step.
TEST(AutoStrategyTest, OneSlowStepDoesNotStopABuilder) {
  AutoOptions options;
  options.profile_steps = 1;
  options.trial_steps = 4;
  options.cutoff = 20;
  std::unique_ptr<Controlled> c = MakeControlled(options);
  ASSERT_NE(c, nullptr);
  AutoStrategy& controller = *c->controller;
  std::string last;
  int under_this = 0;
  RunUntilDecided(*c, [&](const std::string& name) {
    under_this = name == last ? under_this + 1 : 0;
    last = name;
    return name == "ps" && under_this == 1 ? 600 : 10;
  });
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
  EXPECT_GT(0.6, options.cutoff * controller.chosen().measured_s) << controller.Report();
}

// With trial_rounds the counted steps are split into visits, the candidates visited in turn and
// every other round in reverse order: the strategy of each step, in order, shows it.
TEST(AutoStrategyTest, TrialRoundsVisitInTurnEveryOtherRoundReversed) {
  AutoOptions options;
  options.profile_steps = 1;
  options.trial_steps = 8;  // 7 counted: visits of 3, 2 and 2, each after a warm-up step
  options.trial_rounds = 3;
  options.cutoff = 0;
  std::unique_ptr<Controlled> c = MakeControlled(options);
  ASSERT_NE(c, nullptr);
  AutoStrategy& controller = *c->controller;
  std::vector<std::string> step_names;  // the trials' steps' strategies, in order
  RunUntilDecided(*c, [&](const std::string& name) {
    step_names.push_back(name);
    return 0;
  });
  ASSERT_TRUE(controller.decided());
  step_names.erase(step_names.begin());  // the profile's
  std::vector<std::string> tried;
  for (const AutoCandidate& a : controller.candidates()) {
    if (a.measured_s < 0) continue;
    EXPECT_EQ(a.measured_steps, 7) << a.name;
    EXPECT_EQ(a.visits, 3) << a.name;
    tried.push_back(a.strategy.name);
  }
  ASSERT_GE(tried.size(), 2u) << controller.Report();
  // Round 1 in the candidates' order (4 steps each: 1 + 3 counted), round 2 reversed and round
  // 3 forward again (1 + 2 each).
  std::vector<std::string> want;
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < tried.size(); ++i) {
      const std::string& name = tried[round == 1 ? tried.size() - 1 - i : i];
      want.insert(want.end(), round == 0 ? 4 : 3, name);
    }
  }
  EXPECT_EQ(step_names, want) << controller.Report();
  // One synchronizer a trial, kept between its visits (not one a visit), beside the
  // profile's; the chosen one's is the last trial's or made anew.
  const bool chosen_last = controller.chosen().strategy.name == tried.back();
  EXPECT_EQ(controller.synchronizers_made(),
            1 + static_cast<int>(tried.size()) + (chosen_last ? 0 : 1));
  EXPECT_TRUE(absl::StrContains(controller.Report(),
                                "trials: 7 counted steps a strategy in 3 "
                                "rounds, after a step to warm up in each"))
      << controller.Report();
}

// Where each visit counts one step, a slow builder stops once two are counted (after its second
// visit), measured from those two, and is not visited again.
TEST(AutoStrategyTest, ASlowBuilderStopsAfterTwoCountedStepsInRounds) {
  AutoOptions options;
  options.profile_steps = 1;
  options.trial_steps = 5;  // 4 counted, one a visit
  options.trial_rounds = 4;
  options.cutoff = 1.5;
  std::unique_ptr<Controlled> c = MakeControlled(options);
  ASSERT_NE(c, nullptr);
  AutoStrategy& controller = *c->controller;
  // The others take 10 ms a step, so that a sub-millisecond step's jitter (an asan build on a
  // loaded machine) never puts one of them over the cutoff.
  RunUntilDecided(*c, [](const std::string& name) { return name == "ps" ? 100 : 10; });
  ASSERT_TRUE(controller.decided());
  bool saw_ps = false;
  for (const AutoCandidate& a : controller.candidates()) {
    if (a.measured_s < 0) continue;
    if (absl::StartsWith(a.name, "ps")) {
      saw_ps = true;
      EXPECT_EQ(a.visits, 2) << controller.Report();
      EXPECT_EQ(a.measured_steps, 2) << controller.Report();
      EXPECT_GE(a.measured_s, 0.1) << controller.Report();
    } else {
      EXPECT_EQ(a.visits, 4) << a.name << "\n" << controller.Report();
      EXPECT_EQ(a.measured_steps, 4) << a.name;
    }
  }
  EXPECT_TRUE(saw_ps) << controller.Report();
}

// A run that ends before the trials do: Conclude decides from the candidates with a counted
// step, the one under way measured on the steps it had, and the report says so. Before any
// counted step (profiling, or the first trial's warm-up) it stays undecided.
TEST(AutoStrategyTest, ConcludeDecidesFromTheTrialsSoFar) {
  AutoOptions options;
  options.profile_steps = 2;
  options.trial_steps = 4;  // a warm-up step and 3 counted
  options.cutoff = 0;
  std::unique_ptr<Controlled> c = MakeControlled(options);
  ASSERT_NE(c, nullptr);
  AutoStrategy& controller = *c->controller;
  RunSteps(*c, 1);
  ASSERT_TRUE(controller.Conclude().ok());
  EXPECT_TRUE(controller.profiling());
  EXPECT_FALSE(controller.decided());
  RunSteps(*c, 2);  // the profile's second step, the first trial's warm-up
  ASSERT_TRUE(controller.Conclude().ok());
  EXPECT_FALSE(controller.profiling());
  EXPECT_FALSE(controller.decided());
  EXPECT_EQ(controller.trial_steps_run(), 1);
  // The first trial's 3 counted steps, the second's warm-up and one counted.
  RunSteps(*c, 5);
  ASSERT_FALSE(controller.decided());
  ASSERT_TRUE(controller.Conclude().ok());
  ASSERT_TRUE(controller.decided());
  EXPECT_TRUE(controller.cut_short());
  EXPECT_EQ(controller.trial_steps_run(), 6);
  std::vector<int> steps;
  for (const AutoCandidate& a : controller.candidates()) {
    if (a.measured_s >= 0) steps.push_back(a.measured_steps);
  }
  EXPECT_EQ(steps, (std::vector<int>{3, 1})) << controller.Report();
  EXPECT_GE(controller.chosen().measured_s, 0);
  EXPECT_GT(controller.trial_steps_planned(), 8) << controller.Report();
  EXPECT_TRUE(absl::StrContains(controller.Report(),
                                absl::StrCat("the run ended before the trials did (6 of the ",
                                             controller.trial_steps_planned(),
                                             " trial steps planned): chosen from the 2 "
                                             "candidates with a counted step")))
      << controller.Report();
  ASSERT_TRUE(controller.Conclude().ok());  // nothing more once decided
  RunSteps(*c, 2);                          // the chosen strategy trains on
}

// The reserve candidates the correction picks are tried in a second round beside the best of
// the first, tried again, and the decision is that round's: a machine that runs faster by then
// does not hand the reserve a win the first round's best would have had. One searched
// candidate and no builders, so one trial, whose fit (a ridge towards the model) leaves an
// offset under its excess: the reserve, predicted about the same, is corrected below it and
// picked. `again` is how long the first's steps sleep in the second round; the reserve's 10 ms.
void SecondRound(int again, bool first_wins) {
  AutoOptions options;
  options.profile_steps = 1;
  options.trial_steps = 3;  // a warm-up and 2 counted
  options.try_builders = false;
  options.cutoff = 0;
  std::unique_ptr<Controlled> c = MakeControlled(options);
  ASSERT_NE(c, nullptr);
  // MakeControlled tries one searched candidate and keeps no reserve; here one in reserve.
  options.candidates = 1;
  options.reserve = 1;
  absl::StatusOr<std::unique_ptr<AutoStrategy>> made =
      AutoStrategy::Create(c->comm.get(), &c->store, c->sgd.get(), options);
  ASSERT_TRUE(made.ok()) << made.status();
  c->controller = std::move(*made);
  AutoStrategy& controller = *c->controller;
  int step = 0;
  RunUntilDecided(*c, [&](const std::string& name) {
    const int i = step++;
    if (i == 0) return 0;                  // the profile
    if (i <= 3) return 30;                 // auto#1's first trial, on a slow machine
    return name == "auto#1" ? again : 10;  // the second round
  });
  ASSERT_TRUE(controller.decided());
  ASSERT_GE(controller.candidates().size(), 2u);
  const AutoCandidate& first = controller.candidates()[0];
  const AutoCandidate& reserve = controller.candidates()[1];
  ASSERT_EQ(first.name, "auto#1");
  ASSERT_GE(reserve.measured_s, 0) << controller.Report();  // picked and tried
  EXPECT_TRUE(first.second && reserve.second);
  EXPECT_GE(first.first_measured_s, 0.03) << controller.Report();
  EXPECT_EQ(first.measured_steps, 2) << controller.Report();
  EXPECT_EQ(controller.chosen().name, first_wins ? "auto#1" : reserve.name) << controller.Report();
  EXPECT_EQ(step, 1 + 3 + 3 + 3);
  // The second round's steps are planned too: the report's "N of the M trial steps planned".
  EXPECT_EQ(controller.trial_steps_run(), 3 + 3 + 3);
  EXPECT_EQ(controller.trial_steps_planned(), 3 + 3 + 3);
  EXPECT_TRUE(absl::StrContains(controller.Report(),
                                "second round: the reserve the correction picked, beside "
                                "auto#1, the best of the first, tried again:"))
      << controller.Report();
}

TEST(AutoStrategyTest, SecondRoundComparesTheReserveWithTheFirstsBestAgain) {
  SecondRound(/*again=*/2, /*first_wins=*/true);  // 30 ms, then 2: faster than the reserve's 10
}

TEST(AutoStrategyTest, SecondRoundReserveFasterThanTheFirstsBestAgainWins) {
  SecondRound(/*again=*/25, /*first_wins=*/false);
}

// With trial_seconds, a trial of short steps counts about that many seconds of them: steps
// sleeping 2 ms, predicted near that, get ceil(trial_seconds / the fastest predicted step)
// counted steps (at most kMaxBudgetSteps) in rounds of at most kBudgetVisitSteps, where
// trial_steps alone would count one; the profile is stretched the same from its first step.
TEST(AutoStrategyTest, TrialSecondsStretchTrialsOfShortSteps) {
  AutoOptions options;
  options.profile_steps = 2;
  options.trial_steps = 2;  // a warm-up step and 1 counted
  options.trial_seconds = 0.03;
  options.cutoff = 0;
  std::unique_ptr<Controlled> c = MakeControlled(options);
  ASSERT_NE(c, nullptr);
  AutoStrategy& controller = *c->controller;
  const int steps = RunUntilDecided(*c, [](const std::string&) { return 2; });
  ASSERT_TRUE(controller.decided());
  double fastest = 0;
  for (const AutoCandidate& a : controller.candidates()) {
    if (fastest == 0 || a.prediction.step_s < fastest) fastest = a.prediction.step_s;
  }
  ASSERT_GT(fastest, 0.0);
  const int counted =
      std::max(1, std::min(kMaxBudgetSteps, static_cast<int>(std::ceil(0.03 / fastest))));
  const int rounds = counted > 1 ? (counted + kBudgetVisitSteps - 1) / kBudgetVisitSteps : 1;
  EXPECT_GT(counted, 1) << "predicted " << fastest << " s";
  int tried = 0;
  for (const AutoCandidate& a : controller.candidates()) {
    if (a.measured_s < 0) continue;
    ++tried;
    EXPECT_EQ(a.measured_steps, counted) << a.name << "\n" << controller.Report();
  }
  // The profile too: about 0.03 s of steps of at least 2 ms after its first, more than the
  // 2 steps asked.
  EXPECT_GT(controller.profiled_steps(), options.profile_steps);
  EXPECT_LE(controller.profiled_steps(), 1 + 15);
  EXPECT_EQ(steps, controller.profiled_steps() + tried * (counted + (counted > 1 ? rounds : 0)));
  EXPECT_TRUE(absl::StrContains(
      controller.Report(),
      absl::StrCat("trials: ", counted, " counted steps a strategy in ", rounds, " round")))
      << controller.Report();
  EXPECT_TRUE(absl::StrContains(controller.Report(), "0.03 s a strategy at the fastest predicted"))
      << controller.Report();
  if (tried > 1) {
    EXPECT_TRUE(absl::StrContains(controller.Report(),
                                  "out of sample (each trial from the others): median |error| "))
        << controller.Report();
  }
}

// Bad counts are refused, naming the option.
TEST(AutoStrategyTest, RefusesZeroRoundsAndNegativeSeconds) {
  absl::StatusOr<std::unique_ptr<Communicator>> comm = MakeSingleCommunicator();
  ASSERT_TRUE(comm.ok());
  core::ParameterStore store{5};
  ASSERT_TRUE(testing::BuildModel(store).ok());
  std::unique_ptr<core::Optimizer> sgd =
      *core::MakeOptimizer({.kind = core::OptimizerKind::kSgd, .lr = 0.5f});
  AutoOptions options;
  options.trial_rounds = 0;
  absl::StatusOr<std::unique_ptr<AutoStrategy>> a =
      AutoStrategy::Create(comm->get(), &store, sgd.get(), options);
  ASSERT_FALSE(a.ok());
  EXPECT_TRUE(absl::StrContains(a.status().message(), "trial_rounds (0)")) << a.status();
  options = AutoOptions{};
  options.trial_seconds = -1;
  a = AutoStrategy::Create(comm->get(), &store, sgd.get(), options);
  ASSERT_FALSE(a.ok());
  EXPECT_TRUE(absl::StrContains(a.status().message(), "trial_seconds (-1)")) << a.status();
  options = AutoOptions{};
  options.early = "soon";
  a = AutoStrategy::Create(comm->get(), &store, sgd.get(), options);
  ASSERT_FALSE(a.ok());
  EXPECT_TRUE(absl::StrContains(a.status().message(),
                                "early builder 'soon' is none of auto, none, allreduce"))
      << a.status();
}

// One process runs no collective: no early steps even where asked, and the report says why.
TEST(AutoStrategyTest, OneProcessHasNoEarlySteps) {
  AutoOptions options;
  options.profile_steps = 2;
  options.trial_steps = 2;
  options.early = "ps";
  std::unique_ptr<Controlled> c = MakeControlled(options);
  ASSERT_NE(c, nullptr);
  RunUntilDecided(*c, [](const std::string&) { return 0; });
  EXPECT_EQ(c->controller->profile().poll_cost, 0.0);
  EXPECT_TRUE(c->controller->profile().early_strategy.empty());
  EXPECT_TRUE(absl::StrContains(c->controller->Report(),
                                "polls while units are in flight: not measured (one rank, no "
                                "units)"))
      << c->controller->Report();
}

// A controller of two profiled steps and two trial steps a strategy, run until it decides; each
// profiled step sleeps `profile_sleep_ms`, the trials none.
std::unique_ptr<Controlled> DecidedShort(int profile_sleep_ms) {
  AutoOptions options;
  options.profile_steps = 2;
  options.trial_steps = 2;
  std::unique_ptr<Controlled> c = MakeControlled(options);
  if (c == nullptr) return nullptr;
  int step = 0;
  RunUntilDecided(*c, [&](const std::string&) {
    return step++ < options.profile_steps ? profile_sleep_ms : 0;
  });
  return c;
}

// Where every host has one rank (one process is one host of one rank) a hierarchical bucket is
// its flat allreduce: `hier-allreduce` and `hier-hybrid` are tried once, as `allreduce` and
// `hybrid`, and every builder is named by exactly one candidate.
TEST(AutoStrategyTest, HierarchicalBuildersAreTheFlatOnesOnOneRankAHost) {
  std::unique_ptr<Controlled> c = DecidedShort(0);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->controller->cluster().hosts.size(), 1u);
  ASSERT_EQ(c->controller->cluster().hosts[0].ranks, 1);
  const std::string report = c->controller->Report();
  for (const std::string& builder : StrategyBuilderNames()) {
    int named = 0;
    for (const AutoCandidate& cand : c->controller->candidates()) {
      named += cand.name == builder || absl::StartsWith(cand.name, builder + " (= ") ||
                       absl::StrContains(cand.name, "(= " + builder + ")")
                   ? 1
                   : 0;
    }
    EXPECT_EQ(named, 1) << builder << "\n" << report;
  }
  for (const AutoCandidate& cand : c->controller->candidates()) {
    EXPECT_FALSE(absl::StartsWith(cand.name, "hier-")) << report;
    if (absl::StrContains(cand.name, "(= hier-allreduce)")) {
      EXPECT_TRUE(cand.name.find("allreduce") < cand.name.find("(= hier-allreduce)")) << report;
    }
  }
}

// The profiled strategy is measured twice, in the profile and in its trial: the report says how
// far apart (what moves a whole trial, which the standard errors do not count). Here the
// profiled steps sleep 50 ms and the trials none.
TEST(AutoStrategyTest, TheReportSaysHowFarTheProfiledStrategyDrifted) {
  std::unique_ptr<Controlled> c = DecidedShort(50);
  ASSERT_NE(c, nullptr);
  const std::string report = c->controller->Report();
  ASSERT_TRUE(c->controller->drift().has_value()) << report;
  EXPECT_LT(*c->controller->drift(), -0.5) << report;
  EXPECT_TRUE(absl::StrContains(report, "drift: 'hybrid' measured ")) << report;
  EXPECT_TRUE(absl::StrContains(report, " ms in the profile (1 step) and ")) << report;
}

}  // namespace
}  // namespace cavs::distributed
