// Internal to distributed/: the cost model's queued chains (docs/distributed.md, "The cost
// model", queued(u)). Open MPI's TCP transport sends one pair of hosts' messages in order, so a
// unit's first bytes on a pair wait for the bytes the units started before it queued there,
// and the connections through one direction of a host's link share it fairly meanwhile.
//
// Its cost is the pairs: an allgather over H hosts puts bytes on all H^2 of them, and a
// row-sparse table on a PS with a shard per host has H such units. A pair whose wait cannot
// end its phase later than what is already known (bounded from above by its links' total rest)
// is not costed exactly; the result is the same.
//
// Thread-safety: a pure function.
#pragma once

#include <vector>

#include "distributed/collective_cost.h"
#include "distributed/cost_model.h"

namespace cavs::distributed::internal {

// Each unit's end when its chain is replayed from its start with its messages on each pair of
// hosts waiting for the backlog the earlier units left there. `phases`: per unit, in start
// order, its chain (Phase::pairs the bytes per ordered pair of hosts); `units`: their starts.
std::vector<double> QueuedChainEnds(const std::vector<std::vector<Phase>>& phases,
                                    const Resources& res, int hosts,
                                    const std::vector<UnitPrediction>& units);

}  // namespace cavs::distributed::internal
