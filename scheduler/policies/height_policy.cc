// Height: round = 1 + the highest child's round, leaves 0; the fewest rounds any policy can
// give. One pass per graph where every child comes before its parent (trees read bottom-up),
// else Kahn's waves over the merged batch.
#include <algorithm>
#include <memory>

#include "scheduler/batching_policy.h"
#include "scheduler/policies/policy_graph.h"

namespace cavs::scheduler {
namespace {

class HeightPolicy final : public BatchingPolicy {
 public:
  std::string name() const override { return "height"; }
  std::vector<int32_t> Rounds(const BatchGraphs& batch) const override {
    std::vector<int32_t> round;
    if (policies::HeightsChildrenFirst(batch, &round)) return round;
    return policies::RoundsBottomUp(policies::Merge(batch), /*cap=*/0);
  }
};

}  // namespace

std::unique_ptr<BatchingPolicy> MakeHeightPolicy() { return std::make_unique<HeightPolicy>(); }

int32_t HeightRounds(const Graph& graph) {
  const std::vector<Graph> one = {graph};  // BatchGraphs holds the batch by reference
  const std::vector<int64_t> offsets = {0, graph.num_vertices()};
  int64_t edges = static_cast<int64_t>(graph.child_ids.size());
  const std::vector<int32_t> round = HeightPolicy().Rounds(BatchGraphs{one, offsets, edges});
  int32_t rounds = 0;
  for (int32_t r : round) rounds = std::max(rounds, r + 1);
  return rounds;
}

}  // namespace cavs::scheduler
