// What the built-in batching policies share: the batch as one graph over uids, heights read in
// one pass where children come first, Kahn's ready waves, depths from the roots.
#pragma once

#include <cstdint>
#include <vector>

#include "scheduler/batching_policy.h"

namespace cavs::scheduler::policies {

// The batch as one graph over uids: CSR children (-1 kept for empty slots).
struct Merged {
  std::vector<int64_t> child_offsets;
  std::vector<int32_t> children;
  int64_t n = 0;
};
Merged Merge(const BatchGraphs& batch);

// Height (1 + the highest child, leaves 0) in one pass over each graph into `height`, if every
// child comes before its parent (trees read bottom-up); false if one does not.
bool HeightsChildrenFirst(const BatchGraphs& batch, std::vector<int32_t>* height);

// Kahn's algorithm, children first: round = the wave in which a vertex became ready, each wave
// at most `cap` vertices, oldest uid first (cap 0: no cap, and then round = height).
std::vector<int32_t> RoundsBottomUp(const Merged& m, int64_t cap);

// Depth from the roots (the longest path), as round = max depth - depth; `height` is any
// children-first numbering (heights).
std::vector<int32_t> RoundsByDepth(const Merged& m, const std::vector<int32_t>& height);

}  // namespace cavs::scheduler::policies
