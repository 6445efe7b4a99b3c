// Depth: round = max depth - depth, the depth of a vertex its longest path from a root: every
// root in the last round, a vertex as late as it can run. The order a top-down function needs.
#include <memory>

#include "scheduler/batching_policy.h"
#include "scheduler/policies/policy_graph.h"

namespace cavs::scheduler {
namespace {

class DepthPolicy final : public BatchingPolicy {
 public:
  std::string name() const override { return "depth"; }
  std::vector<int32_t> Rounds(const BatchGraphs& batch) const override {
    std::vector<int32_t> height;
    const bool heights = policies::HeightsChildrenFirst(batch, &height);
    const policies::Merged m = policies::Merge(batch);
    if (!heights) height = policies::RoundsBottomUp(m, /*cap=*/0);
    return policies::RoundsByDepth(m, height);
  }
};

}  // namespace

std::unique_ptr<BatchingPolicy> MakeDepthPolicy() { return std::make_unique<DepthPolicy>(); }

}  // namespace cavs::scheduler
