// Strategy: how each parameter's gradient is synchronized across ranks, as plain data (in the
// spirit of AutoDist/AutoSync): one synchronizer per parameter, written to and read from a
// readable text file, built by the builders (distributed/builders.h) or by hand, and checked
// identical on every rank before the first step (distributed/verify.h).
//
// Synchronizers:
//   AllReduce{group, compressor}: dense gradients; parameters of one group are fused into one
//     buffer (a bucket) and summed with one allreduce; fp16 halves the bytes on the wire.
//   ParameterServer{shards}: the gradient is reduced to a server rank, which sends the sum back.
//     Large tensors may be split into row shards, each with its own server. Dense or sparse.
//   Sparse{}: row-sparse gradients; every rank gathers every rank's touched rows and values,
//     then sums duplicate rows.
//
// Text format (docs/distributed.md), one item per line, '#' starts a comment:
//   version 1
//   name hybrid
//   world_size 4
//   param embed/E sparse
//   param fc/W allreduce group=0 compressor=none
//   param fc/b allreduce group=1 compressor=none topology=hierarchical
//   param out/W ps placement=1,3 rows=0,512,1000 staleness=0
//   param out/b ps placement=h1.0 staleness=0          # host 1's first rank
//   param fc2/W ps placement=1,2 staleness=0 route=direct
// Names with spaces, quotes or '#' are written as C-escaped strings in double quotes.
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/parameter.h"

namespace cavs::distributed {

enum class Compressor { kNone, kFp16 };

// "none", "fp16".
const char* CompressorName(Compressor c);

// How an allreduce crosses hosts: kFlat, one allreduce over every rank; kHierarchical, a reduce
// to each host's leader (its lowest rank) over shared memory, an allreduce among the leaders
// over the network, and a broadcast within each host (Horovod's hierarchical allreduce), so
// that each host sends one copy of the bucket instead of one per rank.
enum class AllReduceTopology { kFlat, kHierarchical };

// "flat", "hierarchical".
const char* TopologyName(AllReduceTopology t);

struct AllReduceSync {
  int group = 0;  // bucket id: parameters with the same group are fused into one allreduce
  Compressor compressor = Compressor::kNone;
  AllReduceTopology topology = AllReduceTopology::kFlat;

  friend bool operator==(const AllReduceSync&, const AllReduceSync&) = default;
};

// A server named by its host instead of its rank: the `local`-th rank (0: the lowest) of the
// `host`-th host (hosts in the order of their lowest rank; Communicator::DiscoverTopology).
// Written hH.L (`h1.0`, or `h1` for local rank 0): a strategy that means the same on any
// number of ranks per host.
struct HostRank {
  int host = 0;
  int local = 0;

  friend bool operator==(const HostRank&, const HostRank&) = default;
};

// How a PS shard's gradient reaches its server and the sum comes back: kCollective, MPI's
// reduce and broadcast (libnbc's binomial trees: a rank may forward other ranks' data, so a
// slow host can carry a shard it does not serve); kDirect, point to point, each rank sends
// its piece straight to the server, which adds them in rank order and sends the sum straight
// back to each (the push and pull of a classic parameter server): every rank's link carries
// the shard once each way, the server's (W - 1) times.
enum class PsRoute { kCollective, kDirect };

// "collective", "direct".
const char* RouteName(PsRoute r);

struct ParameterServerSync {
  // Server rank of each shard; one entry for an unsharded parameter. Empty where the servers
  // are named by host (host_placement) until ResolveHostPlacements fills it.
  std::vector<int> placement;
  // Shard boundaries in rows: placement.size() + 1 increasing values from 0 to the parameter's
  // rows. Empty: even split (see ShardRowSplits).
  std::vector<int64_t> row_splits;
  // 0: synchronous. k > 0: a rank may run up to k steps ahead of the servers (bounded
  // staleness); recorded and checked, but the synchronizer supports only 0 so far.
  int staleness = 0;
  // Servers by host, one per shard, or empty: placement names ranks.
  std::vector<HostRank> host_placement;
  PsRoute route = PsRoute::kCollective;

  friend bool operator==(const ParameterServerSync&, const ParameterServerSync&) = default;
};

struct SparseSync {
  friend bool operator==(const SparseSync&, const SparseSync&) = default;
};

// One alternative per synchronizer kind. Everything else about a kind (its text, checks, units
// and cost) lives in its file pair in distributed/kinds/, listed once in kinds/kind.cc.
using ParamSync = std::variant<AllReduceSync, ParameterServerSync, SparseSync>;

struct ParamStrategy {
  std::string param;
  ParamSync sync;

  friend bool operator==(const ParamStrategy&, const ParamStrategy&) = default;
};

struct Strategy {
  std::string name;                   // what made it ("allreduce", "ps", ..., or a user's label)
  int world_size = 1;                 // the number of ranks placements refer to
  std::vector<ParamStrategy> params;  // in the store's creation order

  // nullptr if `param` has no entry.
  const ParamStrategy* Find(absl::string_view param) const;

  friend bool operator==(const Strategy&, const Strategy&) = default;
};

// "allreduce group=0 compressor=none", "ps placement=1 staleness=0", "sparse": the text of one
// synchronizer as it appears in a strategy file (topology= only where it is hierarchical, so
// that flat strategies read as they did before it existed).
std::string DescribeSync(const ParamSync& sync);

// The text form; ParseStrategy(SerializeStrategy(s)) == s.
std::string SerializeStrategy(const Strategy& strategy);

// Parses the text form. Errors name the line: "strategy line 7: unknown synchronizer 'x' ...".
[[nodiscard]] absl::StatusOr<Strategy> ParseStrategy(absl::string_view text);

// Checks `strategy` against this rank's parameters (no communication): one entry per parameter
// and no other; ranks within world_size; an allreduce group with one compressor; shards that
// tile the rows; Sparse and AllReduce only where the gradient is row-sparse and dense. The
// error names the parameter.
[[nodiscard]] absl::Status ValidateStrategy(const Strategy& strategy,
                                            const core::ParameterStore& store);

// The shard boundaries of a PS synchronizer for a parameter with `rows` rows: its row_splits,
// or an even split (the first rows % shards shards one row larger).
std::vector<int64_t> ShardRowSplits(const ParameterServerSync& ps, int64_t rows);

// Shards of a PS synchronizer: placement's, or host_placement's where servers are named by host.
int NumShards(const ParameterServerSync& ps);

// `strategy` with every server named by host replaced by its rank in `host_of_rank` (the host
// of every rank, Topology::host_of_rank). Error: a host or local rank that does not exist,
// naming the parameter ("parameter 'E': server h2.0: there are 2 hosts").
[[nodiscard]] absl::StatusOr<Strategy> ResolveHostPlacements(const Strategy& strategy,
                                                             const std::vector<int>& host_of_rank);

}  // namespace cavs::distributed
