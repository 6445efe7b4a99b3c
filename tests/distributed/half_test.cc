#include "distributed/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

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
