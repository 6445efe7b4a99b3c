// ClusterSpec: the machines a strategy runs on, as the cost model (distributed/cost_model.h)
// sees them: hosts with their ranks (uneven allowed) and network links (each host's may
// differ), the links' latency, per-message overhead, efficiency and duplex behaviour, the
// shared memory within a host, and the collective algorithms the MPI library runs. Written by
// hand or by a probe, in a line format like the strategy's (docs/distributed.md, "Model
// profiles and cluster descriptions"):
//
//   version 1
//   name testbed-2x2
//   inter latency_us=60 overhead_us=40 efficiency=0.95 duplex=0.5
//   intra bandwidth_gbit=40 latency_us=2
//   algorithms allreduce=ring reduce=linear broadcast=linear allgather=linear
//   calibration allreduce=1.1 reduce=1.6 broadcast=1.5 allgather=2 gather=1   # optional
//   fp16 encode_ns=0.55 decode_ns=0.57 sum_ns=3.4                             # optional
//   host a ranks=2 bandwidth_gbit=1
//   host b ranks=2 bandwidth_gbit=0.25 duplex=1   # this host's own duplex factor
//   hosts 4 ranks=8 bandwidth_gbit=100        # four more hosts, named h2 .. h5
//
// Ranks are numbered host by host in file order (mpirun's default --map-by slot): host a holds
// ranks 0-1, host b ranks 2-3. Parse errors name the file, line and field.
//
// Thread-safety: plain values; functions are pure.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cavs::distributed {

// The collectives the synchronizer's units are made of (GatherV: kGather).
enum class Collective { kAllReduce, kReduce, kBroadcast, kAllGather, kGather };
inline constexpr int kNumCollectives = 5;

// "allreduce", "reduce", "broadcast", "allgather", "gather".
const char* CollectiveName(Collective c);

// The algorithms the MPI library uses for each collective the synchronizer calls (Open MPI's
// libnbc: coll_libnbc_i*_algorithm). Each has its own alpha-beta form (docs/distributed.md).
// kRabenseifner: reduce-scatter by recursive halving, then allgather by recursive doubling.
enum class AllReduceAlgorithm { kRing, kRecursiveDoubling, kRabenseifner };
enum class ReduceAlgorithm { kLinear, kBinomial };
// kLibnbc: linear up to 4 ranks, binomial above (libnbc's own choice in Open MPI 4.1).
enum class BroadcastAlgorithm { kLinear, kBinomial, kLibnbc };
// Also used for GatherV to a server (always linear there).
enum class AllGatherAlgorithm { kLinear, kRing };

struct CollectiveAlgorithms {
  AllReduceAlgorithm allreduce = AllReduceAlgorithm::kRing;
  ReduceAlgorithm reduce = ReduceAlgorithm::kLinear;
  BroadcastAlgorithm broadcast = BroadcastAlgorithm::kLinear;
  AllGatherAlgorithm allgather = AllGatherAlgorithm::kLinear;

  friend bool operator==(const CollectiveAlgorithms&, const CollectiveAlgorithms&) = default;
};

struct HostSpec {
  std::string name;
  int ranks = 1;
  double bandwidth = 0.0;  // bytes/s: the line rate of the host's network link, each direction
  // The duplex factor of this host's link (ClusterSpec::duplex), where it has its own: a slow
  // link shaped in each direction carries both at full rate while a fast one is bound by the
  // CPU that drives it. 0: the cluster's.
  double duplex = 0.0;

  friend bool operator==(const HostSpec&, const HostSpec&) = default;
};

// What float16 compression costs a rank's CPU, in s per element, as measured with the job's
// other ranks running beside it (ProbeCluster times it on every rank at once): the conversion
// of a bucket to float16 when it starts, the conversion back when the step finishes, and the
// float16 sum of MPI's user-defined operation, once per element a rank reduces. 0: not charged.
struct Fp16Costs {
  double encode = 0.0;
  double decode = 0.0;
  double sum = 0.0;

  friend bool operator==(const Fp16Costs&, const Fp16Costs&) = default;
};

struct ClusterSpec {
  std::string name;
  std::vector<HostSpec> hosts;  // ranks are numbered host by host in this order
  // Between hosts.
  double inter_latency = 0.0;     // s: one-way latency of a message
  double message_overhead = 0.0;  // s: per message a rank sends or receives in one step
  double efficiency = 1.0;        // fraction of the line rate one direction reaches alone
  // Fraction of (efficiency x line rate) each direction gets while both directions of a link
  // carry traffic (Open MPI 4.1's TCP transport: about 0.5; a full-duplex transport: 1). A
  // host's own (HostSpec::duplex) takes its place for that host.
  double duplex = 1.0;
  // Within a host (shared memory): aggregate bandwidth and latency.
  double intra_bandwidth = 100e9 / 8;
  double intra_latency = 1e-6;
  CollectiveAlgorithms algorithms;
  // The probe's calibration of each collective kind (index: Collective; ProbeCluster times each
  // one as cavs runs it, polled progress included, at two sizes): a collective of that kind
  // takes `extra` seconds more than the alpha-beta form says, and every byte it puts on a
  // resource counts `factor` times; and where `min_factor` is set, it takes at least the form
  // with every byte counted `min_factor` times and no extra (the larger of the two: a line whose
  // ratio to the form grows with the size, extra < 0, with the small size's ratio below it).
  // factor 1, extra 0, min_factor 0: the form as is. Written as `calibration allreduce=F
  // allreduce_us=X allreduce_min=M reduce=F ...`, each key only where it is not the default; a
  // negative extra needs a min_factor.
  std::array<double, kNumCollectives> factor = {1, 1, 1, 1, 1};
  std::array<double, kNumCollectives> extra = {0, 0, 0, 0, 0};
  std::array<double, kNumCollectives> min_factor = {0, 0, 0, 0, 0};
  // Written as `fp16 encode_ns=E decode_ns=D sum_ns=S` where any is not 0.
  Fp16Costs fp16;

  int world_size() const;
  // Host h's duplex factor: its own where it has one, else the cluster's.
  double HostDuplex(int h) const;
  // The host of every rank, ranks numbered host by host.
  std::vector<int> HostOfRank() const;

  friend bool operator==(const ClusterSpec&, const ClusterSpec&) = default;
};

// "ring", "recursive_doubling", "rabenseifner"; "linear", "binomial"; "linear", "binomial",
// "libnbc"; "linear", "ring".
const char* AlgorithmName(AllReduceAlgorithm a);
const char* AlgorithmName(ReduceAlgorithm a);
const char* AlgorithmName(BroadcastAlgorithm a);
const char* AlgorithmName(AllGatherAlgorithm a);

// The text form (one `host` line per host); ParseClusterSpec(Serialize(c)) == c up to the
// rounding of the units (bandwidths in Gbit/s, times in us, written exactly).
std::string SerializeClusterSpec(const ClusterSpec& cluster);

// Parses the text form; `file` names it in errors ("cluster.txt line 4: field 'duplex': ...").
[[nodiscard]] absl::StatusOr<ClusterSpec> ParseClusterSpec(absl::string_view text,
                                                           absl::string_view file);

// `hosts` hosts of `ranks_per_host` ranks each, with `base`'s link parameters and algorithms;
// host i has the bandwidth and duplex of base host (i mod base's hosts), so an uneven cluster keeps
// its mix. Names h0, h1, ... REQUIRES: hosts >= 1, ranks_per_host >= 1, base has a host.
ClusterSpec ScaleCluster(const ClusterSpec& base, int hosts, int ranks_per_host);

}  // namespace cavs::distributed
