#include "distributed/queued_chains.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace cavs::distributed::internal {
namespace {

// The queued chains as docs/distributed.md writes them (queued(u)), pair by pair: every pair of
// every phase costed, every sum over a link's connections taken afresh.
std::vector<double> Reference(const std::vector<std::vector<Phase>>& phases, const Resources& res,
                              int hosts, const std::vector<UnitPrediction>& units) {
  auto out = [&](int h) { return res.capacity(Resources::Out(h)); };
  auto in = [&](int h) { return res.capacity(Resources::In(h)); };
  auto rate = [&](int pair) { return std::min(out(pair / hosts), in(pair % hosts)); };
  std::vector<double> backlog(hosts * hosts, 0.0);
  std::vector<double> ends;
  for (size_t u = 0; u < units.size(); ++u) {
    const double start = units[u].start_s;
    auto rest = [&](int pair) { return rate(pair) * std::max(0.0, backlog[pair] - start); };
    auto free = [&](int pair) {
      const double own = rest(pair);
      if (own <= 0.0) return start;
      const int a = pair / hosts, b = pair % hosts;
      double from_a = 0.0, into_b = 0.0;
      for (int q = 0; q < hosts * hosts; ++q) {
        if (q / hosts == a) from_a += std::min(rest(q), own);
        if (q % hosts == b) into_b += std::min(rest(q), own);
      }
      return start + std::max({own / rate(pair), from_a / out(a), into_b / in(b)});
    };
    double t = start;
    for (const Phase& ph : phases[u]) {
      double software = 0.0;
      for (const Load& c : ph.cpu) software = std::max(software, c.bytes);
      const double ready = t + software;
      double done = ready + ph.latency + TransferSeconds(ph, res);
      for (const Load& p : ph.pairs.Loads()) {
        done = std::max(
            done, std::max(ready, free(p.resource)) + ph.latency + p.bytes / rate(p.resource));
      }
      t = done;
    }
    ends.push_back(t);
    for (const Phase& ph : phases[u]) {
      for (const Load& p : ph.pairs.Loads()) {
        backlog[p.resource] = std::max(backlog[p.resource], start) + p.bytes / rate(p.resource);
      }
      if (!ph.pairs.empty()) break;
    }
  }
  return ends;
}

// A phase with `bytes` on each of `pairs` (from x hosts + to), its loads as PhaseBuilder puts
// them: each pair's bytes on the sender's out, the receiver's in and both duplex budgets.
Phase PhaseOn(const std::vector<std::pair<int, double>>& pairs, int hosts, double cpu,
              double latency) {
  Phase ph;
  std::vector<double> bytes(4 * hosts, 0.0);
  std::vector<Load> on;
  for (const auto& [pair, b] : pairs) {
    on.push_back({pair, b});
    const int from = pair / hosts, to = pair % hosts;
    bytes[Resources::Out(from)] += b, bytes[Resources::In(to)] += b;
    bytes[Resources::Duplex(from)] += b, bytes[Resources::Duplex(to)] += b;
  }
  ph.pairs = PairLoads(std::move(on));
  for (int r = 0; r < 4 * hosts; ++r) {
    if (bytes[r] > 0.0) ph.loads.push_back({r, bytes[r]});
  }
  for (int h = 0; h < hosts; ++h) ph.cpu.push_back({h, cpu});
  ph.latency = latency;
  return ph;
}

// Random units over random clusters (uneven links; units of all pairs, as an allgather puts
// them, of a server's pairs, as a PS shard does, of a ring's; starts shared by several units,
// as the shards of one parameter are): the same ends as the reference.
TEST(QueuedChainsTest, EqualsThePairByPairReference) {
  std::mt19937 rng(7);
  int waited = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int hosts = 2 + trial % 9;
    ClusterSpec cluster;
    cluster.name = "random";
    for (int h = 0; h < hosts; ++h) {
      const double gbit = std::vector<double>{1, 0.25, 10}[rng() % 3];
      cluster.hosts.push_back({"h" + std::to_string(h), 1, gbit * 1e9 / 8});
    }
    const Resources res(cluster);
    const int n = 1 + static_cast<int>(rng() % 40);
    std::vector<std::vector<Phase>> phases(n);
    std::vector<UnitPrediction> units(n);
    double start = 0.001;
    for (int u = 0; u < n; ++u) {
      if (rng() % 3 == 0) start += 1e-4 * (rng() % 50);
      units[u].start_s = start;
      const int count = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < count; ++k) {
        std::vector<std::pair<int, double>> pairs;
        const double b = 10.0 * (1 + rng() % 100000);
        const int server = static_cast<int>(rng() % hosts);
        const int kind = static_cast<int>(rng() % 3);
        for (int a = 0; a < hosts; ++a) {
          for (int c = 0; c < hosts; ++c) {
            const bool on = kind == 0   ? a != c
                            : kind == 1 ? (a == server) != (c == server)
                                        : c == (a + 1) % hosts;
            if (on) pairs.push_back({a * hosts + c, b * (1 + (a + c) % 3)});
          }
        }
        phases[u].push_back(PhaseOn(pairs, hosts, 1e-5 * (rng() % 5), 5e-5 * (rng() % 3)));
      }
    }
    const std::vector<double> want = Reference(phases, res, hosts, units);
    const std::vector<double> got = QueuedChainEnds(phases, res, hosts, units);
    ASSERT_EQ(got.size(), want.size());
    for (int u = 0; u < n; ++u) {
      EXPECT_NEAR(got[u], want[u], 1e-12 * want[u]) << "trial " << trial << " unit " << u;
      // How many units waited for a backlog, so that the check is not of chains alone.
      double alone = units[u].start_s;
      for (const Phase& ph : phases[u]) alone += AloneSeconds(ph, res);
      waited += want[u] > alone * (1 + 1e-9);
    }
  }
  EXPECT_GT(waited, 100);
}

}  // namespace
}  // namespace cavs::distributed::internal
