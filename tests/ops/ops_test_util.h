// Helpers shared by the ops tests: seeded random inputs, element-wise comparisons that report
// the first few mismatches, and the scales a GEMM's comparison needs.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ops/kernels.h"

namespace cavs::ops::testing {

// float32's unit roundoff u = 2^-24: one correctly rounded operation is off by at most u times
// its result.
inline constexpr double kFloat32Roundoff = 0x1p-24;

// γ_n = n u / (1 - n u): a float32 sum of n terms, each an exact value or a product rounded once
// (or formed inside a fused multiply-add), is within γ_n Σ|terms| of the exact sum, accumulated
// in ANY order or blocking (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed.,
// §3.1). So every kernel, thread split and OpenBLAS core type meets it; two float32 evaluations
// of one sum differ by at most 2 γ_n Σ|terms|. The bound is for the worst case: typical errors
// are near sqrt(n) u, so a test with a tolerance below it passes only by the luck of its data
// and of the kernel's order.
inline double SumErrorBound(int64_t n) {
  const double nu = static_cast<double>(n) * kFloat32Roundoff;
  return nu / (1.0 - nu);
}

// The bound of a GEMM's element, relative to its GemmScale: the k products plus beta * c and the
// bias row summed (k + 2 terms), and the result scaled by alpha (one more rounding).
inline double GemmErrorBound(int64_t k) { return SumErrorBound(k + 3); }

// n floats uniform in [lo, hi), reproducible from `seed`.
inline std::vector<float> RandomFloats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// n ints uniform in [lo, hi].
inline std::vector<int32_t> RandomInts(size_t n, uint32_t seed, int32_t lo, int32_t hi) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> dist(lo, hi);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = dist(gen);
  return v;
}

// |got - want| <= rtol * scale + atol for every element, where scale is |want| or, when given,
// scales[i] (e.g. Σ|a||b| for a GEMM, the right yardstick where terms cancel).
inline ::testing::AssertionResult AllClose(const std::vector<float>& got,
                                           const std::vector<double>& want, double rtol,
                                           double atol,
                                           const std::vector<double>* scales = nullptr) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " vs " << want.size();
  }
  std::string errors;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double scale = scales != nullptr ? (*scales)[i] : std::fabs(want[i]);
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    const bool both_nan = std::isnan(got[i]) && std::isnan(want[i]);
    const bool same_inf = std::isinf(got[i]) && got[i] == want[i];
    if (!(err <= rtol * scale + atol) && !both_nan && !same_inf) {
      if (++bad <= 5) {
        absl::StrAppend(&errors, "\n  [", i, "] got ", got[i], " want ", want[i], " (err ", err,
                        ")");
      }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " elements differ" << errors;
}

inline ::testing::AssertionResult AllClose(const std::vector<float>& got,
                                           const std::vector<float>& want, double rtol,
                                           double atol) {
  return AllClose(got, std::vector<double>(want.begin(), want.end()), rtol, atol);
}

// AllClose's scales for the GEMM `g` (host pointers; call it before `g` runs, while g.c holds
// the C it starts from): per element of C's [m, ldc], Σ|alpha a b| + |beta c| (c not read where
// beta is 0) + |bias|, at least 1e-30.
inline std::vector<double> GemmScale(const Kernels::GemmCall& g) {
  std::vector<double> scale(static_cast<size_t>(g.m * g.ldc), 1e-30);
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < g.n; ++j) {
      double& s = scale[i * g.ldc + j];
      for (int64_t p = 0; p < g.k; ++p) {
        const float av = g.trans_a ? g.a[p * g.lda + i] : g.a[i * g.lda + p];
        const float bv = g.trans_b ? g.b[j * g.ldb + p] : g.b[p * g.ldb + j];
        s += std::fabs(static_cast<double>(g.alpha) * av * bv);
      }
      if (g.beta != 0.0f) s += std::fabs(static_cast<double>(g.beta) * g.c[i * g.ldc + j]);
      if (g.bias != nullptr) s += std::fabs(g.bias[j]);
    }
  }
  return scale;
}

}  // namespace cavs::ops::testing
