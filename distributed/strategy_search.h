// The strategy search: per-parameter synchronization strategies for a model on a cluster,
// ranked by the cost model (distributed/cost_model.h). Pure and deterministic: the same
// profile, cluster and options give the same strategies in the same order.
//
// What it searches (docs/distributed.md, "The search"):
//   - dense parameters: allreduce in buckets (filled in backward order up to a cap, from one
//     bucket per parameter to one for all), flat or hierarchical (with several ranks on a
//     host), fp16 only where compression is allowed; or a parameter server with 1 shard, one
//     per host or one per rank, servers spread over the least-loaded hosts, rows split in
//     proportion to the servers' link bandwidth, over MPI's collectives or the direct route
//     (PsRoute: point to point, no rank forwarding another's shard);
//   - row-sparse parameters: sparse allgather or the same PS choices (never allreduce: a
//     row-sparse table never goes dense);
//   - tiny tensors (under tiny_bytes) always ride in an allreduce bucket.
// First every combination of the global choices (bucket cap, topology, compression) with the
// sparse tables' choices and an all-PS form, then, from the best few, moves of one parameter
// at a time (largest first) while they lower the predicted step.
//
// Ties (steps equal to the microsecond) are broken by fewer units, then by fewer PS shards on
// the collective route, then by the strategy's text (SerializeStrategy) in byte order, so the
// order never depends on the order candidates were met. A strategy that can neither rank nor
// be moved to is costed only until its step is sure to be above what it is compared with
// (CostModel::Predict with a bound): the result is that of costing all in full.
//
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "distributed/cluster_spec.h"
#include "distributed/cost_model.h"
#include "distributed/model_profile.h"
#include "distributed/strategy.h"

namespace cavs::distributed {

struct SearchOptions {
  bool allow_compression = false;  // fp16 buckets: faster, but the gradients change
  int top_k = 5;                   // how many strategies to return
  // Bucket caps tried, in bytes (fusion trades latency and overhead for a later start).
  std::vector<int64_t> bucket_bytes = {0,       64 << 10, 256 << 10, 1 << 20,
                                       4 << 20, 16 << 20, 64 << 20,  int64_t{1} << 40};
  int64_t tiny_bytes = 64 << 10;  // always fused into an allreduce bucket
  int start_points = 4;           // the best base strategies improved one parameter at a time
  int rounds = 3;                 // passes over the parameters per start point
  // Strategies ranked beside the searched ones, under their own names (e.g. the builders',
  // so that the best returned is never predicted slower than any of them).
  std::vector<Strategy> seeds;
};

struct SearchResult {
  Strategy strategy;  // named "auto" (or a seed's name), world_size the cluster's
  Prediction prediction;
};

struct SearchReport {
  std::vector<SearchResult> best;  // up to top_k, best first
  int64_t evaluated = 0;           // distinct strategies costed
  // Of them, those costed only until their step was sure to be too slow to rank or to be chosen
  // (CostModel::Predict with a bound).
  int64_t bounded = 0;
};

// Errors: a profile without parameters, a cluster without ranks, top_k < 1, no bucket cap, a
// seed that does not fit the profile and cluster (CostModel::Predict's errors).
[[nodiscard]] absl::StatusOr<SearchReport> SearchStrategies(const ModelProfile& profile,
                                                            const ClusterSpec& cluster,
                                                            const SearchOptions& options = {});

}  // namespace cavs::distributed
