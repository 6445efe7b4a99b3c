// Helpers shared by the ops tests: seeded random inputs and element-wise comparisons that
// report the first few mismatches.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace cavs::ops::testing {

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

}  // namespace cavs::ops::testing
