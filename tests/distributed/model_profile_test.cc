#include "distributed/model_profile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "distributed/builders.h"
#include "distributed/strategy.h"

namespace cavs::distributed {
namespace {

constexpr char kProfile[] = R"(# a hand-written profile
version 1
name "tiny model"
batch_per_rank 25
forward_ms 9.5
backward_ms 14
optimizer_ms 2.25
hooks_ms 3.5
overlap_ms 6
overlap_hooks_ms 2.5
strategy hybrid
step_ms 31.25
poll_cost 0.75
poll_cost_per_mb 0.0025
early_strategy ps-lb
early_compute_ratio 1.5
param embedding shape=1000,30 grad=sparse touched=100 dup=0.4 ready_ms=14
param W shape=30,150 ready_ms=13.5   # a matrix
param b shape=150
param table2 shape=500,8 grad=sparse touched=50 union=2:90,8:250
)";

TEST(ModelProfileTest, ParsesEveryField) {
  absl::StatusOr<ModelProfile> p = ParseModelProfile(kProfile, "tiny.txt");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->name, "tiny model");
  EXPECT_EQ(p->batch_per_rank, 25);
  EXPECT_EQ(p->forward_ms, 9.5);
  EXPECT_EQ(p->backward_ms, 14.0);
  EXPECT_EQ(p->optimizer_ms, 2.25);
  EXPECT_EQ(p->hooks_ms, 3.5);
  EXPECT_EQ(p->overlap_ms, 6.0);
  EXPECT_EQ(p->overlap_hooks_ms, 2.5);
  EXPECT_EQ(p->strategy, "hybrid");
  EXPECT_EQ(p->step_ms, 31.25);
  EXPECT_EQ(p->poll_cost, 0.75);
  EXPECT_EQ(p->poll_cost_per_mb, 0.0025);
  EXPECT_EQ(p->early_strategy, "ps-lb");
  EXPECT_EQ(p->early_compute_ratio, 1.5);
  ASSERT_EQ(p->params.size(), 4u);
  const ParamProfile& e = p->params[0];
  EXPECT_EQ(e.name, "embedding");
  EXPECT_TRUE(e.sparse);
  EXPECT_EQ(e.rows(), 1000);
  EXPECT_EQ(e.cols(), 30);
  EXPECT_EQ(e.bytes(), 1000 * 30 * 4);
  EXPECT_EQ(e.touched_rows, 100.0);
  // dup=0.4: a second rank's 100 rows repeat 40 of the first's.
  ASSERT_EQ(e.union_rows.size(), 1u);
  EXPECT_EQ(e.union_rows[0].first, 2);
  EXPECT_DOUBLE_EQ(e.union_rows[0].second, 160.0);
  EXPECT_EQ(*e.ready_ms, 14.0);
  const ParamProfile& b = p->params[2];
  EXPECT_FALSE(b.sparse);
  EXPECT_EQ(b.rows(), 1);
  EXPECT_EQ(b.cols(), 150);
  EXPECT_FALSE(b.ready_ms.has_value());  // at the end of backward
}

TEST(ModelProfileTest, UnionRowsInterpolatesInLogLogAndIsCapped) {
  absl::StatusOr<ModelProfile> p = ParseModelProfile(kProfile, "tiny.txt");
  ASSERT_TRUE(p.ok()) << p.status();
  const ParamProfile& e = p->params[0];  // (1, 100), (2, 160): U(k) = 100 k^log2(1.6)
  EXPECT_DOUBLE_EQ(e.UnionRows(1), 100.0);
  EXPECT_DOUBLE_EQ(e.UnionRows(2), 160.0);
  EXPECT_NEAR(e.UnionRows(4), 256.0, 1e-9);
  EXPECT_NEAR(e.UnionRows(8), 409.6, 1e-9);
  EXPECT_DOUBLE_EQ(e.UnionRows(1 << 20), 1000.0);  // the table
  const ParamProfile& t = p->params[3];            // (1, 50), (2, 90), (8, 250)
  EXPECT_DOUBLE_EQ(t.UnionRows(2), 90.0);
  EXPECT_NEAR(t.UnionRows(4), 90.0 * std::pow(250.0 / 90.0, 0.5), 1e-9);  // halfway in log k
  EXPECT_DOUBLE_EQ(t.UnionRows(8), 250.0);
  // The last segment's power law continued: 250 * (250/90)^(log(16/8) / log(8/2)).
  EXPECT_NEAR(t.UnionRows(16), 250.0 * std::pow(250.0 / 90.0, 0.5), 1e-9);
  EXPECT_DOUBLE_EQ(t.UnionRows(1 << 20), 500.0);
  EXPECT_EQ(p->params[1].UnionRows(4), 0.0);  // dense
  // No overlap given: k ranks touch k times the rows, up to the table.
  ParamProfile plain = e;
  plain.union_rows.clear();
  EXPECT_DOUBLE_EQ(plain.UnionRows(3), 300.0);
  EXPECT_DOUBLE_EQ(plain.UnionRows(64), 1000.0);
}

// A table whose first tenth holds half of one rank's touched rows and a quarter of the union
// of 4 ranks' rows (a vocabulary sorted by frequency: the frequent rows repeat across ranks).
TEST(ModelProfileTest, SpreadPutsTheRowsWhereTheProfileSays) {
  absl::StatusOr<ModelProfile> p = ParseModelProfile(
      "version 1\nforward_ms 1\nbackward_ms 2\n"
      "param e shape=1000,30 grad=sparse touched=100 union=4:300 "
      "spread=100:0.5:0.25,500:0.9:0.75\n",
      "s.txt");
  ASSERT_TRUE(p.ok()) << p.status();
  const ParamProfile& e = p->params[0];
  ASSERT_EQ(e.spread.size(), 2u);
  EXPECT_EQ(e.SpreadRanks(), 4);
  EXPECT_DOUBLE_EQ(e.TouchedIn(0, 100), 50.0);
  EXPECT_DOUBLE_EQ(e.TouchedIn(100, 500), 40.0);
  EXPECT_DOUBLE_EQ(e.TouchedIn(500, 1000), 10.0);
  EXPECT_DOUBLE_EQ(e.TouchedIn(0, 50), 25.0);       // linear between the points
  EXPECT_NEAR(e.TouchedIn(750, 1000), 5.0, 1e-12);  // and up to (rows, 1)
  EXPECT_DOUBLE_EQ(e.TouchedIn(0, 1000), 100.0);
  // The union's fraction: at 4 ranks the spread's, at 1 the touched rows', between them in
  // log(ranks) (2 ranks: half way).
  EXPECT_DOUBLE_EQ(e.UnionIn(4, 0, 100), 300.0 * 0.25);
  EXPECT_DOUBLE_EQ(e.UnionIn(1, 0, 100), 100.0 * 0.5);
  EXPECT_DOUBLE_EQ(e.UnionIn(2, 0, 100), e.UnionRows(2) * 0.375);
  // Past 4 ranks each segment grows along its own power law from 1 to 4 ranks (touched 50, 40,
  // 10; union 75, 150, 75): at 8 ranks by (U_b / T_b)^(1/2). The spread's 0.25 held there
  // would put 130 of U(8) = 520 rows in the first 100.
  const double head = 75 * std::sqrt(1.5), mid = 150 * std::sqrt(3.75), tail = 75 * std::sqrt(7.5);
  EXPECT_NEAR(e.UnionIn(8, 0, 100), e.UnionRows(8) * head / (head + mid + tail), 1e-9);
  EXPECT_NEAR(e.UnionIn(8, 500, 1000), e.UnionRows(8) * tail / (head + mid + tail), 1e-9);
  // A segment never holds more than its rows: at 64 ranks every segment is full.
  for (int k : {5, 8, 16, 64, 1 << 20}) EXPECT_LE(e.UnionIn(k, 0, 100), 100.0 + 1e-9) << k;
  EXPECT_NEAR(e.UnionIn(64, 0, 100), 100.0, 1e-9);
  EXPECT_NEAR(e.UnionIn(64, 100, 500), 400.0, 1e-9);
  for (int k : {1, 2, 3, 4, 5, 16, 64}) {
    EXPECT_NEAR(e.UnionIn(k, 0, 100) + e.UnionIn(k, 100, 777) + e.UnionIn(k, 777, 1000),
                e.UnionRows(k), 1e-9)
        << k;
  }
  // Without a spread, in proportion to the rows.
  ParamProfile even = e;
  even.spread.clear();
  EXPECT_DOUBLE_EQ(even.TouchedIn(0, 250), 25.0);
  EXPECT_DOUBLE_EQ(even.UnionIn(4, 0, 250), 75.0);
  // A profiler's edges: halvings and eighths of the table, ascending, inside it.
  EXPECT_EQ(SpreadEdges(1000),
            (std::vector<int64_t>{1, 3, 7, 15, 31, 62, 125, 250, 375, 500, 625, 750, 875}));
  EXPECT_EQ(SpreadEdges(1), std::vector<int64_t>{});
}

TEST(ModelProfileTest, RoundTripsThroughTheText) {
  absl::StatusOr<ModelProfile> p = ParseModelProfile(kProfile, "tiny.txt");
  ASSERT_TRUE(p.ok()) << p.status();
  p->params[1].ready_ms = 1.0 / 3.0;  // needs every digit
  p->params[3].spread = {{10, 0.1, 1.0 / 3.0}, {250, 0.9, 0.9}};
  const std::string text = SerializeModelProfile(*p);
  absl::StatusOr<ModelProfile> again = ParseModelProfile(text, "again.txt");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << text;
  EXPECT_EQ(*again, *p) << text;
}

TEST(ModelProfileTest, MakesAStoreTheBuildersAndValidationAccept) {
  absl::StatusOr<ModelProfile> p = ParseModelProfile(kProfile, "tiny.txt");
  ASSERT_TRUE(p.ok()) << p.status();
  core::ParameterStore store;
  ASSERT_TRUE(AddProfileParameters(*p, &store).ok());
  ASSERT_EQ(store.size(), 4);
  EXPECT_TRUE(store.parameters()[0]->sparse_grad);
  EXPECT_EQ(store.parameters()[1]->value.shape(), core::Shape({30, 150}));
  for (const std::string& name : StrategyBuilderNames()) {
    absl::StatusOr<Strategy> s = BuildStrategy(name, store, 4);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_TRUE(ValidateStrategy(*s, store).ok()) << name;
  }
}

struct BadCase {
  std::string text;
  std::string error;  // the whole message
};

TEST(ModelProfileTest, ErrorsNameTheFileLineAndField) {
  const std::string head = "version 1\nforward_ms 1\nbackward_ms 2\n";
  const std::vector<BadCase> cases = {
      {"", "p.txt: no 'version 1' line"},
      {"forward_ms 1\n", "p.txt line 1: the first line must be 'version 1'"},
      {"version 2\n", "p.txt line 1: unsupported version '2' (this build reads version 1)"},
      {"version 1\nbackward_ms 2\nparam a shape=2\n", "p.txt: no 'forward_ms' line"},
      {"version 1\nforward_ms 1\nparam a shape=2\n", "p.txt: no 'backward_ms' line"},
      {head, "p.txt: no 'param' line"},
      {head + "forward_ms 3\n", "p.txt line 4: 'forward_ms' given twice (first on line 2)"},
      {head + "forward_ms\n", "p.txt line 4: 'forward_ms' takes 1 value, got 0"},
      {head + "optimizer_ms -1\n",
       "p.txt line 4: field 'optimizer_ms': bad value '-1' (expected a number >= 0)"},
      {head + "optimizer_ms nan\n",
       "p.txt line 4: field 'optimizer_ms': bad value 'nan' (expected a number >= 0)"},
      {head + "hooks_ms -2\n",
       "p.txt line 4: field 'hooks_ms': bad value '-2' (expected a number >= 0)"},
      {head + "hooks_ms 4\nparam a shape=2\n",
       "p.txt line 4: field 'hooks_ms': 4 is more than the compute (forward_ms + backward_ms) "
       "it is part of (3)"},
      {head + "overlap_ms 3.5\nparam a shape=2\n",
       "p.txt line 4: field 'overlap_ms': 3.5 is more than the compute (forward_ms + "
       "backward_ms) it is part of (3)"},
      {head + "hooks_ms 2\noverlap_ms 1\noverlap_hooks_ms 1.5\nparam a shape=2\n",
       "p.txt line 6: field 'overlap_hooks_ms': 1.5 is more than the overlap (overlap_ms) it is "
       "part of (1)"},
      {head + "hooks_ms 0.5\noverlap_ms 2\noverlap_hooks_ms 1\nparam a shape=2\n",
       "p.txt line 6: field 'overlap_hooks_ms': 1 is more than the hooks (hooks_ms) it is part "
       "of (0.5)"},
      {head + "batch_per_rank 2.5\n",
       "p.txt line 4: field 'batch_per_rank': bad value '2.5' (expected an integer in [0, "
       "1099511627776])"},
      {head + "epochs 3\n",
       "p.txt line 4: unknown directive 'epochs' (expected version, name, batch_per_rank, "
       "forward_ms, backward_ms, optimizer_ms, hooks_ms, overlap_ms, overlap_hooks_ms, strategy, "
       "step_ms, poll_cost, poll_cost_per_mb, early_strategy, early_compute_ratio or param)"},
      {head + "poll_cost 21\n",
       "p.txt line 4: field 'poll_cost': 21 is more than 20 (see kMaxPollCost)"},
      {head + "poll_cost_per_mb 0.2\n",
       "p.txt line 4: field 'poll_cost_per_mb': 0.2 is more than 0.1 (see kMaxPollCostPerMb)"},
      {head + "poll_cost -0.1\n",
       "p.txt line 4: field 'poll_cost': bad value '-0.1' (expected a number >= 0)"},
      {head + "early_compute_ratio 0\n",
       "p.txt line 4: field 'early_compute_ratio': a measured ratio must be positive"},
      {head + "early_strategy ps\nparam a shape=2\n",
       "p.txt line 4: field 'early_strategy': needs a 'early_compute_ratio' line too (the early "
       "steps' compute and the builder they ran under go together)"},
      {head + "early_strategy ps\nearly_compute_ratio 1.2\nparam a shape=2\n",
       "p.txt line 4: field 'early_strategy': needs a 'strategy' line (the early steps' compute "
       "is over the profiled strategy's)"},
      {head + "early_strategy soon\n",
       "p.txt line 4: field 'early_strategy': 'soon' is not a strategy builder (allreduce, ps, "
       "ps-lb, partitioned-ps, hybrid, hier-allreduce, hier-hybrid)"},
      {head + "strategy hybrid\nparam a shape=2\n",
       "p.txt line 4: field 'strategy': needs a 'step_ms' line too (the profiled steps' time and "
       "the builder they ran under go together)"},
      {head + "step_ms 4\nparam a shape=2\n",
       "p.txt line 4: field 'step_ms': needs a 'strategy' line too (the profiled steps' time and "
       "the builder they ran under go together)"},
      {head + "strategy hybrid\nstep_ms 0\nparam a shape=2\n",
       "p.txt line 5: field 'step_ms': a measured step must take some time"},
      {head + "strategy fastest\n",
       "p.txt line 4: field 'strategy': 'fastest' is not a strategy builder (allreduce, ps, "
       "ps-lb, partitioned-ps, hybrid, hier-allreduce, hier-hybrid)"},
      {head + "param\n", "p.txt line 4: 'param' needs a name"},
      {head + "param a\n", "p.txt line 4: field 'shape': missing"},
      {head + "param a shape=3,x\n",
       "p.txt line 4: field 'shape': bad dimension 'x' in '3,x' (expected positive integers)"},
      {head + "param a shape=0\n",
       "p.txt line 4: field 'shape': bad dimension '0' in '0' (expected positive integers)"},
      {head + "param a shape=2 rows=3\n",
       "p.txt line 4: unknown field 'rows=3' (expected shape=, grad=, touched=, dup=, union=, "
       "spread=, ready_ms=)"},
      {head + "param a shape=2 shape=3\n", "p.txt line 4: field 'shape' given twice"},
      {head + "param a shape=2 grad=row\n",
       "p.txt line 4: field 'grad': bad value 'row' (expected dense or sparse)"},
      {head + "param a shape=2\nparam a shape=3\n",
       "p.txt line 5: parameter 'a' given twice (first on line 4)"},
      {head + "param a shape=10,2 touched=3\n",
       "p.txt line 4: field 'touched': only a row-sparse parameter (grad=sparse) touches rows"},
      {head + "param a shape=10,2 grad=sparse\n",
       "p.txt line 4: field 'touched': missing for grad=sparse"},
      {head + "param a shape=10,2 grad=sparse touched=11\n",
       "p.txt line 4: field 'touched': 11 rows of a table of 10"},
      {head + "param a shape=10,2 grad=sparse touched=4 dup=1.5\n",
       "p.txt line 4: field 'dup': bad value '1.5' (expected a number in [0, 1])"},
      {head + "param a shape=10,2 grad=sparse touched=4 dup=0.5 union=2:6\n",
       "p.txt line 4: field 'dup': give dup= or union=, not both"},
      {head + "param a shape=10,2 grad=sparse touched=4 union=1:4\n",
       "p.txt line 4: field 'union': bad point '1:4' (expected ranks:rows with ranks >= 2, e.g. "
       "2:310,4:560)"},
      {head + "param a shape=10,2 grad=sparse touched=4 union=4:8,2:6\n",
       "p.txt line 4: field 'union': point '2:6' after 4:8 (ranks must increase and rows must "
       "not decrease)"},
      {head + "param a shape=10,2 grad=sparse touched=4 union=2:9\n",
       "p.txt line 4: field 'union': 2 ranks touch 9 rows: expected at least touched (4) and at "
       "most min(table rows 10, 2 x touched)"},
      {head + "param a shape=10,2 spread=5:0.5:0.5\n",
       "p.txt line 4: field 'spread': only a row-sparse parameter (grad=sparse) touches rows"},
      {head + "param a shape=10,2 grad=sparse touched=4 spread=5:0.5\n",
       "p.txt line 4: field 'spread': bad point '5:0.5' (expected row:touched:union with 0 < row "
       "< 10 and fractions in [0, 1], e.g. 100:0.6:0.4)"},
      {head + "param a shape=10,2 grad=sparse touched=4 spread=10:0.5:0.5\n",
       "p.txt line 4: field 'spread': bad point '10:0.5:0.5' (expected row:touched:union with 0 "
       "< row < 10 and fractions in [0, 1], e.g. 100:0.6:0.4)"},
      {head + "param a shape=10,2 grad=sparse touched=4 spread=2:0.5:1.5\n",
       "p.txt line 4: field 'spread': bad point '2:0.5:1.5' (expected row:touched:union with 0 "
       "< row < 10 and fractions in [0, 1], e.g. 100:0.6:0.4)"},
      {head + "param a shape=10,2 grad=sparse touched=4 spread=2:0.5:0.4,3:0.4:0.5\n",
       "p.txt line 4: field 'spread': point '3:0.4:0.5' after 2:0.5:0.4 (rows must increase and "
       "fractions must not decrease)"},
      {head + "param a shape=10,2 grad=sparse touched=4 spread=3:0.5:0.4,3:0.6:0.5\n",
       "p.txt line 4: field 'spread': point '3:0.6:0.5' after 3:0.5:0.4 (rows must increase and "
       "fractions must not decrease)"},
      {head + "param a shape=2 ready_ms=3\n",
       "p.txt line 4: field 'ready_ms': 3 is after the end of backward (backward_ms 2 on line 3)"},
      {head + "param \"a\n", "p.txt line 4: unterminated quoted name"},
  };
  for (const BadCase& c : cases) {
    absl::StatusOr<ModelProfile> p = ParseModelProfile(c.text, "p.txt");
    ASSERT_FALSE(p.ok()) << c.text;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_EQ(p.status().message(), c.error) << c.text;
  }
}

}  // namespace
}  // namespace cavs::distributed
