// Batching policies behind their interface: the built-in ones give through PlanOptions::custom
// the plans their names give; a caller's policy plans (its gaps closed); one that puts a vertex
// in its child's round, or gives the wrong count, is an error naming it, the sample and the
// vertex.
#include "scheduler/batching_policy.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/random.h"
#include "scheduler/plan.h"
#include "tests/scheduler/random_graphs.h"
#include "tests/scheduler/serial_policy.h"
#include "vertex/models.h"

namespace cavs::scheduler {
namespace {

using testing::RandomDag;
using testing::RandomTree;

// A policy of a test's: another policy's rounds, each times `stretch` (gaps between rounds),
// or with `flat` every vertex in round 0, or with `short_by` rounds missing at the end.
class Warped final : public BatchingPolicy {
 public:
  Warped(std::shared_ptr<const BatchingPolicy> base, int stretch, bool flat, int short_by)
      : base_(std::move(base)), stretch_(stretch), flat_(flat), short_by_(short_by) {}
  std::string name() const override { return "warped"; }
  std::vector<int32_t> Rounds(const BatchGraphs& batch) const override {
    std::vector<int32_t> r = base_->Rounds(batch);
    for (int32_t& x : r) x = flat_ ? 0 : x * stretch_;
    r.resize(r.size() - short_by_);
    return r;
  }

 private:
  std::shared_ptr<const BatchingPolicy> base_;
  int stretch_;
  bool flat_;
  int short_by_;
};

std::vector<Graph> Batch(core::Rng& rng) {
  std::vector<Graph> gs;
  for (int i = 0; i < 12; ++i)
    gs.push_back(RandomTree(rng, 1 + i * 3, {.vocab = 50, .classes = 5}));
  for (int i = 0; i < 4; ++i)
    gs.push_back(RandomDag(rng, 5 + i * 4, 3, {.vocab = 50, .classes = 5}));
  return gs;
}

absl::StatusOr<vertex::Function> Model() {
  return vertex::models::ChildSumTreeLstm({.vocab = 50, .embed = 4, .hidden = 3, .classes = 5},
                                          /*max_children=*/3);
}

void ExpectSamePlan(const Plan& a, const Plan& b) {
  EXPECT_EQ(a.num_rounds, b.num_rounds);
  EXPECT_EQ(a.round_offsets, b.round_offsets);
  EXPECT_EQ(a.row_of_uid, b.row_of_uid);
  EXPECT_EQ(a.ints, b.ints);
}

TEST(BatchingPolicyTest, BuiltinsBehindTheInterfacePlanAsTheirNames) {
  absl::StatusOr<vertex::Function> f = Model();
  ASSERT_TRUE(f.ok()) << f.status();
  core::Rng rng(5);
  const std::vector<Graph> gs = Batch(rng);
  struct Case {
    PlanOptions named;
    std::shared_ptr<const BatchingPolicy> policy;
  };
  const Case cases[] = {{{Policy::kHeight, 0}, MakeHeightPolicy()},
                        {{Policy::kDepth, 0}, MakeDepthPolicy()},
                        {{Policy::kAgenda, 6}, MakeAgendaPolicy(6)}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.policy->name());
    absl::StatusOr<Plan> named = BuildPlan(*f, gs, c.named);
    PlanOptions custom;
    custom.custom = c.policy;
    absl::StatusOr<Plan> through = BuildPlan(*f, gs, custom);
    ASSERT_TRUE(named.ok()) << named.status();
    ASSERT_TRUE(through.ok()) << through.status();
    ExpectSamePlan(*named, *through);
  }
}

TEST(BatchingPolicyTest, ACallersPolicyPlansWithItsGapsClosed) {
  absl::StatusOr<vertex::Function> f = Model();
  ASSERT_TRUE(f.ok()) << f.status();
  core::Rng rng(6);
  const std::vector<Graph> gs = Batch(rng);
  absl::StatusOr<Plan> height = BuildPlan(*f, gs);
  PlanOptions stretched;
  stretched.custom = std::make_shared<Warped>(MakeHeightPolicy(), 3, false, 0);
  absl::StatusOr<Plan> p = BuildPlan(*f, gs, stretched);
  ASSERT_TRUE(height.ok() && p.ok()) << p.status();
  ExpectSamePlan(*height, *p);

  PlanOptions serial;
  serial.custom = std::make_shared<testing::SerialPolicy>();
  absl::StatusOr<Plan> s = BuildPlan(*f, gs, serial);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->num_rounds, s->num_rows);  // one vertex a round
  for (int r = 0; r < s->num_rounds; ++r) EXPECT_EQ(s->RoundRows(r), 1);
}

TEST(BatchingPolicyTest, BadRoundsAreAnErrorNamingThePolicyAndVertex) {
  absl::StatusOr<vertex::Function> f = Model();
  ASSERT_TRUE(f.ok()) << f.status();
  core::Rng rng(7);
  const std::vector<Graph> gs = Batch(rng);
  PlanOptions flat;
  flat.custom = std::make_shared<Warped>(MakeHeightPolicy(), 1, true, 0);
  absl::StatusOr<Plan> p = BuildPlan(*f, gs, flat);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string m(p.status().message());
  EXPECT_NE(m.find("batching policy 'warped'"), std::string::npos) << m;
  EXPECT_NE(m.find("': sample 1 vertex "), std::string::npos) << m;  // sample 0: one vertex
  EXPECT_NE(m.find("is not after its child"), std::string::npos) << m;

  PlanOptions missing;
  missing.custom = std::make_shared<Warped>(MakeHeightPolicy(), 1, false, 2);
  p = BuildPlan(*f, gs, missing);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(std::string(p.status().message()).find("rounds for"), std::string::npos) << p.status();
}

}  // namespace
}  // namespace cavs::scheduler
