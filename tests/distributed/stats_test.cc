#include "distributed/stats.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace cavs::distributed
