// Plan: how one batch of graphs runs — rounds, the round-major vertex order, and every index
// array the kernels read — built on the host in one O(V + E) pass.
//
// Rows. The batch's vertices are renumbered round-major: round r owns rows
// [round_offsets[r], round_offsets[r + 1]), so a round's ops read and write contiguous rows of
// every [num_rows, width] buffer. A vertex's uid is its index in input order (graph offsets
// plus its id in its graph); uid_of_row maps back.
//
// Index arrays. All int32 arrays live in one vector (`ints`) at the offsets below, so a device
// executor uploads a batch's plan in one transfer. Child rows are rows (not uids), -1 where a
// slot is empty; the reduction CSR lists the children's rows of every row.
//
// Rounds come from a batching policy (scheduler/batching_policy.h): height (the default),
// depth, agenda, or the caller's own (PlanOptions::custom).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/batching_policy.h"
#include "scheduler/graph.h"
#include "vertex/function.h"

namespace cavs::scheduler {

enum class Policy { kHeight, kDepth, kAgenda };
[[nodiscard]] absl::StatusOr<Policy> ParsePolicy(const std::string& name);

struct PlanOptions {
  Policy policy = Policy::kHeight;
  int64_t max_round_rows = 0;  // kAgenda: cap per round (0: no cap)
  // A policy of the caller's, used instead of `policy` where set. Its rounds are checked (an
  // InvalidArgument naming the policy, the sample and the vertex) and empty ones dropped.
  std::shared_ptr<const BatchingPolicy> custom;
};

using RowRange = std::pair<int64_t, int64_t>;  // rows [first, second); empty if first >= second

struct Plan {
  std::string policy;  // the name of the batching policy that made its rounds
  int64_t num_rows = 0;
  int num_rounds = 0;
  std::vector<int64_t> round_offsets;  // num_rounds + 1

  std::vector<int32_t> ints;  // every index array below, back to back
  // Offsets into `ints` (each array is num_rows long unless noted; -1 in an entry: absent).
  std::vector<int64_t> child_rows;  // per gather slot k = 0..max_slot: row of child k
  // Per gather slot k: for a child row, the row of the parent whose slot-k child it is (the
  // last such parent where parents are not unique; only used where they are), else -1.
  std::vector<int64_t> parent_of_slot;
  int64_t reduce_offsets = -1;         // num_rows + 1 CSR offsets into reduce_ids (if reductions)
  int64_t reduce_ids = -1;             // children's rows, in slot order
  int64_t tokens = -1;                 // token per row (-1: none)
  int64_t labels = -1;                 // label per row (-1: unlabelled)
  int64_t uids = -1;                   // uid per row
  int64_t token_slot = -1;             // per row: index into unique_tokens, or -1
  std::vector<int64_t> unique_tokens;  // sorted distinct tokens of the batch
  // The rows of each distinct token, a CSR (where the function has tokens): token_row_offsets
  // (unique_tokens.size() + 1) into token_row_ids, each token's rows ascending. The embedding
  // gradient sums its rows per token with it, in a fixed order (no atomics, nothing zeroed).
  int64_t token_row_offsets = -1;
  int64_t token_row_ids = -1;
  // 0, 1, ..., unique_tokens.size() - 1 (where the function has tokens): the rows of a second
  // embedding's gradient, summed apart, are added onto the first's through it.
  int64_t token_slot_ids = -1;
  std::vector<float> features;         // [num_rows, feature width] row-major, or empty
  std::vector<int64_t> row_of_uid;     // uid -> row
  std::vector<int64_t> graph_offsets;  // uid of each graph's vertex 0; size graphs + 1
  int64_t labelled = 0;                // rows with a label
  bool unique_parents = true;          // no vertex is a child of two slots (trees, chains)
  // The first row from which every row has a child in every gather slot (0 to max slot): the
  // rows before it are those the engine zeroes in the rows children push into (on trees of
  // leaves and full internal vertices, round 0's rows).
  int64_t slots_full_from = 0;
  // Hulls of the rows that carry a token, that have child slot k, that have any child: where
  // embeddings, gathers and reductions can be nonzero (scheduler/row_support.h).
  RowRange token_rows{0, 0};
  bool tokens_dense = true;  // every row of token_rows has a token
  std::vector<RowRange> child_slot_rows;
  RowRange parent_rows{0, 0};

  const int32_t* Ints(int64_t offset) const { return ints.data() + offset; }
  // The length of the index array that starts at `offset`, or -1 where no array starts there.
  int64_t ArrayLength(int64_t offset) const;
  int64_t RoundRows(int r) const { return round_offsets[r + 1] - round_offsets[r]; }
};

// Builds the plan for `graphs` under `f`. REQUIRES: the batch passed ValidateBatch(f, graphs).
[[nodiscard]] absl::StatusOr<Plan> BuildPlan(const vertex::Function& f,
                                             const std::vector<Graph>& graphs,
                                             const PlanOptions& options = {});

// Recomputes the plan's hulls (token_rows, tokens_dense, child_slot_rows, parent_rows) over its
// rows from `first_row` on only: for a batch whose rows before it ran in an earlier batch and
// are carried over (Engine::RunJoining), so that the ops that run from there on see the
// supports and the token density of those rows alone.
void RestrictHulls(Plan& plan, int64_t first_row);

}  // namespace cavs::scheduler
