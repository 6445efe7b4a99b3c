// kDropout of CpuKernels::Elementwise: the mask is exactly PhiloxUniform(seed, uid * width + c)
// >= p (the rule every device shares), kept values are scaled by 1 / (1 - p), the keep rate
// matches 1 - p, and the same (seed, uid) always gives the same mask.
#include <cmath>
#include <vector>

#include "core/random.h"
#include "gtest/gtest.h"
#include "ops/cpu/cpu_kernels.h"
#include "tests/ops/ops_test_util.h"

namespace cavs::ops::cpu {
namespace {

using testing::RandomFloats;

// Runs dropout over rows with the given uids; returns dst ([rows, width], ld width).
std::vector<float> RunDropout(const std::vector<float>& a, const std::vector<int32_t>& uids,
                              int64_t width, float p, uint64_t seed) {
  std::vector<float> dst(a.size(), -1.0f);
  EwInstr in;
  in.op = EwOp::kDropout;
  in.width = width;
  in.dst = {dst.data(), width};
  in.a = {const_cast<float*>(a.data()), width};
  in.scalar = p;
  in.seed = seed;
  in.uids = uids.data();
  absl::Status s = CpuKernels::Get()->Elementwise(&in, &in, 1, static_cast<int64_t>(uids.size()));
  EXPECT_TRUE(s.ok()) << s;
  return dst;
}

TEST(CpuDropoutTest, MaskIsPhiloxUniformAtUidTimesWidthPlusColumn) {
  const int64_t width = 37;  // not a multiple of 4: counters straddle Philox blocks
  const std::vector<int32_t> uids = {0, 5, 17, 3, 1000003, 42};
  const std::vector<float> a =
      RandomFloats(uids.size() * static_cast<size_t>(width), 3, 0.5f, 2.0f);
  const float p = 0.3f;
  const uint64_t seed = 0x1234abcdULL;
  const std::vector<float> got = RunDropout(a, uids, width, p, seed);
  for (size_t r = 0; r < uids.size(); ++r) {
    for (int64_t c = 0; c < width; ++c) {
      const uint64_t counter = static_cast<uint64_t>(uids[r]) * width + c;
      const bool keep = core::PhiloxUniform(seed, counter) >= p;
      const float want = keep ? a[r * width + c] * (1.0f / (1.0f - p)) : 0.0f;
      ASSERT_EQ(got[r * width + c], want) << "uid " << uids[r] << " column " << c;
    }
  }
}

TEST(CpuDropoutTest, KeepRateAndMeanMatchRate) {
  const int64_t rows = 400, width = 500;
  std::vector<int32_t> uids(rows);
  for (int64_t r = 0; r < rows; ++r) uids[r] = static_cast<int32_t>(r * 3 + 1);
  const std::vector<float> ones(static_cast<size_t>(rows * width), 1.0f);
  for (float p : {0.1f, 0.5f, 0.8f}) {
    const std::vector<float> got = RunDropout(ones, uids, width, p, 99);
    double kept = 0, sum = 0;
    for (float v : got) {
      kept += v != 0.0f;
      sum += v;
    }
    const double n = static_cast<double>(got.size());
    const double sigma = std::sqrt(p * (1 - p) / n);
    EXPECT_NEAR(kept / n, 1.0 - p, 5 * sigma) << "p " << p;
    EXPECT_NEAR(sum / n, 1.0, 5 * sigma / (1.0 - p)) << "p " << p;  // unbiased in expectation
  }
}

TEST(CpuDropoutTest, DeterministicPerSeedAndThreadCount) {
  const int64_t rows = 300, width = 64;  // above the parallel threshold
  std::vector<int32_t> uids(rows);
  for (int64_t r = 0; r < rows; ++r) uids[r] = static_cast<int32_t>(rows - r);
  const std::vector<float> a = RandomFloats(static_cast<size_t>(rows * width), 5);
  SetCpuThreads(1);
  const std::vector<float> first = RunDropout(a, uids, width, 0.5f, 7);
  SetCpuThreads(2);
  EXPECT_EQ(RunDropout(a, uids, width, 0.5f, 7), first);
  SetCpuThreads(0);
  const std::vector<float> other = RunDropout(a, uids, width, 0.5f, 8);
  int64_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += (other[i] != 0.0f) != (first[i] != 0.0f);
  EXPECT_GT(differ, static_cast<int64_t>(a.size()) / 4);  // ~half differ for independent masks
}

TEST(CpuDropoutTest, RateZeroKeepsEverythingAndInPlaceWorks) {
  const int64_t width = 10;
  const std::vector<int32_t> uids = {1, 2, 3};
  std::vector<float> a = RandomFloats(30, 6);
  EXPECT_EQ(RunDropout(a, uids, width, 0.0f, 1), a);
  const std::vector<float> want = RunDropout(a, uids, width, 0.4f, 1);
  EwInstr in;
  in.op = EwOp::kDropout;
  in.width = width;
  in.dst = {a.data(), width};
  in.a = {a.data(), width};
  in.scalar = 0.4f;
  in.seed = 1;
  in.uids = uids.data();
  ASSERT_TRUE(CpuKernels::Get()->Elementwise(&in, &in, 1, 3).ok());
  EXPECT_EQ(a, want);
}

TEST(CpuDropoutTest, RejectsRateOutsideZeroOne) {
  std::vector<float> a(8), d(8);
  const int32_t uids[2] = {0, 1};
  for (float p : {1.0f, -0.1f, std::nanf("")}) {
    EwInstr in{EwOp::kDropout, 4, {d.data(), 4}, {a.data(), 4}, {}, p, 0.0f, 1, uids};
    EXPECT_EQ(CpuKernels::Get()->Elementwise(&in, &in, 1, 2).code(),
              absl::StatusCode::kInvalidArgument)
        << p;
  }
}

}  // namespace
}  // namespace cavs::ops::cpu
