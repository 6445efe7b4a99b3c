#include "distributed/collective_cost.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <utility>

#include "core/status.h"

namespace cavs::distributed::internal {

namespace {

// Accumulates the messages of one collective, step by step, into a Phase.
class PhaseBuilder {
 public:
  PhaseBuilder(const ClusterSpec& cluster, const std::vector<int>& host_of)
      : cluster_(cluster),
        host_of_(host_of),
        bytes_(4 * cluster.hosts.size(), 0.0),
        sent_(host_of.size(), 0),
        received_(host_of.size(), 0),
        handled_(host_of.size(), 0.0),
        summed_(host_of.size(), 0.0),
        moved_(host_of.size(), 0.0) {}

  // `bytes` from a rank of host `from` to a rank of host `to`, in the current step (the ranks'
  // message counts are kept by Send or Handles).
  void HostSend(int from, int to, double bytes) {
    if (from == to) {
      bytes_[Resources::Shm(from)] += bytes;
      return;
    }
    crosses_ = true;
    pair_bytes_[from * static_cast<int>(cluster_.hosts.size()) + to] += bytes;
    bytes_[Resources::Out(from)] += bytes;
    bytes_[Resources::In(to)] += bytes;
    bytes_[Resources::Duplex(from)] += bytes;
    bytes_[Resources::Duplex(to)] += bytes;
  }
  void Send(int from_rank, int to_rank, double bytes) {
    HostSend(host_of_[from_rank], host_of_[to_rank], bytes);
    moved_[from_rank] += bytes, moved_[to_rank] += bytes;
    Touch(from_rank), Touch(to_rank);
    ++sent_[from_rank], ++received_[to_rank];
  }
  // `rank` adds `bytes` it received into its buffer (a reduction's step).
  void Sums(int rank, double bytes) { summed_[rank] += bytes; }
  // `rank` sends and receives `bytes` in all (messages counted per pair of hosts by HostSend).
  void Moves(int rank, double bytes) { moved_[rank] += bytes; }
  // `rank` sends and receives `messages` messages each in the current step.
  void Handles(int rank, int messages) {
    Touch(rank);
    sent_[rank] += messages, received_[rank] += messages;
  }
  // Ends `count` steps like the current one.
  void EndSteps(double count) {
    int most = 0;
    for (int r : touched_) {
      const int m = std::max(sent_[r], received_[r]);
      handled_[r] += count * m;
      most = std::max(most, m);
      sent_[r] = received_[r] = 0;
    }
    touched_.clear();
    phase_.latency += count * (crosses_ ? cluster_.inter_latency : cluster_.intra_latency);
    phase_.steps += count;
    phase_.messages += count * most;
    crosses_ = false;
  }
  Phase& phase() { return phase_; }
  Phase Build() {
    for (int r = 0; r < static_cast<int>(bytes_.size()); ++r) {
      if (bytes_[r] > 0.0) phase_.loads.push_back({r, bytes_[r]});
    }
    std::vector<Load> pairs;
    for (const auto& [pair, bytes] : pair_bytes_) pairs.push_back({pair, bytes});
    phase_.pairs = PairLoads(std::move(pairs));
    std::vector<double> cpu(cluster_.hosts.size(), 0.0);
    for (int r = 0; r < static_cast<int>(handled_.size()); ++r) {
      cpu[host_of_[r]] = std::max(cpu[host_of_[r]], handled_[r] * cluster_.message_overhead);
    }
    std::vector<double> summed(cluster_.hosts.size(), 0.0), moved(cluster_.hosts.size(), 0.0);
    for (int r = 0; r < static_cast<int>(summed_.size()); ++r) {
      summed[host_of_[r]] = std::max(summed[host_of_[r]], summed_[r]);
      moved[host_of_[r]] = std::max(moved[host_of_[r]], moved_[r]);
    }
    for (int h = 0; h < static_cast<int>(cpu.size()); ++h) {
      if (cpu[h] > 0.0) phase_.cpu.push_back({h, cpu[h]});
      if (summed[h] > 0.0) phase_.summed.push_back({h, summed[h]});
      if (moved[h] > 0.0) phase_.moved.push_back({h, moved[h]});
    }
    return std::move(phase_);
  }

 private:
  void Touch(int rank) {
    if (sent_[rank] == 0 && received_[rank] == 0) touched_.push_back(rank);
  }

  const ClusterSpec& cluster_;
  const std::vector<int>& host_of_;
  std::vector<double> bytes_;
  std::map<int, double> pair_bytes_;  // per ordered pair of hosts (Phase::pairs)
  std::vector<int> sent_, received_;  // in the current step
  std::vector<int> touched_;          // ranks with messages in the current step
  std::vector<double> handled_;       // messages over the steps so far
  std::vector<double> summed_;        // bytes each rank added into its buffer
  std::vector<double> moved_;         // bytes each rank sent and received
  bool crosses_ = false;
  Phase phase_;
};

int CeilLog2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

// Ring: 2(n-1) steps, each participant sends 1/n of the buffer to the next; in the first n-1
// it adds what it receives (a reduce-scatter), in the rest it keeps it.
void RingAllReduce(const std::vector<int>& p, PhaseBuilder& b) {
  const int n = static_cast<int>(p.size());
  for (int i = 0; i < n; ++i) {
    b.Send(p[i], p[(i + 1) % n], 2.0 * (n - 1) / n);
    b.Sums(p[(i + 1) % n], (n - 1.0) / n);
  }
  b.EndSteps(2.0 * (n - 1));
}

// Recursive doubling over the largest power of two p2 <= n; the first 2(n - p2) participants
// pair up first (the even one hands its buffer to the odd one) and get the result back at the
// end, as MPICH and libnbc do.
void RecursiveDoublingAllReduce(const std::vector<int>& p, PhaseBuilder& b) {
  const int n = static_cast<int>(p.size());
  const int p2 = 1 << (CeilLog2(n + 1) - 1);
  const int rem = n - p2;
  auto real = [&](int v) { return v < rem ? p[2 * v + 1] : p[v + rem]; };
  if (rem > 0) {
    for (int i = 0; i < rem; ++i) {
      b.Send(p[2 * i], p[2 * i + 1], 1.0);
      b.Sums(p[2 * i + 1], 1.0);
    }
    b.EndSteps(1);
  }
  for (int mask = 1; mask < p2; mask <<= 1) {
    for (int v = 0; v < p2; ++v) {
      b.Send(real(v), real(v ^ mask), 1.0);
      b.Sums(real(v ^ mask), 1.0);
    }
    b.EndSteps(1);
  }
  if (rem > 0) {
    for (int i = 0; i < rem; ++i) b.Send(p[2 * i + 1], p[2 * i], 1.0);
    b.EndSteps(1);
  }
}

// Rabenseifner's, as libnbc schedules it: the first 2(n - p2) participants pair up (each sends
// the other half its buffer, the odd one hands its half of the sum to the even one, which takes
// part and returns the result at the end); then a reduce-scatter by recursive halving (the
// partner at distance 1, 2, 4, ...: half, a quarter, ... of the buffer) and an allgather by
// recursive doubling in the reverse order.
void RabenseifnerAllReduce(const std::vector<int>& p, PhaseBuilder& b) {
  const int n = static_cast<int>(p.size());
  const int p2 = 1 << (CeilLog2(n + 1) - 1);
  const int rem = n - p2;
  auto real = [&](int v) { return v < rem ? p[2 * v] : p[v + rem]; };
  if (rem > 0) {
    for (int i = 0; i < rem; ++i) {
      b.Send(p[2 * i], p[2 * i + 1], 0.5);
      b.Send(p[2 * i + 1], p[2 * i], 0.5);
      b.Sums(p[2 * i], 0.5);
      b.Sums(p[2 * i + 1], 0.5);
    }
    b.EndSteps(1);
    for (int i = 0; i < rem; ++i) b.Send(p[2 * i + 1], p[2 * i], 0.5);
    b.EndSteps(1);
  }
  double part = 1.0;
  for (int mask = 1; mask < p2; mask <<= 1) {
    part /= 2;
    for (int v = 0; v < p2; ++v) {
      b.Send(real(v), real(v ^ mask), part);
      b.Sums(real(v ^ mask), part);
    }
    b.EndSteps(1);
  }
  for (int mask = p2 >> 1; mask > 0; mask >>= 1) {
    for (int v = 0; v < p2; ++v) b.Send(real(v), real(v ^ mask), part);
    b.EndSteps(1);
    part *= 2;
  }
  if (rem > 0) {
    for (int i = 0; i < rem; ++i) b.Send(p[2 * i], p[2 * i + 1], 1.0);
    b.EndSteps(1);
  }
}

// libnbc's binomial trees. Virtual ranks swap the root with participant 0 (libnbc's RANK2VRANK;
// the others keep their place). A reduce: in round k, virtual rank v whose lowest set bit is k
// sends its partial sum to v - 2^k. A broadcast: v receives from v less its highest set bit, so
// the root sends to 1, 2, 4, ... at once and v, once it has the data, to v + 2^k for every
// 2^k > v; step s carries the messages to the virtual ranks with s bits set.
void BinomialTree(const std::vector<int>& p, int root, bool to_root, PhaseBuilder& b) {
  const int n = static_cast<int>(p.size());
  auto real = [&](int v) { return p[v == 0 ? root : v == root ? 0 : v]; };
  if (to_root) {
    for (int k = 0; (1 << k) < n; ++k) {
      for (int v = 1 << k; v < n; v += 1 << (k + 1)) {
        b.Send(real(v), real(v - (1 << k)), 1.0);
        b.Sums(real(v - (1 << k)), 1.0);
      }
      b.EndSteps(1);
    }
  } else {
    for (int bits = 1; (1 << (bits - 1)) < n; ++bits) {
      bool any = false;
      for (int v = 1; v < n; ++v) {
        if (std::popcount(static_cast<unsigned>(v)) != bits) continue;
        const int parent = v - (1 << (std::bit_width(static_cast<unsigned>(v)) - 1));
        b.Send(real(parent), real(v), 1.0);
        any = true;
      }
      if (any) b.EndSteps(1);
    }
  }
  (to_root ? b.phase().root_in : b.phase().root_out) = CeilLog2(n);
}

// Every non-root participant sends to (or receives from) the root in one step; a reduce's root
// (`adds`) adds each into its buffer.
void Linear(const std::vector<int>& p, int root, bool to_root, bool adds, PhaseBuilder& b) {
  const int n = static_cast<int>(p.size());
  for (int i = 0; i < n; ++i) {
    if (i == root) continue;
    if (to_root) {
      b.Send(p[i], p[root], 1.0);
      if (adds) b.Sums(p[root], 1.0);
    } else {
      b.Send(p[root], p[i], 1.0);
    }
  }
  b.EndSteps(1);
  (to_root ? b.phase().root_in : b.phase().root_out) = n - 1;
}

// Every participant sends its block to every other one (libnbc's allgatherv), counted per pair
// of hosts: participants on hosts a and b exchange c_a * c_b blocks each way.
void LinearAllGather(const std::vector<int>& p, const std::vector<int>& host_of, int hosts,
                     PhaseBuilder& b) {
  std::vector<double> count(hosts, 0.0);
  for (int r : p) count[host_of[r]] += 1.0;
  for (int from = 0; from < hosts; ++from) {
    if (count[from] == 0.0) continue;
    for (int to = 0; to < hosts; ++to) {
      const double blocks = count[from] * (from == to ? count[to] - 1.0 : count[to]);
      if (blocks > 0.0) b.HostSend(from, to, blocks);
    }
  }
  for (int r : p) {
    b.Handles(r, static_cast<int>(p.size()) - 1);
    b.Moves(r, 2.0 * (static_cast<double>(p.size()) - 1));  // its block out, the others' in
  }
  b.EndSteps(1);
}

// Ring: n-1 steps, each participant forwards one block to the next.
void RingAllGather(const std::vector<int>& p, PhaseBuilder& b) {
  const int n = static_cast<int>(p.size());
  for (int i = 0; i < n; ++i) b.Send(p[i], p[(i + 1) % n], n - 1.0);
  b.EndSteps(n - 1.0);
}

}  // namespace

void PairLoads::Scale(double factor) {
  if (factors_count_ == static_cast<int>(factors_.size())) *this = PairLoads(Loads());
  factors_[factors_count_++] = factor;
}

std::vector<Load> PairLoads::Loads() const {
  std::vector<Load> out;
  out.reserve(size());
  for (size_t i = 0; i < size(); ++i) out.push_back((*this)[i]);
  return out;
}

Phase Phase::Scaled(double factor) const {
  Phase out = *this;
  for (Load& l : out.loads) l.bytes *= factor;
  out.pairs.Scale(factor);
  for (Load& l : out.summed) l.bytes *= factor;
  for (Load& l : out.moved) l.bytes *= factor;
  out.root_in *= factor;
  out.root_out *= factor;
  return out;
}

namespace {

// Two sorted load lists added.
std::vector<Load> AddLoads(const std::vector<Load>& a, const std::vector<Load>& b) {
  std::vector<Load> merged;
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i].resource < b[j].resource)) {
      merged.push_back(a[i++]);
    } else if (i == a.size() || b[j].resource < a[i].resource) {
      merged.push_back(b[j++]);
    } else {
      merged.push_back({a[i].resource, a[i].bytes + b[j].bytes});
      ++i, ++j;
    }
  }
  return merged;
}

}  // namespace

void Phase::Merge(const Phase& other) {
  latency = std::max(latency, other.latency);
  steps = std::max(steps, other.steps);
  messages = std::max(messages, other.messages);
  collectives |= other.collectives;
  root_in += other.root_in;
  root_out += other.root_out;
  loads = AddLoads(loads, other.loads);
  pairs = PairLoads(AddLoads(pairs.Loads(), other.pairs.Loads()));
  cpu = AddLoads(cpu, other.cpu);
  summed = AddLoads(summed, other.summed);
  moved = AddLoads(moved, other.moved);
}

void Phase::ChargeSums(double seconds_per_byte) {
  std::vector<Load> seconds = summed;
  for (Load& l : seconds) l.bytes *= seconds_per_byte;
  cpu = AddLoads(cpu, seconds);
}

Resources::Resources(const ClusterSpec& cluster) {
  for (int h = 0; h < static_cast<int>(cluster.hosts.size()); ++h) {
    const double rate = cluster.efficiency * cluster.hosts[h].bandwidth;
    capacity_.insert(capacity_.end(),
                     {rate, rate, 2.0 * cluster.HostDuplex(h) * rate, cluster.intra_bandwidth});
  }
}

Collectives::Collectives(const ClusterSpec& cluster)
    : cluster_(cluster), host_of_(cluster.HostOfRank()), resources_(cluster) {
  int rank = 0;
  for (const HostSpec& h : cluster.hosts) {
    layout_.leaders.push_back(rank);
    layout_.host_ranks.emplace_back();
    for (int i = 0; i < h.ranks; ++i, ++rank) {
      layout_.all.push_back(rank);
      layout_.host_ranks.back().push_back(rank);
    }
  }
}

Phase Collectives::Run(Collective op, const std::vector<int>& ranks, int root, double bytes,
                       bool direct) {
  // A collective over one rank is no call at all (the units skip it: a hierarchical bucket's
  // reduce and broadcast on a host of one rank), so none of the calibration's fixed time.
  if (ranks.size() <= 1) return OneByte(op, ranks, root, direct);
  auto [it, added] = set_ids_.try_emplace(ranks, static_cast<int>(set_ids_.size()));
  const std::tuple<int, int, int, bool> key(static_cast<int>(op), it->second, root, direct);
  auto cached = cache_.find(key);
  if (cached == cache_.end()) cached = cache_.emplace(key, OneByte(op, ranks, root, direct)).first;
  Phase phase = cached->second.Scaled(bytes);
  // The probe's calibration (root_in and root_out stay the payload, for the servers' report):
  // the larger of its line, each byte on a resource counting `factor` times and `extra`
  // seconds more, and its minimum, each byte `min_factor` times. A negative extra is taken
  // from the transfer (the line's factor at this size, factor + extra / transfer), so that
  // the phase keeps its latency and its loads stay in proportion.
  const int k = static_cast<int>(op);
  phase.collectives |= 1u << k;
  const double factor = cluster_.factor[k], extra = cluster_.extra[k], low = cluster_.min_factor[k];
  const double transfer = TransferSeconds(phase, resources_);
  double scale = factor, fixed = extra;
  if (extra < 0) {
    scale = transfer > 0 ? std::max(low, factor + extra / transfer) : low;
    fixed = 0;
  } else if (low > 0 && low * transfer > factor * transfer + extra) {
    scale = low;
    fixed = 0;
  }
  // Above 1, the excess of an allgather's scale is time the collective takes, not bytes on
  // its links: Open MPI's allgatherv of 305 KB and 1.2 MB a rank on 2 hosts at 100 Mbit/s
  // takes 1.61 and 1.97x the bound while an exchange of the same bytes takes 1.03x
  // (bench/RESULTS.md, "The calibration's excess as time"), so another unit's bytes use the
  // links meanwhile. It is added to the phase's latency, its loads left the payload. The
  // other kinds keep their loads scaled: the grids' measurements give no such evidence for the
  // allreduce, and the parameter server's excess (its handshakes waiting behind the other
  // direction's bytes) predicted as time made the grid's PS predictions worse.
  const bool as_time = op == Collective::kAllGather;
  if (as_time && scale > 1) {
    phase.latency += (scale - 1) * transfer;
  } else {
    for (Load& l : phase.loads) l.bytes *= scale;
    phase.pairs.Scale(scale);
  }
  phase.latency += fixed;
  return phase;
}

Phase Collectives::OneByte(Collective op, const std::vector<int>& p, int root, bool direct) {
  PhaseBuilder b(cluster_, host_of_);
  const int n = static_cast<int>(p.size());
  CAVS_CHECK(n >= 1 && root >= 0 && root < n, "collective over ", n, " ranks, root ", root);
  if (n == 1) return b.Build();
  if (direct && (op == Collective::kReduce || op == Collective::kBroadcast)) {
    const bool reduce = op == Collective::kReduce;
    Linear(p, root, /*to_root=*/reduce, /*adds=*/reduce, b);
    return b.Build();
  }
  const CollectiveAlgorithms& a = cluster_.algorithms;
  switch (op) {
    case Collective::kAllReduce:
      if (a.allreduce == AllReduceAlgorithm::kRing) {
        RingAllReduce(p, b);
      } else if (a.allreduce == AllReduceAlgorithm::kRecursiveDoubling) {
        RecursiveDoublingAllReduce(p, b);
      } else {
        RabenseifnerAllReduce(p, b);
      }
      break;
    case Collective::kReduce:
      if (a.reduce == ReduceAlgorithm::kLinear) {
        Linear(p, root, /*to_root=*/true, /*adds=*/true, b);
      } else {
        BinomialTree(p, root, /*to_root=*/true, b);
      }
      break;
    case Collective::kBroadcast:
      if (a.broadcast == BroadcastAlgorithm::kLinear ||
          (a.broadcast == BroadcastAlgorithm::kLibnbc && n <= 4)) {
        Linear(p, root, /*to_root=*/false, /*adds=*/false, b);
      } else {
        BinomialTree(p, root, /*to_root=*/false, b);
      }
      break;
    case Collective::kAllGather:
      if (a.allgather == AllGatherAlgorithm::kLinear) {
        LinearAllGather(p, host_of_, static_cast<int>(cluster_.hosts.size()), b);
      } else {
        RingAllGather(p, b);
      }
      break;
    case Collective::kGather:
      Linear(p, root, /*to_root=*/true, /*adds=*/false, b);
      break;
  }
  return b.Build();
}

double TransferSeconds(const Phase& phase, const Resources& resources) {
  double transfer = 0.0;
  for (const Load& l : phase.loads) {
    transfer = std::max(transfer, l.bytes / resources.capacity(l.resource));
  }
  return transfer;
}

double AloneSeconds(const Phase& phase, const Resources& resources) {
  double cpu = 0.0;
  for (const Load& c : phase.cpu) cpu = std::max(cpu, c.bytes);
  return cpu + phase.latency + TransferSeconds(phase, resources);
}

}  // namespace cavs::distributed::internal
