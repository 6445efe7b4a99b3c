#include "distributed/probe.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "core/tensor.h"
#include "distributed/calibration.h"
#include "distributed/collective_cost.h"
#include "distributed/half.h"
#include "distributed/stats.h"

namespace cavs::distributed {

namespace {

using core::Tensor;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One exchange of `out` into `in` with `peer` on `comm` (both directions at once when `both`,
// else this rank sends when `sender`): its seconds. Both ranks call it.
absl::StatusOr<double> TimeOnce(Communicator& comm, int peer, Tensor& out, Tensor& in, bool both,
                                bool sender) {
  const double t0 = Now();
  std::vector<std::unique_ptr<Work>> works;
  if (both || sender) {
    CAVS_ASSIGN_OR_RETURN(auto s, comm.StartSend(out, peer, 11));
    works.push_back(std::move(s));
  }
  if (both || !sender) {
    CAVS_ASSIGN_OR_RETURN(auto r, comm.StartRecv(in, peer, 11));
    works.push_back(std::move(r));
  }
  for (auto& w : works) CAVS_RETURN_IF_ERROR(w->Wait());
  // One direction: the receiver's answer of one element closes the timing on both sides.
  if (!both) {
    Tensor ack = Tensor::Host({1});
    if (sender) {
      CAVS_RETURN_IF_ERROR(comm.Recv(ack, peer, 12));
    } else {
      CAVS_RETURN_IF_ERROR(comm.Send(ack, peer, 12));
    }
  }
  return Now() - t0;
}

// The median seconds of `reps` exchanges of `bytes` both ways at once with `peer`, and where
// `one_way`, of `reps` one way (this rank sending when `sender`), taken in turn after one of each
// to warm up: the two see the same moments of whatever else runs (the probe's other pairs in
// the round, sharing the cores), so their ratio, the pair's duplex fraction, does not take one
// timed alone against the other timed beside them. Without `one_way` the second is 0.
absl::StatusOr<std::array<double, 2>> TimeBothAndOne(Communicator& comm, int peer, int64_t bytes,
                                                     int reps, bool one_way, bool sender) {
  const int64_t n = std::max<int64_t>(1, bytes / 4);
  Tensor out = Tensor::Host({n}), in = Tensor::Host({n});
  std::fill_n(out.data<float>(), n, 1.0f);
  std::vector<double> both, one;
  for (int rep = 0; rep <= reps; ++rep) {
    CAVS_ASSIGN_OR_RETURN(const double tb, TimeOnce(comm, peer, out, in, true, sender));
    if (rep > 0) both.push_back(tb);
    if (!one_way) continue;
    CAVS_ASSIGN_OR_RETURN(const double to, TimeOnce(comm, peer, out, in, false, sender));
    if (rep > 0) one.push_back(to);
  }
  return std::array<double, 2>{UpperMedian(both), one_way ? UpperMedian(one) : 0.0};
}

// Median seconds of `reps` exchanges of `bytes` both ways at once with `peer`, after one
// warm-up.
absl::StatusOr<double> TimeExchange(Communicator& comm, int peer, int64_t bytes, int reps) {
  CAVS_ASSIGN_OR_RETURN(const auto times,
                        TimeBothAndOne(comm, peer, bytes, reps, /*one_way=*/false, false));
  return times[0];
}

struct Link {
  double bandwidth = 0;  // bytes/s
  double latency = 0;    // s, the a of t(n) = a + n / b
};

// Fits t(n) = a + n / b through the two sizes' times.
Link Fit(int64_t small, double t_small, int64_t large, double t_large) {
  Link l;
  const double dt = std::max(t_large - t_small, 1e-9);
  l.bandwidth = static_cast<double>(large - small) / dt;
  l.latency = std::max(0.0, t_small - small / l.bandwidth);
  return l;
}

// Broadcasts rank 0's `text` to every rank.
absl::StatusOr<std::string> BroadcastText(Communicator& comm, const std::string& text) {
  Tensor length = Tensor::Host({1}, core::DType::kInt64);
  length.data<int64_t>()[0] = static_cast<int64_t>(text.size());
  CAVS_RETURN_IF_ERROR(comm.Broadcast(length, 0));
  const int64_t n = length.data<int64_t>()[0];
  Tensor bytes = Tensor::Host({std::max<int64_t>(1, (n + 3) / 4)}, core::DType::kInt32);
  if (comm.rank() == 0) std::copy(text.begin(), text.end(), static_cast<char*>(bytes.raw_data()));
  CAVS_RETURN_IF_ERROR(comm.Broadcast(bytes, 0));
  return std::string(static_cast<const char*>(bytes.raw_data()), n);
}

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  int x = 0;
  return v != nullptr && absl::SimpleAtoi(v, &x) ? x : fallback;
}

}  // namespace

CollectiveAlgorithms AlgorithmsInUse() {
  CollectiveAlgorithms a;
  // libnbc's numbering (ompi_info --param coll libnbc): iallreduce 1 ring, 2 binomial,
  // 3 Rabenseifner, 4 recursive doubling; ireduce 1 chain, 2 binomial, 3 Rabenseifner; ibcast
  // 1 linear, 2 binomial, 3 chain, 4 knomial. 0 is libnbc's own choice.
  switch (EnvInt("OMPI_MCA_coll_libnbc_iallreduce_algorithm", 0)) {
    case 1:
      a.allreduce = AllReduceAlgorithm::kRing;
      break;
    case 3:
      a.allreduce = AllReduceAlgorithm::kRabenseifner;
      break;
    default:
      a.allreduce = AllReduceAlgorithm::kRecursiveDoubling;
      break;
  }
  a.reduce = EnvInt("OMPI_MCA_coll_libnbc_ireduce_algorithm", 0) == 2 ? ReduceAlgorithm::kBinomial
                                                                      : ReduceAlgorithm::kLinear;
  switch (EnvInt("OMPI_MCA_coll_libnbc_ibcast_algorithm", 0)) {
    case 1:
      a.broadcast = BroadcastAlgorithm::kLinear;
      break;
    case 2:
      a.broadcast = BroadcastAlgorithm::kBinomial;
      break;
    default:
      a.broadcast = BroadcastAlgorithm::kLibnbc;
      break;
  }
  return a;
}

namespace {

// Floats in each rank's buffer for a collective of `bytes` in all: the whole buffer, or where
// `gathers`, each rank's W-th part.
int64_t BlockFloats(int64_t bytes, int w, bool gathers) {
  return std::max<int64_t>(1, bytes / 4 / (gathers ? w : 1));
}

// The median over `reps` (after one to warm up) of each collective kind's time (index:
// Collective) of `bytes` in all over every rank, root 0, the slowest rank's: every rank waits
// at a barrier for the last.
absl::StatusOr<std::array<double, 5>> TimeCollectives(Communicator& comm, int64_t bytes, int reps) {
  const int w = comm.world_size();
  const int64_t n = BlockFloats(bytes, w, false), block_rows = BlockFloats(bytes, w, true);
  Tensor buf = Tensor::Host({n});
  std::fill_n(buf.data<float>(), n, 1.0f);
  Tensor block = Tensor::Host({block_rows, 1}), gathered = Tensor::Host({block_rows * w, 1});
  std::fill_n(block.data<float>(), block_rows, 1.0f);
  const std::vector<int64_t> counts(w, block_rows);
  std::array<double, 5> out{};
  for (int k = 0; k < 5; ++k) {
    std::vector<double> times;
    for (int rep = 0; rep <= reps; ++rep) {
      CAVS_RETURN_IF_ERROR(comm.Barrier());
      const double t0 = Now();
      switch (static_cast<Collective>(k)) {
        case Collective::kAllReduce:
          CAVS_RETURN_IF_ERROR(comm.AllReduce(buf));
          break;
        case Collective::kReduce:
          CAVS_RETURN_IF_ERROR(comm.Reduce(buf, 0));
          break;
        case Collective::kBroadcast:
          CAVS_RETURN_IF_ERROR(comm.Broadcast(buf, 0));
          break;
        case Collective::kAllGather:
          CAVS_RETURN_IF_ERROR(comm.AllGatherV(block, gathered, counts));
          break;
        case Collective::kGather:
          CAVS_RETURN_IF_ERROR(comm.GatherV(block, gathered, counts, 0));
          break;
      }
      CAVS_RETURN_IF_ERROR(comm.Barrier());
      if (rep > 0) times.push_back(Now() - t0);
    }
    out[k] = UpperMedian(times);
  }
  return out;
}

// Seconds per element of the float16 encode, decode and sum (Fp16Costs) over `n` values on this
// rank, the median of `reps` after one to warm up. Every rank times at once, between barriers,
// so that the figures are what a rank gets with the job's other ranks on the same cores.
absl::StatusOr<Fp16Costs> TimeFp16(Communicator& comm, int64_t n, int reps) {
  std::vector<float> floats(n), back(n);
  for (int64_t i = 0; i < n; ++i) floats[i] = 1e-3f * static_cast<float>(i % 1999 - 999);
  std::vector<uint16_t> halves(n), sums(n);
  FloatsToHalves(floats.data(), 1.0f, sums.data(), n);
  std::vector<double> encode, decode, sum;
  for (int rep = 0; rep <= reps; ++rep) {
    CAVS_RETURN_IF_ERROR(comm.Barrier());
    const double t0 = Now();
    FloatsToHalves(floats.data(), 1.0f, halves.data(), n);
    const double t1 = Now();
    HalvesToFloats(halves.data(), back.data(), n);
    const double t2 = Now();
    AddHalves(halves.data(), sums.data(), n);
    const double t3 = Now();
    if (rep == 0) continue;
    encode.push_back((t1 - t0) / static_cast<double>(n));
    decode.push_back((t2 - t1) / static_cast<double>(n));
    sum.push_back((t3 - t2) / static_cast<double>(n));
  }
  CAVS_RETURN_IF_ERROR(comm.Barrier());
  return Fp16Costs{UpperMedian(encode), UpperMedian(decode), UpperMedian(sum)};
}

}  // namespace

std::array<int64_t, 2> CalibrationSizes(const ProbeOptions& options, double slowest_bandwidth) {
  std::array<int64_t, 2> sizes{options.calibration_bytes, options.calibration_large_bytes};
  const int64_t large = std::max(sizes[0], sizes[1]);
  if (sizes[0] <= 0 || !(options.calibration_seconds > 0) || !(slowest_bandwidth > 0)) {
    return sizes;
  }
  const double fits = options.calibration_seconds * slowest_bandwidth / 2;
  if (fits >= static_cast<double>(large)) return sizes;
  const double scale = std::min(1.0, std::max(fits, 64.0 * 1024) / static_cast<double>(large));
  for (int64_t& b : sizes) {
    if (b > 0) b = std::max<int64_t>(4, std::llround(static_cast<double>(b) * scale));
  }
  return sizes;
}

absl::StatusOr<ProbeResult> ProbeCluster(Communicator& comm, const ProbeOptions& options) {
  if (options.small_bytes < 4 || options.large_bytes <= options.small_bytes ||
      options.repetitions < 1) {
    return absl::InvalidArgumentError(absl::StrCat("probe sizes ", options.small_bytes, " < ",
                                                   options.large_bytes, " and repetitions ",
                                                   options.repetitions, " >= 1 are required"));
  }
  const double start = Now();
  CAVS_ASSIGN_OR_RETURN(Topology topology, comm.DiscoverTopology());
  const int r = comm.rank(), hosts = topology.num_hosts();
  const int64_t small = options.small_bytes, large = options.large_bytes;
  const int reps = options.repetitions;

  // Between hosts: the leaders, paired by the circle method (H - 1 rounds, every pair once).
  // pair_links[i * hosts + j] for i < j, measured by leader i and sent to rank 0 below.
  std::vector<double> mine(3 * hosts, 0.0);  // per peer host: bandwidth, latency, duplex
  const bool leader = topology.LocalRank(r) == 0;
  const int my_host = topology.host_of_rank[r];
  const int slots = hosts % 2 == 0 ? hosts : hosts + 1;  // a bye where odd
  for (int round = 0; round + 1 < slots; ++round) {
    // The circle: slot 0 fixed, the others rotate; slot k meets slot slots - 1 - k.
    std::vector<int> at(slots);
    at[0] = 0;
    for (int k = 1; k < slots; ++k) at[k] = 1 + (k - 1 + round) % (slots - 1);
    int peer_host = -1;
    for (int k = 0; k < slots; ++k) {
      if (at[k] == my_host) peer_host = at[slots - 1 - k];
    }
    if (leader && peer_host >= 0 && peer_host < hosts) {
      const int peer = topology.RanksOn(peer_host)[0];
      CAVS_ASSIGN_OR_RETURN(double ts, TimeExchange(comm, peer, small, reps));
      // The large exchange, and one direction alone (the lower host sending) in turn with it:
      // how much of the exchange's time one direction takes.
      CAVS_ASSIGN_OR_RETURN(
          const auto large_times,
          TimeBothAndOne(comm, peer, large, reps, /*one_way=*/true, my_host < peer_host));
      const double tl = large_times[0], one = large_times[1];
      const Link link = Fit(small, ts, large, tl);
      mine[3 * peer_host] = link.bandwidth;
      mine[3 * peer_host + 1] = link.latency;
      mine[3 * peer_host + 2] = std::clamp(one / tl, 0.5, 1.0);
    }
    CAVS_RETURN_IF_ERROR(comm.Barrier());  // one round at a time
  }

  // Within a host: its first two ranks.
  double intra_bw = 0, intra_lat = 0;
  const std::vector<int> local = topology.RanksOn(my_host);
  if (local.size() >= 2 && (r == local[0] || r == local[1])) {
    const int peer = r == local[0] ? local[1] : local[0];
    CAVS_ASSIGN_OR_RETURN(double ts, TimeExchange(comm, peer, small, reps));
    CAVS_ASSIGN_OR_RETURN(double tl, TimeExchange(comm, peer, large, reps));
    const Link link = Fit(small, ts, large, tl);
    intra_bw = link.bandwidth;
    intra_lat = link.latency;
  }

  // Each collective kind the synchronizer's units use, as cavs runs them (nonblocking, polled),
  // over every rank with root 0, at the two calibration sizes: their measured times, for the
  // calibration below. A size is the bytes of the whole collective: each rank's block of an
  // allgather or gather is its W-th part. The sizes fit the slowest host link (every rank
  // learns it: each leader's fastest pair exchange, a slow host limiting every pair it is in).
  double slowest = 0;
  if (hosts > 1) {
    Tensor host_bw = Tensor::Host({1}), all_bw = Tensor::Host({comm.world_size()});
    double fastest_pair = 0;
    for (int h = 0; h < hosts; ++h) fastest_pair = std::max(fastest_pair, mine[3 * h]);
    host_bw.data<float>()[0] = leader ? static_cast<float>(fastest_pair) : 0.0f;
    CAVS_RETURN_IF_ERROR(comm.AllGather(host_bw, all_bw));
    for (int q = 0; q < comm.world_size(); ++q) {
      const double b = all_bw.data<float>()[q];
      if (b > 0 && (slowest == 0 || b < slowest)) slowest = b;
    }
  }
  const std::array<int64_t, 2> cal_sizes = CalibrationSizes(options, slowest);
  const int cal_points = cal_sizes[1] > cal_sizes[0] ? 2 : 1;
  const bool calibrate = comm.world_size() > 1 && cal_sizes[0] > 0;
  std::array<std::array<double, 5>, 2> collective_s{};
  for (int point = 0; calibrate && point < cal_points; ++point) {
    CAVS_ASSIGN_OR_RETURN(collective_s[point], TimeCollectives(comm, cal_sizes[point], reps));
  }
  Fp16Costs fp16;
  if (options.fp16_elements > 0) {
    CAVS_ASSIGN_OR_RETURN(fp16, TimeFp16(comm, options.fp16_elements, reps));
  }
  // Everything to every rank; rank 0 makes the spec and broadcasts its text. Per rank: per
  // peer host 3 figures, the 2 within its host, the 3 float16 costs (in ns).
  const int w = comm.world_size();
  const int intra_at = 3 * hosts, fp16_at = intra_at + 2, width = fp16_at + 3;
  Tensor row = Tensor::Host({width});
  for (int i = 0; i < 3 * hosts; ++i) row.data<float>()[i] = static_cast<float>(mine[i]);
  row.data<float>()[intra_at] = static_cast<float>(intra_bw);
  row.data<float>()[intra_at + 1] = static_cast<float>(intra_lat);
  row.data<float>()[fp16_at] = static_cast<float>(fp16.encode * 1e9);
  row.data<float>()[fp16_at + 1] = static_cast<float>(fp16.decode * 1e9);
  row.data<float>()[fp16_at + 2] = static_cast<float>(fp16.sum * 1e9);
  Tensor all = Tensor::Host({w * width});
  CAVS_RETURN_IF_ERROR(comm.AllGather(row, all));
  std::string text;
  if (r == 0) {
    const float* v = all.data<float>();
    auto at = [&](int rank, int i) { return static_cast<double>(v[rank * width + i]); };
    ClusterSpec spec;
    spec.name = absl::StrCat("probed ", topology.Describe());
    std::vector<double> latencies, intra_bws, intra_lats;
    // A pair's figures, measured by the lower host's leader.
    auto pair = [&](int h, int peer, int i) {
      return at(topology.RanksOn(std::min(h, peer))[0], 3 * std::max(h, peer) + i);
    };
    // One direction alone took `one`, both at once `tl`: a link that carries both at full rate
    // has one / tl near 1, one that shares its rate between them near 1/2. The exchanges ran
    // both ways, so a pair's line rate is their rate over its duplex fraction. A slow host
    // limits every pair it is in, so a host's own pairs are those within kOwnPairs of its
    // fastest; its line rate and duplex factor are their medians (a pair's exchange and its
    // one-way timing run at different moments, and the other pairs of the round share the
    // cores: one pair alone can be off by a third). The cluster's factor is the smallest of
    // the hosts'; a host whose own differs keeps it.
    constexpr double kOwnPairs = 0.8;
    std::vector<double> host_duplex(hosts, 1.0);
    for (int h = 0; h < hosts; ++h) {
      HostSpec host;
      host.name = absl::StrCat("h", h);
      host.ranks = static_cast<int>(topology.RanksOn(h).size());
      const int lead = topology.RanksOn(h)[0];
      std::vector<double> line(hosts, 0.0);  // per peer: the pair's line rate
      for (int peer = 0; peer < hosts; ++peer) {
        if (peer == h || !(pair(h, peer, 2) > 0)) continue;
        line[peer] = pair(h, peer, 0) / pair(h, peer, 2);
        if (h < peer) latencies.push_back(pair(h, peer, 1));
      }
      const double fastest = *std::max_element(line.begin(), line.end());
      std::vector<double> rates, duplexes;
      for (int peer = 0; peer < hosts; ++peer) {
        if (line[peer] > 0 && line[peer] >= kOwnPairs * fastest) {
          rates.push_back(line[peer]);
          duplexes.push_back(pair(h, peer, 2));
        }
      }
      host.bandwidth = UpperMedian(rates);
      if (!duplexes.empty()) host_duplex[h] = UpperMedian(duplexes);
      if (host.ranks >= 2) {
        intra_bws.push_back(at(lead, intra_at));
        intra_lats.push_back(at(lead, intra_at + 1));
      }
      spec.hosts.push_back(host);
    }
    if (hosts == 1) spec.hosts[0].bandwidth = 1e12;  // no network to speak of
    if (hosts > 1) {
      spec.inter_latency = UpperMedian(latencies);
      spec.duplex = *std::min_element(host_duplex.begin(), host_duplex.end());
      for (int h = 0; h < hosts; ++h) {
        if (host_duplex[h] != spec.duplex) spec.hosts[h].duplex = host_duplex[h];
      }
    }
    if (!intra_bws.empty()) {
      spec.intra_bandwidth = UpperMedian(intra_bws);
      spec.intra_latency = UpperMedian(intra_lats);
    }
    spec.algorithms = AlgorithmsInUse();
    // A collective goes at its slowest rank's pace: the largest of each cost over the ranks,
    // rounded to 0.001 ns so that the text is short.
    if (options.fp16_elements > 0) {
      double* costs[] = {&spec.fp16.encode, &spec.fp16.decode, &spec.fp16.sum};
      for (int k = 0; k < 3; ++k) {
        double ns = 0;
        for (int q = 0; q < w; ++q) ns = std::max(ns, at(q, fp16_at + k));
        *costs[k] = std::max(std::round(ns * 1000), 1.0) / 1000 * 1e-9;
      }
    }
    // Calibration: each collective's measured times against what the model gives it on this
    // spec (the barrier after it included on both sides), CalibrateCollective's line through
    // the two sizes, with the smaller's ratio below it where the line needs a negative extra.
    if (calibrate) {
      internal::Collectives model(spec);
      internal::Resources resources(spec);
      std::vector<int> everyone(w);
      for (int q = 0; q < w; ++q) everyone[q] = q;
      for (int k = 0; k < 5; ++k) {
        const auto op = static_cast<Collective>(k);
        const bool gathers = op == Collective::kAllGather || op == Collective::kGather;
        double modelled[2] = {0, 0}, measured[2] = {0, 0};
        for (int point = 0; point < cal_points; ++point) {
          // The model takes a gather's bytes per rank, the others' in all.
          const double bytes = 4.0 * static_cast<double>(BlockFloats(cal_sizes[point], w, gathers));
          modelled[point] = internal::AloneSeconds(model.Run(op, everyone, 0, bytes), resources);
          measured[point] = collective_s[point][k];
        }
        const CollectiveCalibration c = CalibrateCollective(modelled, measured, cal_points);
        spec.factor[k] = c.factor;
        spec.extra[k] = c.extra;
        spec.min_factor[k] = c.min_factor;
      }
    }
    text = SerializeClusterSpec(spec);
  }
  CAVS_ASSIGN_OR_RETURN(std::string agreed, BroadcastText(comm, text));
  CAVS_ASSIGN_OR_RETURN(ClusterSpec spec, ParseClusterSpec(agreed, "probe"));
  ProbeResult result;
  result.cluster = std::move(spec);
  result.seconds = Now() - start;
  return result;
}

}  // namespace cavs::distributed
