#include "distributed/strategy.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/match.h"
#include "distributed/builders.h"
#include "tests/distributed/test_model.h"

namespace cavs::distributed {
namespace {

bool Contains(const absl::Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

Strategy HandMade() {
  Strategy s;
  s.name = "hand made";
  s.world_size = 4;
  s.params.push_back({"embed/E", SparseSync{}});
  s.params.push_back({"hidden/W", AllReduceSync{0, Compressor::kFp16}});
  s.params.push_back({"hidden/b", AllReduceSync{0, Compressor::kFp16}});
  s.params.push_back({"out/W", ParameterServerSync{{1, 3}, {0, 2, 5}, 0}});
  s.params.push_back({"out/b", ParameterServerSync{{2}, {}, 3}});
  s.params.push_back({"odd \"name\" #1\twith tab", AllReduceSync{7, Compressor::kNone}});
  return s;
}

TEST(StrategyTextTest, WritesReadableLines) {
  const std::string text = SerializeStrategy(HandMade());
  EXPECT_NE(text.find("version 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("name \"hand made\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("world_size 4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("param embed/E sparse\n"), std::string::npos) << text;
  EXPECT_NE(text.find("param hidden/W allreduce group=0 compressor=fp16\n"), std::string::npos);
  EXPECT_NE(text.find("param out/W ps placement=1,3 rows=0,2,5 staleness=0\n"), std::string::npos);
  EXPECT_NE(text.find("param out/b ps placement=2 staleness=3\n"), std::string::npos);
  EXPECT_NE(text.find("param \"odd \\\"name\\\" #1\\twith tab\" allreduce"), std::string::npos)
      << text;
}

TEST(StrategyTextTest, RoundTripsHandMadeAndBuiltStrategies) {
  absl::StatusOr<Strategy> parsed = ParseStrategy(SerializeStrategy(HandMade()));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, HandMade());
  core::ParameterStore store;
  ASSERT_TRUE(testing::BuildModel(store).ok());
  BuildOptions options;
  options.bucket_bytes = 64;
  options.partition_min_bytes = 64;
  options.compressor = Compressor::kFp16;
  for (const std::string& name : StrategyBuilderNames()) {
    absl::StatusOr<Strategy> built = BuildStrategy(name, store, 3, options);
    ASSERT_TRUE(built.ok()) << built.status();
    absl::StatusOr<Strategy> again = ParseStrategy(SerializeStrategy(*built));
    ASSERT_TRUE(again.ok()) << name << ": " << again.status();
    EXPECT_EQ(*again, *built) << name;
  }
}

TEST(StrategyTextTest, AcceptsCommentsBlankLinesAndDefaults) {
  absl::StatusOr<Strategy> s = ParseStrategy(
      "# a strategy\n\nversion 1   # the format\nworld_size 2\n"
      "param a allreduce\nparam b ps placement=1\n  param   c   sparse  \n");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->name, "");
  ASSERT_EQ(s->params.size(), 3u);
  EXPECT_EQ(std::get<AllReduceSync>(s->params[0].sync), (AllReduceSync{0, Compressor::kNone}));
  EXPECT_EQ(std::get<ParameterServerSync>(s->params[1].sync).placement, std::vector<int>({1}));
  EXPECT_TRUE(std::holds_alternative<SparseSync>(s->params[2].sync));
}

// topology= is written only where it is hierarchical; files without it read as flat.
TEST(StrategyTextTest, TopologyIsOptionalAndRoundTrips) {
  absl::StatusOr<Strategy> s = ParseStrategy(
      "version 1\nworld_size 4\nparam a allreduce group=0\n"
      "param b allreduce group=1 topology=hierarchical\nparam c allreduce group=2 topology=flat\n");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(std::get<AllReduceSync>(s->params[0].sync).topology, AllReduceTopology::kFlat);
  EXPECT_EQ(std::get<AllReduceSync>(s->params[1].sync).topology, AllReduceTopology::kHierarchical);
  EXPECT_EQ(std::get<AllReduceSync>(s->params[2].sync).topology, AllReduceTopology::kFlat);
  const std::string text = SerializeStrategy(*s);
  EXPECT_TRUE(
      absl::StrContains(text, "param b allreduce group=1 compressor=none topology=hierarchical\n"))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "param c allreduce group=2 compressor=none\n")) << text;
  EXPECT_EQ(*ParseStrategy(text), *s);
}

// route= is written only where it is direct; files without it read as the collective route.
TEST(StrategyTextTest, PsRouteIsOptionalAndRoundTrips) {
  absl::StatusOr<Strategy> s = ParseStrategy(
      "version 1\nworld_size 4\nparam a ps placement=1\n"
      "param b ps placement=0,2 rows=0,3,5 route=direct\nparam c ps placement=h1 "
      "route=collective\n");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(std::get<ParameterServerSync>(s->params[0].sync).route, PsRoute::kCollective);
  EXPECT_EQ(std::get<ParameterServerSync>(s->params[1].sync).route, PsRoute::kDirect);
  EXPECT_EQ(std::get<ParameterServerSync>(s->params[2].sync).route, PsRoute::kCollective);
  const std::string text = SerializeStrategy(*s);
  EXPECT_TRUE(
      absl::StrContains(text, "param b ps placement=0,2 rows=0,3,5 staleness=0 route=direct\n"))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "param c ps placement=h1.0 staleness=0\n")) << text;
  EXPECT_EQ(*ParseStrategy(text), *s);
  EXPECT_STREQ(RouteName(PsRoute::kDirect), "direct");
  EXPECT_STREQ(RouteName(PsRoute::kCollective), "collective");
}

// Servers named by host: parsed, written back the same way, and resolved to ranks against the
// hosts of the ranks; a host or local rank that does not exist names the parameter.
TEST(StrategyTextTest, ServersNamedByHost) {
  absl::StatusOr<Strategy> s = ParseStrategy(
      "version 1\nworld_size 4\nparam a ps placement=h1.1,h0 rows=0,3,5\nparam b ps "
      "placement=h1\n");
  ASSERT_TRUE(s.ok()) << s.status();
  const auto& a = std::get<ParameterServerSync>(s->params[0].sync);
  EXPECT_TRUE(a.placement.empty());
  EXPECT_EQ(a.host_placement, (std::vector<HostRank>{{1, 1}, {0, 0}}));
  EXPECT_EQ(NumShards(a), 2);
  const std::string text = SerializeStrategy(*s);
  EXPECT_TRUE(absl::StrContains(text, "param a ps placement=h1.1,h0.0 rows=0,3,5")) << text;
  EXPECT_EQ(*ParseStrategy(text), *s);
  // Hosts of ranks 0..3: 2 hosts x 2 ranks.
  absl::StatusOr<Strategy> resolved = ResolveHostPlacements(*s, {0, 0, 1, 1});
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(std::get<ParameterServerSync>(resolved->params[0].sync).placement,
            std::vector<int>({3, 0}));
  EXPECT_EQ(std::get<ParameterServerSync>(resolved->params[1].sync).placement,
            std::vector<int>({2}));
  absl::StatusOr<Strategy> one_host = ResolveHostPlacements(*s, {0, 0, 0, 0});
  EXPECT_TRUE(Contains(one_host.status(), "parameter 'a': server h1.1: there are 1 hosts"))
      << one_host.status();
  absl::StatusOr<Strategy> small = ResolveHostPlacements(*s, {0, 0, 0, 1});
  EXPECT_TRUE(Contains(small.status(), "server h1.1: host 1 has 1 ranks")) << small.status();
  EXPECT_TRUE(
      Contains(ParseStrategy("version 1\nworld_size 2\nparam a ps placement=h1.x\n").status(),
               "bad value 'h1.x' for placement"));
}

TEST(StrategyTextTest, ParseErrorsNameTheLine) {
  struct Case {
    std::string text;
    std::string line;
    std::string message;
  };
  const std::string head = "version 1\nworld_size 2\n";
  const std::vector<Case> cases = {
      {"world_size 2\n", "line 1", "first line must be 'version 1'"},
      {"version 2\n", "line 1", "unsupported version '2'"},
      {head + "param a allgather\n", "line 3", "unknown synchronizer 'allgather'"},
      {head + "param a\n", "line 3", "needs a name and a synchronizer"},
      {head + "param a allreduce group=x\n", "line 3", "bad value 'x' for group"},
      {head + "param a allreduce group=-1\n", "line 3", "bad value '-1' for group"},
      {head + "param a allreduce compressor=int8\n", "line 3", "unknown compressor 'int8'"},
      {head + "param a allreduce bucket=1\n", "line 3", "unknown option 'bucket=1'"},
      {head + "param a allreduce topology=ring\n", "line 3", "unknown topology 'ring'"},
      {head + "param a allreduce group=1 group=2\n", "line 3", "given twice"},
      {head + "param a sparse rows=1\n", "line 3", "it takes none"},
      {head + "param a ps\n", "line 3", "ps needs placement"},
      {head + "param a ps placement=0,1 rows=0,4\n", "line 3", "2 boundaries for 2 shards"},
      {head + "param a ps placement=0,1 rows=0,4,4\n", "line 3", "increase strictly"},
      {head + "param a ps placement=0 staleness=-2\n", "line 3", "staleness"},
      {head + "param a ps placement=0 route=tree\n", "line 3", "unknown route 'tree'"},
      {head + "\nparam a sparse\nparam a sparse\n", "line 5", "first on line 4"},
      {head + "param a ps placement=0,2\n", "line 3", "server rank 2"},
      {head + "frobnicate 1\n", "line 3", "unknown directive 'frobnicate'"},
      {head + "param \"a sparse\n", "line 3", "unterminated"},
      {"version 1\nworld_size 0\n", "line 2", "world_size"},
      {"version 1\nname a b\n", "line 2", "'name' takes 1 value"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Strategy> s = ParseStrategy(c.text);
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(s.status(), "strategy " + c.line + ":")) << s.status();
    EXPECT_TRUE(Contains(s.status(), c.message)) << s.status();
  }
  EXPECT_TRUE(Contains(ParseStrategy("version 1\n").status(), "no 'world_size'"));
  EXPECT_TRUE(Contains(ParseStrategy("").status(), "no 'version 1'"));
}

class ValidateStrategyTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(testing::BuildModel(store_).ok()); }
  Strategy Valid() {
    absl::StatusOr<Strategy> s = BuildStrategy("hybrid", store_, 2);
    EXPECT_TRUE(s.ok()) << s.status();
    return *s;
  }
  ParamSync& SyncOf(Strategy& s, const std::string& name) {
    for (ParamStrategy& p : s.params) {
      if (p.param == name) return p.sync;
    }
    ADD_FAILURE() << name;
    return s.params[0].sync;
  }
  core::ParameterStore store_;
};

TEST_F(ValidateStrategyTest, AcceptsEveryBuiltStrategy) {
  for (const std::string& name : StrategyBuilderNames()) {
    for (int world : {1, 2, 3, 8}) {
      absl::StatusOr<Strategy> s = BuildStrategy(name, store_, world, {.partition_min_bytes = 1});
      ASSERT_TRUE(s.ok()) << s.status();
      EXPECT_TRUE(ValidateStrategy(*s, store_).ok())
          << name << " " << world << ": " << ValidateStrategy(*s, store_);
    }
  }
}

TEST_F(ValidateStrategyTest, ErrorsNameTheParameter) {
  Strategy s = Valid();
  s.params.pop_back();
  EXPECT_TRUE(Contains(ValidateStrategy(s, store_), "no entry for parameter 'out/b'"));
  s = Valid();
  s.params.push_back({"ghost", SparseSync{}});
  EXPECT_TRUE(Contains(ValidateStrategy(s, store_), "entry for 'ghost'"));
  s = Valid();
  s.params.push_back(s.params[1]);
  EXPECT_TRUE(Contains(ValidateStrategy(s, store_), "'hidden/W' appears twice"));
  s = Valid();
  SyncOf(s, "embed/E") = AllReduceSync{};
  EXPECT_TRUE(Contains(ValidateStrategy(s, store_), "'embed/E' has a row-sparse gradient"));
  s = Valid();
  SyncOf(s, "out/W") = SparseSync{};
  EXPECT_TRUE(Contains(ValidateStrategy(s, store_), "'out/W' has a dense gradient"));
  s = Valid();
  SyncOf(s, "out/W") = AllReduceSync{0, Compressor::kFp16};
  EXPECT_TRUE(Contains(ValidateStrategy(s, store_), "group 0 mixes compressors"));
  s = Valid();
  SyncOf(s, "out/W") = AllReduceSync{0, Compressor::kNone, AllReduceTopology::kHierarchical};
  EXPECT_TRUE(Contains(ValidateStrategy(s, store_), "group 0 mixes topologies"));
  s = Valid();
  SyncOf(s, "out/W") = ParameterServerSync{{0, 1}, {0, 2, 4}, 0};  // out/W has 5 rows
  EXPECT_TRUE(Contains(ValidateStrategy(s, store_), "'out/W': shard rows end at 4"));
  s = Valid();
  SyncOf(s, "out/W") = ParameterServerSync{{2}, {}, 0};
  EXPECT_TRUE(Contains(ValidateStrategy(s, store_), "server rank 2 is out of range"));
  s = Valid();
  SyncOf(s, "hidden/b") = ParameterServerSync{{0, 1}, {}, 0};  // a vector is one row
  EXPECT_TRUE(Contains(ValidateStrategy(s, store_), "'hidden/b': 2 shards for 1 rows"));
}

TEST(ShardRowSplitsTest, EvenSplitsGiveTheFirstShardsTheExtraRows) {
  EXPECT_EQ(ShardRowSplits(ParameterServerSync{{0, 1, 2}, {}, 0}, 10),
            std::vector<int64_t>({0, 4, 7, 10}));
  EXPECT_EQ(ShardRowSplits(ParameterServerSync{{0}, {}, 0}, 10), std::vector<int64_t>({0, 10}));
  EXPECT_EQ(ShardRowSplits(ParameterServerSync{{0, 1}, {0, 1, 10}, 0}, 10),
            std::vector<int64_t>({0, 1, 10}));
}

}  // namespace
}  // namespace cavs::distributed
