// CpuKernels::Gemm against a triple-loop GEMM in double precision: every transpose combination,
// odd sizes and leading dimensions, alpha/beta, the row- and column-split parallel paths. Every
// comparison is within the float32 bound of the sums (GemmErrorBound times Σ|terms|), which holds
// for any kernel OpenBLAS picks (OPENBLAS_CORETYPE), any thread split and the packed GEMM.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/cpu_packed_gemm.h"
#include "tests/ops/ops_test_util.h"

namespace cavs::ops::cpu {
namespace {

using testing::AllClose;
using testing::GemmErrorBound;
using testing::RandomFloats;

struct GemmCase {
  bool trans_a, trans_b;
  int64_t m, n, k;
  int64_t lda, ldb, ldc;
  float alpha, beta;
};

// The stored operands and the reference result of one case.
struct GemmData {
  std::vector<float> a, b, c;
  std::vector<double> want, scale;  // scale[i, j] = Σ|alpha a b| + |beta c|
};

GemmData MakeData(const GemmCase& g, uint32_t seed) {
  GemmData d;
  const int64_t a_rows = g.trans_a ? g.k : g.m, b_rows = g.trans_b ? g.n : g.k;
  d.a = RandomFloats(static_cast<size_t>(a_rows * g.lda), seed);
  d.b = RandomFloats(static_cast<size_t>(b_rows * g.ldb), seed + 1);
  d.c = RandomFloats(static_cast<size_t>(g.m * g.ldc), seed + 2);
  d.want.assign(d.c.begin(), d.c.end());
  d.scale.assign(d.c.size(), 0.0);
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < g.n; ++j) {
      double sum = 0.0, abs_sum = 0.0;
      for (int64_t p = 0; p < g.k; ++p) {
        const double av = g.trans_a ? d.a[p * g.lda + i] : d.a[i * g.lda + p];
        const double bv = g.trans_b ? d.b[j * g.ldb + p] : d.b[p * g.ldb + j];
        sum += av * bv;
        abs_sum += std::fabs(av * bv);
      }
      const double old = g.beta == 0.0f ? 0.0 : d.c[i * g.ldc + j];
      d.want[i * g.ldc + j] = g.alpha * sum + g.beta * old;
      d.scale[i * g.ldc + j] = std::fabs(g.alpha) * abs_sum + std::fabs(g.beta * old) + 1e-30;
    }
  }
  return d;
}

// Adds a bias row to the reference result (and its magnitude to the scale).
void AddBias(const GemmCase& g, const std::vector<float>& bias, GemmData& d) {
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < g.n; ++j) {
      d.want[i * g.ldc + j] += bias[j];
      d.scale[i * g.ldc + j] += std::fabs(bias[j]);
    }
  }
}

absl::Status RunGemm(const GemmCase& g, GemmData& d) {
  return CpuKernels::Get()->Gemm(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, d.a.data(), g.lda,
                                 d.b.data(), g.ldb, g.beta, d.c.data(), g.ldc);
}

GemmCase OddCase(bool ta, bool tb, float alpha, float beta) {
  GemmCase g{ta, tb, 37, 53, 29, 0, 0, 0, alpha, beta};
  g.lda = (ta ? g.m : g.k) + 3;
  g.ldb = (tb ? g.k : g.n) + 5;
  g.ldc = g.n + 7;
  return g;
}

class CpuGemmTransposeTest : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(CpuGemmTransposeTest, MatchesNaiveWithOddLeadingDimensions) {
  const auto [ta, tb] = GetParam();
  for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, {0.5f, -1.5f}, {-2.0f, 1.0f}}) {
    const GemmCase g = OddCase(ta, tb, alpha, beta);
    GemmData d = MakeData(g, 7);
    ASSERT_TRUE(RunGemm(g, d).ok());
    EXPECT_TRUE(AllClose(d.c, d.want, GemmErrorBound(g.k), 0.0, &d.scale))
        << "alpha " << alpha << " beta " << beta;
  }
}

TEST_P(CpuGemmTransposeTest, LargeProductsSplitOverThreadsMatchNaive) {
  const auto [ta, tb] = GetParam();
  SetCpuThreads(2);
  // Tall C (split by rows) and wide C (split by columns), both above the parallel threshold.
  for (auto [m, n] : {std::pair<int64_t, int64_t>{301, 97}, {83, 277}}) {
    GemmCase g{ta, tb, m, n, 131, 0, 0, 0, 1.0f, 0.5f};
    g.lda = (ta ? m : g.k) + 1;
    g.ldb = (tb ? g.k : n) + 2;
    g.ldc = n + 3;
    GemmData d = MakeData(g, 11);
    GemmData serial = d;
    ASSERT_TRUE(RunGemm(g, d).ok());
    EXPECT_TRUE(AllClose(d.c, d.want, GemmErrorBound(g.k), 0.0, &d.scale)) << m << "x" << n;
    SetCpuThreads(1);
    ASSERT_TRUE(RunGemm(g, serial).ok());
    SetCpuThreads(2);
    // The split runs other OpenBLAS calls, whose kernels sum the edge tiles in another order
    // (OPENBLAS_CORETYPE=Haswell with OPENBLAS_L2_SIZE=512 differs in the last bits), so the
    // two are not the same bits: each is within the bound of the exact product, hence within
    // twice it of each other, relative to the sums' scale (not to the value, which may cancel).
    EXPECT_TRUE(AllClose(d.c, std::vector<double>(serial.c.begin(), serial.c.end()),
                         2 * GemmErrorBound(g.k), 0.0, &d.scale))
        << m << "x" << n << " threads vs one";
  }
  SetCpuThreads(0);
}

// Gemm with a bias row (Kernels::GemmBias, through Gemm(GemmCall)): beta 0 over NaNs (c not
// read) and 0.5; bad sizes fail and write nothing.
TEST_P(CpuGemmTransposeTest, GemmBiasAddsTheBiasToEveryRow) {
  const auto [ta, tb] = GetParam();
  Kernels* k = CpuKernels::Get();
  ASSERT_TRUE(k->GemmAddsBias());
  for (float beta : {0.0f, 0.5f}) {
    const GemmCase g = OddCase(ta, tb, -0.5f, beta);
    GemmData d = MakeData(g, 13);
    const std::vector<float> bias = RandomFloats(static_cast<size_t>(g.n), 17);
    AddBias(g, bias, d);
    if (beta == 0.0f) {
      for (int64_t i = 0; i < g.m; ++i) {
        std::fill_n(d.c.begin() + i * g.ldc, g.n, std::numeric_limits<float>::quiet_NaN());
      }
    }
    ASSERT_TRUE(
        k->Gemm(Kernels::GemmCall{ta, tb, g.m, g.n, g.k, g.alpha, d.a.data(), g.lda, d.b.data(),
                                  g.ldb, g.beta, d.c.data(), g.ldc, bias.data()})
            .ok());
    EXPECT_TRUE(AllClose(d.c, d.want, GemmErrorBound(g.k), 0.0, &d.scale)) << "beta " << beta;
  }
  std::vector<float> c(4, 1.0f), bias(4, 2.0f), a(4, 1.0f);
  EXPECT_EQ(k->Gemm(Kernels::GemmCall{false, false, 2, 4, 1, 1.0f, a.data(), 1, a.data(), 4, 0.0f,
                                      c.data(), 3, bias.data()})
                .code(),
            absl::StatusCode::kInvalidArgument);  // ldc 3 < n 4
  EXPECT_EQ(c, std::vector<float>(4, 1.0f));
}

INSTANTIATE_TEST_SUITE_P(AllTransposes, CpuGemmTransposeTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()));

TEST(CpuGemmTest, BetaZeroOverwritesNaN) {
  GemmCase g = OddCase(false, false, 1.0f, 0.0f);
  GemmData d = MakeData(g, 3);
  std::fill(d.c.begin(), d.c.end(), std::numeric_limits<float>::quiet_NaN());
  ASSERT_TRUE(RunGemm(g, d).ok());
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < g.n; ++j) ASSERT_FALSE(std::isnan(d.c[i * g.ldc + j])) << i << "," << j;
  }
  EXPECT_TRUE(std::isnan(d.c[g.n]));  // padding between rows is left alone
}

TEST(CpuGemmTest, EmptyInnerDimensionScalesC) {
  std::vector<float> c = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(CpuKernels::Get()
                  ->Gemm(false, false, 2, 3, 0, 1.0f, nullptr, 0, nullptr, 0, 2.0f, c.data(), 3)
                  .ok());
  EXPECT_EQ(c, (std::vector<float>{2, 4, 6, 8, 10, 12}));
  ASSERT_TRUE(CpuKernels::Get()
                  ->Gemm(false, false, 2, 3, 0, 1.0f, nullptr, 0, nullptr, 0, 0.0f, c.data(), 3)
                  .ok());
  EXPECT_EQ(c, std::vector<float>(6, 0.0f));
  // m == 0: nothing is touched, not even c.
  EXPECT_TRUE(CpuKernels::Get()
                  ->Gemm(false, false, 0, 3, 4, 1.0f, nullptr, 0, nullptr, 0, 0.0f, nullptr, 0)
                  .ok());
}

TEST(CpuGemmTest, RejectsBadArguments) {
  std::vector<float> a(64), b(64), c(64);
  Kernels* k = CpuKernels::Get();
  EXPECT_EQ(k->Gemm(false, false, -1, 2, 2, 1, a.data(), 2, b.data(), 2, 0, c.data(), 2).code(),
            absl::StatusCode::kInvalidArgument);
  // lda < k without transpose, and lda < m with it.
  EXPECT_EQ(k->Gemm(false, false, 4, 4, 4, 1, a.data(), 3, b.data(), 4, 0, c.data(), 4).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(k->Gemm(true, false, 5, 4, 4, 1, a.data(), 4, b.data(), 4, 0, c.data(), 4).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(k->Gemm(false, true, 4, 4, 5, 1, a.data(), 5, b.data(), 4, 0, c.data(), 4).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(k->Gemm(false, false, 4, 4, 4, 1, a.data(), 4, b.data(), 4, 0, c.data(), 3).code(),
            absl::StatusCode::kInvalidArgument);
}

// The packed-weight GEMM against the same reference: m from 1 to past the row-block and
// parallel thresholds, n past a panel multiple, both stored layouts of b, beta 0 / 1 / other,
// odd leading dimensions, 1 and 2 threads. Skips where the CPU has no AVX-512F.
TEST(CpuPackedGemmTest, MatchesNaive) {
  Kernels* k = CpuKernels::Get();
  if (k->PackedGemmBytes(8, 8) == 0) GTEST_SKIP() << "no packed GEMM on this CPU";
  for (int threads : {1, 2}) {
    SetCpuThreads(threads);
    for (bool tb : {false, true}) {
      for (int64_t m : {1, 5, 12, 13, 40, 301}) {
        // {300, 97}: with few rows, enough work to split the panels over the threads.
        for (auto [n, kk] : {std::pair<int64_t, int64_t>{5, 150}, {33, 7}, {97, 64}, {300, 97}}) {
          for (auto [beta, with_bias] : {std::pair{0.0f, false},
                                         {1.0f, false},
                                         {-0.5f, false},
                                         {0.0f, true},
                                         {1.0f, true}}) {
            GemmCase g{false, tb, m, n, kk, kk + 3, (tb ? kk : n) + 2, n + 5, 1.0f, beta};
            GemmData d = MakeData(g, 19);
            const std::vector<float> bias = RandomFloats(static_cast<size_t>(n), 23);
            if (with_bias) AddBias(g, bias, d);
            std::vector<float> packed(k->PackedGemmBytes(g.k, g.n) / sizeof(float), -1.0f);
            ASSERT_TRUE(k->PackGemmB(tb, g.k, g.n, d.b.data(), g.ldb, packed.data()).ok());
            ASSERT_TRUE(k->GemmPackedB(g.m, g.n, g.k, d.a.data(), g.lda, packed.data(),
                                       with_bias ? bias.data() : nullptr, g.beta, d.c.data(), g.ldc)
                            .ok());
            EXPECT_TRUE(AllClose(d.c, d.want, GemmErrorBound(g.k), 0.0, &d.scale))
                << "threads " << threads << " trans_b " << tb << " m " << m << " n " << n << " k "
                << kk << " beta " << beta;
          }
        }
      }
    }
  }
  SetCpuThreads(0);
}

TEST(CpuPackedGemmTest, BetaZeroOverwritesNaNAndLeavesPaddingAlone) {
  Kernels* k = CpuKernels::Get();
  if (k->PackedGemmBytes(8, 8) == 0) GTEST_SKIP() << "no packed GEMM on this CPU";
  GemmCase g = OddCase(false, false, 1.0f, 0.0f);
  GemmData d = MakeData(g, 3);
  std::fill(d.c.begin(), d.c.end(), std::numeric_limits<float>::quiet_NaN());
  std::vector<float> packed(k->PackedGemmBytes(g.k, g.n) / sizeof(float));
  ASSERT_TRUE(k->PackGemmB(false, g.k, g.n, d.b.data(), g.ldb, packed.data()).ok());
  ASSERT_TRUE(k->GemmPackedB(g.m, g.n, g.k, d.a.data(), g.lda, packed.data(), nullptr, 0.0f,
                             d.c.data(), g.ldc)
                  .ok());
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < g.n; ++j) ASSERT_FALSE(std::isnan(d.c[i * g.ldc + j])) << i << "," << j;
    for (int64_t j = g.n; j < g.ldc && i + 1 < g.m; ++j)
      EXPECT_TRUE(std::isnan(d.c[i * g.ldc + j]));
  }
  EXPECT_EQ(k->GemmPackedB(2, 4, 4, d.a.data(), 3, packed.data(), nullptr, 0, d.c.data(), 4).code(),
            absl::StatusCode::kInvalidArgument);  // lda < k
  EXPECT_EQ(k->PackGemmB(true, 4, 4, d.b.data(), 3, packed.data()).code(),
            absl::StatusCode::kInvalidArgument);  // ldb < k for a transposed b
}

// Where the CPU has AVX-512F, its AVX2 kernel (what AMD Zen and older Intel CPUs run) computes
// the same bits as the AVX-512 one: both are one FMA chain per element in k order. Row counts
// on both sides of each kernel's block (3 and 12 rows), both layouts of b, beta and bias.
TEST(CpuPackedGemmTest, TheAvx2KernelComputesTheAvx512Bits) {
  Kernels* k = CpuKernels::Get();
  if (!PackedGemmFast()) GTEST_SKIP() << "no AVX-512F on this CPU: one kernel";
  for (int threads : {1, 2}) {
    SetCpuThreads(threads);
    for (bool tb : {false, true}) {
      for (int64_t m : {1, 2, 3, 4, 7, 12, 13, 40, 301}) {
        for (auto [n, kk] : {std::pair<int64_t, int64_t>{5, 150}, {33, 7}, {97, 64}, {750, 300}}) {
          for (auto [beta, with_bias] : {std::pair{0.0f, false}, {-0.5f, false}, {1.0f, true}}) {
            GemmCase g{false, tb, m, n, kk, kk + 3, (tb ? kk : n) + 2, n + 5, 1.0f, beta};
            GemmData d = MakeData(g, 29);
            const std::vector<float> bias = RandomFloats(static_cast<size_t>(n), 31);
            std::vector<float> packed(k->PackedGemmBytes(g.k, g.n) / sizeof(float));
            ASSERT_TRUE(k->PackGemmB(tb, g.k, g.n, d.b.data(), g.ldb, packed.data()).ok());
            std::vector<float> c512 = d.c, c2 = d.c;
            ASSERT_TRUE(k->GemmPackedB(g.m, g.n, g.k, d.a.data(), g.lda, packed.data(),
                                       with_bias ? bias.data() : nullptr, g.beta, c512.data(),
                                       g.ldc)
                            .ok());
            SetPackedGemmAvx2(true);
            EXPECT_FALSE(PackedGemmFast());
            const absl::Status s =
                k->GemmPackedB(g.m, g.n, g.k, d.a.data(), g.lda, packed.data(),
                               with_bias ? bias.data() : nullptr, g.beta, c2.data(), g.ldc);
            SetPackedGemmAvx2(false);
            ASSERT_TRUE(s.ok()) << s;
            ASSERT_EQ(std::memcmp(c512.data(), c2.data(), c2.size() * sizeof(float)), 0)
                << "threads " << threads << " trans_b " << tb << " m " << m << " n " << n << " k "
                << kk << " beta " << beta << " bias " << with_bias;
          }
        }
      }
    }
  }
  SetCpuThreads(0);
  EXPECT_TRUE(PackedGemmFast());
}

TEST(CpuPackedGemmTest, CanBeTurnedOff) {
  Kernels* k = CpuKernels::Get();
  const bool on = k->PackedGemmBytes(8, 8) > 0;
  cpu::SetPackedGemmEnabled(false);
  EXPECT_EQ(k->PackedGemmBytes(8, 8), 0);
  cpu::SetPackedGemmEnabled(on);
  EXPECT_EQ(k->PackedGemmBytes(8, 8) > 0, on);
}

}  // namespace
}  // namespace cavs::ops::cpu
