// Builders: strategies (distributed/strategy.h) for a model's parameters and a world size.
//
//   "allreduce"       dense gradients fused into buckets of about bucket_bytes, filled in
//                     reverse creation order (the order backward finishes them, as in PyTorch
//                     DDP), so the first bucket can start while backward still runs; row-sparse
//                     gradients use Sparse (an allreduce of an embedding table would be dense).
//   "ps"              every parameter on one server, round-robin over ranks in creation order.
//   "ps-lb"           every parameter on one server, greedily balancing bytes: largest first,
//                     each to the least-loaded rank (ties to the lower rank).
//   "partitioned-ps"  as ps-lb, but a tensor of at least partition_min_bytes with two or more
//                     rows is split into min(world_size, rows) row shards placed on the
//                     least-loaded distinct servers: even, or in proportion to server_weights.
//   "hybrid"          row-sparse gradients by Sparse allgather (or load-balanced PS with
//                     hybrid_sparse_ps), dense ones by allreduce buckets.
//   "hier-allreduce", "hier-hybrid"
//                     allreduce and hybrid with every bucket hierarchical (reduce within each
//                     host, allreduce among one leader per host, broadcast within the host).
//
// Builders are deterministic functions of the parameters' names, shapes and order, so every
// rank builds the same strategy. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/parameter.h"
#include "distributed/strategy.h"

namespace cavs::distributed {

struct BuildOptions {
  int64_t bucket_bytes = int64_t{25} << 20;        // allreduce and hybrid: bucket capacity
  Compressor compressor = Compressor::kNone;       // allreduce and hybrid: on every bucket
  int64_t partition_min_bytes = int64_t{1} << 20;  // partitioned-ps: split tensors this large
  bool hybrid_sparse_ps = false;  // hybrid: sparse gradients to PS instead of Sparse allgather
  // allreduce and hybrid: how every bucket crosses hosts (the hier- builders set hierarchical).
  AllReduceTopology topology = AllReduceTopology::kFlat;
  // partitioned-ps: per rank, a weight (e.g. its link's bandwidth); a split tensor's shards get
  // rows in proportion to their servers' weights, so a server behind a slower link serves fewer.
  // Empty: even shards.
  std::vector<double> server_weights;
};

// The builder names BuildStrategy accepts, in the order listed above.
const std::vector<std::string>& StrategyBuilderNames();
// Whether `name` is one of StrategyBuilderNames().
bool IsStrategyBuilder(absl::string_view name);

// Builds the named strategy for `store` over `world_size` ranks. Errors: an unknown name (the
// message lists the known ones), world_size < 1, a non-positive bucket size.
[[nodiscard]] absl::StatusOr<Strategy> BuildStrategy(absl::string_view name,
                                                     const core::ParameterStore& store,
                                                     int world_size,
                                                     const BuildOptions& options = {});

}  // namespace cavs::distributed
