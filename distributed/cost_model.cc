#include "distributed/cost_model.h"

#include <algorithm>
#include <functional>
#include <map>
#include <queue>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "distributed/collective_cost.h"
#include "distributed/kinds/kind.h"

namespace cavs::distributed {

namespace {

using internal::Load;
using internal::Phase;
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
      collectives_(std::make_unique<internal::Collectives>(cluster_)) {}

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
  return std::unique_ptr<CostModel>(new CostModel(std::move(profile), std::move(cluster)));
}

namespace {

// One phase's work on a link resource, queued at `release`.
struct Job {
  double release = 0.0;
  double work = 0.0;  // s
  size_t unit = 0;
  size_t phase = 0;
};

// Every unit's chain with each phase released when the one before it is done among the others:
// each host's CPU (the software time of messages) and each link resource is a queue that serves
// work in order of arrival, one piece after another, as a process pair's messages go out in the
// order they were posted. A message over the cluster's eager limit is a rendezvous: its first
// fragment goes out behind the bytes queued on its direction, the receiver's acknowledgement
// comes back behind the bytes queued on the other direction, and only then do its data join the
// queue. At equal times, earlier stages go first (control messages before data). Sets each
// unit's end_s and records each link resource's jobs in `links`.
void OrderedChains(const std::vector<std::vector<Phase>>& phases, const Resources& res,
                   const ClusterSpec& cluster, std::vector<UnitPrediction>& units,
                   std::vector<std::vector<Job>>& links) {
  enum Stage { kRelease, kReady, kAck, kEnqueue };
  struct Event {
    double t;
    int stage;
    size_t unit, phase;
    bool operator>(const Event& o) const {
      return std::tie(t, stage, unit, phase) > std::tie(o.t, o.stage, o.unit, o.phase);
    }
  };
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  std::vector<double> cpu_free(cluster.hosts.size(), 0.0), link_free(res.count(), 0.0);
  for (size_t u = 0; u < units.size(); ++u) {
    units[u].end_s = units[u].start_s;
    if (!phases[u].empty()) events.push({units[u].start_s, kRelease, u, 0});
  }
  const double latency = cluster.inter_latency;
  auto rendezvous = [&](const internal::PairLoad& p) { return internal::Rendezvous(p, cluster); };
  while (!events.empty()) {
    const Event e = events.top();
    events.pop();
    const Phase& ph = phases[e.unit][e.phase];
    double done = e.t;
    switch (e.stage) {
      case kRelease: {
        // Its messages' software time queues on each host's CPU; its latency runs beside the
        // other units' software time, after its own.
        double own = 0.0;
        for (const Load& c : ph.cpu) {
          cpu_free[c.resource] = std::max(cpu_free[c.resource], e.t) + c.bytes;
          done = std::max(done, cpu_free[c.resource]);
          own = std::max(own, c.bytes);
        }
        events.push({std::max(done, e.t + own + ph.latency), kReady, e.unit, e.phase});
        continue;
      }
      case kReady: {  // first fragments out, each behind its direction's queue
        bool handshake = false;
        for (const internal::PairLoad& p : ph.pairs) {
          if (!rendezvous(p)) continue;
          handshake = true;
          done = std::max(done, std::max(e.t, link_free[Resources::Out(p.from)]) + latency);
        }
        events.push({done, handshake ? kAck : kEnqueue, e.unit, e.phase});
        continue;
      }
      case kAck:  // acknowledgements back, each behind the reverse direction's queue
        for (const internal::PairLoad& p : ph.pairs) {
          if (!rendezvous(p)) continue;
          done = std::max(done, std::max(e.t, link_free[Resources::Out(p.to)]) + latency);
        }
        events.push({done, kEnqueue, e.unit, e.phase});
        continue;
      default:
        break;
    }
    for (const Load& l : ph.loads) {
      const double work = l.bytes / res.capacity(l.resource);
      links[l.resource].push_back({e.t, work, e.unit, e.phase});
      link_free[l.resource] = std::max(link_free[l.resource], e.t) + work;
      done = std::max(done, link_free[l.resource]);
    }
    if (e.phase + 1 < phases[e.unit].size()) {
      events.push({done, kRelease, e.unit, e.phase + 1});
    } else {
      units[e.unit].end_s = done;
    }
  }
}

// Exposure, in order of end: how far each unit extends backward and the units that end before.
void Expose(Prediction& pred) {
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
  pred.exposed_comm_s = covered - pred.compute_s;
  pred.step_s = pred.compute_s + pred.exposed_comm_s + pred.complete_s + pred.optimizer_s;
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

}  // namespace

absl::StatusOr<Prediction> CostModel::Predict(const Strategy& strategy) {
  std::vector<UnitParam> params;
  CAVS_ASSIGN_OR_RETURN(std::vector<UnitSpec> specs,
                        CheckedUnits(strategy, profile_, cluster_, &params));
  const Resources res(cluster_);
  const int hosts = static_cast<int>(cluster_.hosts.size());
  Prediction pred;
  pred.forward_s = profile_.forward_ms * kMs;
  pred.backward_s = profile_.backward_ms * kMs;
  pred.optimizer_s = profile_.optimizer_ms * kMs;
  pred.compute_s = pred.forward_s + pred.backward_s;

  std::vector<std::vector<Phase>> phases(specs.size());
  std::map<int, ServerLoad> servers;
  double started = 0.0;  // s the backward's thread has spent in the units' Start so far
  for (size_t u = 0; u < specs.size(); ++u) {
    const kinds::SyncKind& kind = kinds::KindOf(specs[u].kind);
    UnitPrediction unit;
    unit.name = kind.UnitName(specs[u], params);
    unit.kind = specs[u].kind;
    kinds::UnitCost cost = kind.Cost(specs[u], profile_, *collectives_);
    phases[u] = std::move(cost.phases);
    unit.payload_bytes = cost.payload_bytes;
    unit.ready_s = pred.forward_s;
    for (int i : specs[u].params) {
      const double ready_ms = profile_.params[i].ready_ms.value_or(profile_.backward_ms);
      unit.ready_s = std::max(unit.ready_s, pred.forward_s + ready_ms * kMs);
    }
    // The Start of the units before it ran on the thread that computes the gradients.
    unit.ready_s += started;
    // Units start in order: a ready unit waits for the one before it.
    unit.start_s = std::max(unit.ready_s, u == 0 ? 0.0 : pred.units.back().start_s);
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
  pred.backward_s += started;
  pred.compute_s += started;
  std::vector<std::vector<Job>> links(res.count());
  OrderedChains(phases, res, cluster_, pred.units, links);
  Expose(pred);
  for (const auto& [rank, s] : servers) {  // the most bytes; ties to the lower rank
    const ServerLoad& b = pred.busiest_server;
    if (b.rank < 0 || s.bytes_in + s.bytes_out > b.bytes_in + b.bytes_out) pred.busiest_server = s;
  }
  pred.busiest_link = BusiestLink(links, res, hosts);
  return pred;
}

absl::StatusOr<Prediction> PredictStepTime(const Strategy& strategy, const ModelProfile& profile,
                                           const ClusterSpec& cluster) {
  CAVS_ASSIGN_OR_RETURN(std::unique_ptr<CostModel> model, CostModel::Create(profile, cluster));
  return model->Predict(strategy);
}

}  // namespace cavs::distributed
