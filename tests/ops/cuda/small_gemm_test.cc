// The small-GEMM kernel's phases (ops/cuda/small_gemm.h) run on the host as the kernel runs
// them (every thread of a block through one phase before the next, as its barriers order
// them), against the CPU's GEMM: tile edges, chunks of k, both layouts of B, strides, alpha
// and beta. No GPU needed; the GPU test (cuda_kernels_test.cc) runs the kernel itself.
#include "ops/cuda/small_gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "core/device.h"
#include "core/random.h"
#include "ops/kernels.h"
#include "tests/ops/ops_test_util.h"

namespace cavs::ops::cuda {
namespace {

namespace sg = small_gemm;

// The kernel's grid in tiles of T, block by block, with a barrier between phases (the copies,
// asynchronous on the GPU, are done by the barrier after them), the blocks in random order.
template <typename T>
void Emulate(const sg::Args& g, core::Rng& rng) {
  std::vector<float> shared(sg::SharedFloats<T>(g.chunk));
  float* as = shared.data();
  float* bs = shared.data() + g.chunk * T::kPitchA;
  const auto copy = [](float* dst, const float* src) { *dst = src != nullptr ? *src : 0.0f; };
  const int grid_x = (g.n + T::kCols - 1) / T::kCols, grid_y = (g.m + T::kRows - 1) / T::kRows;
  ASSERT_EQ(int64_t{grid_x} * grid_y, sg::Blocks<T>(g.m, g.n));
  std::vector<int> order(grid_x * grid_y);
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.UniformInt(i)]);
  constexpr int kAcc = T::kPerThread;
  for (const int block : order) {
    const int bx = block % grid_x, by = block / grid_x;
    std::vector<float> acc(kAcc * sg::kThreads, 0.0f);
    for (int k0 = 0; k0 < g.k; k0 += g.chunk) {
      const int len = std::min(g.chunk, g.k - k0);
      // Poisoned: a thread reading shared memory no thread wrote this chunk shows as NaN.
      std::fill(shared.begin(), shared.end(), std::numeric_limits<float>::quiet_NaN());
      for (int t = 0; t < sg::kThreads; ++t) {
        sg::LoadChunk<T>(g, bx, by, t, k0, len, as, bs, copy);
      }
      for (int t = 0; t < sg::kThreads; ++t) {
        sg::AccumulateChunk<T>(t, len, as, bs, acc.data() + kAcc * t);
      }
    }
    std::fill(shared.begin(), shared.end(), std::numeric_limits<float>::quiet_NaN());
    for (int t = 0; t < sg::kThreads; ++t) sg::Park<T>(t, acc.data() + kAcc * t, shared.data());
    for (int t = 0; t < sg::kThreads; ++t) sg::Store<T>(g, bx, by, t, shared.data());
  }
}

std::vector<float> Random(core::Rng& rng, int64_t n) {
  std::vector<float> v(n);
  for (float& x : v) x = rng.Uniform(-1.0f, 1.0f);
  return v;
}

struct Case {
  int m, n, k;
};

// The emulated kernel in tiles of T against the CPU's GEMM on `cases`, both layouts of B, beta
// 0 and 1, with a bias row (at an odd float offset) for half of those, each layout and beta
// with and without.
template <typename T>
void ExpectEmulationMatches(absl::Span<const Case> cases) {
  absl::StatusOr<Kernels*> cpu = GetKernels(core::Device::Cpu());
  ASSERT_TRUE(cpu.ok());
  core::Rng rng(5);
  for (const Case& cs : cases) {
    for (bool trans_b : {false, true}) {
      for (float beta : {0.0f, 1.0f}) {
        const bool with_bias = trans_b != (beta == 0.0f);
        SCOPED_TRACE("tile " + std::to_string(T::kRows) + " x " + std::to_string(T::kCols) +
                     " m=" + std::to_string(cs.m) + " n=" + std::to_string(cs.n) +
                     " k=" + std::to_string(cs.k) + " trans_b=" + std::to_string(trans_b) +
                     " beta=" + std::to_string(beta) + " bias=" + std::to_string(with_bias));
        const std::vector<float> bias_row = Random(rng, cs.n + 1);
        const float* bias = with_bias ? bias_row.data() + 1 : nullptr;
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
                         std::min(cs.k, sg::kMaxChunk),
                         bias};
        Emulate<T>(g, rng);
        if (beta == 0.0f) {
          for (int64_t r = 0; r < cs.m; ++r) {
            for (int64_t j = 0; j < cs.n; ++j) want[r * ldc + j] = 0.0f;
          }
        }
        ASSERT_TRUE((*cpu)
                        ->Gemm(Kernels::GemmCall{false, trans_b, cs.m, cs.n, cs.k, 0.75f, a.data(),
                                                 lda, b.data(), ldb, beta, want.data(), ldc, bias})
                        .ok());
        // Both are float32 sums of the k products, beta c and the bias, in different orders (the
        // slices, OpenBLAS's kernel): within twice their bound of each other, relative to the
        // sum of the terms' magnitudes (terms cancel over long k). The padding columns of C keep
        // their values (NaN where poisoned), as in want.
        const std::vector<double> scale =
            testing::GemmScale(Kernels::GemmCall{false, trans_b, cs.m, cs.n, cs.k, 0.75f, a.data(),
                                                 lda, b.data(), ldb, beta, c.data(), ldc, bias});
        EXPECT_TRUE(testing::AllClose(got, std::vector<double>(want.begin(), want.end()),
                                      2 * testing::GemmErrorBound(cs.k), 0.0, &scale));
      }
    }
  }
}

TEST(SmallGemmTest, EmulatedKernelMatchesTheCpu) {
  // Tile edges (16 rows, 32 columns), one and several chunks of k (512), the rounds' shapes.
  const Case cases[] = {{1, 1, 1},     {16, 32, 7},   {17, 33, 300}, {64, 750, 300},
                        {5, 300, 750}, {64, 96, 512}, {3, 40, 1100}, {512, 64, 20}};
  ExpectEmulationMatches<sg::RoundTile>(cases);
}

// Where the kernel runs by default (CudaKernels' kWhereFaster): the forward rounds' shapes on
// an H100's 132 multiprocessors, not the shapes measured slower (bench/RESULTS.md).
TEST(SmallGemmTest, FasterOnlyWhereMeasuredFaster) {
  constexpr int kH100 = 132;
  EXPECT_EQ(sg::Blocks<sg::RoundTile>(64, 750), 96);
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

// Shared-memory wavefronts of one warp-wide access, each lane's 4-byte words given: the most
// distinct words any one of the 32 banks holds (a word read by several lanes is one broadcast),
// and the fewest the access could take, its distinct words over 32.
struct Wavefronts {
  int taken, fewest;
};
Wavefronts Count(const std::vector<std::vector<int>>& words_by_lane) {
  std::map<int, std::set<int>> by_bank;
  std::set<int> all;
  for (const std::vector<int>& words : words_by_lane) {
    for (int w : words) {
      by_bank[w % 32].insert(w);
      all.insert(w);
    }
  }
  int taken = 0;
  for (const auto& [bank, words] : by_bank) taken = std::max(taken, static_cast<int>(words.size()));
  return {taken, static_cast<int>((all.size() + 31) / 32)};
}

std::vector<int> Four(int word) { return {word, word + 1, word + 2, word + 3}; }

// The tile's shared-memory accesses, warp by warp, as its phases make them: the reads of a
// chunk's products, the 16-byte writes of the parked sums, their reads and the copies into
// shared memory take the fewest wavefronts they can.
template <typename T>
void ExpectFewBankConflicts() {
  SCOPED_TRACE("tile " + std::to_string(T::kRows) + " x " + std::to_string(T::kCols));
  constexpr int kLen = 64;  // inputs in the chunk, 4 per slice
  for (int warp = 0; warp < sg::kSlices; ++warp) {
    const int s = warp, first = warp * 32;
    for (int kk = s * kLen / sg::kSlices; kk < (s + 1) * kLen / sg::kSlices; ++kk) {
      for (int i = 0; i < T::kThreadRows; i += 4) {  // AccumulateChunk's reads of A^T
        std::vector<std::vector<int>> words;
        for (int t = first; t < first + 32; ++t) {
          words.push_back(Four(kk * T::kPitchA + sg::Row<T>(t, i)));
        }
        const Wavefronts w = Count(words);
        EXPECT_EQ(w.taken, w.fewest) << "reads of A, k " << kk << ", rows " << i;
      }
      std::vector<std::vector<int>> words;  // and of op(B)
      for (int t = first; t < first + 32; ++t)
        words.push_back(Four(kk * T::kPitchB + sg::Col0<T>(t)));
      const Wavefronts w = Count(words);
      EXPECT_EQ(w.taken, w.fewest) << "reads of B, k " << kk;
    }
    for (int i = 0; i < T::kThreadRows; ++i) {  // Park
      std::vector<std::vector<int>> words;
      for (int t = first; t < first + 32; ++t) {
        words.push_back(Four((s * T::kRows + sg::Row<T>(t, i)) * T::kPitchC + sg::Col0<T>(t)));
      }
      const Wavefronts w = Count(words);
      EXPECT_EQ(w.taken, w.fewest) << "parked row " << i;
    }
    for (int i = 0; i < T::kOutputs / sg::kThreads; ++i) {  // Store's reads, slice by slice
      for (int slice = 0; slice < sg::kSlices; ++slice) {
        std::vector<std::vector<int>> words;
        for (int t = first; t < first + 32; ++t) {
          const int o = t + i * sg::kThreads;
          words.push_back(
              {(slice * T::kRows + sg::OutputRow<T>(o)) * T::kPitchC + sg::OutputCol<T>(o)});
        }
        const Wavefronts w = Count(words);
        EXPECT_EQ(w.taken, w.fewest) << "sums of output " << i << ", slice " << slice;
      }
    }
  }
  // The copies (LoadChunk), per thread in the order it makes them: the n-th copy of every
  // thread of a warp is one warp-wide access.
  for (bool trans_b : {false, true}) {
    std::vector<float> a(T::kRows * kLen), b(kLen * T::kCols);
    std::vector<float> shared(sg::SharedFloats<T>(kLen));
    float* as = shared.data();
    float* bs = shared.data() + kLen * T::kPitchA;
    const sg::Args g{T::kRows, T::kCols, kLen,
                     1.0f,     0.0f,     a.data(),
                     kLen,     b.data(), trans_b ? kLen : T::kCols,
                     nullptr,  T::kCols, trans_b,
                     kLen};
    std::vector<std::vector<int>> to_a(sg::kThreads), to_b(sg::kThreads);  // words, by thread
    for (int t = 0; t < sg::kThreads; ++t) {
      sg::LoadChunk<T>(g, 0, 0, t, 0, kLen, as, bs, [&](float* dst, const float*) {
        const int word = static_cast<int>(dst - shared.data());
        (dst < bs ? to_a : to_b)[t].push_back(word);
      });
    }
    for (const auto* copies : {&to_a, &to_b}) {
      const bool transposed = copies == &to_a || trans_b;
      for (int warp = 0; warp < sg::kSlices; ++warp) {
        for (size_t n = 0; n < (*copies)[warp * 32].size(); ++n) {
          std::vector<std::vector<int>> words;
          for (int t = warp * 32; t < warp * 32 + 32; ++t) {
            if (n < (*copies)[t].size()) words.push_back({(*copies)[t][n]});
          }
          const Wavefronts w = Count(words);
          EXPECT_LE(w.taken, w.fewest)
              << (copies == &to_a ? "A" : "B") << (transposed ? " transposed" : "") << ", copy "
              << n << " of warp " << warp;
        }
      }
    }
  }
}

TEST(SmallGemmTest, FewBankConflictsInSharedMemory) { ExpectFewBankConflicts<sg::RoundTile>(); }

}  // namespace
}  // namespace cavs::ops::cuda
