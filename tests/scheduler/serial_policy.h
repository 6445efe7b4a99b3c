// A batching policy of a user's, for tests: one vertex a round, in a children-first order
// found by depth-first search over each graph in turn (the most rounds any policy can give).
#pragma once

#include <string>
#include <vector>

#include "scheduler/batching_policy.h"

namespace cavs::scheduler::testing {

class SerialPolicy final : public BatchingPolicy {
 public:
  std::string name() const override { return "serial"; }
  std::vector<int32_t> Rounds(const BatchGraphs& batch) const override {
    std::vector<int32_t> round(batch.graph_offsets.back(), -1);
    int32_t next = 0;
    for (size_t gi = 0; gi < batch.graphs.size(); ++gi) {
      const Graph& g = batch.graphs[gi];
      int32_t* r = round.data() + batch.graph_offsets[gi];
      // Post-order with an explicit stack: (vertex, next child slot to look at).
      std::vector<std::pair<int, int>> stack;
      for (int root = 0; root < g.num_vertices(); ++root) {
        if (r[root] >= 0) continue;
        stack.push_back({root, 0});
        while (!stack.empty()) {
          auto& [v, k] = stack.back();
          if (k < g.num_children(v)) {
            const int c = g.child(v, k++);
            if (c >= 0 && r[c] < 0) stack.push_back({c, 0});
            continue;
          }
          if (r[v] < 0) r[v] = next++;
          stack.pop_back();
        }
      }
    }
    return round;
  }
};

}  // namespace cavs::scheduler::testing
