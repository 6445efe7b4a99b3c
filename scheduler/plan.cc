#include "scheduler/plan.h"

#include <algorithm>

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

// Grows `r` to hold `row` (rows arrive in increasing order).
void Extend(RowRange& r, int64_t row) {
  if (r.first >= r.second) r.first = row;
  r.second = row + 1;
}

// The batch as one graph over uids: CSR children (-1 kept for empty slots).
struct Merged {
  std::vector<int64_t> child_offsets{0};
  std::vector<int32_t> children;
  std::vector<int32_t> parent_count;
  int64_t n = 0;
  bool children_first = true;  // every child's uid below its parent's (trees read bottom-up)
};

Merged Merge(const std::vector<Graph>& graphs, std::vector<int64_t>* graph_offsets) {
  Merged m;
  graph_offsets->assign(1, 0);
  for (const Graph& g : graphs) {
    const int32_t base = static_cast<int32_t>(m.n);
    for (int v = 0; v < g.num_vertices(); ++v) {
      for (int k = 0; k < g.num_children(v); ++k) {
        const int32_t c = g.child(v, k);
        m.children.push_back(c < 0 ? -1 : base + c);
        m.children_first &= c < v;
      }
      m.child_offsets.push_back(static_cast<int64_t>(m.children.size()));
    }
    m.n += g.num_vertices();
    graph_offsets->push_back(m.n);
  }
  m.parent_count.assign(m.n, 0);
  for (int32_t c : m.children) {
    if (c >= 0) ++m.parent_count[c];
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

// Height (1 + the highest child, leaves 0) in one pass, for a batch whose children all come
// before their parents.
std::vector<int32_t> HeightsChildrenFirst(const Merged& m) {
  std::vector<int32_t> height(m.n, 0);
  for (int64_t v = 0; v < m.n; ++v) {
    int32_t h = 0;
    for (int64_t j = m.child_offsets[v]; j < m.child_offsets[v + 1]; ++j) {
      const int32_t c = m.children[j];
      if (c >= 0) h = std::max(h, height[c] + 1);
    }
    height[v] = h;
  }
  return height;
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

}  // namespace

absl::StatusOr<Plan> BuildPlan(const vertex::Function& f, const std::vector<Graph>& graphs,
                               const PlanOptions& options) {
  Plan plan;
  const Merged m = Merge(graphs, &plan.graph_offsets);
  plan.num_rows = m.n;
  const bool agenda = options.policy == Policy::kAgenda;
  std::vector<int32_t> round = !agenda && m.children_first
                                   ? HeightsChildrenFirst(m)
                                   : RoundsBottomUp(m, agenda ? options.max_round_rows : 0);
  if (options.policy == Policy::kDepth) round = RoundsByDepth(m, round);
  for (int32_t c : m.parent_count) plan.unique_parents &= c <= 1;
  // Counting sort of uids by round: rows are round-major, uid order within a round.
  int32_t rounds = 0;
  for (int32_t r : round) rounds = std::max(rounds, r + 1);
  plan.num_rounds = rounds;
  plan.round_offsets.assign(rounds + 1, 0);
  for (int32_t r : round) ++plan.round_offsets[r + 1];
  for (int r = 0; r < rounds; ++r) plan.round_offsets[r + 1] += plan.round_offsets[r];
  std::vector<int64_t> next(plan.round_offsets.begin(), plan.round_offsets.end() - 1);
  plan.row_of_uid.resize(m.n);
  std::vector<int64_t> uid_of_row(m.n);
  for (int64_t u = 0; u < m.n; ++u) {
    const int64_t row = next[round[u]]++;
    plan.row_of_uid[u] = row;
    uid_of_row[row] = u;
  }
  // Index arrays.
  int max_slot = -1;
  for (const vertex::Node& n : f.forward().nodes) {
    if (n.kind == vertex::OpKind::kGather) max_slot = std::max(max_slot, static_cast<int>(n.index));
  }
  auto alloc = [&](int64_t count) {
    const int64_t off = static_cast<int64_t>(plan.ints.size());
    plan.ints.resize(plan.ints.size() + count, -1);
    return off;
  };
  for (int k = 0; k <= max_slot; ++k) plan.child_rows.push_back(alloc(m.n));
  for (int k = 0; k <= max_slot; ++k) plan.parent_of_slot.push_back(alloc(m.n));
  plan.child_slot_rows.assign(max_slot + 1, RowRange{0, 0});
  plan.uids = alloc(m.n);
  plan.tokens = alloc(m.n);
  plan.labels = alloc(m.n);
  plan.token_slot = alloc(m.n);
  const bool reduces = f.max_arity() < 0;
  if (reduces) plan.reduce_offsets = alloc(m.n + 1);
  // Per-graph attributes by uid.
  std::vector<const Graph*> graph_of(m.n);
  std::vector<int32_t> local(m.n);
  for (size_t gi = 0; gi < graphs.size(); ++gi) {
    for (int v = 0; v < graphs[gi].num_vertices(); ++v) {
      graph_of[plan.graph_offsets[gi] + v] = &graphs[gi];
      local[plan.graph_offsets[gi] + v] = v;
    }
  }
  const int64_t feat = f.pull_width();
  if (feat > 0) plan.features.assign(m.n * feat, 0.0f);
  std::vector<int32_t> reduce_ids;
  for (int64_t row = 0; row < m.n; ++row) {
    const int64_t u = uid_of_row[row];
    const Graph& g = *graph_of[u];
    const int v = local[u];
    plan.ints[plan.uids + row] = static_cast<int32_t>(u);
    const int32_t token = g.tokens.empty() ? -1 : g.tokens[v];
    const int32_t label = g.labels.empty() ? -1 : g.labels[v];
    plan.ints[plan.tokens + row] = token;
    plan.ints[plan.labels + row] = label;
    plan.labelled += label >= 0;
    if (token >= 0) Extend(plan.token_rows, row);
    for (int64_t j = m.child_offsets[u]; j < m.child_offsets[u + 1]; ++j) {
      const int k = static_cast<int>(j - m.child_offsets[u]);
      const int32_t c = m.children[j];
      const int32_t crow = c < 0 ? -1 : static_cast<int32_t>(plan.row_of_uid[c]);
      if (k <= max_slot) plan.ints[plan.child_rows[k] + row] = crow;
      if (k <= max_slot && crow >= 0) {
        plan.ints[plan.parent_of_slot[k] + crow] = static_cast<int32_t>(row);
      }
      if (crow >= 0) {
        if (k <= max_slot) Extend(plan.child_slot_rows[k], row);
        Extend(plan.parent_rows, row);
      }
      if (reduces && crow >= 0) reduce_ids.push_back(crow);
    }
    if (reduces) plan.ints[plan.reduce_offsets + row + 1] = static_cast<int32_t>(reduce_ids.size());
    if (feat > 0 && g.feature_dim == feat) {
      std::copy(g.features.begin() + v * feat, g.features.begin() + (v + 1) * feat,
                plan.features.begin() + row * feat);
    }
  }
  if (reduces) {
    plan.ints[plan.reduce_offsets] = 0;
    plan.reduce_ids = static_cast<int64_t>(plan.ints.size());
    plan.ints.insert(plan.ints.end(), reduce_ids.begin(), reduce_ids.end());
  }
  // Distinct tokens (for the row-sparse embedding gradient) and each row's slot among them:
  // marks in a vocabulary-sized table where that is not much larger than the batch, else a
  // sort.
  const int32_t* tokens = plan.ints.data() + plan.tokens;
  const int64_t vocab = f.uses_tokens() ? f.vocab_size() : 0;
  if (vocab > 0 && vocab <= 16 * m.n + 65536) {
    std::vector<int32_t> slot(vocab, -1);
    for (int64_t row = 0; row < m.n; ++row) {
      if (tokens[row] >= 0) slot[tokens[row]] = 0;
    }
    for (int64_t t = 0; t < vocab; ++t) {
      if (slot[t] < 0) continue;
      slot[t] = static_cast<int32_t>(plan.unique_tokens.size());
      plan.unique_tokens.push_back(t);
    }
    for (int64_t row = 0; row < m.n; ++row) {
      if (tokens[row] >= 0) plan.ints[plan.token_slot + row] = slot[tokens[row]];
    }
    return plan;
  }
  for (int64_t row = 0; row < m.n; ++row) {
    if (tokens[row] >= 0) plan.unique_tokens.push_back(tokens[row]);
  }
  std::sort(plan.unique_tokens.begin(), plan.unique_tokens.end());
  plan.unique_tokens.erase(std::unique(plan.unique_tokens.begin(), plan.unique_tokens.end()),
                           plan.unique_tokens.end());
  for (int64_t row = 0; row < m.n; ++row) {
    const int32_t t = tokens[row];
    if (t < 0) continue;
    plan.ints[plan.token_slot + row] = static_cast<int32_t>(
        std::lower_bound(plan.unique_tokens.begin(), plan.unique_tokens.end(), t) -
        plan.unique_tokens.begin());
  }
  return plan;
}

}  // namespace cavs::scheduler
