#include "distributed/builders.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/distributed/test_model.h"

namespace cavs::distributed {
namespace {

using core::Initializer;
using core::ParameterStore;

bool Contains(const absl::Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

// Parameters of the given sizes in float32 elements (as [n] vectors, or [rows, cols] when
// rows > 0), named p0, p1, ... in creation order.
void AddParams(ParameterStore& store, const std::vector<std::pair<int64_t, int64_t>>& shapes) {
  for (size_t i = 0; i < shapes.size(); ++i) {
    const auto [rows, cols] = shapes[i];
    core::Shape shape = rows > 0 ? core::Shape({rows, cols}) : core::Shape({cols});
    ASSERT_TRUE(store.GetOrCreate("p" + std::to_string(i), shape, Initializer::Zeros()).ok());
  }
}

std::map<std::string, ParamSync> ByName(const Strategy& s) {
  std::map<std::string, ParamSync> m;
  for (const ParamStrategy& p : s.params) m[p.param] = p.sync;
  return m;
}

int GroupOf(const Strategy& s, const std::string& name) {
  return std::get<AllReduceSync>(ByName(s).at(name)).group;
}

const ParameterServerSync& PsOf(const Strategy& s, const std::string& name) {
  return std::get<ParameterServerSync>(s.Find(name)->sync);
}

TEST(AllReduceBuilderTest, FillsBucketsInReverseCreationOrderUpToTheCap) {
  ParameterStore store;
  // Bytes: p0 400, p1 400, p2 800, p3 40, p4 1200 (larger than the cap), p5 40.
  AddParams(store, {{0, 100}, {0, 100}, {10, 20}, {0, 10}, {30, 10}, {0, 10}});
  absl::StatusOr<Strategy> s = BuildStrategy("allreduce", store, 4, {.bucket_bytes = 1000});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->name, "allreduce");
  EXPECT_EQ(s->world_size, 4);
  ASSERT_EQ(s->params.size(), 6u);
  EXPECT_EQ(s->params[0].param, "p0");  // entries stay in creation order
  // Reverse order: p5 (40) -> bucket 0; p4 (1200) does not fit -> bucket 1 alone; p3 (40) ->
  // bucket 2, p2 (800) fits with it; p1 (400) would make 1240 -> bucket 3, p0 fits (800).
  EXPECT_EQ(GroupOf(*s, "p5"), 0);
  EXPECT_EQ(GroupOf(*s, "p4"), 1);
  EXPECT_EQ(GroupOf(*s, "p3"), 2);
  EXPECT_EQ(GroupOf(*s, "p2"), 2);
  EXPECT_EQ(GroupOf(*s, "p1"), 3);
  EXPECT_EQ(GroupOf(*s, "p0"), 3);
}

TEST(AllReduceBuilderTest, DefaultBucketsHoldAbout25MegabytesAndSparseUsesAllgather) {
  ParameterStore store;
  const int64_t mb = 1 << 20;
  // Five 10 MB matrices: buckets of two (20 MB) since a third would exceed 25 MB.
  AddParams(store, {{10, mb / 4}, {10, mb / 4}, {10, mb / 4}, {10, mb / 4}, {10, mb / 4}});
  ASSERT_TRUE(store.GetOrCreate("emb", {100, 8}, Initializer::Zeros(), true).ok());
  absl::StatusOr<Strategy> s = BuildStrategy("allreduce", store, 2);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(GroupOf(*s, "p4"), 0);
  EXPECT_EQ(GroupOf(*s, "p3"), 0);
  EXPECT_EQ(GroupOf(*s, "p2"), 1);
  EXPECT_EQ(GroupOf(*s, "p1"), 1);
  EXPECT_EQ(GroupOf(*s, "p0"), 2);
  EXPECT_TRUE(std::holds_alternative<SparseSync>(s->Find("emb")->sync));
  for (const ParamStrategy& p : s->params) {
    if (const auto* ar = std::get_if<AllReduceSync>(&p.sync)) {
      EXPECT_EQ(ar->compressor, Compressor::kNone);
    }
  }
  s = BuildStrategy("allreduce", store, 2, {.compressor = Compressor::kFp16});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(std::get<AllReduceSync>(s->Find("p0")->sync).compressor, Compressor::kFp16);
}

TEST(PsBuilderTest, RoundRobinInCreationOrder) {
  ParameterStore store;
  AddParams(store, {{0, 5}, {0, 500}, {0, 5}, {0, 5}, {0, 5}});
  absl::StatusOr<Strategy> s = BuildStrategy("ps", store, 3);
  ASSERT_TRUE(s.ok()) << s.status();
  const std::vector<int> want = {0, 1, 2, 0, 1};
  for (int i = 0; i < 5; ++i) {
    const ParameterServerSync& ps = PsOf(*s, "p" + std::to_string(i));
    EXPECT_EQ(ps.placement, std::vector<int>({want[i]}));
    EXPECT_TRUE(ps.row_splits.empty());
    EXPECT_EQ(ps.staleness, 0);
  }
}

TEST(PsBuilderTest, LoadBalancingPlacesLargestFirstOnTheLeastLoadedServer) {
  ParameterStore store;
  // Bytes: 4000, 400, 2400, 2000, 400, 1600.
  AddParams(store, {{0, 1000}, {0, 100}, {0, 600}, {0, 500}, {0, 100}, {0, 400}});
  absl::StatusOr<Strategy> s = BuildStrategy("ps-lb", store, 2);
  ASSERT_TRUE(s.ok()) << s.status();
  // Largest first: p0 4000 -> 0; p2 2400 -> 1; p3 2000 -> 1 (2400 < 4000); p5 1600 -> 0
  // (4000 < 4400)... loads 5600 / 4400; p1 400 -> 1; p4 400 -> 1: 5600 / 5200.
  std::vector<int64_t> load(2, 0);
  const std::vector<int> want = {0, 1, 1, 1, 1, 0};
  for (int i = 0; i < 6; ++i) {
    const ParameterServerSync& ps = PsOf(*s, "p" + std::to_string(i));
    ASSERT_EQ(ps.placement.size(), 1u);
    EXPECT_EQ(ps.placement[0], want[i]) << "p" << i;
    load[ps.placement[0]] += store.parameters()[i]->value.nbytes();
  }
  EXPECT_EQ(load[0], 5600);
  EXPECT_EQ(load[1], 5200);
  // Round robin on the same model is far less even: 4000 + 2400 + 400 vs 400 + 2000 + 1600.
}

TEST(PsBuilderTest, PartitionedPsSplitsLargeTensorsIntoRowShardsOnDistinctServers) {
  ParameterStore store;
  AddParams(store, {{10, 100}, {0, 100}, {3, 4}});  // 4000 bytes, 400 bytes, 48 bytes
  absl::StatusOr<Strategy> s =
      BuildStrategy("partitioned-ps", store, 4, {.partition_min_bytes = 1000});
  ASSERT_TRUE(s.ok()) << s.status();
  const ParameterServerSync& big = PsOf(*s, "p0");
  ASSERT_EQ(big.placement.size(), 4u);
  EXPECT_EQ(big.row_splits, std::vector<int64_t>({0, 3, 6, 8, 10}));
  std::vector<int> servers = big.placement;
  std::sort(servers.begin(), servers.end());
  EXPECT_EQ(servers, std::vector<int>({0, 1, 2, 3}));
  EXPECT_EQ(PsOf(*s, "p1").placement.size(), 1u);  // below the threshold
  EXPECT_EQ(PsOf(*s, "p2").placement.size(), 1u);
  // Shards of p0 are 1200, 1200, 800, 800 bytes: the 400-byte p1 goes to a server with 800.
  const int p1_server = PsOf(*s, "p1").placement[0];
  EXPECT_GE(p1_server, 0);
  EXPECT_TRUE(p1_server == big.placement[2] || p1_server == big.placement[3]);
  // Fewer rows than servers: one shard per row.
  ParameterStore narrow;
  AddParams(narrow, {{2, 1000}});
  s = BuildStrategy("partitioned-ps", narrow, 4, {.partition_min_bytes = 1000});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(PsOf(*s, "p0").row_splits, std::vector<int64_t>({0, 1, 2}));
}

TEST(HybridBuilderTest, SparseByAllgatherOrPsAndDenseByAllreduce) {
  ParameterStore store;
  ASSERT_TRUE(testing::BuildModel(store).ok());
  absl::StatusOr<Strategy> s = BuildStrategy("hybrid", store, 2);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(std::holds_alternative<SparseSync>(s->Find("embed/E")->sync));
  for (const char* dense : {"hidden/W", "hidden/b", "out/W", "out/b"}) {
    EXPECT_TRUE(std::holds_alternative<AllReduceSync>(s->Find(dense)->sync)) << dense;
  }
  s = BuildStrategy("hybrid", store, 2, {.hybrid_sparse_ps = true});
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(std::holds_alternative<ParameterServerSync>(s->Find("embed/E")->sync));
  EXPECT_TRUE(std::holds_alternative<AllReduceSync>(s->Find("out/W")->sync));
}

TEST(HierarchicalBuildersTest, AreAllreduceAndHybridWithHierarchicalBuckets) {
  ParameterStore store;
  ASSERT_TRUE(testing::BuildModel(store).ok());
  for (const char* base : {"allreduce", "hybrid"}) {
    const std::string name = absl::StrCat("hier-", base);
    absl::StatusOr<Strategy> hier = BuildStrategy(name, store, 4, {.bucket_bytes = 64});
    absl::StatusOr<Strategy> flat = BuildStrategy(base, store, 4, {.bucket_bytes = 64});
    ASSERT_TRUE(hier.ok() && flat.ok()) << hier.status() << flat.status();
    EXPECT_EQ(hier->name, name);
    ASSERT_EQ(hier->params.size(), flat->params.size());
    for (size_t i = 0; i < flat->params.size(); ++i) {
      ParamSync want = flat->params[i].sync;
      if (auto* ar = std::get_if<AllReduceSync>(&want)) {
        ar->topology = AllReduceTopology::kHierarchical;
      }
      EXPECT_EQ(hier->params[i].sync, want) << name << " " << flat->params[i].param;
    }
  }
}

// Shards of a split tensor sized by their servers' weights: a server of weight 3 gets about
// three times the rows of one of weight 1.
TEST(PsBuilderTest, PartitionedPsSplitsRowsInProportionToServerWeights) {
  ParameterStore store;
  ASSERT_TRUE(testing::BuildModel(store).ok());
  const std::vector<double> weights = {1, 3};
  absl::StatusOr<Strategy> s = BuildStrategy(
      "partitioned-ps", store, 2, {.partition_min_bytes = 16, .server_weights = weights});
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(ValidateStrategy(*s, store).ok());
  const auto& e = std::get<ParameterServerSync>(s->Find("embed/E")->sync);
  ASSERT_EQ(e.placement.size(), 2u);
  const std::vector<int64_t> splits = ShardRowSplits(e, store.Find("embed/E")->value.rows());
  for (int shard = 0; shard < 2; ++shard) {
    const double rows = static_cast<double>(splits[shard + 1] - splits[shard]);
    const double want = splits.back() * weights[e.placement[shard]] / 4.0;
    EXPECT_NEAR(rows, want, 1.0) << "shard " << shard << " on rank " << e.placement[shard];
  }
  EXPECT_TRUE(Contains(BuildStrategy("partitioned-ps", store, 2, {.server_weights = {1}}).status(),
                       "1 server weights for world size 2"));
  EXPECT_TRUE(
      Contains(BuildStrategy("partitioned-ps", store, 2, {.server_weights = {1, 0}}).status(),
               "not positive"));
}

TEST(BuildStrategyTest, ErrorsForUnknownNamesAndBadArguments) {
  ParameterStore store;
  ASSERT_TRUE(testing::BuildModel(store).ok());
  absl::StatusOr<Strategy> s = BuildStrategy("horovod", store, 2);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(s.status(), "unknown strategy builder 'horovod'")) << s.status();
  EXPECT_TRUE(Contains(s.status(),
                       "allreduce, ps, ps-lb, partitioned-ps, hybrid, hier-allreduce, hier-hybrid"))
      << s.status();
  EXPECT_TRUE(Contains(BuildStrategy("ps", store, 0).status(), "world size 0"));
  EXPECT_TRUE(
      Contains(BuildStrategy("allreduce", store, 2, {.bucket_bytes = 0}).status(), "bucket size"));
}

TEST(BuildStrategyTest, SameInputsSameStrategy) {
  ParameterStore a(1), b(99);  // different seeds: values differ, names and shapes do not
  ASSERT_TRUE(testing::BuildModel(a).ok());
  ASSERT_TRUE(testing::BuildModel(b).ok());
  for (const std::string& name : StrategyBuilderNames()) {
    EXPECT_EQ(*BuildStrategy(name, a, 3, {.partition_min_bytes = 8}),
              *BuildStrategy(name, b, 3, {.partition_min_bytes = 8}))
        << name;
  }
}

}  // namespace
}  // namespace cavs::distributed
