// The synchronizer over MPI (run under mpirun -np 2 and 4): for every builder, ranks with
// different (uneven, sometimes zero) numbers of samples end each step with the gradient and,
// after several SGD steps, the parameters of one process trained on the union batch; ranks
// that disagree on the model or the strategy all fail naming the parameter; a late rank is a
// DeadlineExceeded, not a hang.
#include <gtest/gtest.h>

#include <chrono>
#include <climits>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/optimizer.h"
#include "core/status.h"
#include "distributed/auto_strategy.h"
#include "distributed/builders.h"
#include "distributed/synchronizer.h"
#include "distributed/verify.h"
#include "tests/distributed/mpi_test_util.h"
#include "tests/distributed/test_model.h"
#include "tests/ops/ops_test_util.h"

namespace cavs::distributed {
namespace {

using core::ParameterStore;
using testing::World;

bool Contains(const absl::Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

// Samples of `rank` at `step`: (2 rank + step + 1) mod 5 of them, so some ranks have none.
int64_t CountOf(int rank, int step) { return (2 * rank + step + 1) % 5; }

struct Batch {
  std::vector<int64_t> mine, all;
};

Batch BatchOf(int rank, int world, int step) {
  Batch b;
  int64_t next = 1000 * step;
  for (int q = 0; q < world; ++q) {
    for (int64_t i = 0; i < CountOf(q, step); ++i, ++next) {
      b.all.push_back(next);
      if (q == rank) b.mine.push_back(next);
    }
  }
  return b;
}

// Writes the mean gradient (float) of a reference run into `store`.
absl::Status WriteMeans(const testing::GradSums& sums, int64_t count, ParameterStore& store) {
  testing::GradSums mean = sums;
  for (auto& [name, v] : mean.dense) {
    for (double& x : v) x /= count;
  }
  for (auto& [row, v] : mean.embed_rows) {
    for (double& x : v) x /= count;
  }
  return testing::WriteGradients(mean, store);
}

struct RunOptions {
  std::string builder;
  Communicator* comm = nullptr;  // World() if null
  BuildOptions build;
  bool mark_ready = false;  // MarkReady in reverse creation order, then Finish
  // The parameters after `steps` steps against the reference's, relative (floor 1e-3): each
  // step's gradients differ by rounding (bounded per element below), which SGD with momentum
  // carries into the parameters, and the next gradients are taken at those parameters. A
  // trajectory has no tight bound of its own; 1e-5 is about 168 float32 roundings.
  double tolerance = 1e-5;
  bool scaled_error = false;  // compare by error / largest value (float16 compression)
  int steps = 3;
  bool direct = false;  // every parameter server on the direct route (PsRoute::kDirect)
};

// |got - want| <= bound * scale for every element.
::testing::AssertionResult WithinScale(const std::vector<float>& got,
                                       const std::vector<double>& want,
                                       const std::vector<double>& scale, double bound) {
  if (got.size() != want.size() || got.size() != scale.size()) {
    return ::testing::AssertionFailure() << "sizes differ";
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(got[i] - want[i]) <= bound * scale[i])) {
      return ::testing::AssertionFailure() << "[" << i << "] got " << got[i] << " want " << want[i]
                                           << " (scale " << scale[i] << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

// Per element, Σ_q |rank q's gradient sum| / count: the scale of the reduction over ranks.
std::vector<double> RankSumScale(const ParameterStore& store, const std::string& name, int step,
                                 int world, int64_t count) {
  std::vector<double> scale;
  for (int q = 0; q < world; ++q) {
    std::vector<double> mean = testing::ExpectedMean(
        testing::ComputeGradSums(store, BatchOf(q, world, step).mine), name, count);
    if (scale.empty()) scale.assign(mean.size(), 0.0);
    for (size_t i = 0; i < mean.size(); ++i) scale[i] += std::abs(mean[i]);
  }
  return scale;
}

double Error(const RunOptions& run, const std::vector<float>& got,
             const std::vector<double>& want) {
  return run.scaled_error ? testing::MaxScaledError(got, want)
                          : testing::MaxRelativeError(got, want);
}

// Trains the test model for `steps` SGD-with-momentum steps on this rank's share of each batch
// and, alongside, a reference store on the whole batch; compares gradients and parameters.
void RunAndCompare(const RunOptions& run) {
  Communicator& comm = run.comm != nullptr ? *run.comm : World();
  const int r = comm.rank(), w = comm.world_size();
  ParameterStore store(5), reference(5);
  ASSERT_TRUE(testing::BuildModel(store).ok());
  ASSERT_TRUE(testing::BuildModel(reference).ok());
  absl::StatusOr<Strategy> strategy = BuildStrategy(run.builder, store, w, run.build);
  ASSERT_TRUE(strategy.ok()) << strategy.status();
  if (run.direct) {
    for (ParamStrategy& p : strategy->params) {
      if (auto* ps = std::get_if<ParameterServerSync>(&p.sync)) ps->route = PsRoute::kDirect;
    }
  }
  absl::StatusOr<std::unique_ptr<GradientSynchronizer>> sync =
      GradientSynchronizer::Create(&comm, &store, *strategy);
  ASSERT_TRUE(sync.ok()) << sync.status();
  core::OptimizerConfig config{.kind = core::OptimizerKind::kSgd, .lr = 0.5f, .momentum = 0.9f};
  std::unique_ptr<core::Optimizer> sgd = *core::MakeOptimizer(config);
  std::unique_ptr<core::Optimizer> reference_sgd = *core::MakeOptimizer(config);
  for (int step = 0; step < run.steps; ++step) {
    const Batch batch = BatchOf(r, w, step);
    ASSERT_TRUE(WriteGradients(testing::ComputeGradSums(store, batch.mine), store).ok());
    const testing::GradSums want = testing::ComputeGradSums(reference, batch.all);
    // The union batch's gradient at this store's parameters (the reference's have moved apart
    // by rounding since step 0), and the scale of the ranks' sums.
    const testing::GradSums here = testing::ComputeGradSums(store, batch.all);
    const int64_t total = static_cast<int64_t>(batch.all.size());
    absl::StatusOr<StepStats> stats;
    if (run.mark_ready) {
      ASSERT_TRUE((*sync)->BeginStep(static_cast<int64_t>(batch.mine.size())).ok());
      for (int i = store.size() - 1; i >= 0; --i) {
        ASSERT_TRUE((*sync)->MarkReady(store.parameters()[i].get()).ok());
      }
      stats = (*sync)->Finish();
      ASSERT_TRUE(stats.ok()) << stats.status();
      EXPECT_EQ(stats->units_started_early, stats->units);
    } else {
      stats = (*sync)->Synchronize(static_cast<int64_t>(batch.mine.size()));
      ASSERT_TRUE(stats.ok()) << stats.status();
    }
    EXPECT_EQ(stats->global_count, total);
    EXPECT_GT(stats->bytes_sent + stats->bytes_received, 0);
    for (const auto& p : store.parameters()) {
      const std::vector<float> got = testing::DenseGradient(*p);
      EXPECT_LE(Error(run, got, testing::ExpectedMean(want, p->name, total)), run.tolerance)
          << run.builder << " step " << step << " rank " << r << " " << p->name;
      if (run.scaled_error) continue;
      // Exactly: each rank's sum rounded to float, w of them summed in float in the strategy's
      // order, times float(1 / count): within SumErrorBound(w + 2) of Σ_q |sum_q| / count.
      EXPECT_TRUE(WithinScale(got, testing::ExpectedMean(here, p->name, total),
                              RankSumScale(store, p->name, step, w, total),
                              ops::testing::SumErrorBound(w + 2)))
          << run.builder << " step " << step << " rank " << r << " " << p->name;
    }
    ASSERT_TRUE(WriteMeans(want, total, reference).ok());
    ASSERT_TRUE(sgd->Step(store).ok());
    ASSERT_TRUE(reference_sgd->Step(reference).ok());
  }
  for (int i = 0; i < store.size(); ++i) {
    const std::vector<float> got = store.parameters()[i]->value.ToVector();
    const std::vector<float> want = reference.parameters()[i]->value.ToVector();
    EXPECT_LE(Error(run, got, std::vector<double>(want.begin(), want.end())), run.tolerance)
        << run.builder << " rank " << r << " parameter " << store.parameters()[i]->name;
  }
}

TEST(MpiSyncTest, AllReduceMatchesOneProcessOnTheUnionBatch) {
  RunAndCompare({.builder = "allreduce"});
}

TEST(MpiSyncTest, AllReduceInSmallBucketsWithMarkReady) {
  RunAndCompare({.builder = "allreduce", .build = {.bucket_bytes = 64}, .mark_ready = true});
}

// Hierarchical buckets (reduce in the host, allreduce among leaders, broadcast) with the hosts
// declared by CommOptions::ranks_per_host: 1 (every rank a host: leaders only), 2 (2 hosts x 2
// under -np 4, one host of 2 under -np 2) and the whole world on one host.
TEST(MpiSyncTest, HierarchicalAllReduceMatchesOneProcess) {
  for (const int per_host : {1, 2, World().world_size()}) {
    absl::StatusOr<std::unique_ptr<Communicator>> comm =
        MakeCommunicator("mpi", {.timeout = absl::Seconds(10), .ranks_per_host = per_host});
    ASSERT_TRUE(comm.ok()) << comm.status();
    for (const char* builder : {"hier-allreduce", "hier-hybrid"}) {
      SCOPED_TRACE(absl::StrCat(builder, ", ranks per host ", per_host));
      RunAndCompare({.builder = builder, .comm = comm->get()});
      RunAndCompare({.builder = builder,
                     .comm = comm->get(),
                     .build = {.bucket_bytes = 64},
                     .mark_ready = true});
    }
  }
}

// An AutoStrategy over the world on the test model, SGD, beside one process training on the
// whole batches (`reference`); `options` with the probe at small sizes.
struct AutoRun {
  ParameterStore store{5}, reference{5};
  std::unique_ptr<core::Optimizer> sgd, reference_sgd;
  std::unique_ptr<AutoStrategy> a;

  // Step i under `a` on this rank's slice of BatchOf(i), and the same step of one process.
  void Step(int i) {
    const Batch batch = BatchOf(World().rank(), World().world_size(), i);
    absl::StatusOr<StepTimes> t =
        a->Run(static_cast<int64_t>(batch.mine.size()), [&](const StepHooks&) -> absl::Status {
          return WriteGradients(testing::ComputeGradSums(store, batch.mine), store);
        });
    ASSERT_TRUE(t.ok()) << t.status();
    const testing::GradSums want = testing::ComputeGradSums(reference, batch.all);
    ASSERT_TRUE(WriteMeans(want, static_cast<int64_t>(batch.all.size()), reference).ok());
    ASSERT_TRUE(reference_sgd->Step(reference).ok());
  }
  // As Step, but compute marks each gradient ready in turn (latest-created first, as backward
  // finishes them), `gap_ms` apart, polling meanwhile: units start during compute.
  void StepMarkingReady(int i, int gap_ms) {
    const Batch batch = BatchOf(World().rank(), World().world_size(), i);
    absl::StatusOr<StepTimes> t =
        a->Run(static_cast<int64_t>(batch.mine.size()), [&](const StepHooks& hooks) {
          CAVS_RETURN_IF_ERROR(WriteGradients(testing::ComputeGradSums(store, batch.mine), store));
          for (int p = store.size() - 1; p >= 0; --p) {
            const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(gap_ms);
            while (std::chrono::steady_clock::now() < until) {
              CAVS_RETURN_IF_ERROR(hooks.on_progress());
              std::this_thread::sleep_for(std::chrono::microseconds(200));
            }
            CAVS_RETURN_IF_ERROR(hooks.on_gradient_ready(store.parameters()[p]->name));
          }
          return absl::OkStatus();
        });
    ASSERT_TRUE(t.ok()) << t.status();
    const testing::GradSums want = testing::ComputeGradSums(reference, batch.all);
    ASSERT_TRUE(WriteMeans(want, static_cast<int64_t>(batch.all.size()), reference).ok());
    ASSERT_TRUE(reference_sgd->Step(reference).ok());
  }
  // Every parameter within `tolerance` (relative) of one process's.
  void ExpectLikeOneProcess(double tolerance) const {
    for (int i = 0; i < store.size(); ++i) {
      const std::vector<float> got = store.parameters()[i]->value.ToVector();
      const std::vector<float> want = reference.parameters()[i]->value.ToVector();
      EXPECT_LE(testing::MaxRelativeError(got, std::vector<double>(want.begin(), want.end())),
                tolerance)
          << store.parameters()[i]->name;
    }
  }
  // The same choice everywhere: VerifyConsistent when the chosen synchronizer was made, and
  // the chosen strategy's text gathered here.
  void ExpectSameChoiceOnEveryRank() const {
    const int w = World().world_size();
    const std::string chosen = SerializeStrategy(a->chosen().strategy);
    core::Tensor mine = core::Tensor::Host({1}, core::DType::kInt64);
    mine.data<int64_t>()[0] = static_cast<int64_t>(std::hash<std::string>()(chosen) & INT64_MAX);
    core::Tensor all = core::Tensor::Host({w}, core::DType::kInt64);
    ASSERT_TRUE(World().AllGather(mine, all).ok());
    for (int q = 0; q < w; ++q) EXPECT_EQ(all.data<int64_t>()[q], mine.data<int64_t>()[0]) << q;
  }
};

std::unique_ptr<AutoRun> StartAutoRun(float momentum, AutoOptions options) {
  auto run = std::make_unique<AutoRun>();
  EXPECT_TRUE(testing::BuildModel(run->store).ok());
  EXPECT_TRUE(testing::BuildModel(run->reference).ok());
  core::OptimizerConfig config{.kind = core::OptimizerKind::kSgd, .lr = 0.5f, .momentum = momentum};
  run->sgd = *core::MakeOptimizer(config);
  run->reference_sgd = *core::MakeOptimizer(config);
  options.probe = {
      .small_bytes = 1024, .large_bytes = 64 << 10, .repetitions = 1, .fp16_elements = 1 << 16};
  absl::StatusOr<std::unique_ptr<AutoStrategy>> a =
      AutoStrategy::Create(&World(), &run->store, run->sgd.get(), options);
  EXPECT_TRUE(a.ok()) << a.status();
  if (!a.ok()) return nullptr;
  run->a = std::move(*a);
  return run;
}

// --strategy=auto's controller: probe, profile, search, trials, decision. Its steps are ordinary
// training steps, so SGD under it follows one process on the union batches within 1e-5; every
// rank ends with the same strategy. `rounds` > 1: the trials in rounds of visits.
void TrainsLikeOneProcessAndAgreesOnTheChoice(int trial_steps, int rounds) {
  const int w = World().world_size();
  AutoOptions options;
  options.profile_steps = 2;
  options.trial_steps = trial_steps;
  options.trial_rounds = rounds;
  options.candidates = 2;
  options.early = "none";  // the steps counted below are the profile's and the trials'
  std::unique_ptr<AutoRun> run = StartAutoRun(/*momentum=*/0.9f, options);
  ASSERT_NE(run, nullptr);
  AutoStrategy& a = *run->a;
  int steps = 0;
  for (; steps < 100 && !a.decided(); ++steps) ASSERT_NO_FATAL_FAILURE(run->Step(steps));
  ASSERT_TRUE(a.decided()) << "no decision after " << steps << " steps";
  // 2 profiled steps, then for each candidate tried its counted steps and a warm-up a visit;
  // the best of the first round tried again where reserve strategies were.
  int tried = 0;
  for (const AutoCandidate& c : a.candidates()) {
    tried += (c.measured_s >= 0 ? 1 : 0) + (c.first_measured_s >= 0 ? 1 : 0);
  }
  EXPECT_EQ(steps, 2 + (trial_steps - 1 + rounds) * tried);
  // A synchronizer a trial (kept between its visits), the profile's, and the chosen one's
  // where it was not the last tried; in rounds, not one a visit.
  int distinct = 0;
  for (const AutoCandidate& c : a.candidates()) distinct += c.measured_s >= 0 ? 1 : 0;
  EXPECT_GE(a.synchronizers_made(), 1 + distinct);
  EXPECT_LE(a.synchronizers_made(), 1 + tried + 1);
  EXPECT_GE(tried, static_cast<int>(StrategyBuilderNames().size()) / 2);
  // Every builder is tried, also where the search found it too and ranked it in reserve.
  for (const AutoCandidate& c : a.candidates()) {
    if (!absl::StartsWith(c.name, "auto#") || absl::StrContains(c.name, "(= ")) {
      EXPECT_GE(c.measured_s, 0) << c.name << " was not tried";
    }
  }
  // Each step's mean gradient differs from one process's by rounding only (within 1e-6 of its
  // magnitude, RunAndCompare), but over these 20 to 40 steps of SGD with momentum 0.9 those
  // differences add up along the trajectory: seen up to 5e-5 after 32 steps at -np 2; 1e-4.
  run->ExpectLikeOneProcess(1e-4);
  run->ExpectSameChoiceOnEveryRank();
  EXPECT_TRUE(absl::StrContains(a.Report(), "<- chosen")) << a.Report();
  // The probe and the profile describe this job.
  EXPECT_EQ(a.cluster().world_size(), w);
  EXPECT_GT(a.cluster().fp16.encode, 0);  // timed on every rank
  EXPECT_GT(a.cluster().fp16.decode, 0);
  EXPECT_GT(a.cluster().fp16.sum, 0);
  EXPECT_EQ(a.profile().params.size(), static_cast<size_t>(run->store.size()));
  // The profiled step, the second (the first warms up), calibrates the cluster: hybrid runs
  // the allreduce (and the allgather where the model has a row-sparse table), and where the
  // scale moved, hybrid predicts the measured step. Every rank holds the same.
  EXPECT_EQ(a.profile().strategy, "hybrid");
  EXPECT_GT(a.profile().step_ms, 0);
  const StepCalibration& cal = a.step_calibration();
  EXPECT_DOUBLE_EQ(cal.measured_s, 1e-3 * a.profile().step_ms);
  EXPECT_TRUE(cal.collectives >> static_cast<int>(Collective::kAllReduce) & 1u);
  if (cal.unchanged.empty()) {
    EXPECT_GE(cal.scale, kMinStepScale);
    EXPECT_LE(cal.scale, kMaxStepScale);
    if (cal.scale > kMinStepScale && cal.scale < kMaxStepScale) {
      EXPECT_NEAR(cal.calibrated_s, cal.measured_s, 1e-4 * cal.measured_s);
    }
  } else {
    EXPECT_EQ(cal.scale, 1);
  }
  EXPECT_TRUE(absl::StrContains(a.Report(), "calibrated at the profiled step")) << a.Report();
  // The calibrated cluster is the same text on every rank.
  core::Tensor mine = core::Tensor::Host({1}, core::DType::kInt64);
  mine.data<int64_t>()[0] =
      static_cast<int64_t>(std::hash<std::string>()(SerializeClusterSpec(cal.cluster)) & INT64_MAX);
  core::Tensor all = core::Tensor::Host({w}, core::DType::kInt64);
  ASSERT_TRUE(World().AllGather(mine, all).ok());
  for (int q = 0; q < w; ++q) EXPECT_EQ(all.data<int64_t>()[q], mine.data<int64_t>()[0]) << q;
}

TEST(MpiAutoStrategyTest, TrainsLikeOneProcessAndAgreesOnTheChoice) {
  TrainsLikeOneProcessAndAgreesOnTheChoice(/*trial_steps=*/2, /*rounds=*/1);
}

TEST(MpiAutoStrategyTest, TrainsLikeOneProcessInRoundsOfTrials) {
  TrainsLikeOneProcessAndAgreesOnTheChoice(/*trial_steps=*/3, /*rounds=*/2);
}

// The polls while units are in flight: after the profiled steps, as many under the early
// builder (ps, its units start as their gradients are marked ready), and the share fitted to
// its compute over the profiled strategy's; every rank holds the same profile, and the steps
// train like one process.
TEST(MpiAutoStrategyTest, TheEarlyBuildersStepsFitThePollCost) {
  const int w = World().world_size();
  AutoOptions options;
  options.profile_steps = 2;
  options.trial_steps = 2;
  options.candidates = 1;
  options.try_builders = false;
  options.early = "ps";
  std::unique_ptr<AutoRun> run = StartAutoRun(/*momentum=*/0.0f, options);
  ASSERT_NE(run, nullptr);
  AutoStrategy& a = *run->a;
  int steps = 0;
  for (; steps < 2; ++steps) ASSERT_NO_FATAL_FAILURE(run->StepMarkingReady(steps, 3));
  EXPECT_EQ(a.synchronizer()->strategy().name, "ps");  // the early steps begin
  for (; steps < 100 && !a.decided(); ++steps) {
    ASSERT_NO_FATAL_FAILURE(run->StepMarkingReady(steps, 3));
  }
  ASSERT_TRUE(a.decided()) << "no decision after " << steps << " steps";
  // The profile's 2, the early builder's 2, then a warm-up and a counted step a visit; the
  // best of the first round visited again where the correction picked a reserve strategy.
  int tried = 0;
  for (const AutoCandidate& c : a.candidates()) {
    tried += (c.measured_s >= 0 ? 1 : 0) + (c.first_measured_s >= 0 ? 1 : 0);
  }
  EXPECT_EQ(steps, 2 + 2 + 2 * tried) << a.Report();
  const ModelProfile& p = a.profile();
  EXPECT_EQ(p.early_strategy, "ps");
  EXPECT_GT(p.early_compute_ratio, 0);
  EXPECT_GE(p.poll_cost, 0);
  EXPECT_LE(p.poll_cost, kMaxPollCost);
  for (const ParamProfile& q : p.params) EXPECT_TRUE(q.ready_ms.has_value()) << q.name;
  EXPECT_TRUE(absl::StrContains(a.Report(), "s of compute a second of its own per unit in flight"))
      << a.Report();
  EXPECT_TRUE(absl::StrContains(a.Report(), "'ps''s compute over 'hybrid''s")) << a.Report();
  // The profile, its share included, is the same text on every rank.
  core::Tensor mine = core::Tensor::Host({1}, core::DType::kInt64);
  mine.data<int64_t>()[0] =
      static_cast<int64_t>(std::hash<std::string>()(SerializeModelProfile(p)) & INT64_MAX);
  core::Tensor all = core::Tensor::Host({w}, core::DType::kInt64);
  ASSERT_TRUE(World().AllGather(mine, all).ok());
  for (int q = 0; q < w; ++q) EXPECT_EQ(all.data<int64_t>()[q], mine.data<int64_t>()[0]) << q;
  run->ExpectSameChoiceOnEveryRank();
  run->ExpectLikeOneProcess(1e-5);
}

// A run that ends before the trials do (cavs-train's last step in the middle of the second
// candidate's trial): Conclude decides on every rank alike from the trials so far, and the
// chosen strategy trains on like one process.
TEST(MpiAutoStrategyTest, ConcludedEarlyAgreesAndTrainsOn) {
  AutoOptions options;
  options.profile_steps = 2;
  options.trial_steps = 4;  // a warm-up step and 3 counted
  options.candidates = 2;
  options.cutoff = 0;
  options.early = "none";
  std::unique_ptr<AutoRun> run = StartAutoRun(/*momentum=*/0.0f, options);
  ASSERT_NE(run, nullptr);
  AutoStrategy& a = *run->a;
  // The profile's 2 steps, the first candidate's 4, the second's warm-up and 2 counted.
  for (int i = 0; i < 9; ++i) ASSERT_NO_FATAL_FAILURE(run->Step(i));
  ASSERT_FALSE(a.decided());
  ASSERT_TRUE(a.Conclude().ok());
  ASSERT_TRUE(a.decided());
  EXPECT_TRUE(a.cut_short());
  std::vector<int> measured;
  for (const AutoCandidate& c : a.candidates()) {
    if (c.measured_s >= 0) measured.push_back(c.measured_steps);
  }
  EXPECT_EQ(measured, (std::vector<int>{3, 2})) << a.Report();
  run->ExpectSameChoiceOnEveryRank();
  for (int i = 9; i < 12; ++i) ASSERT_NO_FATAL_FAILURE(run->Step(i));
  run->ExpectLikeOneProcess(1e-5);
}

// Servers named by host, resolved against the hosts of a 2-rank-per-host layout.
TEST(MpiSyncTest, ServersNamedByHostResolveToTheirHostsRanks) {
  absl::StatusOr<std::unique_ptr<Communicator>> comm =
      MakeCommunicator("mpi", {.timeout = absl::Seconds(10), .ranks_per_host = 2});
  ASSERT_TRUE(comm.ok()) << comm.status();
  ParameterStore store;
  ASSERT_TRUE(testing::BuildModel(store).ok());
  absl::StatusOr<Strategy> s = BuildStrategy("ps-lb", store, World().world_size());
  ASSERT_TRUE(s.ok()) << s.status();
  const int hosts = (World().world_size() + 1) / 2;
  int next = 0;
  for (ParamStrategy& e : s->params) {
    auto& ps = std::get<ParameterServerSync>(e.sync);
    ps.host_placement = {{next++ % hosts, 0}};
    ps.placement.clear();
  }
  absl::StatusOr<std::unique_ptr<GradientSynchronizer>> sync =
      GradientSynchronizer::Create(comm->get(), &store, *s);
  ASSERT_TRUE(sync.ok()) << sync.status();
  for (const ParamStrategy& e : (*sync)->strategy().params) {
    const auto& ps = std::get<ParameterServerSync>(e.sync);
    ASSERT_EQ(ps.placement.size(), 1u);
    EXPECT_EQ(ps.placement[0] % 2, 0) << e.param << ": a host's first rank";
  }
}

TEST(MpiSyncTest, ParameterServerMatchesOneProcess) { RunAndCompare({.builder = "ps"}); }

// A PS shard's reduce and broadcast in pieces (CommOptions::piece_bytes): down to one float a
// piece, and a piece size that is not a whole number of floats; the same sums as whole.
TEST(MpiSyncTest, ParameterServerInPiecesMatchesOneProcess) {
  for (const int64_t piece : {4, 6, 64, 0}) {
    absl::StatusOr<std::unique_ptr<Communicator>> comm =
        MakeCommunicator("mpi", {.timeout = absl::Seconds(10), .piece_bytes = piece});
    ASSERT_TRUE(comm.ok()) << comm.status();
    EXPECT_EQ((*comm)->PieceBytes(), piece);
    for (const char* builder : {"ps", "partitioned-ps"}) {
      SCOPED_TRACE(absl::StrCat(builder, ", pieces of ", piece, " bytes"));
      RunAndCompare({.builder = builder, .comm = comm->get(), .mark_ready = true});
    }
  }
  // The default: whole on a job without Open MPI's TCP transport, else under its eager limit.
  const int64_t piece = World().PieceBytes();
  EXPECT_TRUE(piece == 0 || piece >= 4096) << piece;
}

// The direct route (point to point to and from each server), dense and row-sparse shards, in
// pieces and whole; the server adds in rank order, so every rank ends with the same bits.
TEST(MpiSyncTest, ParameterServerOnTheDirectRouteMatchesOneProcess) {
  for (const int64_t piece : {4, 6, 64, 0}) {
    absl::StatusOr<std::unique_ptr<Communicator>> comm =
        MakeCommunicator("mpi", {.timeout = absl::Seconds(10), .piece_bytes = piece});
    ASSERT_TRUE(comm.ok()) << comm.status();
    for (const char* builder : {"ps", "partitioned-ps", "hybrid"}) {
      SCOPED_TRACE(absl::StrCat(builder, " direct, pieces of ", piece, " bytes"));
      RunAndCompare({.builder = builder,
                     .comm = comm->get(),
                     .build = {.partition_min_bytes = 16, .hybrid_sparse_ps = true},
                     .mark_ready = piece != 64,
                     .direct = true});
    }
  }
}

TEST(MpiSyncTest, LoadBalancedParameterServerMatchesOneProcess) {
  RunAndCompare({.builder = "ps-lb", .mark_ready = true});
}

TEST(MpiSyncTest, PartitionedParameterServerMatchesOneProcess) {
  RunAndCompare({.builder = "partitioned-ps", .build = {.partition_min_bytes = 16}});
}

TEST(MpiSyncTest, HybridMatchesOneProcess) {
  RunAndCompare({.builder = "hybrid", .mark_ready = true});
}

TEST(MpiSyncTest, HybridWithSparseOnServersMatchesOneProcess) {
  RunAndCompare({.builder = "hybrid", .build = {.hybrid_sparse_ps = true}});
}

TEST(MpiSyncTest, Fp16CompressionIsClose) {
  RunAndCompare({.builder = "allreduce",
                 .build = {.bucket_bytes = 64, .compressor = Compressor::kFp16},
                 .tolerance = 5e-3,
                 .scaled_error = true});
}

TEST(MpiSyncTest, CommunicationProgressesBeforeFinish) {
  Communicator& comm = World();
  ParameterStore store(5);
  ASSERT_TRUE(testing::BuildModel(store).ok());
  absl::StatusOr<Strategy> strategy = BuildStrategy("hybrid", store, comm.world_size());
  ASSERT_TRUE(strategy.ok());
  absl::StatusOr<std::unique_ptr<GradientSynchronizer>> sync =
      GradientSynchronizer::Create(&comm, &store, *strategy);
  ASSERT_TRUE(sync.ok()) << sync.status();
  const Batch batch = BatchOf(comm.rank(), comm.world_size(), 0);
  ASSERT_TRUE(WriteGradients(testing::ComputeGradSums(store, batch.mine), store).ok());
  ASSERT_TRUE((*sync)->BeginStep(static_cast<int64_t>(batch.mine.size())).ok());
  for (int i = store.size() - 1; i >= 0; --i) {
    ASSERT_TRUE((*sync)->MarkReady(store.parameters()[i].get()).ok());
  }
  // Every unit has been started; polling alone (what a trainer does between backward kernels)
  // completes them, before Finish is called.
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while ((*sync)->num_in_flight() > 0 && absl::Now() < deadline) {
    ASSERT_TRUE((*sync)->Poll().ok());
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  EXPECT_EQ((*sync)->num_in_flight(), 0);
  absl::StatusOr<StepStats> stats = (*sync)->Finish();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->units_started_early, stats->units);
}

// ---- Disagreeing ranks ----------------------------------------------------------------------

// Every rank tries to create a synchronizer; all must fail with `expected` in the message.
void ExpectEveryRankFails(ParameterStore& store, const Strategy& strategy,
                          const std::string& expected, Communicator* comm = &World()) {
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<GradientSynchronizer>> sync =
      GradientSynchronizer::Create(comm, &store, strategy);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(sync.status().code(), absl::StatusCode::kFailedPrecondition) << sync.status();
  EXPECT_TRUE(Contains(sync.status(), expected)) << sync.status();
  EXPECT_TRUE(comm->health().ok());
}

TEST(MpiVerifyTest, DifferentStrategyOnTheLastRank) {
  const int r = World().rank(), w = World().world_size();
  ParameterStore store;
  ASSERT_TRUE(testing::BuildModel(store).ok());
  absl::StatusOr<Strategy> strategy = BuildStrategy(r == w - 1 ? "ps" : "hybrid", store, w);
  ASSERT_TRUE(strategy.ok());
  ExpectEveryRankFails(store, *strategy,
                       absl::StrCat("strategy for parameter 'embed/E': rank 0 has 'sparse', rank ",
                                    w - 1, " has 'ps placement=0 staleness=0'"));
}

TEST(MpiVerifyTest, DifferentShapeOnRankOne) {
  const int r = World().rank(), w = World().world_size();
  ParameterStore store;
  using core::Initializer;
  ASSERT_TRUE(store.GetOrCreate("embed/E", {40, 6}, Initializer::Zeros(), true).ok());
  ASSERT_TRUE(store.GetOrCreate("out/W", {6, r == 1 ? 5 : 4}, Initializer::Zeros()).ok());
  absl::StatusOr<Strategy> strategy = BuildStrategy("hybrid", store, w);
  ASSERT_TRUE(strategy.ok());
  ExpectEveryRankFails(store, *strategy,
                       "parameter 'out/W': rank 0 has float32[6, 4] dense, rank 1 has "
                       "float32[6, 5] dense");
}

// Ranks that would cut a PS shard into different pieces issue different collectives.
TEST(MpiVerifyTest, DifferentPieceSizeOnRankOne) {
  const int r = World().rank(), w = World().world_size();
  absl::StatusOr<std::unique_ptr<Communicator>> comm =
      MakeCommunicator("mpi", {.timeout = absl::Seconds(10), .piece_bytes = r == 1 ? 4096 : 65536});
  ASSERT_TRUE(comm.ok()) << comm.status();
  ParameterStore store;
  ASSERT_TRUE(testing::BuildModel(store).ok());
  absl::StatusOr<Strategy> strategy = BuildStrategy("ps", store, w);
  ASSERT_TRUE(strategy.ok());
  ExpectEveryRankFails(store, *strategy,
                       "the PS shards' piece size (CommOptions::piece_bytes, cavs-train's "
                       "--comm-piece-bytes): rank 0 has 65536 bytes, rank 1 has 4096",
                       comm->get());
}

TEST(MpiVerifyTest, MissingParameterOnRankOne) {
  const int r = World().rank(), w = World().world_size();
  ParameterStore store;
  using core::Initializer;
  ASSERT_TRUE(store.GetOrCreate("a", {3}, Initializer::Zeros()).ok());
  if (r != 1) {
    ASSERT_TRUE(store.GetOrCreate("b", {3}, Initializer::Zeros()).ok());
  }
  absl::StatusOr<Strategy> strategy = BuildStrategy("allreduce", store, w);
  ASSERT_TRUE(strategy.ok());
  ExpectEveryRankFails(store, *strategy,
                       "parameter #1 differs: rank 0 has parameter 'b' float32[3] dense, rank 1 "
                       "has no parameter there");
}

TEST(MpiVerifyTest, SameEverywhereIsOk) {
  ParameterStore store;
  ASSERT_TRUE(testing::BuildModel(store).ok());
  absl::StatusOr<Strategy> strategy = BuildStrategy("partitioned-ps", store, World().world_size());
  ASSERT_TRUE(strategy.ok());
  EXPECT_TRUE(VerifyConsistent(World(), *strategy, store).ok());
  // The text form travels: a strategy parsed from rank 0's file is the same strategy.
  absl::StatusOr<Strategy> parsed = ParseStrategy(SerializeStrategy(*strategy));
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(VerifyConsistent(World(), *parsed, store).ok());
}

// ---- A late rank ------------------------------------------------------------------------------

TEST(MpiSyncTimeoutTest, ARankThatDoesNotFinishIsADeadlineNamingTheUnits) {
  std::unique_ptr<Communicator> comm = testing::FreshComm(absl::Seconds(1));
  const int r = comm->rank(), w = comm->world_size();
  ParameterStore store(5);
  ASSERT_TRUE(testing::BuildModel(store).ok());
  absl::StatusOr<Strategy> strategy = BuildStrategy("allreduce", store, w);
  ASSERT_TRUE(strategy.ok());
  absl::StatusOr<std::unique_ptr<GradientSynchronizer>> sync =
      GradientSynchronizer::Create(comm.get(), &store, *strategy);
  ASSERT_TRUE(sync.ok()) << sync.status();
  ASSERT_TRUE((*sync)->BeginStep(1).ok());
  if (r == w - 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    absl::StatusOr<StepStats> late = (*sync)->Finish();  // the others have given up
    EXPECT_TRUE(late.ok() || late.status().code() == absl::StatusCode::kDeadlineExceeded)
        << late.status();
  } else {
    const absl::Time start = absl::Now();
    absl::StatusOr<StepStats> stats = (*sync)->Finish();
    const absl::Duration took = absl::Now() - start;
    EXPECT_EQ(stats.status().code(), absl::StatusCode::kDeadlineExceeded) << stats.status();
    EXPECT_TRUE(Contains(stats.status(), absl::StrCat("gradient synchronization on rank ", r,
                                                      " of ", w, " made no progress for 1s")))
        << stats.status();
    EXPECT_TRUE(Contains(stats.status(), "allreduce bucket 0")) << stats.status();
    EXPECT_GE(took, absl::Seconds(1));
    EXPECT_LT(took, absl::Seconds(4));
    EXPECT_EQ((*sync)->BeginStep(1).code(), absl::StatusCode::kFailedPrecondition);
  }
  ASSERT_TRUE(World().Barrier().ok());
}

}  // namespace
}  // namespace cavs::distributed
