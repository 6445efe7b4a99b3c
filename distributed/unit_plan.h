// The units a strategy becomes, in the order they start: one planner for the synchronizer that
// runs them (GradientSynchronizer) and the cost model that prices them (CostModel), so that
// what is predicted is what runs. Each synchronizer kind plans its parameters' units
// (distributed/kinds/):
//
//   - an allreduce group is one bucket unit, keyed by its earliest-created parameter (entries
//     of one fusion group share the unit their earliest one planned);
//   - a PS synchronizer is one unit per shard (rows [begin, end), its server), dense or
//     row-sparse as the parameter's gradient;
//   - a sparse synchronizer is one unit.
// Units start latest key first (backward produces the latest-created parameters' gradients
// first), a parameter's PS shards in row order.
//
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "distributed/strategy.h"

namespace cavs::distributed {

enum class UnitKind { kBucket, kPsShard, kSparse, kPsSparseShard };
inline constexpr int kNumUnitKinds = 4;

// "allreduce", "ps", "sparse", "sparse ps": for reports.
const char* UnitKindName(UnitKind kind);

// What the planner needs of a parameter.
struct UnitParam {
  std::string name;
  int64_t rows = 0;     // the first dimension (1 for a scalar)
  bool sparse = false;  // a row-sparse gradient
};

struct UnitSpec {
  UnitKind kind = UnitKind::kBucket;
  int key = 0;              // its earliest-created parameter (index into the parameters)
  int shard = 0;            // the shard of a PS parameter
  std::vector<int> params;  // the parameters it covers, in creation order
  int group = 0;            // a bucket's allreduce group
  Compressor compressor = Compressor::kNone;
  AllReduceTopology topology = AllReduceTopology::kFlat;
  int64_t begin = 0, end = 0;            // a PS shard's rows; a sparse unit's: all of them
  int server = -1;                       // a PS shard's server rank
  PsRoute route = PsRoute::kCollective;  // a PS shard's route
};

// REQUIRES: `strategy` has one entry for every parameter (ValidateStrategy, or the cost
// model's checks), its servers named by rank (ResolveHostPlacements).
std::vector<UnitSpec> PlanUnits(const Strategy& strategy, const std::vector<UnitParam>& params);

}  // namespace cavs::distributed
