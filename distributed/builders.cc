#include "distributed/builders.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"

namespace cavs::distributed {

namespace {

using core::Parameter;
using core::ParameterStore;

int64_t Bytes(const Parameter& p) { return static_cast<int64_t>(p.value.nbytes()); }

// A strategy with one entry per parameter, in creation order, each set by `assign`.
template <typename Assign>
Strategy MakeStrategy(absl::string_view name, const ParameterStore& store, int world_size,
                      Assign assign) {
  Strategy s;
  s.name = std::string(name);
  s.world_size = world_size;
  for (const auto& p : store.parameters()) s.params.push_back({p->name, assign(*p)});
  return s;
}

// Bucket (group) ids for the dense parameters, filled in reverse creation order.
std::vector<int> AssignBuckets(const ParameterStore& store, int64_t bucket_bytes) {
  std::vector<int> group(store.parameters().size(), -1);
  int current = -1;
  int64_t filled = 0;
  for (int i = store.size() - 1; i >= 0; --i) {
    const Parameter& p = *store.parameters()[i];
    if (p.sparse_grad) continue;
    if (current < 0 || (filled > 0 && filled + Bytes(p) > bucket_bytes)) {
      ++current;
      filled = 0;
    }
    group[i] = current;
    filled += Bytes(p);
  }
  return group;
}

// Greedy placement by bytes: servers' loads, and the least-loaded ranks.
class ServerLoads {
 public:
  explicit ServerLoads(int world_size) : load_(world_size, 0) {}

  // The `n` least-loaded ranks (ties to the lower rank), in that order.
  std::vector<int> Least(int n) const {
    std::vector<int> ranks(load_.size());
    std::iota(ranks.begin(), ranks.end(), 0);
    std::stable_sort(ranks.begin(), ranks.end(), [&](int a, int b) { return load_[a] < load_[b]; });
    ranks.resize(n);
    return ranks;
  }
  void Add(int rank, int64_t bytes) { load_[rank] += bytes; }

 private:
  std::vector<int64_t> load_;
};

// Parameter indices, largest first (ties in creation order).
std::vector<int> LargestFirst(const ParameterStore& store) {
  std::vector<int> order(store.parameters().size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return Bytes(*store.parameters()[a]) > Bytes(*store.parameters()[b]);
  });
  return order;
}

// Boundaries of `rows` rows in shards sized in proportion to `weights` (positive), every shard
// at least one row. REQUIRES: rows >= weights.size() >= 1.
std::vector<int64_t> ProportionalSplits(int64_t rows, const std::vector<double>& weights) {
  const int64_t shards = static_cast<int64_t>(weights.size());
  double total = 0;
  for (double w : weights) total += w;
  std::vector<int64_t> splits = {0};
  double cumulative = 0;
  for (int64_t s = 0; s < shards; ++s) {
    cumulative += weights[s];
    int64_t b = s + 1 == shards ? rows : std::llround(rows * cumulative / total);
    b = std::clamp(b, splits.back() + 1, rows - (shards - 1 - s));
    splits.push_back(b);
  }
  return splits;
}

// Load-balanced PS entries; with `partition_min_bytes` > 0, large tensors in row shards (sized
// by `weights` per rank where given).
std::vector<ParameterServerSync> BalancedPs(const ParameterStore& store, int world_size,
                                            int64_t partition_min_bytes,
                                            const std::vector<double>& weights = {}) {
  std::vector<ParameterServerSync> out(store.parameters().size());
  ServerLoads loads(world_size);
  for (int i : LargestFirst(store)) {
    const Parameter& p = *store.parameters()[i];
    const int64_t rows = p.value.rows();
    int shards = 1;
    if (partition_min_bytes > 0 && Bytes(p) >= partition_min_bytes && rows >= 2) {
      shards = static_cast<int>(std::min<int64_t>(world_size, rows));
    }
    ParameterServerSync& ps = out[i];
    ps.placement = loads.Least(shards);
    if (shards > 1 && !weights.empty()) {
      std::vector<double> w;
      for (int server : ps.placement) w.push_back(weights[server]);
      ps.row_splits = ProportionalSplits(rows, w);
    } else if (shards > 1) {
      ps.row_splits = ShardRowSplits(ps, rows);
    }
    const std::vector<int64_t> splits = ShardRowSplits(ps, rows);
    for (int s = 0; s < shards; ++s) {
      const int64_t shard_rows = splits[s + 1] - splits[s];
      loads.Add(ps.placement[s], rows == 0 ? 0 : Bytes(p) / rows * shard_rows);
    }
  }
  return out;
}

Strategy BuildAllReduceLike(absl::string_view name, const ParameterStore& store, int world_size,
                            const BuildOptions& options, bool sparse_ps) {
  const std::vector<int> group = AssignBuckets(store, options.bucket_bytes);
  const std::vector<ParameterServerSync> ps =
      sparse_ps ? BalancedPs(store, world_size, 0) : std::vector<ParameterServerSync>();
  int index = 0;
  return MakeStrategy(name, store, world_size, [&](const Parameter& p) -> ParamSync {
    const int i = index++;
    if (!p.sparse_grad) return AllReduceSync{group[i], options.compressor, options.topology};
    if (sparse_ps) return ps[i];
    return SparseSync{};
  });
}

}  // namespace

const std::vector<std::string>& StrategyBuilderNames() {
  static const auto* names = new std::vector<std::string>{
      "allreduce", "ps", "ps-lb", "partitioned-ps", "hybrid", "hier-allreduce", "hier-hybrid"};
  return *names;
}

bool IsStrategyBuilder(absl::string_view name) {
  const std::vector<std::string>& names = StrategyBuilderNames();
  return std::find(names.begin(), names.end(), name) != names.end();
}

absl::StatusOr<Strategy> BuildStrategy(absl::string_view name, const ParameterStore& store,
                                       int world_size, const BuildOptions& options) {
  if (world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("world size ", world_size, " < 1"));
  }
  if (!options.server_weights.empty()) {
    if (static_cast<int>(options.server_weights.size()) != world_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          options.server_weights.size(), " server weights for world size ", world_size));
    }
    for (double w : options.server_weights) {
      if (!(w > 0) || !std::isfinite(w)) {
        return absl::InvalidArgumentError(absl::StrCat("server weight ", w, " is not positive"));
      }
    }
  }
  if (options.bucket_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bucket size ", options.bucket_bytes, " bytes is not positive"));
  }
  if (name == "hier-allreduce" || name == "hier-hybrid") {
    BuildOptions hier = options;
    hier.topology = AllReduceTopology::kHierarchical;
    CAVS_ASSIGN_OR_RETURN(Strategy s, BuildStrategy(name.substr(5), store, world_size, hier));
    s.name = std::string(name);
    return s;
  }
  if (name == "allreduce") return BuildAllReduceLike(name, store, world_size, options, false);
  if (name == "hybrid") {
    return BuildAllReduceLike(name, store, world_size, options, options.hybrid_sparse_ps);
  }
  if (name == "ps") {
    int index = 0;
    return MakeStrategy(name, store, world_size, [&](const Parameter&) -> ParamSync {
      return ParameterServerSync{{index++ % world_size}, {}, 0};
    });
  }
  if (name == "ps-lb" || name == "partitioned-ps") {
    const std::vector<ParameterServerSync> ps = BalancedPs(
        store, world_size, name == "ps-lb" ? 0 : std::max<int64_t>(1, options.partition_min_bytes),
        name == "ps-lb" ? std::vector<double>() : options.server_weights);
    int index = 0;
    return MakeStrategy(name, store, world_size,
                        [&](const Parameter&) -> ParamSync { return ps[index++]; });
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown strategy builder '", name, "': expected ",
                                                 absl::StrJoin(StrategyBuilderNames(), ", ")));
}

}  // namespace cavs::distributed
