#include "distributed/half.h"

#include "core/flush_denormal.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace cavs::distributed {

namespace {

void FloatsToHalvesScalar(const float* src, float scale, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = FloatToHalf(src[i] * scale);
}

void HalvesToFloatsScalar(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = HalfToFloat(src[i]);
}

void AddHalvesScalar(const uint16_t* in, uint16_t* inout, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    inout[i] = FloatToHalf(HalfToFloat(in[i]) + HalfToFloat(inout[i]));
}

#if defined(__x86_64__)

// The instructions round to nearest even, as FloatToHalf does. The caller's denormal modes
// (core/flush_denormal.h) would make them read subnormal inputs as zero and, for the product
// with `scale`, write zero: cleared for the call (core::ScopedExactDenormal), so that the bits
// are the scalar functions'.
constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

__attribute__((target("avx,f16c"))) void FloatsToHalvesF16c(const float* src, float scale,
                                                            uint16_t* dst, int64_t n) {
  core::ScopedExactDenormal exact;
  const __m256 s = _mm256_set1_ps(scale);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(src + i), s);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(v, kRound));
  }
  FloatsToHalvesScalar(src + i, scale, dst + i, n - i);
}

__attribute__((target("avx,f16c"))) void HalvesToFloatsF16c(const uint16_t* src, float* dst,
                                                            int64_t n) {
  core::ScopedExactDenormal exact;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  HalvesToFloatsScalar(src + i, dst + i, n - i);
}

__attribute__((target("avx,f16c"))) void AddHalvesF16c(const uint16_t* in, uint16_t* inout,
                                                       int64_t n) {
  core::ScopedExactDenormal exact;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    const __m256 b = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(inout + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(inout + i),
                     _mm256_cvtps_ph(_mm256_add_ps(a, b), kRound));
  }
  AddHalvesScalar(in + i, inout + i, n - i);
}

// AVX (which the runtime checks together with the OS saving the YMM registers) and F16C
// (CPUID leaf 1, ECX bit 29: clang's __builtin_cpu_supports does not know "f16c").
bool HasF16c() {
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) != 0 &&
           (c & bit_F16C) != 0;
  }();
  return has;
}

#else

bool HasF16c() { return false; }

#endif

}  // namespace

void FloatsToHalves(const float* src, float scale, uint16_t* dst, int64_t n) {
#if defined(__x86_64__)
  if (HasF16c()) return FloatsToHalvesF16c(src, scale, dst, n);
#endif
  FloatsToHalvesScalar(src, scale, dst, n);
}

void HalvesToFloats(const uint16_t* src, float* dst, int64_t n) {
#if defined(__x86_64__)
  if (HasF16c()) return HalvesToFloatsF16c(src, dst, n);
#endif
  HalvesToFloatsScalar(src, dst, n);
}

void AddHalves(const uint16_t* in, uint16_t* inout, int64_t n) {
#if defined(__x86_64__)
  if (HasF16c()) return AddHalvesF16c(in, inout, n);
#endif
  AddHalvesScalar(in, inout, n);
}

}  // namespace cavs::distributed
