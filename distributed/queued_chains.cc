#include "distributed/queued_chains.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "distributed/min_sums.h"

namespace cavs::distributed::internal {

// Each unit's chain again, where its messages queue behind the units started before it: a
// connection (a pair of hosts (a, b)) sends its bytes in order, and the connections through a
// host's link share it fairly. The bytes of each earlier unit's first phase that crosses hosts
// are queued at its start (the others wait for that phase's end, which the cluster moves, so
// they are left out: this end is a bound from below). Sent from there at the pair's rate
// alone (the slower of a's out and b's in), they are through no earlier than
//   backlog(a, b) = max over v < u of (start of v + the time of those bytes on (a, b) of v .. u-1),
// so at u's start at least rest(a, b) = rate(a, b) x max(0, backlog(a, b) - start of u) bytes
// of them wait. u's first bytes on (a, b) go when that rest is through: no earlier than
// rest(a, b) / rate(a, b), and, since every connection through a's out (and b's in) with
// bytes waiting takes its fair share meanwhile, no earlier than the sum over them of
// min(their rest, rest(a, b)) over the link's capacity. The chain is replayed from u's start,
// each phase's bytes on a pair leaving after its software time and that wait, then its latency
// and transfer: a unit of several rounds (a sparse PS shard's counts, gather, unique count and
// rows back) waits behind the backlog of each pair it uses once, then runs its remaining
// rounds. Starts do not depend on the cluster and every term only grows with a slower link, so
// this end too never shrinks with a slower link, more latency or more overhead.
//
// The sums over a link's connections take a pass over them (sorted, AllMinSums) per unit and
// link; a pair's wait is bounded from above by the link's total rest, and by its count of
// waiting connections times the pair's own, both kept per link as the backlogs change. Where
// that bound cannot raise its phase's end past what the phase already ends at, the pair is
// passed over, so most units of an allgather over many hosts cost one look at each pair.
std::vector<double> QueuedChainEnds(const std::vector<std::vector<Phase>>& phases,
                                    const Resources& res, int hosts,
                                    const std::vector<UnitPrediction>& units) {
  const size_t n = units.size();
  std::vector<double> rates(static_cast<size_t>(hosts) * hosts);  // per pair
  for (int a = 0; a < hosts; ++a) {
    for (int b = 0; b < hosts; ++b) {
      rates[a * hosts + b] =
          std::min(res.capacity(Resources::Out(a)), res.capacity(Resources::In(b)));
    }
  }
  auto rate = [&](int pair) { return rates[pair]; };
  // Per pair: when the first phases so far are through on it, at best (0: none); per host, the
  // pairs from it and to it whose backlog may outlast the current start (starts only grow, so
  // a pair whose backlog is through by one is left off until a later unit queues on it again;
  // listed: per pair, whether it is in its from and to lists).
  std::vector<double> backlog(static_cast<size_t>(hosts) * hosts, 0.0);
  std::vector<std::vector<int>> from(hosts), to(hosts);
  std::vector<unsigned char> listed(backlog.size(), 0);  // bit 1: in from, bit 2: in to
  // Drops from `pairs` those through by `start`, clearing their `bit`.
  const auto prune = [&](std::vector<int>& pairs, unsigned char bit, double start) {
    size_t kept = 0;
    for (int q : pairs) {
      if (backlog[q] > start) {
        pairs[kept++] = q;
      } else {
        listed[q] &= static_cast<unsigned char>(~bit);
      }
    }
    pairs.resize(kept);
  };
  std::vector<AllMinSums> out(hosts), in(hosts);  // per link: its connections' rests, for u
  std::vector<double> rests;                      // scratch
  std::vector<size_t> out_for(hosts, n), in_for(hosts, n);  // the unit each was set for
  // Per pair: when u's bytes on it may go (free_for: the unit it was found for).
  std::vector<double> free_at(static_cast<size_t>(hosts) * hosts);
  std::vector<size_t> free_for(free_at.size(), n);
  auto rest = [&](int pair, double start) {
    return std::max(0.0, backlog[pair] - start) * rate(pair);
  };
  // Per host link direction, the sum and count of its connections' rests at `rests_at` (a
  // unit's start; NaN: not yet): min(sum, count x rest(a, b)) bounds the link's term of
  // free(u, a, b) from above, so a pair whose bound cannot raise its phase's end is skipped.
  std::vector<double> out_rest(hosts, 0.0), in_rest(hosts, 0.0);
  std::vector<int> out_count(hosts, 0), in_count(hosts, 0);
  double rests_at = std::numeric_limits<double>::quiet_NaN();
  auto add_rest = [&](int pair, double start, int sign) {
    const double r = rest(pair, start);
    if (r <= 0.0) return;
    out_rest[pair / hosts] += sign * r, out_count[pair / hosts] += sign;
    in_rest[pair % hosts] += sign * r, in_count[pair % hosts] += sign;
  };
  std::vector<double> ends(n);
  for (size_t u = 0; u < n; ++u) {
    const double start = units[u].start_s;
    if (!(start == rests_at)) {
      std::fill(out_rest.begin(), out_rest.end(), 0.0);
      std::fill(in_rest.begin(), in_rest.end(), 0.0);
      std::fill(out_count.begin(), out_count.end(), 0);
      std::fill(in_count.begin(), in_count.end(), 0);
      for (int a = 0; a < hosts; ++a) {
        prune(from[a], 1, start);
        for (int q : from[a]) add_rest(q, start, 1);
      }
      rests_at = start;
    }
    auto link = [&](std::vector<AllMinSums>& sums, std::vector<size_t>& set_for,
                    std::vector<std::vector<int>>& pairs, unsigned char bit,
                    int host) -> const AllMinSums& {
      if (set_for[host] != u) {
        set_for[host] = u;
        prune(pairs[host], bit, start);
        rests.clear();
        for (int q : pairs[host]) {
          if (const double r = rest(q, start); r > 0.0) rests.push_back(r);
        }
        sums[host].Set(rests);
      }
      return sums[host];
    };
    // When `own` bytes waiting on `pair` are through, given the waiting bytes beside them on
    // the pair's out and in links (their sums of min(rest, own), or bounds of those sums).
    auto through_at = [&](int pair, double own, double beside_out, double beside_in) {
      return start +
             std::max({own / rate(pair), beside_out / res.capacity(Resources::Out(pair / hosts)),
                       beside_in / res.capacity(Resources::In(pair % hosts))});
    };
    auto free = [&](int pair) {
      if (free_for[pair] == u) return free_at[pair];
      free_for[pair] = u;
      const double own = rest(pair, start);
      if (own <= 0.0) return free_at[pair] = start;
      return free_at[pair] =
                 through_at(pair, own, link(out, out_for, from, 1, pair / hosts).Of(own),
                            link(in, in_for, to, 2, pair % hosts).Of(own));
    };
    double t = start;
    for (const Phase& ph : phases[u]) {
      double software = 0.0;
      for (const Load& c : ph.cpu) software = std::max(software, c.bytes);
      const double ready = t + software;
      double done = ready + ph.latency + TransferSeconds(ph, res);
      for (size_t i = 0; i < ph.pairs.size(); ++i) {
        const Load p = ph.pairs[i];
        // Nothing waits on the pair: its bytes go at `ready`, through no later than the phase
        // alone (they are part of its out and in links' loads, so bytes / rate is at most
        // TransferSeconds, in floating point too).
        const double own = rest(p.resource, start);
        if (own <= 0.0) continue;
        const double alone = p.bytes / rate(p.resource);
        if (free_for[p.resource] != u) {
          const int a = p.resource / hosts, b = p.resource % hosts;
          const double bound =
              through_at(p.resource, own, std::min(out_rest[a], out_count[a] * own),
                         std::min(in_rest[b], in_count[b] * own));
          // (1 + 1e-9): over the rounding of the sums, so a pair skipped ends before `done`.
          if ((std::max(ready, bound) + ph.latency + alone) * (1 + 1e-9) <= done) continue;
        }
        done = std::max(done, std::max(ready, free(p.resource)) + ph.latency + alone);
      }
      t = done;
    }
    ends[u] = t;
    // The backlog the next unit finds: this unit's first crossing phase joins it. The links'
    // sums of rests follow only where the next unit starts at the same time (else they are
    // summed afresh at its start).
    const bool same_start = u + 1 < n && units[u + 1].start_s == start;
    if (!same_start) rests_at = std::numeric_limits<double>::quiet_NaN();
    for (const Phase& ph : phases[u]) {
      for (size_t i = 0; i < ph.pairs.size(); ++i) {
        const Load p = ph.pairs[i];
        double& through = backlog[p.resource];
        if (!(listed[p.resource] & 1)) from[p.resource / hosts].push_back(p.resource);
        if (!(listed[p.resource] & 2)) to[p.resource % hosts].push_back(p.resource);
        listed[p.resource] = 3;
        if (same_start) add_rest(p.resource, start, -1);
        through = std::max(through, start) + p.bytes / rate(p.resource);
        if (same_start) add_rest(p.resource, start, 1);
      }
      if (!ph.pairs.empty()) break;
    }
  }
  return ends;
}

}  // namespace cavs::distributed::internal
