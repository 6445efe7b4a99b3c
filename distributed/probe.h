// ProbeCluster: measures the cluster a job runs on, as the cost model sees it (ClusterSpec):
// which ranks share a host, each host's network link (bandwidth and latency, from timed
// exchanges between hosts' leaders), whether a link's two directions run at once, shared
// memory within a host, and the collective algorithms the MPI library was set to use.
//
// Collective: every rank calls it; every rank returns the same ClusterSpec (rank 0's, broadcast
// as text). Bounded: each measurement is a few exchanges of `small_bytes` and `large_bytes`
// (default 8 KiB and 1 MiB: under 0.1 s a round at 100 Mbit/s), the hosts paired in H - 1
// rounds (every pair of hosts once; the pairs of a round at the same time); the calibration's
// collectives sized to the slowest link (CalibrationSizes). A dead peer is the communicator's
// DeadlineExceeded.
//
// How the figures are derived (docs/distributed.md, "Probing the cluster"):
//   - a pair's time for n bytes both ways at once is t(n) = a + n / b; from the two sizes,
//     b = (large - small) / (t(large) - t(small)) and a = t(small) - small / b;
//   - a pair's duplex fraction d is the time of `large_bytes` one way alone over that of the
//     exchange (within [0.5, 1]), and its line rate b / d;
//   - a slow host limits every pair it is in, so host h's own pairs are those whose line rate
//     is within 80% of its fastest pair's; its link bandwidth and duplex factor are their
//     medians (with 2 hosts both get the pair's); the cluster's `duplex` is the smallest host's,
//     and a host whose own differs keeps it (HostSpec::duplex: a link shaped at a low rate
//     carries both ways at once where a fast one is bound by its CPU);
//   - the latency is the median a over all pairs, halved (a is a round trip's worth of
//     overheads);
//   - within a host, the same between its first two ranks (hosts with one rank skip it);
//   - calibration: each collective kind the synchronizer uses is timed over all ranks (root 0)
//     at two sizes and compared with the cost model's time for it on the probed spec; the line
//     through the two points, measured = extra + factor x modelled, gives ClusterSpec::extra
//     (what every such collective costs beyond the form: the polled progress of cavs's
//     nonblocking MPI calls, synchronisation) and ::factor (how its bytes run: libnbc's
//     segmenting, CPU sharing), so that the model's time matches at small and large sizes
//     alike rather than carrying one size's overhead to every size;
//   - float16 compression's CPU costs per element (ClusterSpec::fp16): every rank converts and
//     sums a buffer at the same moment, so each shares its host's cores as in training; the
//     slowest rank's figures.
//
// Thread-safety: as the communicator (one thread).
#pragma once

#include <array>
#include <cstdint>

#include "absl/status/statusor.h"
#include "distributed/cluster_spec.h"
#include "distributed/communicator.h"

namespace cavs::distributed {

struct ProbeOptions {
  int64_t small_bytes = 8 << 10;
  int64_t large_bytes = 1 << 20;
  int repetitions = 3;  // per size and pair; the median counts
  // Each collective kind (allreduce, reduce, broadcast, allgatherv, gatherv) of this many bytes
  // in all, over every rank, timed as cavs runs them (the median of `repetitions`, after one to
  // warm up), and again at `calibration_large_bytes` (the same): the line through the two against
  // the cost model's times on the probed links gives ClusterSpec::extra and ::factor (at one
  // size, where the large is not larger: the ratio, as factor). 0: no calibration.
  int64_t calibration_bytes = 1 << 20;
  int64_t calibration_large_bytes = 4 << 20;
  // On slow links both calibration sizes shrink, in proportion, so that the larger allreduce
  // takes about this long at the slowest host's probed bandwidth (CalibrationSizes): the probe
  // stays bounded and measures where the units' sizes are. 0: the sizes as given.
  double calibration_seconds = 0.2;
  // The float16 encode, decode and sum (ClusterSpec::fp16) timed over this many values on every
  // rank at once (`repetitions` times; about 20 ms each on a core of its own). 0: not timed.
  int64_t fp16_elements = 4 << 20;
};

// What the probe measured, besides the spec: for reports and calibration.
struct ProbeResult {
  ClusterSpec cluster;
  double seconds = 0;  // the probe's own time (rank 0's)
};

// The two calibration sizes (bytes of a whole collective) for a cluster whose slowest host
// link carries `slowest_bandwidth` bytes/s (0 or less: unknown, one host): the options' sizes,
// or where an allreduce of the larger (about twice its bytes through a host's link) would take
// over `calibration_seconds`, both scaled down by the same factor, the larger to no less than
// 64 KiB (never more than the options' own). Every rank must pass the same bandwidth.
std::array<int64_t, 2> CalibrationSizes(const ProbeOptions& options, double slowest_bandwidth);

[[nodiscard]] absl::StatusOr<ProbeResult> ProbeCluster(Communicator& comm,
                                                       const ProbeOptions& options = {});

// The collective algorithms Open MPI's libnbc was set to use in this process (its
// coll_libnbc_i*_algorithm variables, which the MPI communicator sets before MPI starts unless
// the user did), as the cost model names them.
CollectiveAlgorithms AlgorithmsInUse();

}  // namespace cavs::distributed
