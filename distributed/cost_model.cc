#include "distributed/cost_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/parameter.h"
#include "core/status.h"
#include "distributed/builders.h"
#include "distributed/collective_cost.h"
#include "distributed/kinds/kind.h"
#include "distributed/min_sums.h"
#include "distributed/queued_chains.h"

namespace cavs::distributed {

namespace {

using internal::AllMinSums;
using internal::Load;
using internal::MinSums;
using internal::Phase;
using internal::QueuedChainEnds;
using internal::Resources;

constexpr double kMs = 1e-3;

// The units in start order (unit_plan.h, as the synchronizer makes them) and the parameters
// they were planned for; errors as CostModel::Predict says. Servers named by host are resolved
// against the cluster's hosts first.
absl::StatusOr<std::vector<UnitSpec>> CheckedUnits(const Strategy& named,
                                                   const ModelProfile& profile,
                                                   const ClusterSpec& cluster,
                                                   std::vector<UnitParam>* params) {
  const int world_size = cluster.world_size();
  if (named.world_size != world_size) {
    return absl::InvalidArgumentError(absl::StrCat("strategy '", named.name, "' is for ",
                                                   named.world_size, " ranks; the cluster has ",
                                                   world_size));
  }
  CAVS_ASSIGN_OR_RETURN(const Strategy strategy,
                        ResolveHostPlacements(named, cluster.HostOfRank()));
  absl::flat_hash_map<std::string, const ParamSync*> sync_of;
  for (const ParamStrategy& e : strategy.params) {
    if (profile.Find(e.param) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("strategy '", strategy.name,
                                                     "' has an entry for '", e.param,
                                                     "', which is not a parameter of the profile"));
    }
    if (!sync_of.emplace(e.param, &e.sync).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("strategy '", strategy.name, "': parameter '", e.param, "' appears twice"));
    }
  }
  params->clear();
  for (const ParamProfile& p : profile.params) {
    auto it = sync_of.find(p.name);
    if (it == sync_of.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("strategy '", strategy.name, "' has no entry for parameter '", p.name, "'"));
    }
    CAVS_RETURN_IF_ERROR(kinds::KindOf(*it->second).CheckProfile(*it->second, p, world_size));
    params->push_back({p.name, p.rows(), p.sparse});
  }
  return PlanUnits(strategy, *params);
}

}  // namespace

CostModel::CostModel(ModelProfile profile, ClusterSpec cluster)
    : profile_(std::move(profile)),
      cluster_(std::move(cluster)),
      collectives_(std::make_unique<internal::Collectives>(cluster_)),
      poll_cost_(profile_.poll_cost),
      poll_cost_per_mb_(profile_.poll_cost_per_mb) {}

CostModel::~CostModel() = default;

absl::StatusOr<std::unique_ptr<CostModel>> CostModel::Create(ModelProfile profile,
                                                             ClusterSpec cluster) {
  if (profile.params.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model profile '", profile.name, "' has no parameters"));
  }
  if (cluster.world_size() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("cluster '", cluster.name, "' has no ranks"));
  }
  std::unique_ptr<CostModel> model(new CostModel(std::move(profile), std::move(cluster)));
  CAVS_RETURN_IF_ERROR(model->MeasureHooksBasis());
  return model;
}

namespace {

// One phase's work on one queue (a link resource, or a host's CPU), released when the phase
// would reach it with nothing else running.
struct Job {
  double release = 0.0;
  double work = 0.0;  // s
  uint32_t unit = 0;
  uint32_t phase = 0;
};

// Every unit's own chain, run alone from its start: sets end_s to it, and hands each phase's
// work to `queue(on_cpu, resource, job)`: host h's software time with on_cpu and resource h, a
// link resource's transfer without.
template <typename Queue>
void ChainUnits(const std::vector<std::vector<Phase>>& phases, const Resources& res,
                std::vector<UnitPrediction>& units, Queue queue) {
  for (size_t u = 0; u < units.size(); ++u) {
    double t = units[u].start_s;
    for (size_t k = 0; k < phases[u].size(); ++k) {
      const Phase& ph = phases[u][k];
      double software = 0.0, transfer = 0.0;
      for (const Load& c : ph.cpu) {
        queue(true, c.resource,
              Job{t, c.bytes, static_cast<uint32_t>(u), static_cast<uint32_t>(k)});
        software = std::max(software, c.bytes);
      }
      const double begin = t + software + ph.latency;
      for (const Load& l : ph.loads) {
        const double work = l.bytes / res.capacity(l.resource);
        queue(false, l.resource,
              Job{begin, work, static_cast<uint32_t>(u), static_cast<uint32_t>(k)});
        transfer = std::max(transfer, work);
      }
      t = begin + transfer;
    }
    units[u].end_s = t;
  }
}

// The latest end the queues allow without their order: every unit's chain alone (units' end_s,
// set), and every queue busy from its first release for all its work (a single server never
// ends sooner). Serve ends no unit earlier than its chain alone and each queue's last job no
// earlier than that: the units' latest end is at least this.
double ChainFloor(const std::vector<std::vector<Phase>>& phases, const Resources& res, int hosts,
                  std::vector<UnitPrediction>& units) {
  struct Busy {
    double first = std::numeric_limits<double>::infinity(), work = 0.0;
  };
  std::vector<Busy> cpu(hosts), links(res.count());
  ChainUnits(phases, res, units, [&](bool on_cpu, int r, const Job& j) {
    Busy& b = on_cpu ? cpu[r] : links[r];
    b.first = std::min(b.first, j.release);
    b.work += j.work;
  });
  double floor = 0.0;
  for (const UnitPrediction& u : units) floor = std::max(floor, u.end_s);
  for (const std::vector<Busy>* queues : {&cpu, &links}) {
    for (const Busy& b : *queues) {
      if (b.work > 0) floor = std::max(floor, b.first + b.work);
    }
  }
  // (1 - 1e-9): under the rounding of the sums, which Serve adds in another order, so that a
  // step equal to the bound is costed in full as before.
  return floor * (1 - 1e-9);
}

// A unit's chain alone: [start, end) from its start with nothing else running.
struct Interval {
  double start = 0.0, end = 0.0;
};

// Each queue serves its jobs in order of release (ties: unit, then phase), never idle while one
// waits; a unit ends no earlier than its jobs there. The last job's end on a queue is the
// single-server makespan, which no shorter work or earlier release can lengthen: so the step
// time never grows with more bandwidth, less latency or less overhead.
void Serve(std::vector<Job>& queue, std::vector<UnitPrediction>& units) {
  std::stable_sort(queue.begin(), queue.end(),
                   [](const Job& a, const Job& b) { return a.release < b.release; });
  double free = 0.0;
  for (const Job& j : queue) {
    free = std::max(free, j.release) + j.work;
    units[j.unit].end_s = std::max(units[j.unit].end_s, free);
  }
}

// For the units on one resource (unit, work there), each one's sum over the others whose alone
// interval overlaps its own of min(their work, its work). Intervals are not empty (a unit with
// work on a resource takes that long alone), so a unit that does not overlap u either starts
// at or after u's end or ends at or before u's start, never both: the sum over all, less the
// two sums over those, less u's own work. Directly where the units are few.
std::vector<double> OverlapShares(const std::vector<std::pair<size_t, double>>& on,
                                  const std::vector<Interval>& alone) {
  const size_t m = on.size();
  std::vector<double> shared(m, 0.0);
  if (m <= 64) {
    for (size_t i = 0; i < m; ++i) {
      const Interval& u = alone[on[i].first];
      for (size_t j = 0; j < m; ++j) {
        const Interval& v = alone[on[j].first];
        if (j == i || v.start >= u.end || u.start >= v.end) continue;
        shared[i] += std::min(on[j].second, on[i].second);
      }
    }
    return shared;
  }
  std::vector<double> works(m);
  for (size_t i = 0; i < m; ++i) works[i] = on[i].second;
  const AllMinSums all(works);
  for (size_t i = 0; i < m; ++i) shared[i] = all.Of(works[i]) - works[i];
  std::vector<size_t> by_start(m), by_end(m);
  for (size_t i = 0; i < m; ++i) by_start[i] = by_end[i] = i;
  auto start = [&](size_t i) { return alone[on[i].first].start; };
  auto end = [&](size_t i) { return alone[on[i].first].end; };
  std::sort(by_start.begin(), by_start.end(),
            [&](size_t a, size_t b) { return start(a) < start(b); });
  std::sort(by_end.begin(), by_end.end(), [&](size_t a, size_t b) { return end(a) < end(b); });
  {  // those starting at or after u's end: u in decreasing end, the others in decreasing start
    MinSums later(works);
    size_t k = m;
    for (size_t q = m; q-- > 0;) {
      const size_t i = by_end[q];
      while (k > 0 && start(by_start[k - 1]) >= end(i)) later.Add(works[by_start[--k]]);
      shared[i] -= later.Of(works[i]);
    }
  }
  {  // those ending at or before u's start: u in increasing start, the others in increasing end
    MinSums earlier(works);
    size_t k = 0;
    for (size_t q = 0; q < m; ++q) {
      const size_t i = by_start[q];
      while (k < m && end(by_end[k]) <= start(i)) earlier.Add(works[by_end[k++]]);
      shared[i] -= earlier.Of(works[i]);
    }
  }
  for (double& x : shared) x = std::max(0.0, x);
  return shared;
}

// Each unit's alone end, later where the units beside it leave its links too little time: per
// link resource r, every unit v whose alone interval [start, alone end] overlaps u's shares r
// with it, min(v's work on r, u's own work on r) over their whole chains, as a fair share of
// the link would (a smaller transfer beside a larger one takes its own size of the link, a
// larger one at most u's). u's chain must then give r its own work and that share: where the
// sum exceeds the chain's transfer time alone (the sum over its phases of each one's longest
// work), the chain ends later by the difference, on its most loaded resource. So a neighbour
// on a link u leaves idle in another phase (a PS shard's broadcast one way while the other
// shard reduces the same way) costs nothing, and one beside u's only phase costs its share
// whole. Overlap is judged on the alone intervals, whose starts do not depend on the cluster
// and whose ends only grow with slower links, more latency or more overhead; the sum and the
// transfer time alone both grow with slower links, and the end is the later of the alone end
// and start + fixed parts + the sum: so this end, too, never shrinks when a link gets slower.
std::vector<double> SharedChainEnds(const std::vector<std::vector<Phase>>& phases,
                                    const Resources& res, const std::vector<Interval>& alone) {
  const size_t n = alone.size();
  // Per resource: the units with work on it (s at full capacity, over all their phases); per
  // unit, its chain's transfer time alone (the sum over its phases of the longest work in each).
  std::vector<std::vector<std::pair<size_t, double>>> on(res.count());
  std::vector<double> transfer(n, 0.0);
  for (size_t u = 0; u < n; ++u) {
    for (const Phase& ph : phases[u]) {
      double longest = 0.0;
      for (const Load& l : ph.loads) {
        const double work = l.bytes / res.capacity(l.resource);
        auto& list = on[l.resource];
        if (list.empty() || list.back().first != u) list.push_back({u, 0.0});
        list.back().second += work;
        longest = std::max(longest, work);
      }
      transfer[u] += longest;
    }
  }
  std::vector<double> busiest(n, 0.0);
  for (const auto& list : on) {
    const std::vector<double> shared = OverlapShares(list, alone);
    for (size_t i = 0; i < list.size(); ++i) {
      const size_t u = list[i].first;
      busiest[u] = std::max(busiest[u], list[i].second + shared[i]);
    }
  }
  std::vector<double> ends(n);
  for (size_t u = 0; u < n; ++u) {
    ends[u] = alone[u].end + std::max(0.0, busiest[u] - transfer[u]);
  }
  return ends;
}

// For each key in both of two lists sorted by it: `f(i, j)`, a[i] and b[j] having that key.
template <typename T, typename Key, typename F>
void ForCommon(const std::vector<T>& a, const std::vector<T>& b, Key key, F f) {
  for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    if (key(a[i]) < key(b[j])) {
      ++i;
    } else if (key(b[j]) < key(a[i])) {
      ++j;
    } else {
      f(i++, j++);
    }
  }
}

// The most units a strategy may have for its staged units to be judged stage by stage
// (StagedEnds, quadratic in the units and linear in each one's resources and pairs of hosts): the
// test bed's strategies have at most a few dozen units; a partitioned PS over hundreds of hosts
// has a shard per rank and parameter, and is judged whole.
constexpr size_t kMaxStagedUnits = 64;

// A staged unit's end where its neighbours meet its stages (`staged[u]`: a PS shard on MPI's
// trees, kinds::UnitCost::staged, whose phases run one after another on every rank). As in
// SharedChainEnds the neighbours are the units whose alone intervals overlap u's, with their
// work per resource over their whole chains; each is charged to the first of u's stages that
// loads a resource it loads, less its bytes on the pairs of hosts that stage sends on (a
// connection sends in order, Open MPI's TCP transport, docs/cluster.md: those go before or
// after the stage's, as the queues and the queued chains order them, not beside them in a fair
// share), min(that, the stage's own work there) on each resource, as SharedChainEnds shares.
// Each stage ends later by what its work and those shares on its most loaded resource exceed
// its transfer time alone, and the unit by the sum over its stages: a stage cannot lend its
// idle time to the stage before it, so the neighbours that delay a shard's reduce delay its
// broadcast's start. Which stage a neighbour meets is decided by the resources, not by time,
// and the neighbours are those of the alone intervals: so, as in SharedChainEnds, the end
// never shrinks when a link gets slower. Units not staged, and every unit of a strategy of
// more than kMaxStagedUnits units: their alone end. The caller takes the later of this and
// SharedChainEnds' end: the stages' form leaves out what goes on a stage's own connections,
// which the whole chain counts as a fair share.
std::vector<double> StagedEnds(const std::vector<std::vector<Phase>>& phases, const Resources& res,
                               int hosts, const std::vector<Interval>& alone,
                               const std::vector<bool>& staged) {
  const size_t n = alone.size();
  std::vector<double> ends(n);
  for (size_t u = 0; u < n; ++u) ends[u] = alone[u].end;
  // Work per resource and bytes per pair of hosts, both ascending, and the transfer time alone
  // (the sum over the phases of the longest work in each): of every unit whole, and of each
  // stage (a phase that loads a link) of a staged unit.
  struct Loads {
    std::vector<std::pair<int, double>> works;
    std::vector<Load> pairs;
    double transfer = 0.0;
  };
  const auto loads_of = [&](std::span<const Phase> chain) {
    std::map<int, double> works, pairs;
    Loads out;
    for (const Phase& ph : chain) {
      double longest = 0.0;
      for (const Load& l : ph.loads) {
        const double work = l.bytes / res.capacity(l.resource);
        works[l.resource] += work;
        longest = std::max(longest, work);
      }
      for (size_t i = 0; i < ph.pairs.size(); ++i) pairs[ph.pairs[i].resource] += ph.pairs[i].bytes;
      out.transfer += longest;
    }
    out.works.assign(works.begin(), works.end());
    for (const auto& [pair, bytes] : pairs) out.pairs.push_back({pair, bytes});
    return out;
  };
  if (n > kMaxStagedUnits || std::find(staged.begin(), staged.end(), true) == staged.end()) {
    return ends;
  }
  std::vector<Loads> whole;
  whole.reserve(n);
  for (size_t u = 0; u < n; ++u) whole.push_back(loads_of(phases[u]));
  for (size_t u = 0; u < n; ++u) {
    if (!staged[u]) continue;
    std::vector<Loads> stages;
    for (const Phase& ph : phases[u]) {
      if (!ph.loads.empty()) stages.push_back(loads_of({&ph, 1}));
    }
    std::vector<std::vector<double>> share(stages.size());
    for (size_t g = 0; g < stages.size(); ++g) share[g].assign(stages[g].works.size(), 0.0);
    for (size_t v = 0; v < n; ++v) {
      if (v == u || alone[v].start >= alone[u].end || alone[u].start >= alone[v].end) continue;
      const Loads& f = whole[v];
      for (size_t g = 0; g < stages.size(); ++g) {
        const Loads& e = stages[g];
        // f's bytes on the stage's pairs, as work on the resources they load.
        std::map<int, double> same;
        ForCommon(
            e.pairs, f.pairs, [](const Load& l) { return l.resource; },
            [&](size_t i, size_t j) {
              const int a = e.pairs[i].resource / hosts, b = e.pairs[i].resource % hosts;
              for (const int r : {Resources::Out(a), Resources::In(b), Resources::Duplex(a),
                                  Resources::Duplex(b)}) {
                same[r] += f.pairs[j].bytes / res.capacity(r);
              }
            });
        bool met = false;
        ForCommon(
            e.works, f.works, [](const std::pair<int, double>& w) { return w.first; },
            [&](size_t i, size_t j) {
              // What is left past its bytes on the stage's connections; under 1e-9 of its
              // work there, the sums' rounding of none.
              const auto it = same.find(e.works[i].first);
              const double apart = f.works[j].second - (it == same.end() ? 0.0 : it->second);
              if (apart > 1e-9 * f.works[j].second) {
                share[g][i] += std::min(apart, e.works[i].second);
                met = true;
              }
            });
        if (met) break;  // the first stage it meets
      }
    }
    for (size_t g = 0; g < stages.size(); ++g) {
      double busiest = 0.0;
      for (size_t i = 0; i < stages[g].works.size(); ++i) {
        busiest = std::max(busiest, stages[g].works[i].second + share[g][i]);
      }
      ends[u] += std::max(0.0, busiest - stages[g].transfer);
    }
  }
  return ends;
}

// Exposure, in order of end: how far each unit extends backward and the units that end before.
// `end_floor`: an end the communication reaches at least, though no unit's end says so (the
// queues' floor), for the step and its exposed part, not the units'.
void Expose(Prediction& pred, double end_floor = 0.0) {
  std::vector<size_t> by_end(pred.units.size());
  for (size_t u = 0; u < by_end.size(); ++u) by_end[u] = u;
  std::stable_sort(by_end.begin(), by_end.end(),
                   [&](size_t a, size_t b) { return pred.units[a].end_s < pred.units[b].end_s; });
  double covered = pred.compute_s;
  for (size_t u : by_end) {
    pred.units[u].exposed_s = std::max(0.0, pred.units[u].end_s - covered);
    covered = std::max(covered, pred.units[u].end_s);
    pred.comm_end_s = std::max(pred.comm_end_s, pred.units[u].end_s);
  }
  covered = std::max(covered, end_floor);
  pred.comm_end_s = std::max(pred.comm_end_s, end_floor);
  pred.exposed_comm_s = covered - pred.compute_s;
  pred.step_s = pred.compute_s + pred.exposed_comm_s + pred.complete_s + pred.optimizer_s;
}

// The most passes of the polls' stretch (StretchForPolls) before the starts hold; past them the
// last is taken.
constexpr int kPollPasses = 4;
// The most of the compute thread the units' bytes may take (beyond it a transfer is bound by
// the thread, not the link, which the spans do not say).
constexpr double kMaxPollShare = 0.9;

// Each unit's end from its start (pred.units' start_s): its chain alone, the queues of each
// link and host CPU, then, where the step is not yet above `bound_s`, the links shared with the
// units beside it and the queued chains; the exposure of each. `links`: the link queues' jobs.
// `staged`: per unit, whether its phases run as stages (kinds::UnitCost::staged).
void EndUnits(const std::vector<std::vector<Phase>>& phases, const std::vector<bool>& staged,
              const Resources& res, int hosts, double bound_s, Prediction& pred,
              std::vector<std::vector<Job>>& links) {
  links.assign(res.count(), {});
  pred.comm_end_s = 0.0;
  if (std::isfinite(bound_s)) {
    // The queues' floor first: where it is already over the bound, not even the queues are
    // served (an allgather over H hosts queues H^2 jobs a phase).
    Expose(pred, ChainFloor(phases, res, hosts, pred.units));
    pred.lower_bound = pred.step_s > bound_s;
    if (pred.lower_bound) return;
    pred.comm_end_s = 0.0;
  }
  std::vector<std::vector<Job>> cpu(hosts);
  ChainUnits(phases, res, pred.units,
             [&](bool on_cpu, int r, const Job& j) { (on_cpu ? cpu[r] : links[r]).push_back(j); });
  // The shared links judge overlap on the chains alone.
  std::vector<Interval> alone;
  alone.reserve(pred.units.size());
  for (const UnitPrediction& u : pred.units) alone.push_back({u.start_s, u.end_s});
  for (std::vector<Job>& queue : cpu) Serve(queue, pred.units);
  for (std::vector<Job>& queue : links) Serve(queue, pred.units);
  // Each pass below can only end units later, and the step never shrinks when one does: where
  // the step is already over the bound, the rest is not costed.
  Expose(pred);
  pred.lower_bound = pred.step_s > bound_s;
  if (!pred.lower_bound) {
    // Every unit whole, and a staged one stage by stage too: it ends no earlier than either.
    const std::vector<double> shared = SharedChainEnds(phases, res, alone);
    const std::vector<double> stage_ends = StagedEnds(phases, res, hosts, alone, staged);
    for (size_t u = 0; u < pred.units.size(); ++u) {
      pred.units[u].end_s = std::max({pred.units[u].end_s, shared[u], stage_ends[u]});
    }
    Expose(pred);
    pred.lower_bound = pred.step_s > bound_s;
  }
  if (!pred.lower_bound) {
    const std::vector<double> queued = QueuedChainEnds(phases, res, hosts, pred.units);
    for (size_t u = 0; u < pred.units.size(); ++u) {
      pred.units[u].end_s = std::max(pred.units[u].end_s, queued[u]);
    }
    Expose(pred);
  }
}

// The polls while units are in flight: with k units in flight, a second of compute's own work
// takes (1 + c k) / (1 - S), S the sum of their shares of the thread (`shares`: the cost of a
// unit's bytes over its span; at most kMaxPollShare), so compute ends later and the units
// ready during it are ready later: a unit in flight in compute costs it its bytes' cost whole
// (without c). A unit is
// in flight for its span (`spans`: end - start, as the last pass's queues gave it) from its
// start, which is when it is ready and not before the unit before it; its readiness is the
// first pass's (`pred` on entry) wall time of compute, mapped through the spans of the units
// started before it (those after start later, so they cannot change it); the units that start
// after compute in the first pass are not in flight in it. The profile's compute already holds
// the profiled strategy's own polls in flight, `own`: compute, and the readiness of the units
// ready at its end, are that much earlier (so the profiled strategy's compute is the
// profile's). Sets the units' starts and compute; their ends are for the caller to find again
// from the new starts (EndUnits), and the spans with them: a unit that shared a link with one
// whose bytes are now through before it starts takes its own time alone, so its end does not
// move with its start (the polls' time is the units' own progress, not time on top of it).
void StretchForPolls(double c, const std::vector<double>& shares, double own,
                     const std::vector<double>& spans, Prediction& pred) {
  const double compute = pred.compute_s;
  // The spans of the units started so far: at each start one more unit and its share, at each
  // end one less, kept in time order (ties: the ends first).
  struct Event {
    double t;
    int units;
    double share;
    bool operator<(const Event& o) const { return t < o.t || (t == o.t && units < o.units); }
  };
  std::vector<Event> events;
  const auto add = [&](double t, int units, double share) {
    const Event e{t, units, share};
    events.insert(std::upper_bound(events.begin(), events.end(), e), e);
  };
  // Own work a wall second while k units are in flight with these shares.
  const auto rate = [&](int k, double share) {
    return (1 - std::clamp(share, 0.0, kMaxPollShare)) / (1 + c * k);
  };
  // The wall time at which compute has done what the first pass had done at `x`: between
  // events the units in flight are constant, and so is the rate of own work.
  const auto wall_at = [&](double x) {
    double wall = 0.0, done = 0.0, share = 0.0;
    int k = 0;
    for (const Event& e : events) {
      const double can = (e.t - wall) * rate(k, share);
      if (done + can >= x) return wall + (x - done) / rate(k, share);
      done += can;
      wall = e.t;
      k += e.units;
      share += e.share;
    }
    return wall + (x - done) / rate(k, share);
  };
  double before = 0.0;  // the start of the unit before
  double end = -1.0;    // compute's end, once a unit ready at it has come
  for (size_t i = 0; i < pred.units.size(); ++i) {
    UnitPrediction& u = pred.units[i];
    const double span = spans[i];
    const bool in_compute = u.start_s < compute;  // in the first pass: only those slow compute down
    if (u.ready_s < compute) {
      u.ready_s = wall_at(u.ready_s);
    } else {
      if (end < 0) end = wall_at(compute) - own;
      u.ready_s = end + u.ready_s - compute;
    }
    u.start_s = std::max(u.ready_s, before);
    before = u.start_s;
    if (in_compute) {
      add(u.start_s, 1, shares[i]);
      add(u.start_s + span, -1, -shares[i]);
    }
  }
  const double gross = wall_at(compute) - compute;
  const double later = gross - own;
  pred.polls_in_flight_s = later;
  pred.compute_s += later;
  pred.backward_s += later;
  pred.hooks_s += later;
}

// The host link busy the longest, from the bytes queued on each resource.
LinkLoad BusiestLink(const std::vector<std::vector<Job>>& links, const Resources& res, int hosts) {
  LinkLoad busiest;
  if (hosts < 2) return busiest;
  for (int h = 0; h < hosts; ++h) {
    LinkLoad link;
    link.host = h;
    for (int r : {Resources::Out(h), Resources::In(h), Resources::Duplex(h)}) {
      double busy = 0.0;
      for (const Job& j : links[r]) busy += j.work;
      link.busy_s = std::max(link.busy_s, busy);
      const double bytes = busy * res.capacity(r);
      if (r == Resources::Out(h)) link.bytes_out = bytes;
      if (r == Resources::In(h)) link.bytes_in = bytes;
    }
    if (busiest.host < 0 || link.busy_s > busiest.busy_s) busiest = link;
  }
  return busiest;
}

// Per host, the bytes its busiest rank sends and receives over the unit's phases.
std::vector<double> MovedByHost(const std::vector<Phase>& phases, int hosts) {
  std::vector<double> moved(hosts, 0.0);
  for (const Phase& ph : phases) {
    for (const Load& l : ph.moved) moved[l.resource] += l.bytes;
  }
  return moved;
}

// The largest over hosts of the per-host values of the units `keep` keeps, summed.
template <typename Keep>
double SlowestHostSum(const std::vector<std::vector<double>>& per_unit, int hosts, Keep keep) {
  std::vector<double> sum(hosts, 0.0);
  for (size_t v = 0; v < per_unit.size(); ++v) {
    if (!keep(v)) continue;
    for (int h = 0; h < hosts; ++h) sum[h] += per_unit[v][h];
  }
  return hosts > 0 ? *std::max_element(sum.begin(), sum.end()) : 0.0;
}

// The units' start costs per host (the seconds a unit's bytes cost each host's busiest rank's
// thread when it starts), added in unit order: the slowest host's sum over those whose own work
// is ready no later than a given time, as SlowestHostSum over them. Units come mostly in order
// of readiness, so the sum over all of them, kept as they are added, is most often the answer;
// units that cost nothing (started after compute, or no cost a byte) are left out of every sum.
class StartCosts {
 public:
  explicit StartCosts(int hosts) : all_(hosts, 0.0) {}

  void Add(double pure_ready, std::vector<double> push) {
    if (std::all_of(push.begin(), push.end(), [](double p) { return p == 0.0; })) return;
    for (size_t h = 0; h < all_.size(); ++h) all_[h] += push[h];
    latest_ = std::max(latest_, pure_ready);
    readies_.push_back(pure_ready);
    pushes_.push_back(std::move(push));
  }
  // The slowest host's sum over the units added so far ready at or before `pure_ready`.
  double Upto(double pure_ready) const {
    if (pushes_.empty()) return 0.0;
    if (pure_ready >= latest_) return All();
    return SlowestHostSum(pushes_, static_cast<int>(all_.size()),
                          [&](size_t v) { return readies_[v] <= pure_ready; });
  }
  double All() const { return pushes_.empty() ? 0.0 : *std::max_element(all_.begin(), all_.end()); }

 private:
  std::vector<double> all_;  // per host, over every unit added
  double latest_ = -std::numeric_limits<double>::infinity();
  std::vector<double> readies_;
  std::vector<std::vector<double>> pushes_;
};

// Whether each unit starts in compute: every gradient of it and of the units before it is
// reported in compute (units start in order: one after a unit started in Finish starts there
// too).
std::vector<bool> StartsInCompute(const std::vector<UnitSpec>& specs, const ModelProfile& p) {
  std::vector<bool> in_compute;
  bool reported = true;
  for (const UnitSpec& spec : specs) {
    for (int i : spec.params) reported = reported && p.params[i].ready_ms.has_value();
    in_compute.push_back(reported);
  }
  return in_compute;
}

// The bytes of one rank's gradient (dense: the parameter; row-sparse: the touched rows with
// their indices), the units' payload at float32.
double GradientBytes(const ModelProfile& p) {
  double bytes = 0.0;
  for (const ParamProfile& q : p.params) {
    bytes += q.sparse ? q.touched_rows * q.row_bytes() : static_cast<double>(q.bytes());
  }
  return bytes;
}

// The synchronizer's hooks (MarkReady and Poll: the transport's work in the polls) on the
// compute thread, from the profile: its compute of C = forward_ms + backward_ms had the profiled
// strategy's first unit start at w0 = C - overlap_ms; of its hooks_ms, H_b = hooks_ms -
// overlap_hooks_ms came before that and H_w = overlap_hooks_ms after. Before, the polls found
// little to do: a share `idle` = H_b / w0 of the thread's time, which the polls keep taking
// after. After, the calls that start a unit push its first messages: what the overlap's
// wall time has beyond its own work at that share, over the gradient's bytes (the profiled
// strategy's units all start in compute), is `per_byte`, the time a byte a unit carries costs
// the thread when the unit starts. Pure() maps the profile's times to the compute's own work.
// The profiled strategy's compute and hooks come out as measured; without the overlap, the
// one share hooks_ms / C and no cost a byte: every strategy's times are then the profile's.
constexpr double kMaxIdleShare = 0.95;

class HookCosts {
 public:
  // `basis`: the bytes the profiled strategy's units that start in compute cost the thread:
  // its busiest rank's transport bytes, or the gradient's payload.
  HookCosts(const ModelProfile& p, double basis) {
    compute_ = (p.forward_ms + p.backward_ms) * kMs;
    const double hooks = std::min(p.hooks_ms * kMs, compute_);
    if (compute_ <= 0 || hooks <= 0) return;
    const double overlap = std::min(p.overlap_ms * kMs, compute_);
    if (overlap <= 0) {
      idle_ = std::min(hooks / compute_, kMaxIdleShare);
      first_ = compute_;
      return;
    }
    const double in_overlap = std::min({p.overlap_hooks_ms * kMs, overlap, hooks});
    first_ = compute_ - overlap;
    idle_ = first_ > 0 ? std::min((hooks - in_overlap) / first_, kMaxIdleShare) : 0.0;
    own_after_ = std::min(overlap - in_overlap, overlap * (1 - idle_));
    const double pushes = overlap - own_after_ / (1 - idle_);
    per_byte_ = basis > 0 ? pushes / basis : 0.0;
  }
  double per_byte() const { return per_byte_; }
  // The compute's own work in the profile's first `wall` s of compute: at 1 - idle a second
  // before the first start, and the overlap's own work spread evenly over it after.
  double Pure(double wall) const {
    if (first_ < 0) return wall;  // no hooks measured
    const double overlap = compute_ - first_;
    if (wall <= first_ || overlap <= 0) return wall * (1 - idle_);
    return first_ * (1 - idle_) + std::min(wall - first_, overlap) / overlap * own_after_;
  }
  // The wall time a strategy's compute takes for `pure` of its own work, without the units'
  // start costs.
  double Wall(double pure) const { return pure / (1 - idle_); }

 private:
  double compute_ = 0.0;
  double first_ = -1.0;  // the profiled first start; -1: no hooks measured
  double idle_ = 0.0, own_after_ = 0.0, per_byte_ = 0.0;
};

}  // namespace

absl::Status CostModel::MeasureHooksBasis() {
  hooks_basis_bytes_ = 0.0;
  if (profile_.strategy.empty()) return absl::OkStatus();
  core::ParameterStore store;
  CAVS_RETURN_IF_ERROR(AddProfileParameters(profile_, &store));
  CAVS_ASSIGN_OR_RETURN(profiled_, BuildStrategy(profile_.strategy, store, cluster_.world_size()));
  if (profile_.hooks_ms <= 0 || profile_.overlap_ms <= 0) return absl::OkStatus();
  std::vector<UnitParam> params;
  CAVS_ASSIGN_OR_RETURN(const std::vector<UnitSpec> specs,
                        CheckedUnits(*profiled_, profile_, cluster_, &params));
  const int hosts = static_cast<int>(cluster_.hosts.size());
  const std::vector<bool> in_compute = StartsInCompute(specs, profile_);
  std::vector<std::vector<double>> moved;
  for (const UnitSpec& spec : specs) {
    moved.push_back(
        MovedByHost(kinds::KindOf(spec.kind).Cost(spec, profile_, *collectives_).phases, hosts));
  }
  hooks_basis_bytes_ = SlowestHostSum(moved, hosts, [&](size_t u) { return in_compute[u]; });
  return absl::OkStatus();
}

absl::StatusOr<double> CostModel::ProfiledPolls() {
  if (!profiled_.has_value() || (poll_cost_ <= 0 && poll_cost_per_mb_ <= 0)) return 0.0;
  if (profiled_polls_cost_ != poll_cost_ || profiled_polls_per_mb_ != poll_cost_per_mb_) {
    in_profiled_ = true;
    absl::StatusOr<Prediction> p = Predict(*profiled_);
    in_profiled_ = false;
    if (!p.ok()) return p.status();
    profiled_polls_cost_ = poll_cost_;
    profiled_polls_per_mb_ = poll_cost_per_mb_;
    profiled_polls_s_ = p->polls_in_flight_s;
  }
  return profiled_polls_s_;
}

absl::StatusOr<Prediction> CostModel::Predict(const Strategy& strategy) {
  return Predict(strategy, std::numeric_limits<double>::infinity());
}

absl::StatusOr<Prediction> CostModel::Predict(const Strategy& strategy, double bound_s) {
  std::vector<UnitParam> params;
  CAVS_ASSIGN_OR_RETURN(std::vector<UnitSpec> specs,
                        CheckedUnits(strategy, profile_, cluster_, &params));
  const Resources res(cluster_);
  const int hosts = static_cast<int>(cluster_.hosts.size());
  Prediction pred;
  pred.forward_s = profile_.forward_ms * kMs;
  pred.optimizer_s = profile_.optimizer_ms * kMs;
  // Start costs by the bytes each host's busiest rank moves where the profiled strategy's
  // units gave the basis (MeasureHooksBasis), else by the payload on every rank.
  const bool by_rank = hooks_basis_bytes_ > 0;
  const HookCosts hooks(profile_, by_rank ? hooks_basis_bytes_ : GradientBytes(profile_));
  const double pure_end = hooks.Pure(pred.forward_s + profile_.backward_ms * kMs);
  const std::vector<bool> in_compute = StartsInCompute(specs, profile_);

  std::vector<std::vector<Phase>> phases(specs.size());
  std::vector<bool> staged(specs.size());
  std::map<int, ServerLoad> servers;
  double started = 0.0;         // s the backward's thread has spent in the units' Start so far
  StartCosts push_s(hosts);     // per unit and host: its start cost
  std::vector<double> unit_mb;  // per unit, the MB its busiest rank moves (where computed)
  for (size_t u = 0; u < specs.size(); ++u) {
    const kinds::SyncKind& kind = kinds::KindOf(specs[u].kind);
    UnitPrediction unit;
    unit.name = kind.UnitName(specs[u], params);
    unit.kind = specs[u].kind;
    kinds::UnitCost cost = kind.Cost(specs[u], profile_, *collectives_);
    phases[u] = std::move(cost.phases);
    staged[u] = cost.staged;
    for (const Phase& ph : phases[u]) pred.collectives |= ph.collectives;
    unit.payload_bytes = cost.payload_bytes;
    double pure_ready = hooks.Pure(pred.forward_s);
    for (int i : specs[u].params) {
      const std::optional<double>& ready_ms = profile_.params[i].ready_ms;
      pure_ready = std::max(
          pure_ready, hooks.Pure(pred.forward_s + ready_ms.value_or(profile_.backward_ms) * kMs));
    }
    // Ready once that much own work is done, after the Start of the units before it (on the
    // thread that computes the gradients: its encodes) and the start costs of those started
    // before it with their own work done no later (their bytes leave in the polls meanwhile).
    // The slowest host's: each rank computes its own gradients.
    unit.ready_s = hooks.Wall(pure_ready) + push_s.Upto(pure_ready) + started;
    // Units start in order: a ready unit waits for the one before it.
    unit.start_s = std::max(unit.ready_s, u == 0 ? 0.0 : pred.units.back().start_s);
    // Its bytes through each host's busiest rank (where the start costs or the bytes' cost in
    // the polls need them); the start costs are by those, or by the payload on every host.
    std::vector<double> moved;
    if (by_rank || poll_cost_per_mb_ > 0) moved = MovedByHost(phases[u], hosts);
    if (!moved.empty()) unit_mb.push_back(1e-6 * *std::max_element(moved.begin(), moved.end()));
    std::vector<double> push =
        by_rank ? std::move(moved)
                : std::vector<double>(hosts, static_cast<double>(cost.payload_bytes));
    for (double& p : push) p *= in_compute[u] ? hooks.per_byte() : 0.0;
    push_s.Add(pure_ready, std::move(push));
    if (cost.start_s > 0) {
      // Its own Start's work comes first, on every rank's CPU.
      Phase start;
      for (int h = 0; h < hosts; ++h) start.cpu.push_back({h, cost.start_s});
      phases[u].insert(phases[u].begin(), std::move(start));
      started += cost.start_s;
    }
    pred.complete_s += cost.complete_s;
    if (specs[u].server >= 0) {
      ServerLoad& s = servers[specs[u].server];
      s.rank = specs[u].server;
      s.host = collectives_->host_of_rank()[s.rank];
      ++s.shards;
      for (const Phase& ph : phases[u]) s.bytes_in += ph.root_in, s.bytes_out += ph.root_out;
    }
    pred.units.push_back(std::move(unit));
  }
  const double pushed = push_s.All();
  pred.hooks_s = hooks.Wall(pure_end) - pure_end + pushed;
  pred.compute_s = pure_end + pred.hooks_s + started;
  pred.backward_s = pred.compute_s - pred.forward_s;
  std::vector<std::vector<Job>> links;
  // With the polls, each pass's spans set the next one's starts, and a stretch can move the
  // starts earlier as well as later (net of the profiled strategy's own polls): so only the
  // last pass may stop at the bound.
  const bool polls = (poll_cost_ > 0 || poll_cost_per_mb_ > 0) && !pred.units.empty();
  const double unbounded = std::numeric_limits<double>::infinity();
  EndUnits(phases, staged, res, hosts, polls ? unbounded : bound_s, pred, links);
  if (polls) {
    // The polls while units are in flight, net of the profiled strategy's own (in the
    // profile's compute already).
    double own = 0.0;
    if (!in_profiled_) {
      CAVS_ASSIGN_OR_RETURN(own, ProfiledPolls());
    }
    // Each pass's spans stretch the first pass's compute again, until the starts hold (the
    // spans depend on the starts: a unit that starts later may share its links with fewer).
    const Prediction first = pred;
    for (int pass = 0; pass < kPollPasses; ++pass) {
      // A unit's share of the thread in flight: its bytes' cost over its span.
      std::vector<double> spans, shares;
      for (size_t u = 0; u < pred.units.size(); ++u) {
        const double span = pred.units[u].end_s - pred.units[u].start_s;
        spans.push_back(span);
        const bool costed = poll_cost_per_mb_ > 0 && span > 0;
        shares.push_back(costed ? poll_cost_per_mb_ * unit_mb[u] / span : 0.0);
      }
      Prediction next = first;
      StretchForPolls(poll_cost_, shares, own, spans, next);
      bool held = true;
      for (size_t u = 0; u < next.units.size(); ++u) {
        held &= std::abs(next.units[u].start_s - pred.units[u].start_s) <= 1e-12;
      }
      const bool last = held || pass + 1 == kPollPasses;
      EndUnits(phases, staged, res, hosts, last ? bound_s : unbounded, next, links);
      pred = std::move(next);
      if (held) break;
    }
  }
  for (const auto& [rank, s] : servers) {  // the most bytes; ties to the lower rank
    const ServerLoad& b = pred.busiest_server;
    if (b.rank < 0 || s.bytes_in + s.bytes_out > b.bytes_in + b.bytes_out) pred.busiest_server = s;
  }
  pred.busiest_link = BusiestLink(links, res, hosts);
  return pred;
}

absl::StatusOr<CostModel::PollCostFit> CostModel::FitPollCost(const Strategy& profiled,
                                                              const Strategy& early, double ratio) {
  if (!(ratio > 0) || !std::isfinite(ratio)) {
    return absl::InvalidArgumentError(
        absl::StrCat("poll cost: the measured compute ratio ", ratio, " is not positive"));
  }
  const double kept = poll_cost_;
  const auto predicted = [&](double cost) -> absl::StatusOr<double> {
    poll_cost_ = cost;
    absl::StatusOr<Prediction> p = Predict(profiled), e = Predict(early);
    poll_cost_ = kept;
    if (!p.ok()) return p.status();
    if (!e.ok()) return e.status();
    return e->compute_s / p->compute_s;
  };
  PollCostFit fit;
  fit.ratio = ratio;
  CAVS_ASSIGN_OR_RETURN(fit.at_zero, predicted(0.0));
  CAVS_ASSIGN_OR_RETURN(fit.at_max, predicted(kMaxPollCost));
  // Where no cost moves the ratio (the early strategy's units are not in flight in its
  // compute), the measurement says nothing of it: none.
  if (ratio <= fit.at_zero || fit.at_max - fit.at_zero < 1e-9 * fit.at_zero) {
    fit.predicted = fit.at_zero;
    return fit;
  }
  if (ratio >= fit.at_max) {
    fit.cost = kMaxPollCost;
    fit.predicted = fit.at_max;
    return fit;
  }
  // The predicted ratio grows with the cost (the early strategy's units are in flight in more
  // of its compute than the profiled one's): halve the interval where it crosses the measured.
  double lo = 0.0, hi = kMaxPollCost;
  while (hi - lo > 1e-4 * kMaxPollCost) {
    const double mid = 0.5 * (lo + hi);
    CAVS_ASSIGN_OR_RETURN(const double r, predicted(mid));
    (r < ratio ? lo : hi) = mid;
  }
  fit.cost = 0.5 * (lo + hi);
  CAVS_ASSIGN_OR_RETURN(fit.predicted, predicted(fit.cost));
  return fit;
}

double MeanUnitsInFlight(const Prediction& p) {
  if (p.compute_s <= 0) return 0.0;
  double in_flight = 0.0;
  for (const UnitPrediction& u : p.units) {
    in_flight += std::max(0.0, std::min(u.end_s, p.compute_s) - u.start_s);
  }
  return in_flight / p.compute_s;
}

absl::StatusOr<Prediction> PredictStepTime(const Strategy& strategy, const ModelProfile& profile,
                                           const ClusterSpec& cluster) {
  CAVS_ASSIGN_OR_RETURN(std::unique_ptr<CostModel> model, CostModel::Create(profile, cluster));
  return model->Predict(strategy);
}

namespace {

// `cluster` with the factors of `collectives` (bits 1 << Collective) times `scale`.
ClusterSpec ScaleCollectives(ClusterSpec cluster, unsigned collectives, double scale) {
  for (int k = 0; k < kNumCollectives; ++k) {
    if ((collectives >> k & 1u) == 0) continue;
    cluster.factor[k] *= scale;
    cluster.min_factor[k] *= scale;
  }
  return cluster;
}

}  // namespace

std::string DescribeStepCalibration(const StepCalibration& c) {
  if (c.measured_s <= 0) return "not calibrated at a profiled step (none measured)";
  std::string out =
      absl::StrFormat("calibrated at the profiled step (%.2f ms): ", 1e3 * c.measured_s);
  if (!c.unchanged.empty()) return absl::StrCat(out, "unchanged, ", c.unchanged);
  std::vector<std::string> names;
  for (int k = 0; k < kNumCollectives; ++k) {
    if (c.collectives >> k & 1u) names.push_back(CollectiveName(static_cast<Collective>(k)));
  }
  absl::StrAppendFormat(&out, "%s x%.3f (predicted %.2f ms before, %.2f after)",
                        absl::StrJoin(names, ", "), c.scale, 1e3 * c.predicted_s,
                        1e3 * c.calibrated_s);
  if (c.scale <= kMinStepScale || c.scale >= kMaxStepScale) absl::StrAppend(&out, ", at the bound");
  return out;
}

absl::StatusOr<StepCalibration> CalibrateToProfiledStep(const ModelProfile& profile,
                                                        const ClusterSpec& cluster,
                                                        const Strategy& profiled,
                                                        double measured_s) {
  if (!(measured_s > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the profiled step of '", profiled.name, "' is ", measured_s, " s"));
  }
  StepCalibration cal;
  cal.cluster = cluster;
  cal.measured_s = measured_s;
  CAVS_ASSIGN_OR_RETURN(const Prediction before, PredictStepTime(profiled, profile, cluster));
  cal.predicted_s = cal.calibrated_s = before.step_s;
  cal.collectives = before.collectives;
  if (before.collectives == 0) {
    cal.unchanged = "it runs no collective";
    return cal;
  }
  if (before.exposed_comm_s < kMinExposedShare * measured_s) {
    cal.unchanged =
        absl::StrFormat("its communication is hidden (%.2f ms exposed of %.2f ms measured)",
                        1e3 * before.exposed_comm_s, 1e3 * measured_s);
    return cal;
  }
  const auto step_at = [&](double scale) -> absl::StatusOr<double> {
    CAVS_ASSIGN_OR_RETURN(
        const Prediction p,
        PredictStepTime(profiled, profile, ScaleCollectives(cluster, cal.collectives, scale)));
    return p.step_s;
  };
  double lo = kMinStepScale, hi = kMaxStepScale, scale = 1.0;
  CAVS_ASSIGN_OR_RETURN(const double at_lo, step_at(lo));
  CAVS_ASSIGN_OR_RETURN(const double at_hi, step_at(hi));
  if (at_lo >= measured_s) {
    scale = lo;
  } else if (at_hi <= measured_s) {
    scale = hi;
  } else {  // at_lo < measured < at_hi: halve [lo, hi] keeping that, to 1e-5 of s
    while (hi - lo > 1e-5 * lo) {
      const double mid = 0.5 * (lo + hi);
      CAVS_ASSIGN_OR_RETURN(const double at_mid, step_at(mid));
      (at_mid < measured_s ? lo : hi) = mid;
    }
    scale = 0.5 * (lo + hi);
  }
  cal.scale = scale;
  cal.cluster = ScaleCollectives(cluster, cal.collectives, scale);
  CAVS_ASSIGN_OR_RETURN(cal.calibrated_s, step_at(scale));
  return cal;
}

}  // namespace cavs::distributed
