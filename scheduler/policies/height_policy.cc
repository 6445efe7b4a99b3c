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

std::vector<int32_t> HeightRounds(const std::vector<Graph>& graphs) {
  std::vector<int64_t> offsets = {0};
  int64_t edges = 0;
  for (const Graph& g : graphs) {
    offsets.push_back(offsets.back() + g.num_vertices());
    edges += static_cast<int64_t>(g.child_ids.size());
  }
  const std::vector<int32_t> round = HeightPolicy().Rounds(BatchGraphs{graphs, offsets, edges});
  std::vector<int32_t> rounds(graphs.size(), 0);
  for (size_t gi = 0; gi < graphs.size(); ++gi) {
    for (int64_t u = offsets[gi]; u < offsets[gi + 1]; ++u) {
      rounds[gi] = std::max(rounds[gi], round[static_cast<size_t>(u)] + 1);
    }
  }
  return rounds;
}

}  // namespace cavs::scheduler
