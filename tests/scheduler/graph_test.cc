#include "scheduler/graph.h"

#include <gtest/gtest.h>

namespace cavs::scheduler {
namespace {

TEST(GraphTest, ChainAndParents) {
  Graph c = Graph::Chain(4);
  EXPECT_EQ(c.num_vertices(), 4);
  EXPECT_EQ(c.child(3, 0), 2);
  EXPECT_EQ(c.child(0, 0), -1);
  EXPECT_EQ(c.Roots(), std::vector<int32_t>{3});
  absl::StatusOr<Graph> t = Graph::FromParents({2, 2, -1});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->child(2, 0), 0);
  EXPECT_EQ(t->child(2, 1), 1);
  EXPECT_TRUE(ValidateGraph(*t, 0).ok());
  EXPECT_FALSE(Graph::FromParents({5}).ok());
}

TEST(GraphTest, ValidationErrors) {
  Graph g;
  g.AddVertex({});
  g.AddVertex({0, -1});
  EXPECT_TRUE(ValidateGraph(g, 0, 2).ok());
  EXPECT_FALSE(ValidateGraph(g, 0, 1).ok());
  Graph self;
  self.AddVertex({0});
  EXPECT_NE(ValidateGraph(self, 4).message().find("sample 4, vertex 0"), std::string::npos);
  Graph cyc;
  cyc.AddVertex({2});
  cyc.AddVertex({0});
  cyc.AddVertex({1});
  EXPECT_NE(ValidateGraph(cyc, 0).message().find("cycle"), std::string::npos);
  // Numbered parents first (children above their parents): acyclic is fine, a cycle is not.
  Graph down;
  down.AddVertex({1, 2});
  down.AddVertex({2});
  down.AddVertex({});
  EXPECT_TRUE(ValidateGraph(down, 0).ok());
  down.child_ids[2] = 0;  // vertex 1's child is now vertex 0, its parent
  EXPECT_NE(ValidateGraph(down, 0).message().find("cycle"), std::string::npos);
  Graph bad = Graph::Chain(3);
  bad.child_offsets[1] = 5;
  EXPECT_FALSE(ValidateGraph(bad, 0).ok());
  Graph tok = Graph::Chain(2);
  tok.tokens = {1};
  EXPECT_NE(ValidateGraph(tok, 0).message().find("1 tokens for 2 vertices"), std::string::npos);
  // A long chain validates without recursion.
  EXPECT_TRUE(ValidateGraph(Graph::Chain(200000), 0).ok());
}

}  // namespace
}  // namespace cavs::scheduler
