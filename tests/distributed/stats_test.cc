#include "distributed/stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace cavs::distributed {
namespace {

// Hand-computed: an odd count has one middle value for both; an even count's Median is the
// mean of the middle two and its UpperMedian the larger; the order of the input is irrelevant.
TEST(StatsTest, MedianAndUpperMedian) {
  EXPECT_EQ(Median({}), 0.0);
  EXPECT_EQ(UpperMedian({}), 0.0);
  EXPECT_EQ(Median({7}), 7.0);
  EXPECT_EQ(UpperMedian({7}), 7.0);
  EXPECT_EQ(Median({5, 1}), 3.0);
  EXPECT_EQ(UpperMedian({5, 1}), 5.0);
  EXPECT_EQ(Median({4, 1, 3}), 3.0);
  EXPECT_EQ(UpperMedian({4, 1, 3}), 3.0);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(UpperMedian({4, 1, 3, 2}), 3.0);
  EXPECT_EQ(Median({9, -1, 9, 2, 9}), 9.0);
  EXPECT_EQ(UpperMedian({9, -1, 9, 2, 9}), 9.0);
}

// The argument is a copy: the caller's values keep their order.
TEST(StatsTest, LeavesTheCallersValuesAlone) {
  const std::vector<double> v = {3, 1, 2, 0};
  EXPECT_EQ(Median(v), 1.5);
  EXPECT_EQ(UpperMedian(v), 2.0);
  EXPECT_EQ(v, std::vector<double>({3, 1, 2, 0}));
}

// Hand-computed: {100, 110} deviate 5/105 each from their mean, times sqrt(2) for two values;
// {1, 2, 3} adds 0.5 * sqrt(1.5), 0, 0.5 * sqrt(1.5); a series of one value adds nothing. The
// median of the five deviations is the first series', times 1.4826.
TEST(StatsTest, PooledSpreadByHand) {
  EXPECT_EQ(PooledSpread({}), 0.0);
  EXPECT_EQ(PooledSpread({{5.0}}), 0.0);
  const double two = 5.0 / 105.0 * std::sqrt(2.0) * 1.4826;
  EXPECT_NEAR(PooledSpread({{100, 110}}), two, 1e-12);
  EXPECT_NEAR(PooledSpread({{100, 110}, {1, 2, 3}, {7}}), two, 1e-12);
  EXPECT_NEAR(MedianStandardError(0.1, 4), 1.2533 * 0.1 / 2, 1e-12);
  EXPECT_EQ(MedianStandardError(0.1, 0), 0.0);
}

// Series of normal noise with a 5% standard deviation around different levels: the pooled
// spread finds the 5% however few steps a series has (its own sampling error over 8,000 values
// is about 2%, 0.001 here).
TEST(StatsTest, PooledSpreadFindsTheNoise) {
  std::mt19937 gen(11);
  std::normal_distribution<double> noise(0.0, 0.05);
  for (int n : {2, 4, 10}) {
    std::vector<std::vector<double>> series;
    for (int s = 0; s < 8000 / n; ++s) {
      const double level = 50.0 + s % 7 * 20.0;
      std::vector<double> steps;
      for (int i = 0; i < n; ++i) steps.push_back(level * (1 + noise(gen)));
      series.push_back(steps);
    }
    EXPECT_NEAR(PooledSpread(series), 0.05, 0.004) << n << " values a series";
  }
}

}  // namespace
}  // namespace cavs::distributed
