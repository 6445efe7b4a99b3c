#include "scheduler/plan.h"

#include <algorithm>
#include <bit>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace cavs::scheduler {

absl::StatusOr<Policy> ParsePolicy(const std::string& name) {
  if (name == "height") return Policy::kHeight;
  if (name == "depth") return Policy::kDepth;
  if (name == "agenda") return Policy::kAgenda;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown batching policy '", name, "': expected height, depth or agenda"));
}

namespace {

// The hull of the rows added, in any order.
struct Hull {
  int64_t lo = INT64_MAX, hi = -1;
  void Add(int64_t row) {
    lo = std::min(lo, row);
    hi = std::max(hi, row);
  }
  RowRange Range() const { return hi < 0 ? RowRange{0, 0} : RowRange{lo, hi + 1}; }
};

// The batch as one graph over uids: CSR children (-1 kept for empty slots). Only the general
// round policies need it; heights of a batch whose children come first are taken per graph.
struct Merged {
  std::vector<int64_t> child_offsets;
  std::vector<int32_t> children;
  int64_t n = 0;
};

Merged Merge(const std::vector<Graph>& graphs, const std::vector<int64_t>& graph_offsets,
             int64_t edges) {
  Merged m;
  m.n = graph_offsets.back();
  m.child_offsets.resize(m.n + 1);
  m.children.resize(edges);
  m.child_offsets[0] = 0;
  int64_t e = 0;
  for (size_t gi = 0; gi < graphs.size(); ++gi) {
    const Graph& g = graphs[gi];
    const int32_t base = static_cast<int32_t>(graph_offsets[gi]);
    const int n = g.num_vertices();
    for (int v = 0; v < n; ++v) m.child_offsets[base + v + 1] = e + g.child_offsets[v + 1];
    const int32_t* ids = g.child_ids.data();
    int32_t* out = m.children.data() + e;
    for (size_t j = 0; j < g.child_ids.size(); ++j) out[j] = ids[j] < 0 ? -1 : base + ids[j];
    e += static_cast<int64_t>(g.child_ids.size());
  }
  return m;
}

// Kahn's algorithm: visits uids children-first; calls visit(uid, round) with the round the
// policy gives. Height: 1 + max child round. Agenda: ready vertices in waves of at most `cap`.
std::vector<int32_t> RoundsBottomUp(const Merged& m, int64_t cap) {
  std::vector<int32_t> pending(m.n, 0), round(m.n, 0);
  std::vector<int64_t> poff(m.n + 1, 0);
  for (int32_t c : m.children) {
    if (c >= 0) ++poff[c + 1];
  }
  for (int64_t i = 0; i < m.n; ++i) poff[i + 1] += poff[i];
  std::vector<int32_t> parents(poff[m.n]);
  std::vector<int64_t> fill(poff.begin(), poff.end() - 1);
  for (int64_t v = 0; v < m.n; ++v) {
    for (int64_t j = m.child_offsets[v]; j < m.child_offsets[v + 1]; ++j) {
      const int32_t c = m.children[j];
      if (c >= 0) {
        parents[fill[c]++] = static_cast<int32_t>(v);
        ++pending[v];
      }
    }
  }
  std::vector<int32_t> ready, next;
  for (int64_t v = 0; v < m.n; ++v) {
    if (pending[v] == 0) ready.push_back(static_cast<int32_t>(v));
  }
  int32_t r = 0;
  while (!ready.empty()) {
    // The agenda takes the oldest uids first; without a cap the order within a round does not
    // matter here (rows are put in uid order within each round afterwards).
    if (cap > 0) std::sort(ready.begin(), ready.end());
    const size_t take = cap > 0 ? std::min<size_t>(ready.size(), cap) : ready.size();
    next.assign(ready.begin() + take, ready.end());
    for (size_t i = 0; i < take; ++i) {
      const int32_t v = ready[i];
      round[v] = r;
      for (int64_t j = poff[v]; j < poff[v + 1]; ++j) {
        if (--pending[parents[j]] == 0) next.push_back(parents[j]);
      }
    }
    ready.swap(next);
    ++r;
  }
  return round;
}

// Height (1 + the highest child, leaves 0) in one pass over each graph, if every child comes
// before its parent (trees read bottom-up); false if one does not.
bool HeightsChildrenFirst(const std::vector<Graph>& graphs,
                          const std::vector<int64_t>& graph_offsets, std::vector<int32_t>* height) {
  height->resize(graph_offsets.back());
  bool children_first = true;
  for (size_t gi = 0; gi < graphs.size(); ++gi) {
    const Graph& g = graphs[gi];
    const int32_t* off = g.child_offsets.data();
    const int32_t* ids = g.child_ids.data();
    int32_t* h = height->data() + graph_offsets[gi];
    for (int v = 0; v < g.num_vertices(); ++v) {
      int32_t hv = 0;
      for (int32_t j = off[v]; j < off[v + 1]; ++j) {
        children_first &= ids[j] < v;  // else h[ids[j]] is not yet known (but in range)
        if (ids[j] >= 0) hv = std::max(hv, h[ids[j]] + 1);
      }
      h[v] = hv;
    }
  }
  return children_first;
}

// Depth from the roots (longest path), then round = max depth - depth.
std::vector<int32_t> RoundsByDepth(const Merged& m, const std::vector<int32_t>& height) {
  // Process parents before children: decreasing height order is a valid order.
  std::vector<int32_t> order(m.n);
  for (int64_t i = 0; i < m.n; ++i) order[i] = static_cast<int32_t>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return height[a] > height[b]; });
  std::vector<int32_t> depth(m.n, 0);
  int32_t max_depth = 0;
  for (int32_t v : order) {
    max_depth = std::max(max_depth, depth[v]);
    for (int64_t j = m.child_offsets[v]; j < m.child_offsets[v + 1]; ++j) {
      const int32_t c = m.children[j];
      if (c >= 0) depth[c] = std::max(depth[c], depth[v] + 1);
    }
  }
  for (int32_t& d : depth) d = max_depth - d;
  return depth;
}

// The round of every uid under the policy.
std::vector<int32_t> Rounds(const std::vector<Graph>& graphs,
                            const std::vector<int64_t>& graph_offsets, int64_t edges,
                            const PlanOptions& options) {
  const bool agenda = options.policy == Policy::kAgenda;
  std::vector<int32_t> round;
  const bool heights = !agenda && HeightsChildrenFirst(graphs, graph_offsets, &round);
  if (heights && options.policy == Policy::kHeight) return round;
  const Merged m = Merge(graphs, graph_offsets, edges);
  if (!heights) round = RoundsBottomUp(m, agenda ? options.max_round_rows : 0);
  if (options.policy == Policy::kDepth) round = RoundsByDepth(m, round);
  return round;
}

// Distinct tokens (for the row-sparse embedding gradient) and each row's slot among them: a
// bitmap of the vocabulary where that is not much larger than the batch (a token's slot is
// the count of marked tokens below it), else a sort.
void TokenSlots(const vertex::Function& f, Plan& plan) {
  const int64_t n = plan.num_rows;
  const int32_t* tokens = plan.ints.data() + plan.tokens;
  int32_t* token_slot = plan.ints.data() + plan.token_slot;
  const int64_t vocab = f.uses_tokens() ? f.vocab_size() : 0;
  const int64_t words = (vocab + 63) / 64;
  if (vocab > 0 && words <= n + 1024) {
    // Rows without a token mark a spare bit past the vocabulary's words.
    std::vector<uint64_t> bits(words + 1, 0);
    auto bit = [&](int32_t t) { return t < 0 ? words * 64 : int64_t{t}; };
    for (int64_t row = 0; row < n; ++row) {
      const int64_t b = bit(tokens[row]);
      bits[b >> 6] |= uint64_t{1} << (b & 63);
    }
    std::vector<int32_t> below(words);  // marked tokens in the words before
    int32_t count = 0;
    for (int64_t w = 0; w < words; ++w) {
      below[w] = count;
      count += std::popcount(bits[w]);
    }
    plan.unique_tokens.resize(count);
    int64_t* out = plan.unique_tokens.data();
    for (int64_t w = 0; w < words; ++w) {
      for (uint64_t x = bits[w]; x != 0; x &= x - 1) *out++ = w * 64 + std::countr_zero(x);
    }
    for (int64_t row = 0; row < n; ++row) {
      const int32_t t = tokens[row];
      const int64_t b = t < 0 ? 0 : t;
      const uint64_t lower = bits[b >> 6] & ((uint64_t{1} << (b & 63)) - 1);
      token_slot[row] = t < 0 ? -1 : below[b >> 6] + std::popcount(lower);
    }
    return;
  }
  for (int64_t row = 0; row < n; ++row) {
    if (tokens[row] >= 0) plan.unique_tokens.push_back(tokens[row]);
  }
  std::sort(plan.unique_tokens.begin(), plan.unique_tokens.end());
  plan.unique_tokens.erase(std::unique(plan.unique_tokens.begin(), plan.unique_tokens.end()),
                           plan.unique_tokens.end());
  for (int64_t row = 0; row < n; ++row) {
    const int32_t t = tokens[row];
    if (t < 0) continue;
    token_slot[row] = static_cast<int32_t>(
        std::lower_bound(plan.unique_tokens.begin(), plan.unique_tokens.end(), t) -
        plan.unique_tokens.begin());
  }
}

// The CSR of each token slot's rows (Plan::token_row_offsets), appended to `ints`: a counting
// sort of the `tokened` rows with a token by slot, rows ascending within a slot.
void TokenRows(Plan& plan, int64_t tokened) {
  const int64_t n = plan.num_rows, slots = static_cast<int64_t>(plan.unique_tokens.size());
  plan.token_row_offsets = static_cast<int64_t>(plan.ints.size());
  plan.token_row_ids = plan.token_row_offsets + slots + 1;
  plan.token_slot_ids = plan.token_row_ids + tokened;
  plan.ints.resize(plan.token_slot_ids + slots, 0);
  int32_t* iota = plan.ints.data() + plan.token_slot_ids;
  for (int64_t s = 0; s < slots; ++s) iota[s] = static_cast<int32_t>(s);
  const int32_t* slot = plan.ints.data() + plan.token_slot;
  int32_t* offsets = plan.ints.data() + plan.token_row_offsets;
  for (int64_t row = 0; row < n; ++row) {
    if (slot[row] >= 0) ++offsets[slot[row] + 1];
  }
  for (int64_t s = 0; s < slots; ++s) offsets[s + 1] += offsets[s];
  // offsets[s] is now the next free place of slot s; it ends at slot s + 1's start.
  int32_t* ids = plan.ints.data() + plan.token_row_ids;
  for (int64_t row = 0; row < n; ++row) {
    if (slot[row] >= 0) ids[offsets[slot[row]]++] = static_cast<int32_t>(row);
  }
  for (int64_t s = slots; s > 0; --s) offsets[s] = offsets[s - 1];
  offsets[0] = 0;
}

}  // namespace

absl::StatusOr<Plan> BuildPlan(const vertex::Function& f, const std::vector<Graph>& graphs,
                               const PlanOptions& options) {
  Plan plan;
  plan.graph_offsets.resize(graphs.size() + 1);
  plan.graph_offsets[0] = 0;
  int64_t edges = 0;
  for (size_t gi = 0; gi < graphs.size(); ++gi) {
    edges += static_cast<int64_t>(graphs[gi].child_ids.size());
    plan.graph_offsets[gi + 1] = plan.graph_offsets[gi] + graphs[gi].num_vertices();
  }
  const int64_t n = plan.graph_offsets.back();
  plan.num_rows = n;
  const std::vector<int32_t> round = Rounds(graphs, plan.graph_offsets, edges, options);
  // Counting sort of uids by round: rows are round-major, uid order within a round.
  int32_t rounds = 0;
  for (int32_t r : round) rounds = std::max(rounds, r + 1);
  plan.num_rounds = rounds;
  plan.round_offsets.assign(rounds + 1, 0);
  for (int32_t r : round) ++plan.round_offsets[r + 1];
  for (int r = 0; r < rounds; ++r) plan.round_offsets[r + 1] += plan.round_offsets[r];
  std::vector<int64_t> next(plan.round_offsets.begin(), plan.round_offsets.end() - 1);
  plan.row_of_uid.resize(n);
  for (int64_t u = 0; u < n; ++u) plan.row_of_uid[u] = next[round[u]]++;
  // Index arrays, all in `ints`, -1 until written; the reductions' ids last (at most one per
  // child id; trimmed below).
  int max_slot = -1;
  for (const vertex::Node& node : f.forward().nodes) {
    if (node.kind == vertex::OpKind::kGather) {
      max_slot = std::max(max_slot, static_cast<int>(node.index));
    }
  }
  const bool reduces = f.max_arity() < 0;
  int64_t size = 0;
  auto alloc = [&](int64_t count) {
    const int64_t off = size;
    size += count;
    return off;
  };
  for (int k = 0; k <= max_slot; ++k) plan.child_rows.push_back(alloc(n));
  for (int k = 0; k <= max_slot; ++k) plan.parent_of_slot.push_back(alloc(n));
  plan.uids = alloc(n);
  plan.tokens = alloc(n);
  plan.labels = alloc(n);
  plan.token_slot = alloc(n);
  if (reduces) {
    plan.reduce_offsets = alloc(n + 1);
    plan.reduce_ids = alloc(edges);
  }
  plan.ints.assign(size, -1);
  int32_t* ints = plan.ints.data();
  std::vector<int32_t*> child_rows(max_slot + 1), parent_of(max_slot + 1);
  for (int k = 0; k <= max_slot; ++k) {
    child_rows[k] = ints + plan.child_rows[k];
    parent_of[k] = ints + plan.parent_of_slot[k];
  }
  int32_t* uids = ints + plan.uids;
  int32_t* tokens = ints + plan.tokens;
  int32_t* labels = ints + plan.labels;
  int32_t* reduce_counts = reduces ? ints + plan.reduce_offsets + 1 : nullptr;
  const int64_t feat = f.pull_width();
  if (feat > 0) plan.features.assign(n * feat, 0.0f);
  std::vector<uint8_t> has_parent(n, 0);
  uint8_t shared = 0;
  int64_t slots_full_from = 0, with_token = 0;
  Hull token_rows, parent_rows;
  std::vector<Hull> slot_rows(max_slot + 1);
  // One pass in uid order: reads each graph in order, writes each vertex's row.
  const int64_t* row_of_uid = plan.row_of_uid.data();
  for (size_t gi = 0; gi < graphs.size(); ++gi) {
    const Graph& g = graphs[gi];
    const int64_t base = plan.graph_offsets[gi];
    const int64_t* rows = row_of_uid + base;
    const int32_t* off = g.child_offsets.data();
    const int32_t* ids = g.child_ids.data();
    const int32_t* tok = g.tokens.empty() ? nullptr : g.tokens.data();
    const int32_t* lab = g.labels.empty() ? nullptr : g.labels.data();
    const bool copy_features = feat > 0 && g.feature_dim == feat;
    for (int v = 0; v < g.num_vertices(); ++v) {
      const int64_t row = rows[v];
      uids[row] = static_cast<int32_t>(base + v);
      if (tok != nullptr) {
        tokens[row] = tok[v];
        if (tok[v] >= 0) {
          token_rows.Add(row);
          ++with_token;
        }
      }
      if (lab != nullptr) {
        labels[row] = lab[v];
        plan.labelled += lab[v] >= 0;
      }
      int32_t children = 0;
      if (off[v + 1] - off[v] <= max_slot) slots_full_from = std::max(slots_full_from, row + 1);
      for (int32_t j = off[v]; j < off[v + 1]; ++j) {
        const int k = j - off[v];
        const int32_t c = ids[j];
        const int32_t crow = c < 0 ? -1 : static_cast<int32_t>(rows[c]);
        if (k <= max_slot) child_rows[k][row] = crow;
        if (k <= max_slot && crow < 0) slots_full_from = std::max(slots_full_from, row + 1);
        if (crow < 0) continue;
        ++children;
        shared |= has_parent[crow];
        has_parent[crow] = 1;
        if (k <= max_slot) {
          slot_rows[k].Add(row);
          parent_of[k][crow] = std::max(parent_of[k][crow], static_cast<int32_t>(row));
        }
      }
      if (children > 0) parent_rows.Add(row);
      if (reduces) reduce_counts[row] = children;
      if (copy_features) {
        std::copy(g.features.begin() + v * feat, g.features.begin() + (v + 1) * feat,
                  plan.features.begin() + row * feat);
      }
    }
  }
  plan.unique_parents = shared == 0;
  plan.slots_full_from = slots_full_from;
  plan.token_rows = token_rows.Range();
  plan.tokens_dense = with_token == plan.token_rows.second - plan.token_rows.first;
  plan.parent_rows = parent_rows.Range();
  for (const Hull& h : slot_rows) plan.child_slot_rows.push_back(h.Range());
  if (reduces) {
    // Counts to CSR offsets, then each row's children's rows in slot order.
    int32_t* offsets = ints + plan.reduce_offsets;
    offsets[0] = 0;
    for (int64_t row = 0; row < n; ++row) offsets[row + 1] += offsets[row];
    int32_t* reduce_ids = ints + plan.reduce_ids;
    for (size_t gi = 0; gi < graphs.size(); ++gi) {
      const Graph& g = graphs[gi];
      const int64_t* rows = row_of_uid + plan.graph_offsets[gi];
      for (int v = 0; v < g.num_vertices(); ++v) {
        int32_t at = offsets[rows[v]];
        for (int32_t j = g.child_offsets[v]; j < g.child_offsets[v + 1]; ++j) {
          if (g.child_ids[j] >= 0) reduce_ids[at++] = static_cast<int32_t>(rows[g.child_ids[j]]);
        }
      }
    }
    plan.ints.resize(plan.reduce_ids + offsets[n]);
  }
  TokenSlots(f, plan);
  if (f.uses_tokens()) TokenRows(plan, with_token);
  return plan;
}

int64_t Plan::ArrayLength(int64_t offset) const {
  int64_t end = static_cast<int64_t>(ints.size());
  bool start_of_one = false;
  auto below = [&](int64_t start) {
    start_of_one |= start == offset;
    if (start > offset && start < end) end = start;
  };
  for (int64_t start : child_rows) below(start);
  for (int64_t start : parent_of_slot) below(start);
  for (int64_t start : {reduce_offsets, reduce_ids, tokens, labels, uids, token_slot,
                        token_row_offsets, token_row_ids, token_slot_ids}) {
    below(start);
  }
  return start_of_one ? end - offset : -1;
}

}  // namespace cavs::scheduler
