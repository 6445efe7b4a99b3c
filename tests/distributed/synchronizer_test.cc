// The synchronizer in one process (world size 1): the global mean is the local sum divided by
// the local count, for every builder, with and without MarkReady. Multi-rank behaviour is in
// mpi_sync_test.cc.
#include "distributed/synchronizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/optimizer.h"
#include "distributed/builders.h"
#include "distributed/comm_state.h"
#include "distributed/single_communicator.h"
#include "distributed/step.h"
#include "distributed/sync_units.h"
#include "tests/core/host_memory_device.h"
#include "tests/distributed/test_model.h"

namespace cavs::distributed {
namespace {

// A Work that completes on its `polls`-th poll, counting them.
class CountedWork final : public Work {
 public:
  CountedWork(int polls, int* polled)
      : Work(
            std::make_shared<internal::CommState>("fake", 0, 1, CommOptions{}, core::Device::Cpu()),
            "counted"),
        polls_(polls),
        polled_(polled) {}

 private:
  absl::StatusOr<bool> Poll() override { return ++*polled_ >= polls_; }
  int polls_;
  int* polled_;
};

// A stage's operations are polled in order, each until it completes, and a poll stops at the
// first still running: one poll of the transport progresses them all, so a shard's hundreds of
// pieces cost one each call, not hundreds.
TEST(StageTest, PollsInOrderAndStopsAtTheFirstRunning) {
  std::vector<int> polled(3, 0);
  internal::Stage stage;
  ASSERT_TRUE(stage.Add(std::make_unique<CountedWork>(2, &polled[0])).ok());
  ASSERT_TRUE(stage.Add(std::make_unique<CountedWork>(1, &polled[1])).ok());
  ASSERT_TRUE(stage.Add(std::make_unique<CountedWork>(3, &polled[2])).ok());
  absl::StatusOr<bool> done = stage.Test();  // the first still running
  ASSERT_TRUE(done.ok());
  EXPECT_FALSE(*done);
  EXPECT_EQ(polled, (std::vector<int>{1, 0, 0}));
  done = stage.Test();  // the first and second complete, the third running
  EXPECT_FALSE(*done);
  EXPECT_EQ(polled, (std::vector<int>{2, 1, 1}));
  done = stage.Test();
  EXPECT_FALSE(*done);
  done = stage.Test();  // the completed ones are not polled again
  EXPECT_TRUE(*done);
  EXPECT_EQ(polled, (std::vector<int>{2, 1, 3}));
  stage.Clear();
  done = stage.Test();
  EXPECT_TRUE(*done);
}

using core::ParameterStore;
using testing::BuildModel;
using testing::ComputeGradSums;
using testing::DenseGradient;
using testing::ExpectedMean;
using testing::MaxRelativeError;

bool Contains(const absl::Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

std::vector<int64_t> Range(int64_t begin, int64_t end) {
  std::vector<int64_t> v;
  for (int64_t s = begin; s < end; ++s) v.push_back(s);
  return v;
}

class SynchronizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Communicator>> comm = MakeSingleCommunicator();
    ASSERT_TRUE(comm.ok()) << comm.status();
    comm_ = *std::move(comm);
    ASSERT_TRUE(BuildModel(store_).ok());
  }

  std::unique_ptr<GradientSynchronizer> Make(const std::string& builder,
                                             BuildOptions options = {}) {
    absl::StatusOr<Strategy> strategy = BuildStrategy(builder, store_, 1, options);
    EXPECT_TRUE(strategy.ok()) << strategy.status();
    absl::StatusOr<std::unique_ptr<GradientSynchronizer>> sync =
        GradientSynchronizer::Create(comm_.get(), &store_, *strategy);
    EXPECT_TRUE(sync.ok()) << sync.status();
    return sync.ok() ? *std::move(sync) : nullptr;
  }

  // One process: each element is float(sum) times float(1 / count), three roundings (3 u =
  // 1.8e-7) of the value itself, nothing summed in another order: 1e-6 is above that bound.
  void ExpectMeans(const testing::GradSums& sums, int64_t count, double tolerance = 1e-6) {
    for (const auto& p : store_.parameters()) {
      EXPECT_LE(MaxRelativeError(DenseGradient(*p), ExpectedMean(sums, p->name, count)), tolerance)
          << p->name;
    }
  }

  std::unique_ptr<Communicator> comm_;
  ParameterStore store_;
};

TEST_F(SynchronizerTest, EveryBuilderGivesTheSumOverTheCount) {
  for (const std::string& builder : StrategyBuilderNames()) {
    std::unique_ptr<GradientSynchronizer> sync =
        Make(builder, {.bucket_bytes = 64, .partition_min_bytes = 1});
    ASSERT_NE(sync, nullptr);
    const testing::GradSums sums = ComputeGradSums(store_, Range(0, 7));
    ASSERT_TRUE(WriteGradients(sums, store_).ok());
    absl::StatusOr<StepStats> stats = sync->Synchronize(7);
    ASSERT_TRUE(stats.ok()) << builder << ": " << stats.status();
    EXPECT_EQ(stats->local_count, 7);
    EXPECT_EQ(stats->global_count, 7);
    EXPECT_EQ(stats->units, sync->num_units());
    ExpectMeans(sums, 7);
    const core::Parameter& e = *store_.Find("embed/E");
    EXPECT_TRUE(std::is_sorted(e.grad_rows.begin(), e.grad_rows.end())) << builder;
    EXPECT_TRUE(core::ValidateGradient(e).ok()) << builder;
  }
}

TEST_F(SynchronizerTest, ZeroGlobalCountGivesZeroGradients) {
  std::unique_ptr<GradientSynchronizer> sync = Make("hybrid");
  ASSERT_TRUE(store_.ZeroGrad().ok());
  absl::StatusOr<StepStats> stats = sync->Synchronize(0);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->global_count, 0);
  for (const auto& p : store_.parameters()) {
    for (float v : DenseGradient(*p)) EXPECT_EQ(v, 0.0f) << p->name;
  }
  EXPECT_TRUE(store_.Find("embed/E")->grad_rows.empty());
}

TEST_F(SynchronizerTest, UnitsStartInReverseCreationOrderAsTheyBecomeReady) {
  // One bucket per parameter: units out/b, out/W, hidden/b, hidden/W, then embed/E.
  std::unique_ptr<GradientSynchronizer> sync = Make("allreduce", {.bucket_bytes = 4});
  ASSERT_NE(sync, nullptr);
  const std::vector<std::string> names = sync->UnitNames();
  ASSERT_EQ(names.size(), 5u);
  EXPECT_EQ(names[0], "allreduce bucket 0 (out/b)");
  EXPECT_EQ(names[3], "allreduce bucket 3 (hidden/W)");
  EXPECT_EQ(names[4], "sparse allgather 'embed/E'");
  const testing::GradSums sums = ComputeGradSums(store_, Range(3, 8));
  ASSERT_TRUE(WriteGradients(sums, store_).ok());

  ASSERT_TRUE(sync->BeginStep(5).ok());
  // hidden/W alone cannot start: the units before it (out/b, out/W, hidden/b) have not.
  ASSERT_TRUE(sync->MarkReady(store_.Find("hidden/W")).ok());
  ASSERT_TRUE(sync->MarkReady(store_.Find("hidden/W")).ok());  // twice: a no-op
  ASSERT_TRUE(sync->MarkReady(store_.Find("out/b")).ok());
  ASSERT_TRUE(sync->MarkReady(store_.Find("out/W")).ok());
  absl::StatusOr<StepStats> stats = sync->Finish();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->units_started_early, 2);  // out/b and out/W
  // The hooks before Finish: three MarkReady calls that did something (the repeat returns at
  // once), their time counted, Finish's not.
  EXPECT_EQ(stats->polls, 3);
  EXPECT_GE(stats->hook_seconds, 0.0);
  EXPECT_LE(stats->hook_seconds, stats->unit_done_at.back());
  // The first call started nothing; the calls from out/b's on ran with a unit in flight.
  EXPECT_GE(stats->hook_seconds_in_flight, 0.0);
  EXPECT_LE(stats->hook_seconds_in_flight, stats->hook_seconds);
  EXPECT_EQ(stats->polls_in_flight, 2);  // out/b's and out/W's
  ExpectMeans(sums, 5);
  // Each unit's start and the poll that found it done, from BeginStep, in start order: the
  // early ones before the rest, every one done no earlier than it started.
  ASSERT_EQ(stats->unit_started_at.size(), 5u);
  ASSERT_EQ(stats->unit_done_at.size(), 5u);
  ASSERT_EQ(stats->unit_start_seconds.size(), 5u);
  for (size_t u = 0; u < 5; ++u) {
    EXPECT_GE(stats->unit_start_seconds[u], 0.0) << u;
    EXPECT_LE(stats->unit_start_seconds[u], stats->unit_started_at[u]) << u;
    EXPECT_GE(stats->unit_started_at[u], 0.0) << u;
    EXPECT_GE(stats->unit_done_at[u], stats->unit_started_at[u]) << u;
    if (u > 0) EXPECT_GE(stats->unit_started_at[u], stats->unit_started_at[u - 1]) << u;
  }
  // Each unit's stages, found complete in order between its start and its end: an allreduce
  // bucket has one, the sparse allgather two (the counts, the rows).
  ASSERT_EQ(stats->unit_stages_done_at.size(), 5u);
  for (size_t u = 0; u < 5; ++u) {
    const std::vector<double>& stages = stats->unit_stages_done_at[u];
    ASSERT_EQ(stages.size(), u < 4 ? 1u : 2u) << u;
    EXPECT_GE(stages.front(), stats->unit_started_at[u]) << u;
    EXPECT_EQ(stages.back(), stats->unit_done_at[u]) << u;
    EXPECT_TRUE(std::is_sorted(stages.begin(), stages.end())) << u;
  }

  ASSERT_TRUE(WriteGradients(sums, store_).ok());
  ASSERT_TRUE(sync->BeginStep(5).ok());
  for (int i = store_.size() - 1; i >= 0; --i) {
    ASSERT_TRUE(sync->MarkReady(store_.parameters()[i].get()).ok());
  }
  // Every unit has started; the sparse one may be in its second stage (one stage per poll).
  EXPECT_LE(sync->num_in_flight(), 1);
  ASSERT_TRUE(sync->Poll().ok());
  stats = sync->Finish();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->units_started_early, 5);
  EXPECT_EQ(stats->polls, store_.size() + 1);  // a new step counts afresh
  ExpectMeans(sums, 5);
}

// DataParallelStep with and without overlap: the same update; without it, compute's hooks do
// not reach the synchronizer: the only calls it counts are the step's MarkReady after compute
// (one a parameter), so every unit starts after compute, and the profile sees no gradient
// ready before the end of backward.
TEST_F(SynchronizerTest, DataParallelStepWithoutOverlapStartsEveryUnitAfterCompute) {
  const testing::GradSums sums = ComputeGradSums(store_, Range(0, 6));
  std::vector<std::vector<float>> updated[2];
  for (bool overlap : {true, false}) {
    ParameterStore store;
    ASSERT_TRUE(BuildModel(store).ok());
    absl::StatusOr<Strategy> strategy = BuildStrategy("allreduce", store, 1, {.bucket_bytes = 4});
    ASSERT_TRUE(strategy.ok()) << strategy.status();
    absl::StatusOr<std::unique_ptr<GradientSynchronizer>> sync =
        GradientSynchronizer::Create(comm_.get(), &store, *strategy);
    ASSERT_TRUE(sync.ok()) << sync.status();
    absl::StatusOr<std::unique_ptr<core::Optimizer>> opt = core::MakeOptimizer({.lr = 0.5f});
    ASSERT_TRUE(opt.ok()) << opt.status();
    DataParallelStep step(&store, opt->get(), sync->get());
    step.set_profiling(true);
    step.set_overlap(overlap);
    EXPECT_EQ(step.overlap(), overlap);
    int calls = 0;
    absl::StatusOr<StepTimes> t = step.Run(6, [&](const StepHooks& hooks) -> absl::Status {
      CAVS_RETURN_IF_ERROR(WriteGradients(sums, store));
      for (int i = store.size() - 1; i >= 0; --i) {
        CAVS_RETURN_IF_ERROR(hooks.on_gradient_ready(store.parameters()[i]->name));
        CAVS_RETURN_IF_ERROR(hooks.on_progress());
        calls += 2;
      }
      return absl::OkStatus();
    });
    ASSERT_TRUE(t.ok()) << t.status();
    const StepStats& stats = t->sync;
    ASSERT_EQ(stats.unit_started_at.size(), 5u);
    if (overlap) {
      EXPECT_EQ(stats.polls, calls);
      for (double ready : t->ready_at) EXPECT_GE(ready, 0.0);
      EXPECT_GE(t->hooks, 0.0);
      EXPECT_LE(t->hooks, t->compute);
      // The first unit started in compute's first hook: the overlap is most of compute.
      EXPECT_GT(t->overlap, 0.0);
      EXPECT_LE(t->overlap, t->compute);
      EXPECT_GE(t->overlap_hooks, 0.0);
      EXPECT_LE(t->overlap_hooks, std::min(t->overlap, t->hooks));
      EXPECT_EQ(t->polls, calls);
      EXPECT_EQ(t->overlap_polls, calls);  // the first call started the first unit
    } else {
      EXPECT_EQ(t->hooks, 0.0);    // the hooks never reached the synchronizer
      EXPECT_EQ(t->overlap, 0.0);  // no unit started in compute
      EXPECT_EQ(t->overlap_hooks, 0.0);
      EXPECT_EQ(t->polls, 0);
      EXPECT_EQ(t->overlap_polls, 0);
      EXPECT_EQ(stats.polls, store.size());
      for (double ready : t->ready_at) EXPECT_EQ(ready, -1.0);
    }
    for (const auto& p : store.parameters()) {
      absl::StatusOr<core::Tensor> value = p->value.CopyTo(core::Device::Cpu());
      ASSERT_TRUE(value.ok()) << value.status();
      updated[overlap ? 0 : 1].emplace_back(value->data<float>(),
                                            value->data<float>() + value->numel());
    }
  }
  EXPECT_EQ(updated[0], updated[1]);  // the same gradients, bit for bit
}

TEST_F(SynchronizerTest, Fp16CompressionIsCloseAndPreScaled) {
  std::unique_ptr<GradientSynchronizer> sync =
      Make("allreduce", {.bucket_bytes = 64, .compressor = Compressor::kFp16});
  ASSERT_NE(sync, nullptr);
  // 3000 samples: the sums exceed what float16 holds precisely; the mean does not.
  const testing::GradSums sums = ComputeGradSums(store_, Range(0, 3000));
  ASSERT_TRUE(WriteGradients(sums, store_).ok());
  absl::StatusOr<StepStats> stats = sync->Synchronize(3000);
  ASSERT_TRUE(stats.ok()) << stats.status();
  ExpectMeans(sums, 3000, 2e-3);
}

TEST_F(SynchronizerTest, ProtocolErrors) {
  std::unique_ptr<GradientSynchronizer> sync = Make("allreduce");
  EXPECT_EQ(sync->MarkReady(store_.Find("out/W")).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(sync->Finish().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(sync->BeginStep(-1).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(sync->BeginStep(1).ok());
  EXPECT_EQ(sync->BeginStep(1).code(), absl::StatusCode::kFailedPrecondition);
  ParameterStore other;
  ASSERT_TRUE(BuildModel(other).ok());
  absl::Status s = sync->MarkReady(other.Find("out/W"));
  EXPECT_TRUE(Contains(s, "'out/W' is not a parameter of the synchronizer's store")) << s;
  EXPECT_TRUE(sync->Finish().ok());
}

TEST_F(SynchronizerTest, MalformedGradientIsAnErrorNamingTheParameter) {
  std::unique_ptr<GradientSynchronizer> sync = Make("hybrid");
  core::Parameter* e = store_.Find("embed/E");
  e->grad_rows = {3, 3};
  e->grad_values = core::Tensor::Host({2, testing::kEmbed});
  absl::StatusOr<StepStats> stats = sync->Synchronize(1);
  EXPECT_FALSE(stats.ok());
  EXPECT_TRUE(Contains(stats.status(), "embed/E")) << stats.status();
  EXPECT_FALSE(comm_->health().ok());  // this rank left the agreed order of operations
}

TEST_F(SynchronizerTest, CreateRejectsStalenessAndAWrongWorldSize) {
  absl::StatusOr<Strategy> strategy = BuildStrategy("ps", store_, 1);
  ASSERT_TRUE(strategy.ok());
  std::get<ParameterServerSync>(strategy->params[2].sync).staleness = 2;
  absl::StatusOr<std::unique_ptr<GradientSynchronizer>> sync =
      GradientSynchronizer::Create(comm_.get(), &store_, *strategy);
  EXPECT_EQ(sync.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(Contains(sync.status(), "'hidden/b': bounded staleness")) << sync.status();
  strategy = BuildStrategy("ps", store_, 2);
  ASSERT_TRUE(strategy.ok());
  std::get<ParameterServerSync>(strategy->params[1].sync).placement = {0};
  std::get<ParameterServerSync>(strategy->params[3].sync).placement = {0};
  sync = GradientSynchronizer::Create(comm_.get(), &store_, *strategy);
  EXPECT_TRUE(Contains(sync.status(), "world_size 2 but the communicator has 1")) << sync.status();
  strategy->params.pop_back();
  sync = GradientSynchronizer::Create(comm_.get(), &store_, *strategy);
  EXPECT_EQ(sync.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(sync.status(), "no entry for parameter 'out/b'")) << sync.status();
}

// With the host-memory stand-in "cuda:0" (tests/core/host_memory_device.h) the synchronizer's
// device paths (copies to and from the buffer device, scaling through the device's optimizer
// kernels) run without a GPU.
TEST_F(SynchronizerTest, DeviceGradientsMatchHostOnes) {
  core::test_devices::HostMemoryDevice* device = core::test_devices::UseHostMemoryDevice();
  if (device == nullptr) GTEST_SKIP() << "a real CUDA backend";
  core::test_devices::RegisterHostMemoryDevice(device, core::test_devices::HostOptimizerKernels());
  ParameterStore dev_store(1, core::Device::Cuda(0));
  ASSERT_TRUE(BuildModel(dev_store).ok());
  for (const std::string& builder : StrategyBuilderNames()) {
    absl::StatusOr<Strategy> strategy = BuildStrategy(builder, dev_store, 1);
    ASSERT_TRUE(strategy.ok());
    absl::StatusOr<std::unique_ptr<GradientSynchronizer>> sync =
        GradientSynchronizer::Create(comm_.get(), &dev_store, *strategy);
    ASSERT_TRUE(sync.ok()) << sync.status();
    const testing::GradSums sums = ComputeGradSums(store_, Range(0, 9));
    ASSERT_TRUE(WriteGradients(sums, dev_store).ok());
    const int copies_before = device->copies;
    ASSERT_TRUE((*sync)->Synchronize(9).ok());
    EXPECT_GT(device->copies, copies_before) << builder;
    for (const auto& p : dev_store.parameters()) {
      EXPECT_LE(MaxRelativeError(DenseGradient(*p), ExpectedMean(sums, p->name, 9)), 1e-6)
          << builder << " " << p->name;
      if (p->sparse_grad) {
        EXPECT_EQ(p->grad_values.device(), core::Device::Cuda(0));
      }
    }
  }
  core::test_devices::RegisterHostMemoryDevice(device);
}

}  // namespace
}  // namespace cavs::distributed
