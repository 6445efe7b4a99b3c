#include "distributed/strategy_search.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "distributed/builders.h"

namespace cavs::distributed {
namespace {

constexpr double kGbit = 1e9 / 8;

// The SST Tree-LSTM's parameters (vertex/models.h) with a CPU-like profile.
ModelProfile TreeLstm() {
  ModelProfile p;
  p.name = "tree-lstm";
  p.batch_per_rank = 25;
  p.forward_ms = 9;
  p.backward_ms = 14;
  p.optimizer_ms = 1.4;
  auto add = [&](const char* name, std::vector<int64_t> shape, double ready) {
    ParamProfile param;
    param.name = name;
    param.shape = std::move(shape);
    param.ready_ms = ready;
    p.params.push_back(param);
  };
  add("embedding", {21701, 300}, 14);
  p.params[0].sparse = true;
  p.params[0].touched_rows = 287;
  p.params[0].union_rows = {{2, 509}, {4, 891}};
  add("W", {300, 750}, 13);
  add("U", {300, 750}, 12.5);
  add("b", {750}, 12.5);
  add("out_W", {150, 5}, 0.2);
  add("out_b", {5}, 0.2);
  return p;
}

// A dense-heavy model: one large output layer and many small tensors.
ModelProfile Dense() {
  ModelProfile p;
  p.name = "dense";
  p.forward_ms = 2;
  p.backward_ms = 4;
  for (int i = 0; i < 12; ++i) {
    ParamProfile param;
    param.name = "small" + std::to_string(i);
    param.shape = {64, 64};
    param.ready_ms = 4.0 - i * 0.3;
    p.params.push_back(param);
  }
  ParamProfile out;
  out.name = "out";
  out.shape = {512, 10000};
  out.ready_ms = 0.1;
  p.params.push_back(out);
  return p;
}

ClusterSpec Cluster(std::vector<std::pair<int, double>> hosts) {
  ClusterSpec c;
  c.name = "test";
  for (size_t i = 0; i < hosts.size(); ++i) {
    c.hosts.push_back({"h" + std::to_string(i), hosts[i].first, hosts[i].second * kGbit});
  }
  c.inter_latency = 50e-6;
  c.message_overhead = 20e-6;
  c.duplex = 0.5;
  c.efficiency = 0.95;
  return c;
}

std::vector<ClusterSpec> Clusters() {
  std::vector<ClusterSpec> out = {Cluster({{1, 1}, {1, 1}, {1, 1}, {1, 1}}),
                                  Cluster({{2, 1}, {2, 0.25}}),
                                  Cluster({{4, 10}, {4, 10}, {2, 1}})};
  out[1].algorithms = {AllReduceAlgorithm::kRecursiveDoubling, ReduceAlgorithm::kBinomial,
                       BroadcastAlgorithm::kLibnbc, AllGatherAlgorithm::kLinear};
  return out;
}

TEST(StrategySearchTest, ResultsAreValidRankedAndRoundTrip) {
  for (const ModelProfile& profile : {TreeLstm(), Dense()}) {
    core::ParameterStore store;
    ASSERT_TRUE(AddProfileParameters(profile, &store).ok());
    for (const ClusterSpec& cluster : Clusters()) {
      absl::StatusOr<SearchReport> r = SearchStrategies(profile, cluster, {.top_k = 6});
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_EQ(r->best.size(), 6u);
      EXPECT_GE(r->evaluated, 6);
      for (size_t i = 0; i < r->best.size(); ++i) {
        const Strategy& s = r->best[i].strategy;
        EXPECT_EQ(s.name, "auto");
        EXPECT_EQ(s.world_size, cluster.world_size());
        EXPECT_TRUE(ValidateStrategy(s, store).ok()) << ValidateStrategy(s, store);
        absl::StatusOr<Strategy> again = ParseStrategy(SerializeStrategy(s));
        ASSERT_TRUE(again.ok()) << again.status();
        EXPECT_EQ(*again, s);
        // The prediction is the cost model's for that strategy.
        absl::StatusOr<Prediction> p = PredictStepTime(s, profile, cluster);
        ASSERT_TRUE(p.ok()) << p.status();
        EXPECT_EQ(p->step_s, r->best[i].prediction.step_s);
        if (i > 0) {
          // Ranked by the step to the microsecond (then fewer units, tree shards, the text).
          EXPECT_LE(std::round(r->best[i - 1].prediction.step_s * 1e6),
                    std::round(r->best[i].prediction.step_s * 1e6));
          EXPECT_NE(SerializeStrategy(r->best[i - 1].strategy), SerializeStrategy(s));
        }
        for (const ParamStrategy& e : s.params) {  // no compression unless allowed
          const auto* ar = std::get_if<AllReduceSync>(&e.sync);
          EXPECT_TRUE(ar == nullptr || ar->compressor == Compressor::kNone);
        }
      }
    }
  }
}

// Ties (the same step to the microsecond) go to fewer units, then to fewer PS shards on the
// collective route: on 2 hosts x 1 rank a one-server PS moves the same bytes on either route
// (one message each way), and with one parameter nothing runs beside a one-server shard's
// stages on the trees, so each such collective-route strategy has a direct twin of the same
// step and units, ranked before it.
TEST(StrategySearchTest, TiesGoToFewerUnitsThenTheDirectRoute) {
  ModelProfile profile = Dense();
  profile.params.erase(profile.params.begin(), profile.params.end() - 1);  // "out" alone
  const ClusterSpec cluster = Cluster({{1, 1}, {1, 1}});
  absl::StatusOr<SearchReport> r = SearchStrategies(profile, cluster, {.top_k = 1000});
  ASSERT_TRUE(r.ok()) << r.status();
  auto tree_shards = [](const Strategy& s) {
    size_t n = 0;
    for (const ParamStrategy& e : s.params) {
      const auto* ps = std::get_if<ParameterServerSync>(&e.sync);
      if (ps != nullptr && ps->route == PsRoute::kCollective) n += ps->placement.size();
    }
    return n;
  };
  int ties = 0;
  for (size_t i = 1; i < r->best.size(); ++i) {
    const SearchResult& a = r->best[i - 1];
    const SearchResult& b = r->best[i];
    if (std::round(a.prediction.step_s * 1e6) != std::round(b.prediction.step_s * 1e6)) continue;
    EXPECT_LE(a.prediction.units.size(), b.prediction.units.size()) << i;
    if (a.prediction.units.size() != b.prediction.units.size()) continue;
    EXPECT_LE(tree_shards(a.strategy), tree_shards(b.strategy)) << i;
    ties += tree_shards(a.strategy) < tree_shards(b.strategy);
  }
  EXPECT_GT(ties, 0);
}

// Costing against bounds changes no result: with a top_k larger than every strategy met, no
// strategy is ever above the ranking's bound, so every one is costed in full; the first few of
// that ranking are the small top_k's, predictions and all, from the same strategies met. On the
// larger clusters the small search did stop some predictions at a bound.
TEST(StrategySearchTest, BoundedCostsChangeNoResult) {
  std::vector<ClusterSpec> clusters = Clusters();
  clusters.push_back(ScaleCluster(Cluster({{1, 1}, {1, 0.25}}), 16, 2));
  int64_t bounded = 0;
  for (const ModelProfile& profile : {TreeLstm(), Dense()}) {
    for (const ClusterSpec& cluster : clusters) {
      absl::StatusOr<SearchReport> few = SearchStrategies(profile, cluster, {.top_k = 3});
      absl::StatusOr<SearchReport> all = SearchStrategies(profile, cluster, {.top_k = 100000});
      ASSERT_TRUE(few.ok() && all.ok());
      ASSERT_LT(all->evaluated, 100000);
      EXPECT_EQ(all->bounded, 0);
      EXPECT_EQ(few->evaluated, all->evaluated) << cluster.name;
      bounded += few->bounded;
      ASSERT_EQ(few->best.size(), 3u);
      for (size_t i = 0; i < few->best.size(); ++i) {
        EXPECT_EQ(few->best[i].strategy, all->best[i].strategy) << cluster.name << " " << i;
        EXPECT_EQ(few->best[i].prediction.step_s, all->best[i].prediction.step_s);
        EXPECT_FALSE(few->best[i].prediction.lower_bound);
      }
    }
  }
  EXPECT_GT(bounded, 0);
}

TEST(StrategySearchTest, IsDeterministic) {
  const ModelProfile profile = TreeLstm();
  for (const ClusterSpec& cluster : Clusters()) {
    absl::StatusOr<SearchReport> a = SearchStrategies(profile, cluster, {.top_k = 5});
    absl::StatusOr<SearchReport> b = SearchStrategies(profile, cluster, {.top_k = 5});
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->evaluated, b->evaluated);
    ASSERT_EQ(a->best.size(), b->best.size());
    for (size_t i = 0; i < a->best.size(); ++i) {
      EXPECT_EQ(a->best[i].strategy, b->best[i].strategy);
      EXPECT_EQ(a->best[i].prediction.step_s, b->best[i].prediction.step_s);
    }
  }
}

// Seeded with the builders' strategies, the best is never predicted slower than any of them.
TEST(StrategySearchTest, NeverPredictedSlowerThanASeed) {
  for (const ModelProfile& profile : {TreeLstm(), Dense()}) {
    core::ParameterStore store;
    ASSERT_TRUE(AddProfileParameters(profile, &store).ok());
    for (const ClusterSpec& cluster : Clusters()) {
      SearchOptions options;
      for (const std::string& name : StrategyBuilderNames()) {
        absl::StatusOr<Strategy> s = BuildStrategy(name, store, cluster.world_size());
        ASSERT_TRUE(s.ok());
        options.seeds.push_back(*s);
      }
      absl::StatusOr<SearchReport> r = SearchStrategies(profile, cluster, options);
      ASSERT_TRUE(r.ok()) << r.status();
      for (const Strategy& seed : options.seeds) {
        absl::StatusOr<Prediction> p = PredictStepTime(seed, profile, cluster);
        ASSERT_TRUE(p.ok());
        EXPECT_LE(r->best[0].prediction.step_s, p->step_s) << seed.name;
      }
    }
  }
  SearchOptions bad;
  bad.seeds.push_back(Strategy{"broken", 3, {}});
  EXPECT_FALSE(SearchStrategies(TreeLstm(), Clusters()[0], bad).ok());
}

// On a slow link with a large dense layer, compression pays, but only where it is allowed;
// the row-sparse table never goes dense either way.
TEST(StrategySearchTest, CompressesOnlyWhenAllowed) {
  ModelProfile profile = Dense();
  ParamProfile table;
  table.name = "table";
  table.shape = {10000, 512};
  table.sparse = true;
  table.touched_rows = 500;
  profile.params.insert(profile.params.begin(), table);
  const ClusterSpec cluster = Cluster({{1, 1}, {1, 1}});
  absl::StatusOr<SearchReport> plain = SearchStrategies(profile, cluster);
  absl::StatusOr<SearchReport> fp16 =
      SearchStrategies(profile, cluster, {.allow_compression = true});
  ASSERT_TRUE(plain.ok() && fp16.ok());
  auto compressed = [](const Strategy& s) {
    const auto* ar = std::get_if<AllReduceSync>(&s.Find("out")->sync);
    return ar != nullptr && ar->compressor == Compressor::kFp16;
  };
  EXPECT_FALSE(compressed(plain->best[0].strategy));
  EXPECT_TRUE(compressed(fp16->best[0].strategy)) << SerializeStrategy(fp16->best[0].strategy);
  EXPECT_LT(fp16->best[0].prediction.step_s, plain->best[0].prediction.step_s);
  for (const SearchReport* r : {&*plain, &*fp16}) {
    for (const SearchResult& result : r->best) {
      EXPECT_FALSE(std::holds_alternative<AllReduceSync>(result.strategy.Find("table")->sync));
    }
  }
}

// A parameter server's rows follow its servers' bandwidth on an uneven cluster; tiny tensors
// stay in allreduce buckets.
TEST(StrategySearchTest, SplitsRowsByBandwidthAndFusesTinyTensors) {
  const ModelProfile profile = Dense();
  const ClusterSpec cluster = Cluster({{1, 4}, {1, 1}});
  absl::StatusOr<SearchReport> r = SearchStrategies(profile, cluster, {.top_k = 100});
  ASSERT_TRUE(r.ok()) << r.status();
  bool saw_uneven = false;
  for (const SearchResult& result : r->best) {
    for (int i = 0; i < 12; ++i) {  // 16 KB each: under tiny_bytes
      EXPECT_TRUE(std::holds_alternative<AllReduceSync>(
          result.strategy.Find("small" + std::to_string(i))->sync));
    }
    const auto* ps = std::get_if<ParameterServerSync>(&result.strategy.Find("out")->sync);
    if (ps == nullptr || ps->placement.size() != 2) continue;
    // 512 rows in proportion 4 : 1, the faster host's server first.
    EXPECT_EQ(ps->placement, (std::vector<int>{0, 1}));
    EXPECT_EQ(ps->row_splits, (std::vector<int64_t>{0, 410, 512}));
    saw_uneven = true;
  }
  EXPECT_TRUE(saw_uneven);
}

// A table whose touched rows crowd into its first rows (a vocabulary sorted by frequency) is
// split for its servers by traffic, not by rows: each shard brings its server the same touched
// and union rows (to within a row's), so the first shard holds few rows.
TEST(StrategySearchTest, SplitsASkewedTableByItsTraffic) {
  ModelProfile profile = TreeLstm();
  ParamProfile& e = profile.params[0];
  e.spread = {{20, 0.3, 0.15}, {200, 0.6, 0.4}, {2000, 0.85, 0.75}};
  const ClusterSpec cluster = Cluster({{1, 1}, {1, 1}, {1, 1}, {1, 1}});
  absl::StatusOr<SearchReport> r = SearchStrategies(profile, cluster, {.top_k = 1000});
  ASSERT_TRUE(r.ok()) << r.status();
  const int world = cluster.world_size();
  auto traffic = [&](int64_t a, int64_t b) { return e.TouchedIn(a, b) + e.UnionIn(world, a, b); };
  int saw = 0;
  for (const SearchResult& result : r->best) {
    const auto* ps = std::get_if<ParameterServerSync>(&result.strategy.Find("embedding")->sync);
    if (ps == nullptr || ps->placement.size() < 2) continue;
    const std::vector<int64_t>& splits = ps->row_splits;
    const int n = static_cast<int>(ps->placement.size());
    ASSERT_EQ(splits.size(), static_cast<size_t>(n + 1)) << SerializeStrategy(result.strategy);
    EXPECT_LT(splits[1], e.rows() / n / 4);
    const double share = traffic(0, e.rows()) / n;
    for (int s = 0; s < n; ++s) {
      // A shard's boundary is the first row where the traffic below it reaches its share.
      EXPECT_GE(traffic(0, splits[s + 1]), share * (s + 1) * (1 - 1e-12)) << s;
      if (s + 1 < n) EXPECT_LT(traffic(0, splits[s + 1] - 1), share * (s + 1)) << s;
    }
    ++saw;
  }
  EXPECT_GT(saw, 0);
}

// One slow host among four under libnbc's binomial trees: the best strategy keeps the large
// layer off the trees (the direct route), and beats every builder in the model, since a ring
// or Rabenseifner allreduce puts 1.5 B through the slow link and the trees route other ranks'
// shards through it.
TEST(StrategySearchTest, TakesTheDirectRouteAroundASlowHost) {
  const ModelProfile profile = Dense();
  ClusterSpec cluster = Cluster({{1, 0.1}, {1, 1}, {1, 1}, {1, 1}});
  cluster.algorithms = {AllReduceAlgorithm::kRabenseifner, ReduceAlgorithm::kBinomial,
                        BroadcastAlgorithm::kBinomial, AllGatherAlgorithm::kLinear};
  core::ParameterStore store;
  ASSERT_TRUE(AddProfileParameters(profile, &store).ok());
  std::vector<Strategy> builders;
  for (const std::string& name : StrategyBuilderNames()) {
    absl::StatusOr<Strategy> s = BuildStrategy(name, store, cluster.world_size());
    ASSERT_TRUE(s.ok()) << s.status();
    builders.push_back(*s);
  }
  absl::StatusOr<SearchReport> r = SearchStrategies(profile, cluster, {.top_k = 1});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->best.size(), 1u);
  const auto* ps = std::get_if<ParameterServerSync>(&r->best[0].strategy.Find("out")->sync);
  ASSERT_NE(ps, nullptr) << SerializeStrategy(r->best[0].strategy);
  EXPECT_EQ(ps->route, PsRoute::kDirect);
  for (const Strategy& b : builders) {
    absl::StatusOr<Prediction> p = PredictStepTime(b, profile, cluster);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_LT(r->best[0].prediction.step_s * 1.2, p->step_s) << b.name;
  }
}

TEST(StrategySearchTest, RejectsBadOptions) {
  EXPECT_FALSE(SearchStrategies(TreeLstm(), Clusters()[0], {.top_k = 0}).ok());
  SearchOptions no_caps;
  no_caps.bucket_bytes.clear();
  EXPECT_FALSE(SearchStrategies(TreeLstm(), Clusters()[0], no_caps).ok());
  EXPECT_FALSE(SearchStrategies(ModelProfile{}, Clusters()[0]).ok());
}

}  // namespace
}  // namespace cavs::distributed
