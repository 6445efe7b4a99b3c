// Batching policies: the round each vertex of a batch runs in. Round r's vertices run together
// (one row range of every buffer, one launch per op), after every vertex of the rounds before;
// so a policy must put every child in an earlier round than its parent. Policies give the same
// results and differ in how many rounds there are and how full they are.
//
// Built in (scheduler/policies/, one file each; PlanOptions::policy names them):
//   - height (default): round = height, leaves 0: the fewest rounds (Cavs's and Fold's).
//   - depth: round = max depth - depth, depth counted from the roots: top-down order, the rounds
//     a top-down function needs.
//   - agenda: DyNet's agenda: each round takes the ready vertices (all children done), at most
//     `max_round_rows` of them, oldest uid first; bounds a round's memory.
// A caller's own policy implements BatchingPolicy and goes in PlanOptions::custom; BuildPlan
// checks its rounds (an error naming the policy, the sample and the vertex) and closes gaps.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "scheduler/graph.h"

namespace cavs::scheduler {

// A batch as a policy sees it: the graphs in input order, and the uid of each graph's vertex 0
// (a vertex's uid is its graph's offset plus its id; size graphs + 1).
struct BatchGraphs {
  const std::vector<Graph>& graphs;
  const std::vector<int64_t>& graph_offsets;
  int64_t edges = 0;  // child slots over all graphs (empty ones included)
};

class BatchingPolicy {
 public:
  virtual ~BatchingPolicy() = default;
  virtual std::string name() const = 0;
  // The round of every uid (graph_offsets.back() of them), each child's below its parent's.
  // Called from several threads at once where plans are made ahead (PlanQueue): const, and
  // without state shared between calls.
  virtual std::vector<int32_t> Rounds(const BatchGraphs& batch) const = 0;
};

std::unique_ptr<BatchingPolicy> MakeHeightPolicy();
// Per graph, the rounds the height policy gives it alone: its height + 1 (0 without vertices).
std::vector<int32_t> HeightRounds(const std::vector<Graph>& graphs);
std::unique_ptr<BatchingPolicy> MakeDepthPolicy();
// max_round_rows: the cap per round (0: none).
std::unique_ptr<BatchingPolicy> MakeAgendaPolicy(int64_t max_round_rows);

}  // namespace cavs::scheduler
