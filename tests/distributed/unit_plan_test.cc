#include "distributed/unit_plan.h"

#include <gtest/gtest.h>

#include <vector>

namespace cavs::distributed {
namespace {

// Buckets by group keyed by their earliest parameter, a unit per PS shard (sparse or dense as
// the gradient), a unit per sparse table; latest key first, shards in row order.
TEST(UnitPlanTest, UnitsInTheSynchronizersStartOrder) {
  const std::vector<UnitParam> params = {
      {"a", 10, false}, {"b", 100, true}, {"c", 4, false}, {"d", 8, false}, {"e", 6, true}};
  Strategy s;
  s.world_size = 2;
  AllReduceSync g0, g1;
  g1.group = 1;
  g1.compressor = Compressor::kFp16;
  s.params = {{"a", g0},
              {"b", ParameterServerSync{{1, 0}, {}, 0}},
              {"c", g0},
              {"d", g1},
              {"e", SparseSync{}}};
  const std::vector<UnitSpec> units = PlanUnits(s, params);
  ASSERT_EQ(units.size(), 5u);
  EXPECT_EQ(units[0].kind, UnitKind::kSparse);
  EXPECT_EQ(units[0].key, 4);
  EXPECT_EQ(units[0].end, 6);
  EXPECT_EQ(units[1].kind, UnitKind::kBucket);
  EXPECT_EQ(units[1].params, std::vector<int>({3}));
  EXPECT_EQ(units[1].compressor, Compressor::kFp16);
  for (int shard = 0; shard < 2; ++shard) {
    const UnitSpec& u = units[2 + shard];
    EXPECT_EQ(u.kind, UnitKind::kPsSparseShard);
    EXPECT_EQ(u.key, 1);
    EXPECT_EQ(u.shard, shard);
    EXPECT_EQ(u.begin, 50 * shard);
    EXPECT_EQ(u.end, 50 * (shard + 1));
    EXPECT_EQ(u.server, 1 - shard);
  }
  EXPECT_EQ(units[4].kind, UnitKind::kBucket);
  EXPECT_EQ(units[4].key, 0);
  EXPECT_EQ(units[4].params, std::vector<int>({0, 2}));
}

}  // namespace
}  // namespace cavs::distributed
