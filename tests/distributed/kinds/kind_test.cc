#include "distributed/kinds/kind.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_split.h"
#include "distributed/collective_cost.h"
#include "distributed/model_profile.h"

namespace cavs::distributed::kinds {
namespace {

// One value of every alternative of ParamSync, in its order.
std::vector<ParamSync> Alternatives() {
  return {AllReduceSync{}, ParameterServerSync{{0}, {}, 0}, SparseSync{}};
}

// The list of kinds covers ParamSync: each alternative held by exactly one kind, listed in the
// variant's order, found by its keyword; the keywords for errors in that order.
TEST(SyncKindTest, OneKindPerAlternativeInOrder) {
  const std::vector<ParamSync> alternatives = Alternatives();
  ASSERT_EQ(alternatives.size(), std::variant_size_v<ParamSync>);
  ASSERT_EQ(AllKinds().size(), alternatives.size());
  for (size_t i = 0; i < alternatives.size(); ++i) {
    ASSERT_EQ(alternatives[i].index(), i);
    int holders = 0;
    for (const SyncKind* kind : AllKinds()) holders += kind->Holds(alternatives[i]) ? 1 : 0;
    EXPECT_EQ(holders, 1) << "alternative " << i;
    EXPECT_EQ(&KindOf(alternatives[i]), AllKinds()[i]);
    EXPECT_EQ(FindKind(AllKinds()[i]->keyword()), AllKinds()[i]);
  }
  EXPECT_EQ(FindKind("allgather"), nullptr);
  EXPECT_EQ(KindKeywords(), "allreduce, ps or sparse");
}

// Every unit kind is planned by exactly one synchronizer kind (the running unit and the cost
// term are found through it).
TEST(SyncKindTest, EveryUnitKindHasOneOwner) {
  for (int u = 0; u < kNumUnitKinds; ++u) {
    int owners = 0;
    for (const SyncKind* kind : AllKinds()) {
      const std::vector<UnitKind> units = kind->unit_kinds();
      owners += static_cast<int>(std::count(units.begin(), units.end(), UnitKind(u)));
    }
    EXPECT_EQ(owners, 1) << UnitKindName(UnitKind(u));
  }
  EXPECT_EQ(&KindOf(UnitKind::kBucket), &KindOf(ParamSync(AllReduceSync{})));
  EXPECT_EQ(&KindOf(UnitKind::kPsShard), &KindOf(UnitKind::kPsSparseShard));
  EXPECT_EQ(&KindOf(UnitKind::kSparse), &KindOf(ParamSync(SparseSync{})));
}

// What a kind writes, its Parse reads back to the same value (the line's first two tokens are
// "param" and the name).
TEST(SyncKindTest, DescribeReadsBack) {
  const std::vector<ParamSync> syncs = {
      AllReduceSync{},
      AllReduceSync{3, Compressor::kFp16, AllReduceTopology::kHierarchical},
      ParameterServerSync{{1, 0}, {0, 2, 5}, 0},
      ParameterServerSync{{}, {}, 2, {{1, 0}, {0, 1}}},
      SparseSync{},
  };
  for (const ParamSync& sync : syncs) {
    const SyncKind& kind = KindOf(sync);
    const std::string text = kind.Describe(sync);
    std::vector<std::string> tokens = {"param", "x"};
    for (absl::string_view t : absl::StrSplit(text, ' ')) tokens.emplace_back(t);
    ASSERT_EQ(tokens[2], kind.keyword()) << text;
    absl::StatusOr<ParamSync> parsed = kind.Parse(tokens);
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status();
    EXPECT_EQ(*parsed, sync) << text;
  }
}

// The units' names, written by hand: the synchronizer's errors and the cost model's report
// both use them.
TEST(SyncKindTest, UnitNames) {
  const std::vector<UnitParam> params = {{"a", 4, false}, {"b", 10, true}, {"c", 6, false}};
  UnitSpec bucket;
  bucket.kind = UnitKind::kBucket;
  bucket.group = 2;
  bucket.params = {0, 2};
  bucket.compressor = Compressor::kFp16;
  EXPECT_EQ(KindOf(bucket.kind).UnitName(bucket, params), "allreduce bucket 2 (a, c; fp16)");
  bucket.compressor = Compressor::kNone;
  bucket.topology = AllReduceTopology::kHierarchical;
  EXPECT_EQ(KindOf(bucket.kind).UnitName(bucket, params),
            "allreduce bucket 2 (a, c; hierarchical)");
  UnitSpec shard;
  shard.kind = UnitKind::kPsSparseShard;
  shard.key = 1;
  shard.begin = 0;
  shard.end = 5;
  shard.server = 3;
  EXPECT_EQ(KindOf(shard.kind).UnitName(shard, params), "ps 'b' rows [0, 5) on server 3");
  shard.end = 10;
  EXPECT_EQ(KindOf(shard.kind).UnitName(shard, params), "ps 'b' on server 3");
  UnitSpec table;
  table.kind = UnitKind::kSparse;
  table.key = 1;
  table.end = 10;
  EXPECT_EQ(KindOf(table.kind).UnitName(table, params), "sparse allgather 'b'");
}

// A row-sparse PS shard's row counts go to its server alone (the others send their own rows and
// need no one's count): on 4 hosts, 3 pairs into the server's host, not an allgather's 12. Its
// rows go the same way (both gathers are linear whatever the cluster's algorithms).
TEST(SyncKindTest, ARowSparseShardsCountsGoToItsServerAlone) {
  ClusterSpec cluster;
  cluster.name = "test";
  for (int h = 0; h < 4; ++h) cluster.hosts.push_back({"h" + std::to_string(h), 1, 1e9 / 8});
  cluster.inter_latency = 50e-6;
  internal::Collectives collectives(cluster);
  ModelProfile profile;
  ParamProfile table;
  table.name = "E";
  table.shape = {1000, 10};
  table.sparse = true;
  table.touched_rows = 100;
  profile.params.push_back(table);
  UnitSpec shard;
  shard.kind = UnitKind::kPsSparseShard;
  shard.key = 0;
  shard.begin = 0;
  shard.end = 1000;
  shard.server = 2;
  const UnitCost cost = KindOf(shard.kind).Cost(shard, profile, collectives);
  ASSERT_EQ(cost.phases.size(), 4u);
  const int hosts = static_cast<int>(cluster.hosts.size());
  for (int p : {0, 1}) {
    const internal::PairLoads& pairs = cost.phases[p].pairs;
    ASSERT_EQ(pairs.size(), 3u) << "phase " << p;
    for (size_t i = 0; i < pairs.size(); ++i) {
      const int from = pairs[i].resource / hosts, to = pairs[i].resource % hosts;
      EXPECT_EQ(to, shard.server) << "phase " << p << " pair " << i;
      EXPECT_NE(from, to);
    }
  }
  EXPECT_DOUBLE_EQ(cost.phases[0].root_in, 3 * 8.0);
}

}  // namespace
}  // namespace cavs::distributed::kinds
