// BuildPlan on its own: rounds per policy (height, depth, a capped agenda), round-major rows in
// uid order within a round, and the distinct tokens with each row's slot — for batches whose
// children come before their parents (the one-pass height) and batches numbered parents first
// (the general topological sort), which must plan alike.
#include "scheduler/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <set>
#include <tuple>
#include <vector>

#include "core/random.h"
#include "scheduler/executor_common.h"
#include "tests/scheduler/random_graphs.h"
#include "tests/scheduler/test_functions.h"
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

// The CSR of each token's rows (Plan::token_row_offsets) against the token slots: every row
// with a token once, under its slot, rows ascending; no empty slot. Then the slots' ids.
void ExpectTokenRows(const Plan& p) {
  const int64_t slots = static_cast<int64_t>(p.unique_tokens.size());
  ASSERT_GE(p.token_row_offsets, 0);
  ASSERT_EQ(p.ArrayLength(p.token_row_offsets), slots + 1);
  const int32_t* off = p.Ints(p.token_row_offsets);
  const int32_t* ids = p.Ints(p.token_row_ids);
  std::vector<std::vector<int32_t>> want(slots);
  for (int64_t row = 0; row < p.num_rows; ++row) {
    const int32_t slot = p.Ints(p.token_slot)[row];
    if (slot >= 0) want[slot].push_back(static_cast<int32_t>(row));
  }
  EXPECT_EQ(off[0], 0);
  int64_t total = 0;
  for (int64_t s = 0; s < slots; ++s) {
    EXPECT_FALSE(want[s].empty()) << "slot " << s;
    EXPECT_EQ(std::vector<int32_t>(ids + off[s], ids + off[s + 1]), want[s]) << "slot " << s;
    total += static_cast<int64_t>(want[s].size());
  }
  EXPECT_EQ(off[slots], total);
  EXPECT_EQ(p.ArrayLength(p.token_row_ids), total);
  ASSERT_EQ(p.ArrayLength(p.token_slot_ids), slots);
  for (int64_t s = 0; s < slots; ++s) EXPECT_EQ(p.Ints(p.token_slot_ids)[s], s);
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
    ExpectTokenRows(*p);
  }
}

// Every index array, hull and count of the plan against the graphs themselves, for DAGs
// (shared children, absent slots, more children than the function gathers, features) under
// a function with a reduction and slot 0, and trees numbered either way under the binary
// Tree-LSTM, in every policy.
void ExpectArraysMatch(const vertex::Function& f, const std::vector<Graph>& gs, const Plan& p) {
  int max_slot = -1;
  for (const vertex::Node& n : f.forward().nodes) {
    if (n.kind == vertex::OpKind::kGather) max_slot = std::max(max_slot, static_cast<int>(n.index));
  }
  const bool reduces = f.max_arity() < 0;
  ASSERT_EQ(static_cast<int>(p.child_rows.size()), max_slot + 1);
  ASSERT_EQ(static_cast<int>(p.parent_of_slot.size()), max_slot + 1);
  ASSERT_EQ(p.graph_offsets.size(), gs.size() + 1);
  const int64_t feat = f.pull_width();
  std::vector<int> parents(p.num_rows, 0);
  std::vector<std::vector<int32_t>> parent_of(max_slot + 1, std::vector<int32_t>(p.num_rows, -1));
  RowRange token_rows{0, 0}, parent_rows{0, 0};
  std::vector<RowRange> slot_rows(max_slot + 1, RowRange{0, 0});
  auto extend = [](RowRange& r, int64_t row) {
    r.first = r.first >= r.second ? row : std::min(r.first, row);
    r.second = std::max(r.second, row + 1);
  };
  int64_t labelled = 0, slots_full_from = 0, with_token = 0;
  for (size_t gi = 0; gi < gs.size(); ++gi) {
    const Graph& g = gs[gi];
    ASSERT_EQ(p.graph_offsets[gi + 1] - p.graph_offsets[gi], g.num_vertices());
    for (int v = 0; v < g.num_vertices(); ++v) {
      const int64_t u = p.graph_offsets[gi] + v, row = p.row_of_uid[u];
      EXPECT_EQ(p.Ints(p.uids)[row], u);
      const int32_t token = g.tokens.empty() ? -1 : g.tokens[v];
      const int32_t label = g.labels.empty() ? -1 : g.labels[v];
      EXPECT_EQ(p.Ints(p.tokens)[row], token);
      EXPECT_EQ(p.Ints(p.labels)[row], label);
      labelled += label >= 0;
      if (token >= 0) extend(token_rows, row);
      with_token += token >= 0 ? 1 : 0;
      std::vector<int32_t> reduced;
      for (int k = 0; k < std::max(g.num_children(v), max_slot + 1); ++k) {
        const int32_t c = g.child(v, k);
        const int32_t crow =
            c < 0 ? -1 : static_cast<int32_t>(p.row_of_uid[p.graph_offsets[gi] + c]);
        if (k <= max_slot) {
          EXPECT_EQ(p.Ints(p.child_rows[k])[row], crow) << "sample " << gi << " vertex " << v;
          if (crow < 0) slots_full_from = std::max<int64_t>(slots_full_from, row + 1);
        }
        if (crow < 0) continue;
        ++parents[crow];
        reduced.push_back(crow);
        extend(parent_rows, row);
        if (k <= max_slot) {
          extend(slot_rows[k], row);
          parent_of[k][crow] = std::max(parent_of[k][crow], static_cast<int32_t>(row));
        }
      }
      if (reduces) {
        const int32_t* off = p.Ints(p.reduce_offsets);
        EXPECT_EQ(std::vector<int32_t>(p.Ints(p.reduce_ids) + off[row],
                                       p.Ints(p.reduce_ids) + off[row + 1]),
                  reduced);
      }
      if (feat > 0) {
        for (int64_t i = 0; i < feat; ++i) {
          EXPECT_EQ(p.features[row * feat + i], g.features[v * feat + i]);
        }
      }
    }
  }
  if (reduces) EXPECT_EQ(p.Ints(p.reduce_offsets)[0], 0);
  // Each array's length (what the engine uploads of it, Batch::Ints): one int per row, the
  // reductions' CSR offsets one more, their ids one per edge.
  for (int k = 0; k <= max_slot; ++k) {
    EXPECT_EQ(p.ArrayLength(p.child_rows[k]), p.num_rows) << "slot " << k;
    EXPECT_EQ(p.ArrayLength(p.parent_of_slot[k]), p.num_rows) << "slot " << k;
  }
  for (int64_t at : {p.uids, p.tokens, p.labels, p.token_slot}) {
    EXPECT_EQ(p.ArrayLength(at), p.num_rows);
  }
  if (f.uses_tokens()) ExpectTokenRows(p);
  if (p.num_rows > 1) EXPECT_EQ(p.ArrayLength(p.tokens + 1), -1);  // not an array's start
  if (reduces) {
    EXPECT_EQ(p.ArrayLength(p.reduce_offsets), p.num_rows + 1);
    EXPECT_EQ(p.ArrayLength(p.reduce_ids), p.Ints(p.reduce_offsets)[p.num_rows]);
  }
  for (int k = 0; k <= max_slot; ++k) {
    EXPECT_EQ(
        std::vector<int32_t>(p.Ints(p.parent_of_slot[k]), p.Ints(p.parent_of_slot[k]) + p.num_rows),
        parent_of[k])
        << "slot " << k;
    EXPECT_EQ(p.child_slot_rows[k], slot_rows[k]) << "slot " << k;
  }
  EXPECT_EQ(p.token_rows, token_rows);
  EXPECT_EQ(p.tokens_dense, with_token == token_rows.second - token_rows.first);
  EXPECT_EQ(p.parent_rows, parent_rows);
  EXPECT_EQ(p.labelled, labelled);
  EXPECT_EQ(p.slots_full_from, slots_full_from);
  EXPECT_EQ(p.unique_parents,
            std::all_of(parents.begin(), parents.end(), [](int n) { return n <= 1; }));
}

TEST(PlanTest, IndexArraysMatchTheGraphs) {
  absl::StatusOr<vertex::Function> every = testing::EveryOp(5);
  absl::StatusOr<vertex::Function> lstm =
      vertex::models::BinaryTreeLstm({.vocab = 50, .embed = 4, .hidden = 3, .classes = 5});
  ASSERT_TRUE(every.ok() && lstm.ok());
  core::Rng rng(11);
  std::vector<Graph> dags;
  for (int i = 0; i < 20; ++i) {
    Graph g = testing::RandomDag(rng, 1 + static_cast<int>(rng.UniformInt(12)), 3,
                                 {.vocab = 50, .classes = 5});
    g.feature_dim = 3;
    for (int j = 0; j < 3 * g.num_vertices(); ++j) g.features.push_back(rng.Uniform());
    dags.push_back(std::move(g));
  }
  std::vector<Graph> trees = Trees(12, 30);
  for (int i = 0; i < 12; ++i) trees[i] = Reversed(trees[i]);
  trees[3].tokens.clear();
  trees[5].labels.clear();
  for (const auto& [f, gs] : {std::pair{&*every, &dags}, std::pair{&*lstm, &trees}}) {
    ASSERT_TRUE(ValidateBatch(*f, *gs).ok());
    for (PlanOptions o :
         {PlanOptions{}, PlanOptions{Policy::kDepth, 0}, PlanOptions{Policy::kAgenda, 5}}) {
      absl::StatusOr<Plan> p = BuildPlan(*f, *gs, o);
      ASSERT_TRUE(p.ok());
      ExpectRoundMajorUidOrder(*p);
      ExpectArraysMatch(*f, *gs, *p);
    }
  }
}

// The batch's tokens and labels at the edges of what is valid: the last token and class pass,
// one past them or below -1 is an error naming the sample, vertex and value; a function
// without an embedding takes any token.
TEST(PlanTest, InputChecksAtTheEdges) {
  absl::StatusOr<vertex::Function> f =
      vertex::models::BinaryTreeLstm({.vocab = 50, .embed = 4, .hidden = 3, .classes = 5});
  absl::StatusOr<vertex::Function> no_tokens = testing::SingleInputConcats(5);
  ASSERT_TRUE(f.ok() && no_tokens.ok());
  auto check = [&](const vertex::Function& fn, int32_t token, int32_t label) {
    std::vector<Graph> gs = Trees(4, 3);
    if (fn.max_arity() == 1) {  // SingleInputConcats reads slot 0 only: chains
      core::Rng rng(5);
      for (Graph& g : gs) g = testing::RandomChain(rng, 4, {.vocab = 50, .classes = 5});
    }
    gs[2].tokens[1] = token;
    gs[2].labels[1] = label;
    return ValidateBatch(fn, gs);
  };
  EXPECT_TRUE(check(*f, 49, 4).ok());
  EXPECT_TRUE(check(*f, -1, -1).ok());
  for (const auto& [token, label, want] :
       {std::tuple{50, 0, "sample 2, vertex 1: token 50 outside the vocabulary [0, 50)"},
        std::tuple{-2, 0, "sample 2, vertex 1: token -2"},
        std::tuple{0, 5, "sample 2, vertex 1: label 5 outside [0, 5)"},
        std::tuple{0, -7, "sample 2, vertex 1: label -7"}}) {
    const absl::Status s = check(*f, token, label);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find(want), std::string::npos) << s;
  }
  EXPECT_TRUE(check(*no_tokens, INT32_MAX, 4).ok());
  EXPECT_FALSE(check(*no_tokens, -2, 4).ok());
}

}  // namespace
}  // namespace cavs::scheduler
