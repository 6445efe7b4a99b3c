// Height: round = 1 + the highest child's round, leaves 0; the fewest rounds any policy can
// give. One pass per graph where every child comes before its parent (trees read bottom-up),
// else Kahn's waves over the merged batch.
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

}  // namespace cavs::scheduler
