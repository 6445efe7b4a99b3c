// BuildPlan on its own: rounds per policy (height, depth, a capped agenda), round-major rows in
// uid order within a round, and the distinct tokens with each row's slot — for batches whose
// children come before their parents (the one-pass height) and batches numbered parents first
// (the general topological sort), which must plan alike.
#include "scheduler/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "core/random.h"
#include "scheduler/executor_common.h"
#include "tests/scheduler/random_graphs.h"
#include "vertex/models.h"

namespace cavs::scheduler {
namespace {

// The same tree with its vertices numbered in reverse: parents before children.
Graph Reversed(const Graph& g) {
  const int n = g.num_vertices();
  Graph r;
  for (int nv = 0; nv < n; ++nv) {
    const int v = n - 1 - nv;
    std::vector<int32_t> kids;
    for (int k = 0; k < g.num_children(v); ++k) {
      const int32_t c = g.child(v, k);
      kids.push_back(c < 0 ? -1 : n - 1 - c);
    }
    r.AddVertex(kids, g.tokens.empty() ? -1 : g.tokens[v], g.labels.empty() ? -1 : g.labels[v]);
  }
  return r;
}

// Heights of one graph's vertices (leaves 0), by recursion over children.
int Height(const Graph& g, int v) {
  int h = 0;
  for (int k = 0; k < g.num_children(v); ++k) {
    if (g.child(v, k) >= 0) h = std::max(h, Height(g, g.child(v, k)) + 1);
  }
  return h;
}

// The round of each uid.
std::vector<int> RoundOfUid(const Plan& p) {
  std::vector<int> out(p.num_rows);
  for (int r = 0; r < p.num_rounds; ++r) {
    for (int64_t row = p.round_offsets[r]; row < p.round_offsets[r + 1]; ++row) {
      out[p.Ints(p.uids)[row]] = r;
    }
  }
  return out;
}

void ExpectRoundMajorUidOrder(const Plan& p) {
  for (int64_t u = 0; u < p.num_rows; ++u) EXPECT_EQ(p.Ints(p.uids)[p.row_of_uid[u]], u);
  for (int r = 0; r < p.num_rounds; ++r) {
    for (int64_t row = p.round_offsets[r] + 1; row < p.round_offsets[r + 1]; ++row) {
      EXPECT_LT(p.Ints(p.uids)[row - 1], p.Ints(p.uids)[row]) << "round " << r;
    }
  }
}

std::vector<Graph> Trees(uint64_t seed, int count) {
  core::Rng rng(seed);
  std::vector<Graph> gs;
  for (int i = 0; i < count; ++i) {
    gs.push_back(testing::RandomTree(rng, 1 + static_cast<int>(rng.UniformInt(15)),
                                     {.vocab = 50, .classes = 5}, /*allow_unary=*/true));
  }
  return gs;
}

TEST(PlanTest, HeightRoundsEitherNumbering) {
  absl::StatusOr<vertex::Function> f =
      vertex::models::BinaryTreeLstm({.vocab = 50, .embed = 4, .hidden = 3, .classes = 5});
  ASSERT_TRUE(f.ok());
  const std::vector<Graph> fwd = Trees(1, 40);
  std::vector<Graph> rev;
  for (const Graph& g : fwd) rev.push_back(Reversed(g));
  ASSERT_TRUE(ValidateBatch(*f, fwd).ok());
  ASSERT_TRUE(ValidateBatch(*f, rev).ok());
  absl::StatusOr<Plan> a = BuildPlan(*f, fwd), b = BuildPlan(*f, rev);
  ASSERT_TRUE(a.ok() && b.ok());
  ExpectRoundMajorUidOrder(*a);
  ExpectRoundMajorUidOrder(*b);
  const std::vector<int> ra = RoundOfUid(*a), rb = RoundOfUid(*b);
  EXPECT_EQ(a->num_rounds, b->num_rounds);
  for (size_t gi = 0; gi < fwd.size(); ++gi) {
    const int n = fwd[gi].num_vertices();
    for (int v = 0; v < n; ++v) {
      EXPECT_EQ(ra[a->graph_offsets[gi] + v], Height(fwd[gi], v));
      EXPECT_EQ(rb[b->graph_offsets[gi] + n - 1 - v], Height(fwd[gi], v));
    }
  }
}

TEST(PlanTest, DepthAndCappedAgendaRespectChildren) {
  absl::StatusOr<vertex::Function> f =
      vertex::models::BinaryTreeLstm({.vocab = 50, .embed = 4, .hidden = 3, .classes = 5});
  ASSERT_TRUE(f.ok());
  std::vector<Graph> gs = Trees(2, 30);
  for (int i = 0; i < 10; ++i) gs[i] = Reversed(gs[i]);
  for (PlanOptions o : {PlanOptions{Policy::kDepth, 0}, PlanOptions{Policy::kAgenda, 7}}) {
    absl::StatusOr<Plan> p = BuildPlan(*f, gs, o);
    ASSERT_TRUE(p.ok());
    ExpectRoundMajorUidOrder(*p);
    const std::vector<int> round = RoundOfUid(*p);
    for (size_t gi = 0; gi < gs.size(); ++gi) {
      for (int v = 0; v < gs[gi].num_vertices(); ++v) {
        for (int k = 0; k < gs[gi].num_children(v); ++k) {
          const int c = gs[gi].child(v, k);
          if (c < 0) continue;
          EXPECT_LT(round[p->graph_offsets[gi] + c], round[p->graph_offsets[gi] + v]);
        }
      }
    }
    if (o.policy == Policy::kAgenda) {
      for (int r = 0; r < p->num_rounds; ++r) EXPECT_LE(p->RoundRows(r), 7);
    } else {  // every root in the last round
      for (size_t gi = 0; gi < gs.size(); ++gi) {
        for (int32_t root : gs[gi].Roots()) {
          EXPECT_EQ(round[p->graph_offsets[gi] + root], p->num_rounds - 1);
        }
      }
    }
  }
}

// The distinct tokens come out sorted with each row's slot, whether found by marks in a
// vocabulary-sized table (small vocabulary) or by sorting (a vocabulary far larger than the
// batch).
TEST(PlanTest, UniqueTokensAndSlots) {
  for (int64_t vocab : {50, 5'000'000}) {
    absl::StatusOr<vertex::Function> f =
        vertex::models::BinaryTreeLstm({.vocab = vocab, .embed = 4, .hidden = 3, .classes = 5});
    ASSERT_TRUE(f.ok());
    std::vector<Graph> gs = Trees(3, 25);
    gs[0].tokens[0] = static_cast<int32_t>(vocab - 1);
    absl::StatusOr<Plan> p = BuildPlan(*f, gs);
    ASSERT_TRUE(p.ok());
    std::set<int64_t> want;
    for (const Graph& g : gs) {
      for (int32_t t : g.tokens) {
        if (t >= 0) want.insert(t);
      }
    }
    EXPECT_EQ(p->unique_tokens, std::vector<int64_t>(want.begin(), want.end())) << vocab;
    for (int64_t row = 0; row < p->num_rows; ++row) {
      const int32_t t = p->Ints(p->tokens)[row], slot = p->Ints(p->token_slot)[row];
      if (t < 0) {
        EXPECT_EQ(slot, -1);
      } else {
        ASSERT_GE(slot, 0);
        EXPECT_EQ(p->unique_tokens[slot], t);
      }
    }
  }
}

}  // namespace
}  // namespace cavs::scheduler
