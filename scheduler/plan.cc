#include "scheduler/plan.h"

#include <algorithm>
#include <bit>
#include <memory>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "scheduler/batching_policy.h"

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

// The built-in policy `options.policy` names.
std::unique_ptr<BatchingPolicy> BuiltinPolicy(const PlanOptions& options) {
  switch (options.policy) {
    case Policy::kDepth:
      return MakeDepthPolicy();
    case Policy::kAgenda:
      return MakeAgendaPolicy(options.max_round_rows);
    case Policy::kHeight:
      break;
  }
  return MakeHeightPolicy();
}

// A caller's policy's rounds, checked (one per uid, none negative, every child before its
// parent) and closed up (empty rounds dropped, the order kept).
absl::Status CheckRounds(const BatchingPolicy& policy, const BatchGraphs& batch,
                         std::vector<int32_t>& round) {
  const int64_t n = batch.graph_offsets.back();
  if (static_cast<int64_t>(round.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("batching policy '", policy.name(), "' gave ",
                                                   round.size(), " rounds for ", n, " vertices"));
  }
  for (size_t gi = 0; gi < batch.graphs.size(); ++gi) {
    const Graph& g = batch.graphs[gi];
    const int32_t* r = round.data() + batch.graph_offsets[gi];
    for (int v = 0; v < g.num_vertices(); ++v) {
      if (r[v] < 0) {
        return absl::InvalidArgumentError(absl::StrCat("batching policy '", policy.name(),
                                                       "': sample ", gi, " vertex ", v,
                                                       " has round ", r[v]));
      }
      for (int32_t j = g.child_offsets[v]; j < g.child_offsets[v + 1]; ++j) {
        const int32_t c = g.child_ids[j];
        if (c >= 0 && r[c] >= r[v]) {
          return absl::InvalidArgumentError(absl::StrCat(
              "batching policy '", policy.name(), "': sample ", gi, " vertex ", v, " (round ", r[v],
              ") is not after its child ", c, " (round ", r[c], ")"));
        }
      }
    }
  }
  int32_t rounds = 0;
  for (int32_t r : round) rounds = std::max(rounds, r + 1);
  std::vector<int32_t> dense(rounds, 0);
  for (int32_t r : round) dense[r] = 1;
  int32_t next = 0;
  for (int32_t& d : dense) d = d ? next++ : -1;
  for (int32_t& r : round) r = dense[r];
  return absl::OkStatus();
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
  const BatchGraphs batch{graphs, plan.graph_offsets, edges};
  std::vector<int32_t> round;
  if (options.custom != nullptr) {
    round = options.custom->Rounds(batch);
    CAVS_RETURN_IF_ERROR(CheckRounds(*options.custom, batch, round));
    plan.policy = options.custom->name();
  } else {
    const std::unique_ptr<BatchingPolicy> policy = BuiltinPolicy(options);
    round = policy->Rounds(batch);
    plan.policy = policy->name();
  }
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

void RestrictHulls(Plan& plan, int64_t first_row) {
  const int64_t n = plan.num_rows;
  const int32_t* tokens = plan.tokens >= 0 ? plan.Ints(plan.tokens) : nullptr;
  const int32_t* reduce = plan.reduce_offsets >= 0 ? plan.Ints(plan.reduce_offsets) : nullptr;
  Hull token_rows, parent_rows;
  std::vector<Hull> slot_rows(plan.child_rows.size());
  int64_t with_token = 0;
  for (int64_t row = first_row; row < n; ++row) {
    if (tokens != nullptr && tokens[row] >= 0) {
      token_rows.Add(row);
      ++with_token;
    }
    bool parent = reduce != nullptr && reduce[row + 1] > reduce[row];
    for (size_t k = 0; k < slot_rows.size(); ++k) {
      if (plan.Ints(plan.child_rows[k])[row] >= 0) {
        slot_rows[k].Add(row);
        parent = true;
      }
    }
    if (parent) parent_rows.Add(row);
  }
  plan.token_rows = token_rows.Range();
  plan.tokens_dense = with_token == plan.token_rows.second - plan.token_rows.first;
  plan.parent_rows = parent_rows.Range();
  for (size_t k = 0; k < slot_rows.size(); ++k) plan.child_slot_rows[k] = slot_rows[k].Range();
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
