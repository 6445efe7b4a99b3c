// The kernels registry, the CPU thread setting and pool, and CpuKernels' column reductions.
// (GEMM, element-wise, gather/segment and softmax have their own files beside this one.)
#include "ops/cpu/cpu_kernels.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "core/device_plugin.h"
#include "gtest/gtest.h"
#include "ops/device_plugin.h"
#include "ops/kernels.h"
#include "tests/ops/ops_test_util.h"

namespace cavs::ops::cpu {
namespace {

using testing::AllClose;
using testing::RandomFloats;

TEST(KernelsRegistryTest, CpuIsAlwaysThere) {
  absl::StatusOr<Kernels*> k = GetKernels(core::Device::Cpu());
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(*k, CpuKernels::Get());
  EXPECT_TRUE((*k)->device().is_cpu());
  EXPECT_TRUE((*k)->Synchronize().ok());
  EXPECT_EQ(GetKernels(core::Device{core::DeviceType::kCpu, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

#if !defined(CAVS_WITH_CUDA)
TEST(KernelsRegistryTest, CudaWithoutFactoryIsFailedPreconditionNamingTheDevice) {
  absl::StatusOr<Kernels*> k = GetKernels(core::Device::Cuda(0));
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(k.status().message().find("cuda:0"), absl::string_view::npos) << k.status();
}

// A plug-in for kCuda whose kernels come from `kernels`.
static std::shared_ptr<const DevicePlugin> KernelsPlugin(
    std::function<absl::StatusOr<Kernels*>(int)> kernels) {
  auto plugin = std::make_shared<DevicePlugin>();
  plugin->type = core::DeviceType::kCuda;
  plugin->kernels = std::move(kernels);
  return plugin;
}

TEST(KernelsRegistryTest, RegisteredFactoryAnswersItsDeviceType) {
  const std::shared_ptr<const core::DevicePlugin> before = core::RegisterDevicePlugin(
      core::DeviceType::kCuda, KernelsPlugin([](int ordinal) -> absl::StatusOr<Kernels*> {
        if (ordinal != 3) return absl::InvalidArgumentError("only ordinal 3");
        return CpuKernels::Get();  // a stand-in: the registry does not look inside
      }));
  EXPECT_EQ(*GetKernels(core::Device::Cuda(3)), CpuKernels::Get());
  EXPECT_EQ(GetKernels(core::Device::Cuda(0)).status().code(), absl::StatusCode::kInvalidArgument);
  core::RegisterDevicePlugin(core::DeviceType::kCuda, KernelsPlugin([](int) {
                               return absl::StatusOr<Kernels*>(static_cast<Kernels*>(nullptr));
                             }));
  EXPECT_EQ(GetKernels(core::Device::Cuda(0)).status().code(), absl::StatusCode::kInternal);
  core::RegisterDevicePlugin(core::DeviceType::kCuda, before);
}
#endif

TEST(CpuThreadsTest, SetAndDefaultFromEnvironment) {
  SetCpuThreads(3);
  EXPECT_EQ(CpuThreads(), 3);
  // The environment reaches the kernels only through a binary's KernelOptionsFromEnvironment.
  ASSERT_EQ(setenv("CAVS_NUM_THREADS", "5", 1), 0);
  ASSERT_TRUE(SetKernelOptions(KernelOptionsFromEnvironment().options).ok());
  EXPECT_EQ(CpuThreads(), 5);
  ASSERT_EQ(setenv("CAVS_NUM_THREADS", "garbage", 1), 0);
  ASSERT_TRUE(SetKernelOptions(KernelOptionsFromEnvironment().options).ok());
  EXPECT_GE(CpuThreads(), 1);
  ASSERT_EQ(unsetenv("CAVS_NUM_THREADS"), 0);
  ASSERT_TRUE(SetKernelOptions(KernelOptionsFromEnvironment().options).ok());
  EXPECT_GE(CpuThreads(), 1);
}

TEST(CpuThreadsTest, RunTasksRunsEveryTaskOnceFromConcurrentCallers) {
  SetCpuThreads(4);
  constexpr int kTasks = 1000;
  auto run = [](std::vector<std::atomic<int>>& hits) {
    for (int round = 0; round < 50; ++round) {
      cpu::RunTasks(kTasks, [&](int64_t t) {
        // A nested loop still covers its range (inline, or on the pool if it is free).
        std::atomic<int64_t> covered{0};
        cpu::ParallelFor(100000, 1, [&](int64_t b, int64_t e) { covered.fetch_add(e - b); });
        EXPECT_EQ(covered.load(), 100000);
        hits[t].fetch_add(1);
      });
    }
  };
  std::vector<std::atomic<int>> hits_a(kTasks), hits_b(kTasks);
  std::thread other([&] { run(hits_b); });
  run(hits_a);
  other.join();
  for (int t = 0; t < kTasks; ++t) {
    ASSERT_EQ(hits_a[t].load(), 50) << t;
    ASSERT_EQ(hits_b[t].load(), 50) << t;
  }
  SetCpuThreads(0);
}

TEST(CpuThreadsTest, ParallelForCoversTheRangeExactly) {
  SetCpuThreads(2);
  for (int64_t n : {0, 1, 7, 1000, 123457}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    cpu::ParallelFor(n, 64, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << n << " @" << i;
  }
  // Fixed chunks, whatever the thread count.
  std::vector<int64_t> begins(cpu::NumChunks(1000, 64), -1);
  cpu::ParallelForChunks(1000, 64, 1000, [&](int64_t chunk, int64_t b, int64_t e) {
    begins[chunk] = b;
    EXPECT_EQ(e, std::min<int64_t>(1000, b + 64));
  });
  for (size_t c = 0; c < begins.size(); ++c) EXPECT_EQ(begins[c], static_cast<int64_t>(c) * 64);
  SetCpuThreads(0);
}

// Subnormal floats are flushed inside the kernels (a GEMM over a subnormal weight costs a
// microcode assist per instruction otherwise): subnormal inputs read as zero (DAZ) and results
// that would be subnormal are written as zero (FTZ), on the caller's thread and on the pool's;
// the caller's own floating-point mode is the same after the call.
TEST(CpuFlushDenormalTest, KernelsFlushSubnormalsAndKeepTheCallersMode) {
  const float tiny = std::numeric_limits<float>::min() / 8;  // subnormal
  const float least_normal = std::numeric_limits<float>::min();
  ASSERT_EQ(std::fpclassify(tiny), FP_SUBNORMAL);
#if defined(__x86_64__) || defined(__i386__)
  const unsigned mode = _mm_getcsr();
#endif
  for (int threads : {1, 2}) {
    SetCpuThreads(threads);
    const int64_t rows = 4096, w = 16;  // large enough to run on the pool
    // FTZ: least_normal / 2 is subnormal; DAZ: tiny itself reads as zero.
    std::vector<float> normal(rows * w, least_normal), sub(rows * w, tiny);
    std::vector<float> out1(rows * w, 1.0f), out2(rows * w, 1.0f);
    EwInstr program[] = {{EwOp::kScale, w, {out1.data(), w}, {normal.data(), w}},
                         {EwOp::kScale, w, {out2.data(), w}, {sub.data(), w}}};
    program[0].scalar = 0.5f;
    program[1].scalar = 1.0f;
    ASSERT_TRUE(CpuKernels::Get()->Elementwise(program, program, 2, rows).ok());
    for (float v : out1) ASSERT_EQ(v, 0.0f) << "FTZ, " << threads << " threads";
    for (float v : out2) ASSERT_EQ(v, 0.0f) << "DAZ, " << threads << " threads";
    std::vector<float> a(8, least_normal), b(8, 0.0625f), c(1, 1.0f);  // 8 * 2^-130: subnormal
    ASSERT_TRUE(CpuKernels::Get()
                    ->Gemm(false, false, 1, 1, 8, 1.0f, a.data(), 8, b.data(), 1, 0.0f, c.data(), 1)
                    .ok());
    EXPECT_EQ(c[0], 0.0f);
  }
  SetCpuThreads(0);
#if defined(__x86_64__) || defined(__i386__)
  EXPECT_EQ(_mm_getcsr() & 0x8040u, mode & 0x8040u) << "the caller's FTZ/DAZ bits changed";
#endif
  volatile float v = tiny;  // and subnormals still work on the caller's thread
  const float half = v * 0.5f;
  EXPECT_EQ(std::fpclassify(half), FP_SUBNORMAL);
}

TEST(CpuColumnTest, ColumnSumAndDotMatchNaive) {
  for (auto [m, w] : {std::pair<int64_t, int64_t>{5, 3}, {37, 130}, {3000, 70}, {2500, 10}}) {
    const int64_t ld = w + 3, y_ld = w + 1;
    const std::vector<float> x = RandomFloats(m * ld, 1), y = RandomFloats(m * y_ld, 2);
    const std::vector<float> dst0 = RandomFloats(w, 3);
    std::vector<double> want_sum(dst0.begin(), dst0.end()), want_dot = want_sum;
    std::vector<double> scale_sum(w, 0.0), scale_dot(w, 0.0);
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t c = 0; c < w; ++c) {
        want_sum[c] += -0.5 * x[r * ld + c];
        want_dot[c] += static_cast<double>(x[r * ld + c]) * y[r * y_ld + c];
        scale_sum[c] += std::fabs(0.5 * x[r * ld + c]);
        scale_dot[c] += std::fabs(static_cast<double>(x[r * ld + c]) * y[r * y_ld + c]);
      }
    }
    std::vector<float> by_threads[2][2];
    for (int threads : {1, 2}) {
      SetCpuThreads(threads);
      std::vector<float> sum = dst0, dot = dst0;
      ASSERT_TRUE(CpuKernels::Get()->ColumnSum(x.data(), ld, m, w, -0.5f, sum.data()).ok());
      ASSERT_TRUE(
          CpuKernels::Get()->ColumnDot(x.data(), ld, y.data(), y_ld, m, w, dot.data()).ok());
      for (int64_t c = 0; c < w; ++c) {
        scale_sum[c] += std::fabs(dst0[c]) * (threads == 1);
        scale_dot[c] += std::fabs(dst0[c]) * (threads == 1);
      }
      // m terms (products for the dot), alpha's rounding and dst's add: within the float32
      // bound of m + 2 terms, whatever the tiling.
      EXPECT_TRUE(AllClose(sum, want_sum, testing::SumErrorBound(m + 2), 0.0, &scale_sum))
          << m << "x" << w;
      EXPECT_TRUE(AllClose(dot, want_dot, testing::SumErrorBound(m + 2), 0.0, &scale_dot))
          << m << "x" << w;
      by_threads[threads - 1][0] = sum;
      by_threads[threads - 1][1] = dot;
    }
    // A fixed tile grid whatever the thread count: the same sums in the same order.
    EXPECT_EQ(by_threads[0][0], by_threads[1][0]);
    EXPECT_EQ(by_threads[0][1], by_threads[1][1]);
  }
  SetCpuThreads(0);
}

TEST(CpuColumnTest, EmptyAndBadArguments) {
  std::vector<float> dst = {1, 2};
  EXPECT_TRUE(CpuKernels::Get()->ColumnSum(nullptr, 0, 0, 2, 1.0f, dst.data()).ok());
  EXPECT_EQ(dst, (std::vector<float>{1, 2}));
  EXPECT_EQ(CpuKernels::Get()->ColumnSum(nullptr, 2, 3, 2, 1.0f, dst.data()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CpuKernels::Get()->ColumnDot(dst.data(), 2, nullptr, 2, 1, 2, dst.data()).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cavs::ops::cpu
