// Engine::RunJoining: graphs that join a running inference batch between its rounds get the
// results the serial reference gives them, and those a batch of their own gives (bit for bit
// with RunOptions::batch_invariant where the CPU has the packed GEMM); the running batch's
// graphs keep theirs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/random.h"
#include "ops/cpu/cpu_packed_gemm.h"
#include "scheduler/engine.h"
#include "scheduler/engine_compile.h"
#include "scheduler/reference_executor.h"
#include "tests/scheduler/engine_test_util.h"
#include "tests/scheduler/random_graphs.h"
#include "tests/scheduler/test_functions.h"
#include "vertex/models.h"

namespace cavs::scheduler {
namespace {

using testing::Cell;
using testing::Chains;
using testing::kTolerance;
using testing::RandomDag;
using testing::RandomTree;
using testing::RelErr;
using testing::Trees;

std::vector<Graph> Dags(core::Rng& rng, int count, int max_vertices, int max_children,
                        int features) {
  std::vector<Graph> gs;
  for (int i = 0; i < count; ++i) {
    Graph g = RandomDag(rng, 1 + static_cast<int>(rng.UniformInt(max_vertices)), max_children,
                        {.vocab = 50, .classes = 5});
    g.feature_dim = features;
    for (int j = 0; j < features * g.num_vertices(); ++j)
      g.features.push_back(rng.Uniform() - 0.5f);
    gs.push_back(std::move(g));
  }
  return gs;
}

RunOptions Inference(bool folded) {
  RunOptions o;
  o.training = false;
  o.backward = false;
  o.keep_outputs = true;
  o.folded_projections = folded;
  o.batch_invariant = true;
  return o;
}

struct Case {
  std::string what;
  absl::StatusOr<vertex::Function> f;
  std::vector<Graph> first;
  std::map<int, std::vector<Graph>> joins;  // after this many rounds: these graphs join
};

// Runs `cs` joining, then checks every graph against the reference and against a run of its
// own, and that the running batch's graphs got what a run of their own gives them.
void ExpectJoinedRunsMatch(Case& cs, bool folded) {
  SCOPED_TRACE(cs.what + (folded ? ", folded" : ""));
  ASSERT_TRUE(cs.f.ok()) << cs.f.status();
  core::ParameterStore store(7, core::Device::Cpu());
  EngineOptions eo;
  eo.poison_buffers = true;  // a row the grown batch reads but nobody wrote turns NaN
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(&*cs.f, &store, eo);
  ASSERT_TRUE(engine.ok()) << engine.status();
  if (folded) {
    if ((*engine)->foldable_projections() == 0) return;
    ASSERT_TRUE((*engine)->FoldInputProjections().ok());
  }
  const RunOptions ro = Inference(folded);
  absl::StatusOr<Plan> plan = (*engine)->PlanBatch(cs.first);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<Graph> order = cs.first;  // the graphs in the order their results come
  int asked = 0, joins = 0;
  std::vector<int> rounds_seen;
  absl::StatusOr<RunResult> got =
      (*engine)->RunJoining(cs.first, *plan, ro, [&](const JoinPoint& at) -> std::vector<Graph> {
        ++asked;
        EXPECT_GT(at.rounds_done, 0);
        EXPECT_LT(at.rounds_done, at.rounds);
        auto it = cs.joins.find(at.rounds_done);
        if (it == cs.joins.end() || it->second.empty()) return {};
        ++joins;
        order.insert(order.end(), it->second.begin(), it->second.end());
        return it->second;
      });
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*engine)->stats().joins, joins);
  EXPECT_GE(joins, 1) << "no graph joined: the case tests nothing";
  EXPECT_EQ((*engine)->stats().rounds, asked + 1);
  ASSERT_EQ(got->outputs.size(), order.size());
  absl::StatusOr<ReferenceResult> want =
      RunReference(*cs.f, order, SnapshotParameters(*cs.f, store), ro);
  ASSERT_TRUE(want.ok()) << want.status();
  const bool bitwise = ops::cpu::PackedGemmBytes(8, 8) > 0;
  for (size_t g = 0; g < order.size(); ++g) {
    SCOPED_TRACE(absl::StrCat("graph ", g, g < cs.first.size() ? " (running)" : " (joined)"));
    EXPECT_LT(RelErr(got->outputs[g], want->run.outputs[g]), kTolerance);
    absl::StatusOr<RunResult> alone = (*engine)->Run({order[g]}, ro);
    ASSERT_TRUE(alone.ok()) << alone.status();
    if (bitwise && cs.what.find("no bits") == std::string::npos) {
      EXPECT_EQ(got->outputs[g], alone->outputs[0]);
      EXPECT_EQ(got->predictions[g], alone->predictions[0]);
    } else {
      EXPECT_LT(RelErr(got->outputs[g], alone->outputs[0]), kTolerance);
    }
  }
}

TEST(EngineJoinTest, JoinedTreesChainsAndDagsGetTheirOwnResults) {
  core::Rng rng(11);
  std::vector<Case> cases;
  const vertex::models::CellConfig c = Cell();
  // Joins early and late, a tree higher than the rounds left (the batch grows), and several.
  auto tree_joins = [&rng]() {
    std::map<int, std::vector<Graph>> j;
    j[1] = Trees(rng, 3, 6);
    j[2] = {RandomTree(rng, 40, {.vocab = 50, .classes = 5})};
    j[4] = Trees(rng, 2, 4);
    return j;
  };
  cases.push_back({"binary Tree-LSTM", vertex::models::BinaryTreeLstm(c), Trees(rng, 6, 12, true),
                   tree_joins()});
  cases.push_back({"Tree-FC", vertex::models::TreeFc(c), Trees(rng, 5, 12, true), tree_joins()});
  cases.push_back({"Tree-GRU", vertex::models::TreeGru(c), Trees(rng, 5, 12, true), tree_joins()});
  cases.push_back({"child-sum Tree-LSTM", vertex::models::ChildSumTreeLstm(c, 2),
                   Trees(rng, 5, 12, true), tree_joins()});
  std::map<int, std::vector<Graph>> chain_joins;
  chain_joins[1] = Chains(rng, 2, 5);
  chain_joins[3] = Chains(rng, 2, 20);
  cases.push_back({"LSTM", vertex::models::Lstm(c), Chains(rng, 4, 9), chain_joins});
  cases.push_back({"GRU", vertex::models::Gru(c), Chains(rng, 4, 9), chain_joins});
  // DAGs with shared children (gathers, not pushes), tokens on inner vertices, pulls and every
  // reduction; sums computed in place.
  std::map<int, std::vector<Graph>> dag_joins;
  dag_joins[1] = Dags(rng, 3, 12, 4, 3);
  dag_joins[2] = Dags(rng, 2, 25, 4, 3);
  cases.push_back({"every op on DAGs", testing::EveryOp(5), Dags(rng, 6, 20, 4, 3), dag_joins});
  std::map<int, std::vector<Graph>> sum_joins;
  sum_joins[1] = Dags(rng, 3, 12, 2, 0);
  sum_joins[3] = Dags(rng, 2, 25, 2, 0);
  // Its sums' rows are not batch invariant in Run either (a row's terms accumulate in an order
  // that depends on which rows earlier terms wrote): compared within rounding, "no bits".
  cases.push_back(
      {"GEMM sums on DAGs (no bits)", testing::GemmSums(5), Dags(rng, 6, 20, 2, 0), sum_joins});
  for (int which = 0; which < 4; ++which) {
    std::map<int, std::vector<Graph>> j;
    j[2] = Chains(rng, 3, 12);
    cases.push_back({absl::StrCat("embedding read besides a fold ", which),
                     testing::EmbedReadBesidesAFold(which, 5, which % 2 == 1), Chains(rng, 5, 12),
                     j});
  }
  for (Case& cs : cases) {
    for (bool folded : {false, true}) ExpectJoinedRunsMatch(cs, folded);
  }
}

TEST(EngineJoinTest, AGraphJoinsAfterEveryRound) {
  core::Rng rng(12);
  Case cs{"one tree a round", vertex::models::BinaryTreeLstm(Cell()), {}, {}};
  cs.first = {RandomTree(rng, 60, {.vocab = 50, .classes = 5})};
  for (int r = 1; r < 30; ++r) cs.joins[r] = Trees(rng, 1, 8);
  ExpectJoinedRunsMatch(cs, /*folded=*/true);
}

TEST(EngineJoinTest, WithoutJoinsItIsRun) {
  core::Rng rng(13);
  absl::StatusOr<vertex::Function> f = vertex::models::BinaryTreeLstm(Cell());
  ASSERT_TRUE(f.ok());
  core::ParameterStore store(7, core::Device::Cpu());
  auto engine = Engine::Create(&*f, &store);
  ASSERT_TRUE(engine.ok());
  const std::vector<Graph> trees = Trees(rng, 20, 15);
  const RunOptions ro = Inference(false);
  absl::StatusOr<RunResult> want = (*engine)->Run(trees, ro);
  ASSERT_TRUE(want.ok());
  absl::StatusOr<Plan> plan = (*engine)->PlanBatch(trees);
  ASSERT_TRUE(plan.ok());
  int asked = 0;
  absl::StatusOr<RunResult> got =
      (*engine)->RunJoining(trees, *plan, ro, [&](const JoinPoint&) -> std::vector<Graph> {
        ++asked;
        return {};
      });
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(asked, plan->num_rounds - 1);
  EXPECT_EQ((*engine)->stats().joins, 0);
  EXPECT_EQ(got->outputs, want->outputs);
  EXPECT_EQ(got->predictions, want->predictions);
  EXPECT_EQ(got->correct, want->correct);
}

TEST(EngineJoinTest, RefusesWhatItCannotJoin) {
  core::Rng rng(14);
  absl::StatusOr<vertex::Function> f = vertex::models::BinaryTreeLstm(Cell());
  ASSERT_TRUE(f.ok());
  core::ParameterStore store(7, core::Device::Cpu());
  auto engine = Engine::Create(&*f, &store);
  ASSERT_TRUE(engine.ok());
  const std::vector<Graph> trees = Trees(rng, 4, 15);
  absl::StatusOr<Plan> plan = (*engine)->PlanBatch(trees);
  ASSERT_TRUE(plan.ok());
  auto none = [](const JoinPoint&) { return std::vector<Graph>(); };
  RunOptions training = Inference(false);
  training.training = true;
  training.backward = true;
  absl::StatusOr<RunResult> r = (*engine)->RunJoining(trees, *plan, training, none);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  // A joining graph with a token past the vocabulary: the error names the round and the vertex.
  Graph bad = RandomTree(rng, 3, {.vocab = 50, .classes = 5});
  bad.tokens[0] = 500;
  r = (*engine)->RunJoining(trees, *plan, Inference(false),
                            [&](const JoinPoint&) { return std::vector<Graph>{bad}; });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find("joining after round 1"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("vertex 0"), std::string::npos) << r.status();
  // Another policy than height.
  EngineOptions depth;
  depth.plan.policy = Policy::kDepth;
  core::ParameterStore store2(7, core::Device::Cpu());
  auto by_depth = Engine::Create(&*f, &store2, depth);
  ASSERT_TRUE(by_depth.ok());
  absl::StatusOr<Plan> depth_plan = (*by_depth)->PlanBatch(trees);
  ASSERT_TRUE(depth_plan.ok());
  r = (*by_depth)->RunJoining(trees, *depth_plan, Inference(false), none);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  // That policy's plan handed to a height engine: an error, not a wrong join.
  std::vector<Graph> uneven = {RandomTree(rng, 9, {.vocab = 50, .classes = 5}), Graph::Chain(1)};
  uneven[1].tokens = {3};
  uneven[1].labels = {1};
  absl::StatusOr<Plan> uneven_depth_plan = (*by_depth)->PlanBatch(uneven);
  ASSERT_TRUE(uneven_depth_plan.ok()) << uneven_depth_plan.status();
  r = (*engine)->RunJoining(uneven, *uneven_depth_plan, Inference(false), none);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  // A sum computed in place with terms before and after the rounds (x S + h O + b as the
  // logits): refused, as the grown batch would start the rows that ran without x S.
  absl::StatusOr<vertex::Function> across = vertex::Define("across", [](vertex::Vertex& v) {
    vertex::Expr x = v.embed("emb", 50, 4);
    vertex::State c0 = v.gather(0);
    vertex::Expr h = vertex::Tanh(vertex::MatMul(c0["h"], v.param("U", {6, 6})) +
                                  vertex::MatMul(x, v.param("W", {4, 6})));
    v.scatter({{"h", h}});
    v.push(vertex::MatMul(h, v.param("out", {6, 5})) + vertex::MatMul(x, v.param("S", {4, 5})) +
           v.param("b", {5}));
  });
  ASSERT_TRUE(across.ok()) << across.status();
  core::ParameterStore store3(7, core::Device::Cpu());
  auto across_engine = Engine::Create(&*across, &store3);
  ASSERT_TRUE(across_engine.ok()) << across_engine.status();
  ASSERT_GT(internal::Compile(*across).fwd.num_sums, 0) << "the logits' sum is not folded";
  EXPECT_EQ((*across_engine)->JoinSupported().code(), absl::StatusCode::kUnimplemented)
      << (*across_engine)->JoinSupported();
}

// The logits (push 0) computed in the rounds and not scattered: the rows that ran carry them
// to the loss and the read-back of the grown batch.
TEST(EngineJoinTest, APushComputedInTheRoundsIsCarried) {
  core::Rng rng(15);
  Case cs{"push in the rounds",
          vertex::Define(
              "push_in_rounds",
              [](vertex::Vertex& v) {
                vertex::Expr x = v.embed("emb", 50, 4);
                vertex::State c0 = v.gather(0), c1 = v.gather(1);
                vertex::Expr h = vertex::Tanh(vertex::MatMul(x, v.param("W", {4, 6})) +
                                              vertex::MatMul(c0["h"], v.param("U", {6, 6})) +
                                              vertex::MatMul(c1["h"], v.param("V", {6, 6})));
                vertex::Expr logits = vertex::MatMul(h, v.param("out", {6, 5}));
                // The field reads the logits: they are computed in the rounds.
                v.scatter({{"h", h + vertex::Tanh(vertex::MatMul(logits, v.param("G", {5, 6})))}});
                v.push(logits);
              }),
          Trees(rng, 6, 12),
          {}};
  cs.joins[1] = Trees(rng, 2, 6);
  cs.joins[3] = Trees(rng, 2, 6);
  ExpectJoinedRunsMatch(cs, /*folded=*/false);
}

}  // namespace
}  // namespace cavs::scheduler
