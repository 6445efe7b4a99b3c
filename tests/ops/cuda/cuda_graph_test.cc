// CudaGraphReplay through CudaKernels::QueueRecorded: captured launches run as one graph with
// the results of the same launches queued one by one; an executable graph is updated in place
// for new pointers and sizes of the same topology; a capture that fails goes launch by launch.
#include "ops/cuda/cuda_graph.h"

#include <gtest/gtest.h>

#include <vector>

#include "ops/cuda/cuda_kernels.h"
#include "tests/ops/cuda/cuda_test_util.h"

namespace cavs::ops::cuda {
namespace {

using ::cavs::ops::testing::Backend0;
using ::cavs::ops::testing::DeviceArray;

// Graphs on for the test, as they were after it.
class GraphsOn {
 public:
  explicit GraphsOn(CudaKernels* k) : k_(k), was_(k->graphs()) { k->SetGraphs(true); }
  ~GraphsOn() { k_->SetGraphs(was_); }

 private:
  CudaKernels* k_;
  bool was_;
};

// A fill of `n` values and a column sum of them: two kernels, or a memset and a kernel.
absl::Status FillAndSum(CudaKernels* k, float* x, int64_t n, float value, float* sum) {
  if (absl::Status s = k->Fill(x, n, value); !s.ok()) return s;
  if (absl::Status s = k->Fill(sum, 1, 0.0f); !s.ok()) return s;
  return k->ColumnSum(x, 1, n, 1, 1.0f, sum);
}

TEST(CudaGraphTest, UpdatedInPlaceForOtherPointersAndSizes) {
  CAVS_SKIP_WITHOUT_CUDA();
  absl::StatusOr<CudaKernels*> k = GetCudaKernels(0);
  ASSERT_TRUE(k.ok()) << k.status();
  GraphsOn on(*k);
  const CudaGraphReplay::Stats before = (*k)->graph_stats();
  DeviceArray<float> a(1000), b(3000), sa(1), sb(1);
  // One topology: the first makes the executable graph, the second (other pointers, other rows,
  // other value) updates it.
  absl::StatusOr<bool> first =
      (*k)->QueueRecorded([&]() { return FillAndSum(*k, a.get(), 1000, 2.0f, sa.get()); });
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<bool> second =
      (*k)->QueueRecorded([&]() { return FillAndSum(*k, b.get(), 3000, 0.5f, sb.get()); });
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(*first);
  EXPECT_TRUE(*second);
  EXPECT_EQ(sa.Download()[0], 2000.0f);
  EXPECT_EQ(sb.Download()[0], 1500.0f);
  // The first's topology again with another value: an update of the first's executable graph
  // (the second's column sum over 3000 rows may have been another topology).
  const CudaGraphReplay::Stats middle = (*k)->graph_stats();
  absl::StatusOr<bool> third =
      (*k)->QueueRecorded([&]() { return FillAndSum(*k, a.get(), 1000, 4.0f, sa.get()); });
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_TRUE(*third);
  EXPECT_EQ(sa.Download()[0], 4000.0f);
  EXPECT_EQ(sb.Download()[0], 1500.0f);
  const CudaGraphReplay::Stats& after = (*k)->graph_stats();
  EXPECT_EQ(after.launched - before.launched, 3);
  EXPECT_EQ(after.updated - middle.updated, 1);
  EXPECT_EQ(after.instantiated, middle.instantiated);
  EXPECT_LE(after.instantiated - before.instantiated, 2);
  EXPECT_EQ(after.fallbacks, before.fallbacks);
  EXPECT_GE(after.nodes, 3);
}

TEST(CudaGraphTest, AFailedCaptureGoesLaunchByLaunch) {
  CAVS_SKIP_WITHOUT_CUDA();
  absl::StatusOr<CudaKernels*> k = GetCudaKernels(0);
  ASSERT_TRUE(k.ok()) << k.status();
  GraphsOn on(*k);
  const int64_t fallbacks = (*k)->graph_stats().fallbacks;
  DeviceArray<float> x(500), sum(1);
  // A wait for the stream cannot be captured: the capture fails and the same calls are made
  // again outside it.
  absl::StatusOr<bool> r = (*k)->QueueRecorded([&]() -> absl::Status {
    if (absl::Status s = FillAndSum(*k, x.get(), 500, 3.0f, sum.get()); !s.ok()) return s;
    return CAVS_CUDA_STATUS(cudaStreamSynchronize((*k)->stream()));
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(*r);
  EXPECT_EQ((*k)->graph_stats().fallbacks, fallbacks + 1);
  EXPECT_EQ(sum.Download()[0], 1500.0f);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(CudaGraphTest, ErrorsOfTheLaunchesAreReturned) {
  CAVS_SKIP_WITHOUT_CUDA();
  absl::StatusOr<CudaKernels*> k = GetCudaKernels(0);
  ASSERT_TRUE(k.ok()) << k.status();
  GraphsOn on(*k);
  absl::StatusOr<bool> r = (*k)->QueueRecorded([&]() { return (*k)->Fill(nullptr, -1, 1.0f); });
  EXPECT_FALSE(r.ok());
}

TEST(CudaGraphTest, OffQueuesLaunchByLaunch) {
  CAVS_SKIP_WITHOUT_CUDA();
  absl::StatusOr<CudaKernels*> k = GetCudaKernels(0);
  ASSERT_TRUE(k.ok()) << k.status();
  const bool was = (*k)->graphs();
  (*k)->SetGraphs(false);
  DeviceArray<float> x(64), sum(1);
  absl::StatusOr<bool> r =
      (*k)->QueueRecorded([&]() { return FillAndSum(*k, x.get(), 64, 1.0f, sum.get()); });
  (*k)->SetGraphs(was);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(*r);
  EXPECT_EQ(sum.Download()[0], 64.0f);
}

}  // namespace
}  // namespace cavs::ops::cuda
