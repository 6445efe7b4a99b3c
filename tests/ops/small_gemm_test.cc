// The small-GEMM kernel's phases (ops/cuda/small_gemm.h) run on the host as the kernel runs
// them (every thread of a block through one phase before the next, as its barriers order
// them), against the CPU's GEMM: tile edges, chunks of k, both layouts of B, strides, alpha
// and beta. No GPU needed; the GPU test (cuda_kernels_test.cc) runs the kernel itself.
#include "ops/cuda/small_gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/random.h"
#include "ops/kernels.h"
#include "tests/ops/ops_test_util.h"

namespace cavs::ops {
namespace {

namespace sg = small_gemm;

// The kernel's grid, block by block, with a barrier between phases (the copies, asynchronous
// on the GPU, are done by the barrier after them).
void Emulate(const sg::Args& g) {
  std::vector<float> shared(sg::SharedFloats(g.chunk));
  float* as = shared.data();
  float* bs = shared.data() + g.chunk * sg::kPitchA;
  const auto copy = [](float* dst, const float* src) { *dst = src != nullptr ? *src : 0.0f; };
  const int grid_x = (g.n + sg::kCols - 1) / sg::kCols, grid_y = (g.m + sg::kRows - 1) / sg::kRows;
  for (int by = 0; by < grid_y; ++by) {
    for (int bx = 0; bx < grid_x; ++bx) {
      std::vector<float> acc(16 * sg::kThreads, 0.0f);
      for (int k0 = 0; k0 < g.k; k0 += g.chunk) {
        const int len = std::min(g.chunk, g.k - k0);
        // Poisoned: a thread reading shared memory no thread wrote this chunk shows as NaN.
        std::fill(shared.begin(), shared.end(), std::numeric_limits<float>::quiet_NaN());
        for (int t = 0; t < sg::kThreads; ++t) sg::LoadChunk(g, bx, by, t, k0, len, as, bs, copy);
        for (int t = 0; t < sg::kThreads; ++t) {
          sg::AccumulateChunk(t, len, as, bs, acc.data() + 16 * t);
        }
      }
      std::fill(shared.begin(), shared.end(), std::numeric_limits<float>::quiet_NaN());
      for (int t = 0; t < sg::kThreads; ++t) sg::Park(t, acc.data() + 16 * t, shared.data());
      for (int t = 0; t < sg::kThreads; ++t) sg::Store(g, bx, by, t, shared.data());
    }
  }
}

std::vector<float> Random(core::Rng& rng, int64_t n) {
  std::vector<float> v(n);
  for (float& x : v) x = rng.Uniform(-1.0f, 1.0f);
  return v;
}

TEST(SmallGemmTest, EmulatedKernelMatchesTheCpu) {
  absl::StatusOr<Kernels*> cpu = GetKernels(core::Device::Cpu());
  ASSERT_TRUE(cpu.ok());
  core::Rng rng(5);
  struct Case {
    int m, n, k;
  };
  // Tile edges (16 rows, 32 columns), one and several chunks of k (512), the rounds' shapes.
  const Case cases[] = {{1, 1, 1},     {16, 32, 7},   {17, 33, 300}, {64, 750, 300},
                        {5, 300, 750}, {64, 96, 512}, {3, 40, 1100}, {512, 64, 20}};
  for (const Case& cs : cases) {
    for (bool trans_b : {false, true}) {
      for (float beta : {0.0f, 1.0f}) {
        SCOPED_TRACE("m=" + std::to_string(cs.m) + " n=" + std::to_string(cs.n) +
                     " k=" + std::to_string(cs.k) + " trans_b=" + std::to_string(trans_b) +
                     " beta=" + std::to_string(beta));
        const int64_t lda = cs.k + 3, ldb = (trans_b ? cs.k : cs.n) + 1, ldc = cs.n + 2;
        const std::vector<float> a = Random(rng, cs.m * lda);
        const std::vector<float> b = Random(rng, (trans_b ? cs.n : cs.k) * ldb);
        std::vector<float> c = Random(rng, cs.m * ldc);
        if (beta == 0.0f) {  // C is not read: NaNs there must not come through
          for (int64_t i = 0; i < cs.m * ldc; i += 7)
            c[i] = std::numeric_limits<float>::quiet_NaN();
        }
        std::vector<float> got = c, want = c;
        const sg::Args g{cs.m,
                         cs.n,
                         cs.k,
                         0.75f,
                         beta,
                         a.data(),
                         lda,
                         b.data(),
                         ldb,
                         got.data(),
                         ldc,
                         trans_b,
                         std::min(cs.k, sg::kMaxChunk)};
        Emulate(g);
        if (beta == 0.0f) {
          for (int64_t r = 0; r < cs.m; ++r) {
            for (int64_t j = 0; j < cs.n; ++j) want[r * ldc + j] = 0.0f;
          }
        }
        ASSERT_TRUE((*cpu)
                        ->Gemm(false, trans_b, cs.m, cs.n, cs.k, 0.75f, a.data(), lda, b.data(),
                               ldb, beta, want.data(), ldc)
                        .ok());
        // The padding columns of C keep their values (NaN where poisoned), as in want.
        EXPECT_TRUE(testing::AllClose(got, want, 1e-4, 1e-5));
      }
    }
  }
}

// Where the kernel runs by default (CudaKernels' kWhereFaster): the forward rounds' shapes on
// an H100's 132 multiprocessors, not the shapes run 7 measured slower.
TEST(SmallGemmTest, FasterOnlyWhereMeasuredFaster) {
  constexpr int kH100 = 132;
  EXPECT_EQ(sg::Blocks(64, 750), 96);
  EXPECT_TRUE(sg::Faster(false, false, 64, 750, 300, kH100));  // Tree-LSTM forward round
  EXPECT_TRUE(sg::Faster(false, false, 1, 1, 1, kH100));
  EXPECT_FALSE(sg::Faster(false, false, 512, 750, 300, kH100));  // 768 blocks
  EXPECT_FALSE(sg::Faster(false, false, 64, 2048, 512, kH100));  // LSTM recurrent, 256 blocks
  EXPECT_FALSE(sg::Faster(false, true, 64, 300, 750, kH100));    // backward to the inputs
  EXPECT_FALSE(sg::Faster(true, false, 300, 750, 64, kH100));    // weight gradient
  EXPECT_FALSE(sg::Faster(false, false, 16, 32, sg::kMaxChunk + 1, kH100));  // two chunks
  EXPECT_FALSE(sg::Faster(false, false, 64, 750, 0, kH100));
  EXPECT_FALSE(sg::Faster(false, false, 64, 750, 300, 95));  // a smaller chip
}

}  // namespace
}  // namespace cavs::ops
