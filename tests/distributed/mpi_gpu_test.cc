// Device buffers with a real CUDA backend (run under mpirun; skipped without a GPU): MPI with
// gradients on the GPU (staged through page-locked memory) and, in a one-rank job (NCCL allows
// one rank per GPU), the NCCL communicator and the synchronizer over it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/backend.h"
#include "core/optimizer.h"
#include "distributed/builders.h"
#include "distributed/synchronizer.h"
#include "tests/distributed/mpi_test_util.h"
#include "tests/distributed/test_model.h"

namespace cavs::distributed {
namespace {

using core::Device;
using core::Tensor;
using testing::World;

bool HaveGpu() { return core::DeviceAvailable(core::DeviceType::kCuda); }

// One synchronized step of the test model on a cuda:0 store, for every builder, against the
// mean over the union batch computed on the host.
void SynchronizeOnDevice(Communicator& comm) {
  const int r = comm.rank(), w = comm.world_size();
  for (const std::string& builder : StrategyBuilderNames()) {
    core::ParameterStore store(5, Device::Cuda(0)), host(5);
    ASSERT_TRUE(testing::BuildModel(store).ok());
    ASSERT_TRUE(testing::BuildModel(host).ok());
    absl::StatusOr<Strategy> strategy =
        BuildStrategy(builder, store, w, {.bucket_bytes = 64, .partition_min_bytes = 16});
    ASSERT_TRUE(strategy.ok());
    absl::StatusOr<std::unique_ptr<GradientSynchronizer>> sync =
        GradientSynchronizer::Create(&comm, &store, *strategy);
    ASSERT_TRUE(sync.ok()) << sync.status();
    std::vector<int64_t> mine, all;
    for (int64_t s = 0; s < 7 * w; ++s) {
      all.push_back(s);
      if (s % w == r) mine.push_back(s);
    }
    ASSERT_TRUE(WriteGradients(testing::ComputeGradSums(store, mine), store).ok());
    const testing::GradSums want = testing::ComputeGradSums(host, all);
    absl::StatusOr<StepStats> stats = (*sync)->Synchronize(static_cast<int64_t>(mine.size()));
    ASSERT_TRUE(stats.ok()) << builder << ": " << stats.status();
    for (const auto& p : store.parameters()) {
      EXPECT_LE(testing::MaxRelativeError(testing::DenseGradient(*p),
                                          testing::ExpectedMean(want, p->name, 7 * w)),
                1e-5)
          << comm.backend() << " " << builder << " " << p->name;
    }
  }
}

TEST(MpiGpuTest, MpiStagesDeviceBuffers) {
  if (!HaveGpu()) GTEST_SKIP() << "no GPU";
  const int r = World().rank(), w = World().world_size();
  absl::StatusOr<Tensor> t = Tensor::FromVector({1.0f * r, 2.0f}, {2}).CopyTo(Device::Cuda(0));
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(World().AllReduce(*t).ok());
  EXPECT_EQ(t->ToVector(), std::vector<float>({w * (w - 1) / 2.0f, 2.0f * w}));
  SynchronizeOnDevice(World());
}

TEST(MpiGpuTest, NcclCollectivesOnOneRank) {
  if (!HaveGpu()) GTEST_SKIP() << "no GPU";
  absl::StatusOr<std::unique_ptr<Communicator>> nccl =
      MakeCommunicator("nccl", {absl::Seconds(20)});
  if (World().world_size() > 1) {  // ranks sharing one GPU: NCCL refuses, and says so
    if (!nccl.ok()) GTEST_SKIP() << "NCCL with several ranks per GPU: " << nccl.status();
  }
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  Communicator& c = **nccl;
  EXPECT_EQ(c.backend(), "nccl");
  EXPECT_TRUE(c.buffer_device().is_cuda());
  absl::StatusOr<Tensor> t = Tensor::FromVector({1.5f, -2.0f}, {2}).CopyTo(c.buffer_device());
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(c.AllReduce(*t).ok());
  ASSERT_TRUE(c.Broadcast(*t, 0).ok());
  ASSERT_TRUE(c.Reduce(*t, 0).ok());
  EXPECT_EQ(t->ToVector(), std::vector<float>({1.5f, -2.0f}));
  absl::StatusOr<Gathered> g = c.AllGatherV(*t);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->data.ToVector(), std::vector<float>({1.5f, -2.0f}));
  absl::StatusOr<Tensor> recv = Tensor::Zeros({2}, core::DType::kFloat32, c.buffer_device());
  ASSERT_TRUE(c.GatherV(*t, *recv, {2}, 0).ok());
  EXPECT_EQ(recv->ToVector(), std::vector<float>({1.5f, -2.0f}));
  ASSERT_TRUE(c.Barrier().ok());
  absl::StatusOr<std::unique_ptr<Communicator>> dup = c.Duplicate();
  ASSERT_TRUE(dup.ok()) << dup.status();
  ASSERT_TRUE((*dup)->AllReduce(*t).ok());
  absl::Status host = c.AllReduce(Tensor::Host({2}));
  EXPECT_EQ(host.code(), absl::StatusCode::kInvalidArgument) << host;
  EXPECT_TRUE(c.health().ok()) << c.health();  // a wrong device is the caller's error only
  SynchronizeOnDevice(c);
}

}  // namespace
}  // namespace cavs::distributed
