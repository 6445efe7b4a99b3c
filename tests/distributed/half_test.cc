#include "distributed/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include "core/flush_denormal.h"

namespace cavs::distributed {
namespace {

uint16_t CompilerHalfBits(float f) {
  const _Float16 h = static_cast<_Float16>(f);  // the compiler's IEEE conversion, the reference
  uint16_t bits;
  std::memcpy(&bits, &h, sizeof(bits));
  return bits;
}

float CompilerHalfToFloat(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, sizeof(bits));
  return static_cast<float>(h);
}

TEST(HalfTest, EveryHalfConvertsToTheSameFloatAsTheCompiler) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float want = CompilerHalfToFloat(static_cast<uint16_t>(bits));
    const float got = HalfToFloat(static_cast<uint16_t>(bits));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << bits;
    } else {
      EXPECT_EQ(FloatBits(got), FloatBits(want)) << bits;
    }
  }
}

TEST(HalfTest, FloatsRoundToNearestEvenLikeTheCompiler) {
  std::vector<float> values = {0.0f,     -0.0f,    1.0f,   -1.0f,    0.1f,         65504.0f,
                               65519.0f, 65520.0f, 1e6f,   -1e6f,    6.1035e-5f,   5.96e-8f,
                               2.98e-8f, 2.99e-8f, 1e-10f, 3.14159f, 1.0009765625f};
  values.push_back(std::numeric_limits<float>::infinity());
  values.push_back(-std::numeric_limits<float>::infinity());
  // A sweep over many binades, including halfway cases of the subnormal range.
  for (uint32_t bits = 0x33000000u; bits < 0x47800000u; bits += 0x1357u) {
    values.push_back(BitsToFloat(bits));
    values.push_back(-BitsToFloat(bits));
  }
  for (float f : values) EXPECT_EQ(FloatToHalf(f), CompilerHalfBits(f)) << f;
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::numeric_limits<float>::quiet_NaN()))));
}

// Bits equal, or both NaN (the instructions keep a NaN's payload, FloatToHalf does not).
bool SameHalf(uint16_t a, uint16_t b) {
  const auto is_nan = [](uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; };
  return a == b || (is_nan(a) && is_nan(b));
}

// Every half, and floats over every binade (subnormal results, halfway cases, overflow), at odd
// lengths so that the vector loop and its scalar tail both run; with the caller's denormal
// modes on too (the CPU kernels run under them), which must not change a bit.
class HalfBuffersTest : public ::testing::TestWithParam<bool> {};

TEST_P(HalfBuffersTest, GiveTheScalarFunctionsBits) {
  std::optional<core::ScopedFlushDenormal> flush;
  if (GetParam()) flush.emplace();
  std::vector<uint16_t> halves(0x10000 - 3);  // not a multiple of 8
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(i + 3);
  std::vector<float> floats(halves.size());
  HalvesToFloats(halves.data(), floats.data(), static_cast<int64_t>(halves.size()));
  for (size_t i = 0; i < halves.size(); ++i) {
    const float want = HalfToFloat(halves[i]);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(floats[i])) << halves[i];
    } else {
      ASSERT_EQ(FloatBits(floats[i]), FloatBits(want)) << halves[i];
    }
  }

  std::vector<float> values;
  for (uint32_t bits = 0; bits < 0x7f800000u; bits += 0x2345u) {
    values.push_back(BitsToFloat(bits));
    values.push_back(-BitsToFloat(bits));
  }
  values.push_back(std::numeric_limits<float>::infinity());
  values.push_back(std::numeric_limits<float>::quiet_NaN());
  for (const float scale : {1.0f, 0.25f, 1.0f / 3.0f}) {
    std::vector<uint16_t> got(values.size());
    FloatsToHalves(values.data(), scale, got.data(), static_cast<int64_t>(values.size()));
    for (size_t i = 0; i < values.size(); ++i) {
      ASSERT_TRUE(SameHalf(got[i], FloatToHalf(values[i] * scale)))
          << values[i] << " x " << scale << ": " << got[i];
    }
  }

  std::mt19937 rng(5);
  std::vector<uint16_t> a(100003), b(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<uint16_t>(rng());
    b[i] = static_cast<uint16_t>(i % 7 == 0 ? a[i] ^ 0x8000u : rng());  // exact cancellations
  }
  std::vector<uint16_t> sum = b;
  AddHalves(a.data(), sum.data(), static_cast<int64_t>(a.size()));
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(SameHalf(sum[i], FloatToHalf(HalfToFloat(a[i]) + HalfToFloat(b[i]))))
        << a[i] << " + " << b[i] << ": " << sum[i];
  }
}

TEST_P(HalfBuffersTest, LeaveTheCallersDenormalModes) {
#if defined(__x86_64__)
  std::optional<core::ScopedFlushDenormal> flush;
  if (GetParam()) flush.emplace();
  constexpr unsigned kControl = ~0x3fu;  // the low 6 bits are sticky exception flags
  const unsigned before = _mm_getcsr() & kControl;
  float f[9] = {1e-40f, 1, 2, 3, 4, 5, 6, 7, 8};
  uint16_t h[9];
  FloatsToHalves(f, 1.0f, h, 9);
  HalvesToFloats(h, f, 9);
  AddHalves(h, h, 9);
  EXPECT_EQ(_mm_getcsr() & kControl, before);
#else
  GTEST_SKIP() << "MXCSR is x86's";
#endif
}

INSTANTIATE_TEST_SUITE_P(DenormalModes, HalfBuffersTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "FlushOn" : "FlushOff"; });

TEST(HalfTest, BFloat16KeepsTheExponentAndRoundsTheMantissa) {
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(1.0f)), 1.0f);
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(-3.5f)), -3.5f);
  EXPECT_NEAR(BFloat16ToFloat(FloatToBFloat16(1e30f)), 1e30f, 1e30f / 256);  // 8 mantissa bits
  EXPECT_NEAR(BFloat16ToFloat(FloatToBFloat16(0.1f)), 0.1f, 0.1f / 128);
  EXPECT_EQ(FloatToBFloat16(BitsToFloat(0x3f808000u)), 0x3f80);  // tie to even: down
  EXPECT_EQ(FloatToBFloat16(BitsToFloat(0x3f818000u)), 0x3f82);  // tie to even: up
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::nanf("")))));
}

}  // namespace
}  // namespace cavs::distributed
