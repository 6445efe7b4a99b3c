#include "scheduler/reference_executor.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/parameter.h"
#include "core/random.h"
#include "tests/scheduler/gradient_check.h"
#include "tests/scheduler/random_graphs.h"
#include "tests/scheduler/test_functions.h"
#include "vertex/models.h"

namespace cavs::scheduler {
namespace {

using testing::CheckGradients;
using testing::RandomChain;
using testing::RandomDag;
using testing::RandomGraphOptions;
using testing::RandomTree;

vertex::models::CellConfig Small() { return {.vocab = 20, .embed = 4, .hidden = 3, .classes = 3}; }

ParamValues Params(const vertex::Function& f, uint64_t seed) {
  core::ParameterStore store(seed);
  EXPECT_TRUE(CreateParameters(f, &store).ok());
  ParamValues p = SnapshotParameters(f, store);
  // Make biases nonzero so that every path is exercised.
  core::Rng rng(seed, 7);
  for (auto& [name, values] : p) {
    for (double& x : values) x += 0.1 * (rng.Uniform() - 0.5);
  }
  return p;
}

std::vector<Graph> Trees(uint64_t seed, int count, bool unary = false) {
  core::Rng rng(seed);
  std::vector<Graph> gs;
  for (int i = 0; i < count; ++i) {
    gs.push_back(RandomTree(rng, 1 + static_cast<int>(rng.UniformInt(6)), {}, unary));
  }
  return gs;
}

TEST(ReferenceExecutorTest, HandComputedTreeFc) {
  // One leaf: h = tanh(x Wx + b); logits = h out_W + out_b; loss = CE.
  vertex::models::CellConfig c;
  c.vocab = 2;
  c.embed = 1;
  c.hidden = 1;
  c.classes = 2;
  absl::StatusOr<vertex::Function> f = vertex::models::TreeFc(c);
  ASSERT_TRUE(f.ok());
  ParamValues p;
  p["embedding"] = {0.5, -1.0};
  p["Wx"] = {2.0};
  p["U"] = {0.0, 0.0};
  p["b"] = {0.1};
  p["out_W"] = {1.0, -1.0};
  p["out_b"] = {0.0, 0.2};
  Graph g;
  g.AddVertex({}, /*token=*/1, /*label=*/0);
  RunOptions o;
  o.keep_outputs = true;
  absl::StatusOr<ReferenceResult> r = RunReference(*f, {g}, p, o);
  ASSERT_TRUE(r.ok()) << r.status();
  const double h = std::tanh(-1.0 * 2.0 + 0.1);
  const double l0 = h, l1 = -h + 0.2;
  const double loss = std::log(std::exp(l0) + std::exp(l1)) - l0;
  EXPECT_NEAR(r->loss, loss, 1e-12);
  EXPECT_NEAR(r->run.outputs[0][1], l1, 1e-6);
  const double p0 = std::exp(l0) / (std::exp(l0) + std::exp(l1));
  EXPECT_NEAR(r->grads["out_b"][0], p0 - 1, 1e-12);
  const double dh = (p0 - 1) * 1.0 + (1 - p0) * -1.0;
  EXPECT_NEAR(r->grads["Wx"][0], dh * (1 - h * h) * -1.0, 1e-12);
  EXPECT_NEAR(r->grads["embedding"][1], dh * (1 - h * h) * 2.0, 1e-12);
  EXPECT_EQ(r->grads["embedding"][0], 0.0);  // token 0 unused: row-sparse
  EXPECT_EQ(r->run.labelled, 1);
}

TEST(ReferenceExecutorTest, GradientsOfEveryModelCellOnTrees) {
  const vertex::models::CellConfig c = Small();
  for (auto f : {vertex::models::BinaryTreeLstm(c), vertex::models::ChildSumTreeLstm(c, 2),
                 vertex::models::TreeFc(c), vertex::models::TreeGru(c)}) {
    ASSERT_TRUE(f.ok()) << f.status();
    CheckGradients(*f, Trees(3, 3), Params(*f, 11), RunOptions());
  }
}

TEST(ReferenceExecutorTest, GradientsOfSequenceCellsOnChains) {
  const vertex::models::CellConfig c = Small();
  core::Rng rng(5);
  std::vector<Graph> chains = {RandomChain(rng, 1, {}), RandomChain(rng, 7, {}),
                               RandomChain(rng, 30, {})};
  for (auto f : {vertex::models::Lstm(c), vertex::models::Gru(c)}) {
    ASSERT_TRUE(f.ok()) << f.status();
    CheckGradients(*f, chains, Params(*f, 12), RunOptions(), 15);
  }
  // A 1,000-step chain: gradients through the whole sequence stay exact.
  std::vector<Graph> long_chain = {RandomChain(rng, 1000, {})};
  absl::StatusOr<vertex::Function> lstm = vertex::models::Lstm(c);
  ASSERT_TRUE(lstm.ok());
  CheckGradients(*lstm, long_chain, Params(*lstm, 15), RunOptions(), 4);
}

// DAGs with shared children and 3-wide features.
std::vector<Graph> Dags(uint64_t seed, int count, int vertices) {
  core::Rng rng(seed);
  std::vector<Graph> dags;
  for (int i = 0; i < count; ++i) {
    Graph g = RandomDag(rng, vertices, 3, {});
    g.feature_dim = 3;
    for (int j = 0; j < 3 * g.num_vertices(); ++j) g.features.push_back(rng.Uniform() - 0.5f);
    dags.push_back(std::move(g));
  }
  return dags;
}

TEST(ReferenceExecutorTest, GradientsOfEveryOpOnDags) {
  absl::StatusOr<vertex::Function> f = testing::EveryOp(3);
  ASSERT_TRUE(f.ok()) << f.status();
  const std::vector<Graph> dags = Dags(8, 3, 12);
  RunOptions o;
  o.dropout_seed = 42;  // a fixed mask: the loss stays a smooth function of the parameters
  CheckGradients(*f, dags, Params(*f, 13), o, 30, 1e-5);
  o.loss = RunOptions::Loss::kSum;
  CheckGradients(*f, dags, Params(*f, 14), o, 10, 1e-5);
}

TEST(ReferenceExecutorTest, DropoutIsIdentityInEval) {
  absl::StatusOr<vertex::Function> f = testing::EveryOp(3);
  ASSERT_TRUE(f.ok());
  const std::vector<Graph> dags = Dags(9, 1, 8);
  ParamValues p = Params(*f, 3);
  RunOptions train, train2, eval;
  train.dropout_seed = 1;
  train2.dropout_seed = 2;
  eval.training = false;
  const double l1 = RunReference(*f, dags, p, train)->loss;
  const double l1again = RunReference(*f, dags, p, train)->loss;
  const double l2 = RunReference(*f, dags, p, train2)->loss;
  const double le = RunReference(*f, dags, p, eval)->loss;
  EXPECT_EQ(l1, l1again);
  EXPECT_NE(l1, l2);
  EXPECT_NE(l1, le);
}

TEST(ReferenceExecutorTest, BadBatchesAreErrorsNamingSampleAndVertex) {
  absl::StatusOr<vertex::Function> f = vertex::models::BinaryTreeLstm(Small());
  ASSERT_TRUE(f.ok());
  ParamValues p = Params(*f, 1);
  std::vector<Graph> gs = Trees(1, 2);
  gs[1].tokens[0] = 99;
  absl::StatusOr<ReferenceResult> r = RunReference(*f, gs, p, RunOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("sample 1, vertex 0: token 99"), std::string::npos)
      << r.status();
  gs = Trees(1, 2);
  gs[0].child_ids[0] = 50;
  r = RunReference(*f, gs, p, RunOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("sample 0, vertex"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("out of range"), std::string::npos) << r.status();
  Graph three;
  three.AddVertex({});
  three.AddVertex({});
  three.AddVertex({});
  three.AddVertex({0, 1, 2});
  r = RunReference(*f, {three}, p, RunOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("3 children"), std::string::npos) << r.status();
  Graph cyc;
  cyc.AddVertex({1});
  cyc.AddVertex({0});
  r = RunReference(*f, {Graph(), cyc}, p, RunOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cycle"), std::string::npos) << r.status();
  gs = Trees(2, 1);
  gs[0].labels[0] = 3;
  EXPECT_FALSE(RunReference(*f, gs, p, RunOptions()).ok());
}

}  // namespace
}  // namespace cavs::scheduler
