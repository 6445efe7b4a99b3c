#include "core/random.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace cavs::core {
namespace {

void ExpectBlock(PhiloxBlock got, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  EXPECT_EQ(got.v[0], a);
  EXPECT_EQ(got.v[1], b);
  EXPECT_EQ(got.v[2], c);
  EXPECT_EQ(got.v[3], d);
}

// Known-answer vectors of Philox4x32-10 from Random123 (kat_vectors).
TEST(PhiloxTest, KnownAnswerVectors) {
  ExpectBlock(Philox4x32_10({{0, 0, 0, 0}}, 0, 0), 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8);
  ExpectBlock(
      Philox4x32_10({{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}}, 0xffffffff, 0xffffffff),
      0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd);
  ExpectBlock(
      Philox4x32_10({{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}}, 0xa4093822, 0x299f31d0),
      0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1);
}

TEST(PhiloxTest, StreamLayout) {
  const uint64_t seed = 0x0123456789abcdefull, stream = 0xfedcba9876543210ull;
  const uint64_t block = 0x1122334455667788ull;
  const PhiloxBlock want =
      Philox4x32_10({{0x55667788, 0x11223344, 0x76543210, 0xfedcba98}}, 0x89abcdef, 0x01234567);
  ExpectBlock(PhiloxStreamBlock(seed, stream, block), want.v[0], want.v[1], want.v[2], want.v[3]);
  for (uint64_t lane = 0; lane < 4; ++lane) {
    EXPECT_EQ(PhiloxBits(seed, stream, block * 4 + lane), want.v[lane]);
  }
  // Stream 0 with key (0, 0) is the first known-answer vector.
  EXPECT_EQ(PhiloxUniformBits(0, 0), 0x6627e8d5u);
  EXPECT_EQ(PhiloxUniformBits(0, 3), 0x9b00dbd8u);
  EXPECT_EQ(PhiloxUniform(0, 0), static_cast<float>(0x6627e8d5u >> 8) / 16777216.0f);
}

TEST(PhiloxTest, UniformFromBitsFormula) {
  EXPECT_EQ(UniformFromBits(0), 0.0f);
  EXPECT_EQ(UniformFromBits(0xff), 0.0f);  // the low 8 bits are dropped
  EXPECT_EQ(UniformFromBits(0x80000000u), 0.5f);
  EXPECT_EQ(UniformFromBits(0xffffffffu), 1.0f - std::ldexp(1.0f, -24));
  for (uint64_t i = 0; i < 1000; ++i) {
    const float u = PhiloxUniform(7, i);
    EXPECT_GE(u, 0.0f);
    EXPECT_LT(u, 1.0f);
  }
}

TEST(HashNameTest, Fnv1a64Vectors) {
  static_assert(HashName("") == 0xcbf29ce484222325ull);
  EXPECT_EQ(HashName("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(HashName("foobar"), 0x85944171f73967e8ull);
  EXPECT_NE(HashName("W"), HashName("U"));
}

TEST(RngTest, FollowsTheStream) {
  Rng rng(42, 9);
  for (uint64_t i = 0; i < 11; ++i) EXPECT_EQ(rng.NextU32(), PhiloxBits(42, 9, i));
  EXPECT_EQ(rng.offset(), 11u);
  const uint64_t lo = PhiloxBits(42, 9, 11), hi = PhiloxBits(42, 9, 12);
  EXPECT_EQ(rng.NextU64(), lo | (hi << 32));
  Rng at(42, 9, 13);
  EXPECT_EQ(rng.NextU32(), at.NextU32());
}

TEST(RngTest, StateRoundTripResumesTheSequence) {
  Rng a(123, 4);
  for (int i = 0; i < 7; ++i) a.NextU32();
  EXPECT_EQ(a.State(), "philox:123:4:7");
  absl::StatusOr<Rng> b = Rng::FromState(a.State());
  ASSERT_TRUE(b.ok()) << b.status();
  for (int i = 0; i < 20; ++i) EXPECT_EQ(a.NextU32(), b->NextU32());
  for (const char* bad : {"", "philox:1:2", "mt:1:2:3", "philox:1:x:3", "philox:1:2:3:4"}) {
    absl::StatusOr<Rng> r = Rng::FromState(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("invalid RNG state"), std::string::npos);
  }
}

TEST(RngTest, UniformIntIsInRangeAndBalanced) {
  Rng rng(5);
  EXPECT_EQ(rng.UniformInt(1), 0u);
  std::vector<int> counts(10, 0);
  const int kDraws = 100000;
  for (int i = 0; i < kDraws; ++i) {
    const uint64_t x = rng.UniformInt(10);
    ASSERT_LT(x, 10u);
    ++counts[x];
  }
  for (int c : counts) EXPECT_NEAR(c, kDraws / 10, 500);  // ~5 standard deviations
  const uint64_t big = (1ull << 40) + 3;
  for (int i = 0; i < 100; ++i) EXPECT_LT(rng.UniformInt(big), big);
}

TEST(RngTest, ShuffleIsADeterministicPermutation) {
  std::vector<int> a(50), b(50);
  std::iota(a.begin(), a.end(), 0);
  b = a;
  Rng r1(77), r2(77);
  r1.Shuffle(a);
  r2.Shuffle(b);
  EXPECT_EQ(a, b);
  std::vector<int> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> want(50);
  std::iota(want.begin(), want.end(), 0);
  EXPECT_EQ(sorted, want);
  EXPECT_NE(a, want);
}

TEST(ScaleUniformTest, HalfOpenInterval) {
  EXPECT_EQ(ScaleUniform(0, -2.0f, 2.0f), -2.0f);
  EXPECT_EQ(ScaleUniform(0x80000000u, -2.0f, 2.0f), 0.0f);
  EXPECT_EQ(ScaleUniform(0xffffffffu, 3.0f, 3.0f), 3.0f);
  // The top draw on a one-ulp interval rounds onto hi; it is pulled back below it.
  const float lo = 1.0f, hi = std::nextafter(1.0f, 2.0f);
  EXPECT_LT(ScaleUniform(0xffffffffu, lo, hi), hi);
  EXPECT_GE(ScaleUniform(0xffffffffu, lo, hi), lo);
}

TEST(XavierTest, FansAreFirstAndLastDimension) {
  EXPECT_FLOAT_EQ(XavierBound(Shape({3, 5})), std::sqrt(6.0f / 8.0f));
  EXPECT_FLOAT_EQ(XavierBound(Shape({2, 7, 3})), std::sqrt(6.0f / 5.0f));
  EXPECT_FLOAT_EQ(XavierBound(Shape({4})), std::sqrt(6.0f / 8.0f));
  EXPECT_FLOAT_EQ(XavierBound(Shape({})), std::sqrt(3.0f));
  EXPECT_EQ(XavierBound(Shape({0, 0})), 0.0f);
}

TEST(InitializeTensorTest, XavierValuesAreBoundedAndSpread) {
  Tensor t = Tensor::Host({100, 200});
  ASSERT_TRUE(InitializeTensor(t, Initializer::XavierUniform(), 1, "W").ok());
  const float s = std::sqrt(6.0f / 300.0f);
  const std::vector<float> v = t.ToVector();
  double sum = 0;
  float lo = 1, hi = -1;
  for (float x : v) {
    ASSERT_GE(x, -s);
    ASSERT_LT(x, s);
    sum += x;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  EXPECT_NEAR(sum / v.size(), 0.0, 0.01 * s);
  EXPECT_LT(lo, -0.99f * s);
  EXPECT_GT(hi, 0.99f * s);
}

TEST(InitializeTensorTest, DrawsFromSeedAndNameStream) {
  Tensor t = Tensor::Host({3, 3});  // 9 values: two full blocks and one lane of a third
  ASSERT_TRUE(InitializeTensor(t, Initializer::Uniform(-1.0f, 3.0f), 99, "layer/W").ok());
  const std::vector<float> v = t.ToVector();
  for (uint64_t i = 0; i < 9; ++i) {
    const float u = UniformFromBits(PhiloxBits(99, HashName("layer/W"), i));
    EXPECT_EQ(v[i], -1.0f + 4.0f * u) << i;  // exact: 4 * u and the sum are representable
  }
}

// Pinned values: a change here changes every model's initial parameters.
TEST(InitializeTensorTest, GoldenValues) {
  Tensor t = Tensor::Host({4});
  ASSERT_TRUE(InitializeTensor(t, Initializer::Uniform(0.0f, 1.0f), 1, "W").ok());
  const std::vector<float> v = t.ToVector();
  const uint64_t stream = HashName("W");
  EXPECT_EQ(stream, 0xaf640a4c86023ab6ull);
  const PhiloxBlock b = PhiloxStreamBlock(1, stream, 0);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(v[i], UniformFromBits(b.v[i]));
  EXPECT_EQ(v, (std::vector<float>{0x1.a866a8p-2f, 0x1.8da43p-3f, 0x1.46e44p-6f, 0x1.7b08p-6f}));
}

TEST(InitializeTensorTest, ReproducibleAndNameAndSeedDependent) {
  auto draw = [](uint64_t seed, const std::string& name) {
    Tensor t = Tensor::Host({64});
    absl::Status s = InitializeTensor(t, Initializer::XavierUniform(), seed, name);
    EXPECT_TRUE(s.ok()) << s;
    return t.ToVector();
  };
  EXPECT_EQ(draw(3, "U"), draw(3, "U"));
  EXPECT_NE(draw(3, "U"), draw(3, "W"));
  EXPECT_NE(draw(3, "U"), draw(4, "U"));
}

TEST(InitializeTensorTest, ConstantsZerosAndErrors) {
  Tensor t = Tensor::Host({5});
  ASSERT_TRUE(InitializeTensor(t, Initializer::Constant(0.25f), 1, "c").ok());
  EXPECT_EQ(t.ToVector(), std::vector<float>(5, 0.25f));
  ASSERT_TRUE(InitializeTensor(t, Initializer::Zeros(), 1, "c").ok());
  EXPECT_EQ(t.ToVector(), std::vector<float>(5, 0.0f));

  absl::Status s = InitializeTensor(t, Initializer::Uniform(2.0f, 1.0f), 1, "bad");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'bad'"), std::string::npos) << s;
  EXPECT_NE(s.message().find("invalid uniform range"), std::string::npos) << s;
  EXPECT_FALSE(InitializeTensor(t, Initializer::Uniform(0.0f, INFINITY), 1, "inf").ok());

  Tensor ints = Tensor::Host({2}, DType::kInt32);
  s = InitializeTensor(ints, Initializer::Zeros(), 1, "i");
  EXPECT_NE(s.message().find("float32"), std::string::npos) << s;
  Tensor undefined;
  EXPECT_FALSE(InitializeTensor(undefined, Initializer::Zeros(), 1, "u").ok());
}

}  // namespace
}  // namespace cavs::core
