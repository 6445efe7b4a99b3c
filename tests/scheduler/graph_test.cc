#include "scheduler/graph.h"

#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "core/random.h"

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

// Validity by the definition, slowly: offsets from 0, never decreasing, ending at the ids'
// end; arity within the bound; every child -1 or in range; no vertex its own descendant.
bool ValidByDefinition(const Graph& g, int max_arity) {
  if (g.child_offsets.empty() || g.child_offsets[0] != 0) return false;
  const int n = g.num_vertices();
  if (g.child_offsets[n] != static_cast<int32_t>(g.child_ids.size())) return false;
  for (int v = 0; v < n; ++v) {
    if (g.child_offsets[v + 1] < g.child_offsets[v]) return false;
    if (max_arity >= 0 && g.num_children(v) > max_arity) return false;
  }
  for (int32_t c : g.child_ids) {
    if (c < -1 || c >= n) return false;
  }
  std::vector<int> state(n, 0);  // 0 new, 1 on the path, 2 done
  std::function<bool(int)> acyclic = [&](int v) {
    if (state[v] != 0) return state[v] == 2;
    state[v] = 1;
    for (int k = 0; k < g.num_children(v); ++k) {
      if (g.child(v, k) >= 0 && !acyclic(g.child(v, k))) return false;
    }
    state[v] = 2;
    return true;
  };
  for (int v = 0; v < n; ++v) {
    if (!acyclic(v)) return false;
  }
  return true;
}

// Random small graphs, most of them broken in one way or another (offsets out of order or
// off the end, ids out of range, self-loops, cycles, too many children, numbered either way):
// ValidateGraph accepts exactly the valid ones, and never reads out of bounds doing so.
TEST(GraphTest, ValidationAgreesWithTheDefinition) {
  core::Rng rng(21);
  int valid = 0, children_first = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    Graph g;
    const int n = static_cast<int>(rng.UniformInt(7));
    g.child_offsets.assign(1, rng.Uniform() < 0.03 ? 1 : 0);
    for (int v = 0; v < n; ++v) {
      const int32_t step = static_cast<int32_t>(rng.UniformInt(4)) - (rng.Uniform() < 0.03);
      g.child_offsets.push_back(g.child_offsets.back() + step);
    }
    const int32_t ids = std::max<int32_t>(0, g.child_offsets.back() + (rng.Uniform() < 0.03));
    for (int32_t j = 0; j < ids; ++j) {
      // Mostly a lower id (children first), sometimes any id, -1, or out of range.
      const double u = rng.Uniform();
      const int v_hint = n > 0 ? static_cast<int>(rng.UniformInt(n)) : 0;
      g.child_ids.push_back(u < 0.6
                                ? (v_hint > 0 ? static_cast<int32_t>(rng.UniformInt(v_hint)) : -1)
                            : u < 0.9 ? static_cast<int32_t>(rng.UniformInt(n + 1)) - 1
                                      : static_cast<int32_t>(rng.UniformInt(n + 4)) - 2);
    }
    const int max_arity = rng.Uniform() < 0.5 ? -1 : static_cast<int>(rng.UniformInt(4));
    const bool want = ValidByDefinition(g, max_arity);
    ASSERT_EQ(ValidateGraph(g, trial, max_arity).ok(), want) << "trial " << trial;
    valid += want;
    bool first = want;
    for (int v = 0; v < n && first; ++v) {
      for (int k = 0; k < g.num_children(v); ++k) first &= g.child(v, k) < v;
    }
    children_first += first;
  }
  // Both paths ran: valid graphs numbered children first, and others.
  EXPECT_GT(children_first, 1000);
  EXPECT_GT(valid - children_first, 100);
  EXPECT_GT(20000 - valid, 1000);
}

}  // namespace
}  // namespace cavs::scheduler
