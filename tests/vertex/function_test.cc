#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "vertex/models.h"
#include "vertex/vertex.h"

namespace cavs::vertex {
namespace {

using ::testing::HasSubstr;

models::CellConfig Small() {
  models::CellConfig c;
  c.vocab = 10;
  c.embed = 4;
  c.hidden = 3;
  c.classes = 2;
  return c;
}

const Node* FindNode(const Program& p, OpKind kind, int nth = 0) {
  for (const Node& n : p.nodes) {
    if (n.kind == kind && nth-- == 0) return &n;
  }
  return nullptr;
}

TEST(FunctionTest, TreeLstmOpClasses) {
  absl::StatusOr<Function> f = models::BinaryTreeLstm(Small());
  ASSERT_TRUE(f.ok()) << f.status();
  const Program& p = f->forward();
  // x W is a pre-op, the children's U product is recurrent, the output layer is a post-op.
  const Node* embed = FindNode(p, OpKind::kEmbed);
  ASSERT_NE(embed, nullptr);
  EXPECT_EQ(embed->op_class, OpClass::kBeforeRounds);
  int pre = 0, rec = 0, post = 0;
  for (const Node& n : p.nodes) {
    if (n.kind != OpKind::kMatMul) continue;
    pre += n.op_class == OpClass::kBeforeRounds;
    rec += n.op_class == OpClass::kInRounds;
    post += n.op_class == OpClass::kAfterRounds;
  }
  EXPECT_EQ(pre, 1);
  EXPECT_EQ(rec, 1);
  EXPECT_EQ(post, 1);
  EXPECT_EQ(f->max_arity(), 2);
  EXPECT_EQ(f->scatter().size(), 2u);
  EXPECT_EQ(p.nodes[f->pushes()[0]].width, 2);
  EXPECT_EQ(f->params().size(), 6u);  // embedding, W, U, b, out_W, out_b
  // Weight gradients are lazy: one reduction sink per MatMul parameter.
  int wg = 0;
  for (const Node& n : f->backward().nodes) wg += n.kind == OpKind::kWeightGradMatMul;
  EXPECT_EQ(wg, 3);
}

TEST(FunctionTest, EveryModelCellDefines) {
  const models::CellConfig c = Small();
  for (auto f : {models::BinaryTreeLstm(c), models::ChildSumTreeLstm(c, 4), models::TreeFc(c),
                 models::Lstm(c), models::Gru(c), models::TreeGru(c)}) {
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_FALSE(f->backward().nodes.empty()) << f->name();
    for (const Node& n : f->forward().nodes) {
      if (!n.is_static()) EXPECT_GT(n.width, 0) << f->name();
    }
  }
}

TEST(FunctionTest, ShapeMismatchNamesOpAndBothShapes) {
  absl::StatusOr<Function> f = Define("bad", [](Vertex& v) {
    Expr x = v.pull(300);
    v.push(MatMul(x, v.param("W", {200, 750})));
  });
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("vertex function 'bad'"));
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("MatMul"));
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("[300] and [200, 750]"));
}

TEST(FunctionTest, ElementwiseMismatch) {
  absl::StatusOr<Function> f = Define("add", [](Vertex& v) {
    v.push(v.pull(3) + MatMul(v.pull(3), v.param("W", {3, 4})));
  });
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("Add"));
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("[3] and [4]"));
}

TEST(FunctionTest, GatheredWidthFollowsScatter) {
  // c depends on the children's c: the width is found by the fixed point.
  absl::StatusOr<Function> f = Define("acc", [](Vertex& v) {
    Expr c = v.gather(0)["c"] + Tanh(MatMul(v.pull(2), v.param("W", {2, 5})));
    v.scatter({{"c", c}});
  });
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->forward().nodes[f->scatter()[0].node].width, 5);
}

TEST(FunctionTest, ErrorsAreStatusesNotCrashes) {
  EXPECT_THAT(
      std::string(Define("g", [](Vertex& v) { v.push(v.gather(0)["nope"]); }).status().message()),
      HasSubstr("reads field 'nope'"));
  EXPECT_THAT(std::string(Define("s",
                                 [](Vertex& v) {
                                   Expr x = v.pull(6);
                                   auto parts = Split<4>(x);
                                   v.push(parts[0]);
                                 })
                              .status()
                              .message()),
              HasSubstr("cannot split into 4"));
  EXPECT_THAT(std::string(Define("p",
                                 [](Vertex& v) {
                                   v.param("W", {2, 2});
                                   v.push(MatMul(v.pull(2), v.param("W", {3, 2})));
                                 })
                              .status()
                              .message()),
              HasSubstr("parameter 'W' declared with shape [2, 2] and again with [3, 2]"));
  EXPECT_THAT(std::string(Define("e", [](Vertex&) {}).status().message()),
              HasSubstr("neither scatters nor pushes"));
  EXPECT_THAT(
      std::string(Define("x", [](Vertex& v) { v.push(v.param("b", {2})); }).status().message()),
      HasSubstr("expects a per-vertex value"));
  EXPECT_THAT(
      std::string(
          Define("d", [](Vertex& v) { v.push(Dropout(v.pull(2), 1.5f)); }).status().message()),
      HasSubstr("drop probability"));
}

TEST(FunctionTest, DebugStringAndDot) {
  absl::StatusOr<Function> f = models::TreeFc(Small());
  ASSERT_TRUE(f.ok());
  const std::string s = f->DebugString();
  EXPECT_THAT(s, HasSubstr("MatMul"));
  EXPECT_THAT(s, HasSubstr("recurrent"));
  EXPECT_THAT(s, HasSubstr("post"));
  EXPECT_THAT(s, HasSubstr("WeightGradMatMul"));
  const std::string dot = f->ToDot();
  EXPECT_THAT(dot, HasSubstr("digraph \"tree_fc\""));
  EXPECT_THAT(dot, HasSubstr("cluster_backward"));
}

TEST(FunctionTest, DeadCodeIsPruned) {
  absl::StatusOr<Function> f = Define("dead", [](Vertex& v) {
    Expr x = v.pull(2);
    Tanh(MatMul(x, v.param("unused", {2, 2})));
    v.push(Sigmoid(x));
  });
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->forward().nodes.size(), 2u);
  EXPECT_TRUE(f->params().empty());
}

}  // namespace
}  // namespace cavs::vertex
