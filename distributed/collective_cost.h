// Internal to distributed/: the alpha-beta cost of one collective on a ClusterSpec, for the cost
// model (distributed/cost_model.h). A collective becomes a Phase of three parts, run in turn:
//
//   cpu      per host, the software time of the messages its busiest rank sends or receives:
//            message_overhead x (the sum over the steps of that rank's messages in the step);
//            a host's ranks run in parallel, a rank's messages one after another, and
//            concurrent collectives queue for it (each rank progresses all of them)
//   latency  the sum over the sequential steps of the step's link latency: inter-host if any
//            of its messages crosses hosts, else intra-host; concurrent collectives overlap
//   loads    the bytes put on each link resource, which concurrent collectives share
//
// and, beside them, `summed`: per host, the bytes its busiest rank adds into its own buffer
// (a reduction's work on the CPU, which the cost model charges where adding costs more than
// the probe's calibration covers: the float16 sum of MPI's user-defined operation).
//
// Link resources, per host h:
//
//   Out(h), In(h)   the two directions of h's network link, efficiency x line rate each
//   Duplex(h)       both directions together: 2 x duplex x efficiency x line rate (the
//                   host's own duplex where it has one), so that a direction gets the full rate
//                   alone and duplex x rate while the other is busy
//   Shm(h)          h's shared memory, for messages between two of its ranks
//
// A message of b bytes from a rank on host a to one on host b != a adds b to Out(a), In(b),
// Duplex(a) and Duplex(b); within host a, b to Shm(a). Alone on idle resources a collective
// takes cpu + latency + max over resources of (bytes / capacity): the alpha-beta form. The
// algorithms enumerate their messages (docs/distributed.md, "The cost model", gives each
// one's form). Loads scale with the bytes, so each collective is computed once per participant
// set and root for one byte, and scaled.
//
// Thread-safety: a Collectives caches; one thread at a time.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "distributed/cluster_spec.h"

namespace cavs::distributed::internal {

struct Load {
  int resource = 0;
  double bytes = 0.0;
};

// A phase's bytes per ordered pair of hosts (Load::resource is from x hosts + to), ascending:
// the one-byte collective's list, shared by every phase scaled from it (an allgather over H
// hosts has H^2 pairs, and a PS with a shard per host H such phases), times the factors
// applied since, in order, so that each pair's bytes are exactly those of a copy scaled in
// place. Copies share the list.
class PairLoads {
 public:
  PairLoads() = default;
  explicit PairLoads(std::vector<Load> loads)
      : base_(std::make_shared<const std::vector<Load>>(std::move(loads))) {}

  bool empty() const { return size() == 0; }
  size_t size() const { return base_ == nullptr ? 0 : base_->size(); }
  // Pair i with its bytes scaled. REQUIRES: i < size().
  Load operator[](size_t i) const {
    double bytes = (*base_)[i].bytes;
    for (int k = 0; k < factors_count_; ++k) bytes *= factors_[k];
    return {(*base_)[i].resource, bytes};
  }
  // Every pair's bytes times `factor`.
  void Scale(double factor);
  // Pair by pair, scaled.
  std::vector<Load> Loads() const;

 private:
  std::shared_ptr<const std::vector<Load>> base_;
  std::array<double, 3> factors_{};
  int factors_count_ = 0;
};

// One collective (or several run side by side) of a synchronizer unit.
struct Phase {
  std::vector<Load> cpu;    // s of software time per host (Load::resource is the host)
  double latency = 0.0;     // s
  std::vector<Load> loads;  // bytes per link resource, resource ascending, each at most once
  // The same inter-host bytes per ordered pair of hosts: the connections whose bytes go in
  // order (the cost model's queued chains).
  PairLoads pairs;
  double root_in = 0.0;      // bytes the root rank receives (rooted collectives; PS hot spots)
  double root_out = 0.0;     // bytes the root rank sends
  std::vector<Load> summed;  // bytes per host its busiest rank sums, host ascending
  // Bytes per host its busiest rank sends and receives, host ascending: the transport's work
  // in that rank's polls (the cost model's start costs). Never calibrated: the payload's.
  std::vector<Load> moved;
  // For calibration: sequential steps, and the messages on the critical path (the sum over the
  // steps of the most messages one rank handles in the step).
  double steps = 0.0;
  double messages = 0.0;
  // The collectives it runs, as bits 1 << Collective (the calibration each one's bytes take).
  unsigned collectives = 0;

  // This phase with every byte count (loads, summed, moved, root) times `factor` (cpu and
  // latency unchanged).
  Phase Scaled(double factor) const;
  // Runs `other` beside this one (on other ranks): the longer latency, cpu and loads added.
  void Merge(const Phase& other);
  // Charges what each host's busiest rank sums as software time: `seconds_per_byte` each.
  void ChargeSums(double seconds_per_byte);
};

// The resources of a cluster and their capacities (bytes/s).
class Resources {
 public:
  explicit Resources(const ClusterSpec& cluster);

  static int Out(int host) { return 4 * host; }
  static int In(int host) { return 4 * host + 1; }
  static int Duplex(int host) { return 4 * host + 2; }
  static int Shm(int host) { return 4 * host + 3; }
  static int HostOf(int resource) { return resource / 4; }

  int count() const { return static_cast<int>(capacity_.size()); }
  double capacity(int resource) const { return capacity_[resource]; }

 private:
  std::vector<double> capacity_;
};

// The ranks of a cluster: all of them, each host's (ranks are numbered host by host), and the
// leaders (each host's lowest rank), as the synchronizer's communicators hold them.
struct RankLayout {
  std::vector<int> all;
  std::vector<int> leaders;
  std::vector<std::vector<int>> host_ranks;
};

// The cost of each collective over a set of participants on one cluster.
class Collectives {
 public:
  explicit Collectives(const ClusterSpec& cluster);

  // `ranks`: the participants, ascending (a communicator's ranks in order); `root` an index
  // into them. AllGather and Gather move `bytes` from every participant (a block each).
  // `direct`: a reduce or broadcast as point-to-point messages between the root and each other
  // participant (a PS shard's direct route), whatever the cluster's algorithms; calibrated as
  // the collective it replaces.
  Phase Run(Collective op, const std::vector<int>& ranks, int root, double bytes,
            bool direct = false);

  const ClusterSpec& cluster() const { return cluster_; }
  const std::vector<int>& host_of_rank() const { return host_of_; }
  const RankLayout& layout() const { return layout_; }

 private:
  Phase OneByte(Collective op, const std::vector<int>& ranks, int root, bool direct);

  ClusterSpec cluster_;
  std::vector<int> host_of_;
  Resources resources_;  // for the calibration's line and minimum
  RankLayout layout_;
  std::map<std::vector<int>, int> set_ids_;
  // (op, set, root, direct) -> one-byte phase
  std::map<std::tuple<int, int, int, bool>, Phase> cache_;
};

// The time `phase` takes alone on idle resources: its slowest host's cpu, its latency, and its
// busiest resource's bytes over that resource's capacity (TransferSeconds).
double AloneSeconds(const Phase& phase, const Resources& resources);
double TransferSeconds(const Phase& phase, const Resources& resources);

}  // namespace cavs::distributed::internal
