#include "distributed/unit_plan.h"

#include <algorithm>
#include <map>
#include <utility>
#include <variant>

#include "absl/container/flat_hash_map.h"
#include "core/status.h"

namespace cavs::distributed {

std::vector<UnitSpec> PlanUnits(const Strategy& strategy, const std::vector<UnitParam>& params) {
  absl::flat_hash_map<std::string, const ParamSync*> sync_of;
  for (const ParamStrategy& e : strategy.params) sync_of[e.param] = &e.sync;
  std::map<int, UnitSpec> buckets;  // by group
  std::vector<UnitSpec> specs;
  for (int i = 0; i < static_cast<int>(params.size()); ++i) {
    const UnitParam& p = params[i];
    auto found = sync_of.find(p.name);
    CAVS_CHECK(found != sync_of.end(), "PlanUnits: no entry for parameter '", p.name, "'");
    const ParamSync& sync = *found->second;
    if (const auto* ar = std::get_if<AllReduceSync>(&sync)) {
      auto [it, added] = buckets.try_emplace(ar->group);
      if (added) {
        it->second.key = i;  // parameters are visited in creation order: i is the earliest
        it->second.group = ar->group;
        it->second.compressor = ar->compressor;
        it->second.topology = ar->topology;
      }
      it->second.params.push_back(i);
    } else if (const auto* ps = std::get_if<ParameterServerSync>(&sync)) {
      const std::vector<int64_t> splits = ShardRowSplits(*ps, p.rows);
      for (size_t s = 0; s < ps->placement.size(); ++s) {
        UnitSpec spec;
        spec.kind = p.sparse ? UnitKind::kPsSparseShard : UnitKind::kPsShard;
        spec.key = i;
        spec.shard = static_cast<int>(s);
        spec.params = {i};
        spec.begin = splits[s];
        spec.end = splits[s + 1];
        spec.server = ps->placement[s];
        specs.push_back(std::move(spec));
      }
    } else {
      UnitSpec spec;
      spec.kind = UnitKind::kSparse;
      spec.key = i;
      spec.params = {i};
      spec.end = p.rows;
      specs.push_back(std::move(spec));
    }
  }
  for (auto& [group, spec] : buckets) specs.push_back(std::move(spec));
  std::sort(specs.begin(), specs.end(), [](const UnitSpec& a, const UnitSpec& b) {
    return a.key != b.key ? a.key > b.key : a.shard < b.shard;
  });
  return specs;
}

}  // namespace cavs::distributed
