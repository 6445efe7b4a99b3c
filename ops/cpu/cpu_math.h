// Branch-free float math for the CPU kernels' inner loops: exp, tanh and the logistic sigmoid
// written so that a loop over contiguous floats calling them vectorizes (no libm calls, no
// branches, only selects). Accuracy, checked by tests/ops/cpu/cpu_elementwise_test.cc against
// std::exp / std::tanh over the whole float range: relative error below 1e-6 (about 2e-7 in
// practice) for normal results; subnormal results are as exact as their few bits allow.
//
// Exp is Cephes' expf (range reduction by ln 2 in two parts, a degree-6 polynomial on
// [-ln2/2, ln2/2]) with the final scaling by 2^n done in two halves, so that results down to
// the subnormal range and up to overflow come out right without a branch.
//
// CAVS_CPU_VECTOR_CLONES (core/host_device.h) marks the hot loop functions.
#pragma once

#include <bit>
#include <cstdint>

#include "core/host_device.h"

#if defined(__GNUC__)
#define CAVS_CPU_INLINE inline __attribute__((always_inline))
#else
#define CAVS_CPU_INLINE inline
#endif

namespace cavs::ops::cpu {

// 2^n as a float, for integer n in [-126, 127].
CAVS_CPU_INLINE float Pow2(int32_t n) { return std::bit_cast<float>((n + 127) << 23); }

// e^x. Returns +inf above ~88.72, 0 below ~-103.9, NaN for NaN.
CAVS_CPU_INLINE float Exp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;  // ln 2 = kLn2Hi + kLn2Lo, kLn2Hi exact in 9 bits
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  x = x > 88.8f ? 88.8f : x;             // NaN passes both clamps unchanged
  x = x < -104.0f ? -104.0f : x;
  const float n = (x * kLog2e + kRound) - kRound;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t ni = static_cast<int32_t>(n);  // in [-150, 128]
  const int32_t n1 = ni >> 1;                  // both halves in [-75, 64]: normal floats
  return p * Pow2(n1) * Pow2(ni - n1);
}

// tanh(x): Cephes' odd polynomial below |x| = 0.625 (no cancellation near 0), else
// 1 - 2 / (e^{2|x|} + 1) with the sign of x.
CAVS_CPU_INLINE float Tanh(float x) {
  const float ax = x < 0.0f ? -x : x;
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  const float big = 1.0f - 2.0f / (Exp(2.0f * ax) + 1.0f);
  const float signed_big = x < 0.0f ? -big : big;
  return ax < 0.625f ? small : signed_big;
}

// 1 / (1 + e^-x), computed from e^-|x| so that large negative x keeps its relative accuracy.
CAVS_CPU_INLINE float Sigmoid(float x) {
  const float ax = x < 0.0f ? -x : x;
  const float e = Exp(-ax);
  const float s = 1.0f / (1.0f + e);
  return x < 0.0f ? e * s : s;
}

}  // namespace cavs::ops::cpu
