// IEEE float16 and bfloat16 conversions on the host, for gradient compression and for the MPI
// sum of half-precision buffers (MPI has no half type). Round to nearest even; NaN stays NaN,
// overflow becomes infinity, float16 subnormals are kept.
//
// The scalar functions below are the definition; the buffer functions at the end give the same
// bits (NaN payloads aside) and use the F16C instructions where the CPU has them: the scalar
// float-to-half conversion is branchy (about 16 ns a value on the development machine, so 130 ms
// a step for an 8-million-value bucket), the instructions convert 8 values in a few cycles.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <cstring>

namespace cavs::distributed {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline uint16_t FloatToHalf(float f) {
  const uint32_t x = FloatBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520
  if (abs < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the smallest
    const uint32_t exponent = abs >> 23;
    const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exponent;  // value = mantissa * 2^(exponent - 150); unit 2^-24
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = ((abs - 0x38000000u) >> 13);  // rebias exponent 127 -> 15
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return BitsToFloat(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return BitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return BitsToFloat(sign);
  // Subnormal: mantissa * 2^-24.
  const float magnitude = static_cast<float>(mantissa) * BitsToFloat(0x33800000u);
  return sign ? -magnitude : magnitude;
}

inline uint16_t FloatToBFloat16(float f) {
  const uint32_t x = FloatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

inline float BFloat16ToFloat(uint16_t b) { return BitsToFloat(static_cast<uint32_t>(b) << 16); }

// dst[i] = FloatToHalf(src[i] * scale), i < n.
void FloatsToHalves(const float* src, float scale, uint16_t* dst, int64_t n);

// dst[i] = HalfToFloat(src[i]), i < n.
void HalvesToFloats(const uint16_t* src, float* dst, int64_t n);

// inout[i] = FloatToHalf(HalfToFloat(in[i]) + HalfToFloat(inout[i])), i < n: MPI's half sum.
void AddHalves(const uint16_t* in, uint16_t* inout, int64_t n);

}  // namespace cavs::distributed
