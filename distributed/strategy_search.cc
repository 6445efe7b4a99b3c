#include "distributed/strategy_search.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace cavs::distributed {

namespace {

// What one parameter does: allreduce (in the plan's buckets), sparse allgather, or a
// parameter server with `shards` shards on `route`.
struct Choice {
  enum class Kind { kAllReduce, kSparse, kPs };
  Kind kind = Kind::kAllReduce;
  int shards = 1;
  PsRoute route = PsRoute::kCollective;

  friend bool operator==(const Choice&, const Choice&) = default;
};

// A point of the search space, before it becomes a Strategy.
struct Plan {
  std::vector<Choice> choice;  // per parameter, in creation order
  int64_t bucket_bytes = 0;
  AllReduceTopology topology = AllReduceTopology::kFlat;
  Compressor compressor = Compressor::kNone;
};

// The traffic a PS shard of rows [begin, end) brings to its server, for balancing.
double ShardTraffic(const ParamProfile& p, int64_t begin, int64_t end, int world) {
  const double fraction = static_cast<double>(end - begin) / p.rows();
  if (!p.sparse) return fraction * p.bytes();
  // Without a spread TouchedIn and UnionIn are this, rounded otherwise: kept, so that the
  // placements' ties fall as they did.
  if (p.spread.empty()) return fraction * (p.touched_rows + p.UnionRows(world)) * p.row_bytes();
  return (p.TouchedIn(begin, end) + p.UnionIn(world, begin, end)) * p.row_bytes();
}

// `rows` split in proportion to `weights`: each share rounded down, the rows left over to the
// largest remainders (ties to the first), then a share of 0 given a row of the largest (ties to
// the first). REQUIRES: rows >= weights.size() >= 1, weights > 0.
std::vector<int64_t> ProportionalSplits(int64_t rows, const std::vector<double>& weights) {
  const int n = static_cast<int>(weights.size());
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  std::vector<int64_t> count(n);
  std::vector<std::pair<double, int>> remainder;  // (-fraction, index): largest first
  int64_t left = rows;
  for (int i = 0; i < n; ++i) {
    const double share = static_cast<double>(rows) * weights[i] / total;
    count[i] = std::min<int64_t>(left, static_cast<int64_t>(share));
    left -= count[i];
    remainder.emplace_back(-(share - static_cast<double>(count[i])), i);
  }
  std::sort(remainder.begin(), remainder.end());
  for (int k = 0; left > 0; k = (k + 1) % n, --left) ++count[remainder[k].second];
  for (int i = 0; i < n; ++i) {
    if (count[i] > 0) continue;
    --*std::max_element(count.begin(), count.end());
    count[i] = 1;
  }
  std::vector<int64_t> splits = {0};
  for (int64_t c : count) splits.push_back(splits.back() + c);
  return splits;
}

// p's rows split so that each shard's traffic (ShardTraffic) is in proportion to `weights`:
// ProportionalSplits where the rows carry traffic evenly (a dense tensor, or a row-sparse one
// without a spread); else each boundary the first row at which the traffic below it reaches
// its share, every shard keeping at least one row. REQUIRES: as ProportionalSplits.
std::vector<int64_t> TrafficSplits(const ParamProfile& p, int world,
                                   const std::vector<double>& weights) {
  const int64_t rows = p.rows();
  if (!p.sparse || p.spread.empty()) return ProportionalSplits(rows, weights);
  const int n = static_cast<int>(weights.size());
  const double total_weight = std::accumulate(weights.begin(), weights.end(), 0.0);
  const double total = ShardTraffic(p, 0, rows, world);
  std::vector<int64_t> splits = {0};
  double cumulative = 0.0;
  for (int s = 0; s + 1 < n; ++s) {
    cumulative += weights[s];
    const double target = total * cumulative / total_weight;
    int64_t lo = splits.back() + 1, hi = rows - (n - 1 - s);  // keep a row for each shard left
    while (lo < hi) {  // the first row r in [lo, hi] with traffic below r >= target
      const int64_t mid = lo + (hi - lo) / 2;
      if (ShardTraffic(p, 0, mid, world) >= target) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    splits.push_back(lo);
  }
  splits.push_back(rows);
  return splits;
}

// Places PS shards: hosts by least normalized load (bytes / link bandwidth; ties to the lower
// host), one shard per host until every host has one, then again; on a host, its rank with
// the fewest shards (ties to the lower rank).
class Placer {
 public:
  explicit Placer(const ClusterSpec& cluster)
      : cluster_(cluster), host_load_(cluster.hosts.size(), 0.0) {
    int rank = 0;
    for (const HostSpec& h : cluster.hosts) {
      ranks_.emplace_back();
      for (int i = 0; i < h.ranks; ++i) ranks_.back().push_back({0, rank++});
    }
  }

  ParameterServerSync Place(const ParamProfile& p, int shards, PsRoute route, int world) {
    shards = static_cast<int>(std::min<int64_t>(shards, p.rows()));
    std::vector<int> hosts(cluster_.hosts.size());
    std::iota(hosts.begin(), hosts.end(), 0);
    std::stable_sort(hosts.begin(), hosts.end(), [&](int a, int b) {
      return host_load_[a] / cluster_.hosts[a].bandwidth <
             host_load_[b] / cluster_.hosts[b].bandwidth;
    });
    ParameterServerSync ps;
    ps.route = route;
    std::vector<double> weights;
    std::vector<int> host_of_shard;
    for (int s = 0; s < shards; ++s) {
      const int host = hosts[s % hosts.size()];
      auto& ranks = ranks_[host];
      auto least = std::min_element(ranks.begin(), ranks.end());
      ++least->first;
      ps.placement.push_back(least->second);
      weights.push_back(cluster_.hosts[host].bandwidth);
      host_of_shard.push_back(host);
    }
    std::vector<int64_t> splits = TrafficSplits(p, world, weights);
    for (int s = 0; s < shards; ++s) {
      host_load_[host_of_shard[s]] += ShardTraffic(p, splits[s], splits[s + 1], world);
    }
    if (splits != ShardRowSplits(ps, p.rows())) ps.row_splits = std::move(splits);
    return ps;
  }

 private:
  const ClusterSpec& cluster_;
  std::vector<double> host_load_;
  std::vector<std::vector<std::pair<int, int>>> ranks_;  // per host: (shards, rank)
};

Strategy Materialize(const Plan& plan, const ModelProfile& profile, const ClusterSpec& cluster) {
  const int n = static_cast<int>(profile.params.size());
  const int world = cluster.world_size();
  Strategy s;
  s.name = "auto";
  s.world_size = world;
  std::vector<ParamSync> sync(n, SparseSync{});
  // Buckets in reverse creation order (backward's), as the allreduce builder fills them.
  int group = -1;
  int64_t filled = 0;
  for (int i = n - 1; i >= 0; --i) {
    if (plan.choice[i].kind != Choice::Kind::kAllReduce) continue;
    const int64_t bytes = profile.params[i].bytes();
    if (group < 0 || (filled > 0 && filled + bytes > plan.bucket_bytes)) ++group, filled = 0;
    filled += bytes;
    sync[i] = AllReduceSync{group, plan.compressor, plan.topology};
  }
  // Servers for the largest tensors first (ties in creation order).
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return profile.params[a].bytes() > profile.params[b].bytes();
  });
  Placer placer(cluster);
  for (int i : order) {
    if (plan.choice[i].kind == Choice::Kind::kPs) {
      sync[i] = placer.Place(profile.params[i], plan.choice[i].shards, plan.choice[i].route, world);
    }
  }
  for (int i = 0; i < n; ++i) s.params.push_back({profile.params[i].name, std::move(sync[i])});
  return s;
}

// The choices a parameter may take (tiny dense tensors: only allreduce).
std::vector<Choice> ChoicesFor(const ParamProfile& p, const std::vector<int>& shard_options,
                               int64_t tiny_bytes) {
  std::vector<Choice> out;
  if (!p.sparse && p.bytes() < tiny_bytes) return {Choice{}};
  out.push_back(p.sparse ? Choice{Choice::Kind::kSparse, 1} : Choice{});
  for (PsRoute route : {PsRoute::kCollective, PsRoute::kDirect}) {
    for (int k : shard_options) {
      if (k <= p.rows()) out.push_back({Choice::Kind::kPs, k, route});
    }
  }
  return out;
}

// Evaluated strategies, ranked: step time (to the microsecond), then fewer units, then fewer
// PS shards on the collective route, then the text. A strategy is only of use if it makes the
// best top_k or beats what the caller compares it with, so each is costed against a bound, the
// larger of the caller's and the top_k-th best step so far (a margin above it, for the
// microsecond ties), and where the cost model finds its step above the bound before the
// costliest term, that lower bound is what the caller gets: above the caller's bound, so it
// changes none of its choices, and above the top_k-th, so it never ranks. A strategy met again
// under a larger bound is costed in full then.
class Ranking {
 public:
  Ranking(CostModel* model, const ModelProfile& profile, const ClusterSpec& cluster, int top_k)
      : model_(model), profile_(profile), cluster_(cluster), top_k_(top_k) {}

  // The predicted step of `plan` (costed in full once per distinct strategy), or a lower bound
  // of it that is above `bound_s`.
  absl::StatusOr<double> Evaluate(const Plan& plan, double bound_s) {
    return Consider(Materialize(plan, profile_, cluster_), bound_s);
  }

  absl::StatusOr<double> Consider(Strategy s, double bound_s) {
    std::string text = SerializeStrategy(s);
    const double bound = std::max(bound_s, RankBound());
    auto it = seen_.find(text);
    if (it != seen_.end() && (it->second.exact || it->second.step > bound)) {
      return it->second.step;
    }
    CAVS_ASSIGN_OR_RETURN(Prediction p, model_->Predict(s, bound));
    const double step = p.step_s;
    if (it == seen_.end()) it = seen_.emplace(std::move(text), Seen{}).first;
    it->second = {step, !p.lower_bound};
    if (p.lower_bound) return step;
    // Steps equal to the microsecond tie (the routes' arithmetic differs in the last bits).
    Key key{std::round(step * 1e6), p.units.size(), TreeShards(s), it->first};
    ranked_.emplace(std::move(key), SearchResult{std::move(s), std::move(p)});
    return step;
  }

  // Distinct strategies costed so far, and of them those costed only to a lower bound.
  size_t size() const { return seen_.size(); }
  int64_t bounded() const {
    int64_t n = 0;
    for (const auto& [text, seen] : seen_) n += !seen.exact;
    return n;
  }

  SearchReport Best() const {
    SearchReport r;
    r.evaluated = static_cast<int64_t>(seen_.size());
    r.bounded = bounded();
    for (const auto& [key, result] : ranked_) {
      if (static_cast<int>(r.best.size()) == top_k_) break;
      r.best.push_back(result);
    }
    return r;
  }

 private:
  using Key = std::tuple<double, size_t, size_t, std::string>;
  struct Seen {
    double step = 0.0;
    bool exact = false;  // else a lower bound
  };

  // Above this a step never makes the best top_k: 2 us over the top_k-th best so far (infinite
  // while fewer are ranked), so that even a tie to the microsecond with it is costed in full.
  double RankBound() const {
    if (static_cast<int>(ranked_.size()) < top_k_) return std::numeric_limits<double>::infinity();
    auto kth = ranked_.begin();
    std::advance(kth, top_k_ - 1);
    return kth->second.prediction.step_s + 2e-6;
  }

  // PS shards on the collective route: there a rank forwards other ranks' bytes in the
  // binomial trees, on the direct route none does; where the model predicts the two the same
  // (the same bytes on every link), the direct route goes first.
  static size_t TreeShards(const Strategy& s) {
    size_t shards = 0;
    for (const ParamStrategy& e : s.params) {
      const auto* ps = std::get_if<ParameterServerSync>(&e.sync);
      if (ps != nullptr && ps->route == PsRoute::kCollective) shards += ps->placement.size();
    }
    return shards;
  }
  CostModel* model_;
  const ModelProfile& profile_;
  const ClusterSpec& cluster_;
  const int top_k_;
  std::map<std::string, Seen> seen_;
  std::map<Key, SearchResult> ranked_;
};

// Shard counts tried for a PS: one server, one per host, one per rank (up to 64 ranks).
std::vector<int> ShardOptions(const ClusterSpec& cluster) {
  std::set<int> k = {1, static_cast<int>(cluster.hosts.size())};
  if (cluster.world_size() <= 64) k.insert(cluster.world_size());
  return {k.begin(), k.end()};
}

}  // namespace

namespace {

// The space of one search and the walk through it.
class Search {
 public:
  Search(const ModelProfile& profile, const ClusterSpec& cluster, const SearchOptions& options,
         CostModel* model)
      : profile_(profile),
        options_(options),
        ranking_(model, profile, cluster, options.top_k),
        shard_options_(ShardOptions(cluster)) {
    for (const ParamProfile& p : profile.params) {
      choices_.push_back(ChoicesFor(p, shard_options_, options.tiny_bytes));
    }
    bool several_per_host = false;
    for (const HostSpec& h : cluster.hosts) several_per_host |= h.ranks > 1;
    std::vector<AllReduceTopology> topologies = {AllReduceTopology::kFlat};
    if (several_per_host && cluster.hosts.size() > 1) {
      topologies.push_back(AllReduceTopology::kHierarchical);
    }
    std::vector<Compressor> compressors = {Compressor::kNone};
    if (options.allow_compression) compressors.push_back(Compressor::kFp16);
    for (int64_t cap : options.bucket_bytes) {
      for (AllReduceTopology t : topologies) {
        for (Compressor c : compressors) globals_.push_back({{}, cap, t, c});
      }
    }
    order_.resize(profile.params.size());
    std::iota(order_.begin(), order_.end(), 0);
    std::stable_sort(order_.begin(), order_.end(), [&](int a, int b) {
      return profile.params[a].bytes() > profile.params[b].bytes();
    });
  }

  Ranking& ranking() { return ranking_; }

  // Every global setting with: each parameter's first choice; the row-sparse tables on k-shard
  // PS; every tensor that may be on k-shard PS; each PS on either route. Distinct strategies
  // only, best first.
  absl::StatusOr<std::vector<std::pair<double, Plan>>> Bases() {
    std::vector<std::pair<double, Plan>> bases;
    for (const Plan& g : globals_) {
      // `ps` for the row-sparse tables (and with `every`, for every tensor that may take it)
      // where their rows allow; each parameter's first choice elsewhere.
      auto add = [&](const Choice* ps, bool every) -> absl::Status {
        Plan plan = g;
        for (size_t i = 0; i < profile_.params.size(); ++i) {
          const ParamProfile& p = profile_.params[i];
          const bool to_ps = ps != nullptr && (p.sparse || every) && choices_[i].size() > 1 &&
                             ps->shards <= p.rows();
          plan.choice.push_back(to_ps ? *ps : choices_[i][0]);
        }
        const size_t before = ranking_.size();
        // Only the best start_points bases are improved: one above those met so far never is.
        CAVS_ASSIGN_OR_RETURN(double step, ranking_.Evaluate(plan, StartBound(bases)));
        if (ranking_.size() > before) bases.emplace_back(step, std::move(plan));
        return absl::OkStatus();
      };
      CAVS_RETURN_IF_ERROR(add(nullptr, false));
      for (PsRoute route : {PsRoute::kCollective, PsRoute::kDirect}) {
        for (bool every : {false, true}) {
          for (int k : shard_options_) {
            const Choice ps{Choice::Kind::kPs, k, route};
            CAVS_RETURN_IF_ERROR(add(&ps, every));
          }
        }
      }
    }
    std::stable_sort(bases.begin(), bases.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    return bases;
  }

  // From `plan`: each parameter in turn (largest first) to whichever choice lowers the step,
  // then each global setting, until a pass changes nothing (at most options.rounds passes).
  absl::Status Improve(Plan plan, double step) {
    for (int round = 0; round < options_.rounds; ++round) {
      bool improved = false;
      auto consider = [&](Plan next) -> absl::Status {
        CAVS_ASSIGN_OR_RETURN(double next_step, ranking_.Evaluate(next, step));
        if (next_step < step) step = next_step, plan = std::move(next), improved = true;
        return absl::OkStatus();
      };
      for (int i : order_) {
        for (const Choice& c : choices_[i]) {
          if (c == plan.choice[i]) continue;
          Plan next = plan;
          next.choice[i] = c;
          CAVS_RETURN_IF_ERROR(consider(std::move(next)));
        }
      }
      for (const Plan& g : globals_) {
        Plan next = plan;
        next.bucket_bytes = g.bucket_bytes;
        next.topology = g.topology;
        next.compressor = g.compressor;
        CAVS_RETURN_IF_ERROR(consider(std::move(next)));
      }
      if (!improved) break;
    }
    return absl::OkStatus();
  }

 private:
  // The start_points-th best step among `bases` (infinite while there are fewer).
  double StartBound(const std::vector<std::pair<double, Plan>>& bases) const {
    const size_t k = static_cast<size_t>(std::max(options_.start_points, 0));
    if (bases.size() < k || k == 0) return std::numeric_limits<double>::infinity();
    std::vector<double> steps;
    for (const auto& b : bases) steps.push_back(b.first);
    std::nth_element(steps.begin(), steps.begin() + (k - 1), steps.end());
    return steps[k - 1];
  }

  const ModelProfile& profile_;
  const SearchOptions& options_;
  Ranking ranking_;
  std::vector<int> shard_options_;
  std::vector<std::vector<Choice>> choices_;  // per parameter
  std::vector<Plan> globals_;                 // bucket cap x topology x compressor
  std::vector<int> order_;                    // parameters, largest first
};

}  // namespace

absl::StatusOr<SearchReport> SearchStrategies(const ModelProfile& profile,
                                              const ClusterSpec& cluster,
                                              const SearchOptions& options) {
  if (options.top_k < 1 || options.bucket_bytes.empty()) {
    return absl::InvalidArgumentError("strategy search: top_k < 1 or no bucket sizes to try");
  }
  CAVS_ASSIGN_OR_RETURN(std::unique_ptr<CostModel> model, CostModel::Create(profile, cluster));
  Search search(profile, cluster, options, model.get());
  for (const Strategy& seed : options.seeds) {
    CAVS_RETURN_IF_ERROR(
        search.ranking().Consider(seed, -std::numeric_limits<double>::infinity()).status());
  }
  CAVS_ASSIGN_OR_RETURN(auto bases, search.Bases());
  const size_t starts = std::min<size_t>(std::max(options.start_points, 0), bases.size());
  for (size_t s = 0; s < starts; ++s) {
    CAVS_RETURN_IF_ERROR(search.Improve(bases[s].second, bases[s].first));
  }
  return search.ranking().Best();
}

}  // namespace cavs::distributed
