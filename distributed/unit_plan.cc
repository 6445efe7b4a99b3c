#include "distributed/unit_plan.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "core/status.h"
#include "distributed/kinds/kind.h"

namespace cavs::distributed {

const char* UnitKindName(UnitKind kind) {
  switch (kind) {
    case UnitKind::kBucket:
      return "allreduce";
    case UnitKind::kPsShard:
      return "ps";
    case UnitKind::kSparse:
      return "sparse";
    case UnitKind::kPsSparseShard:
      return "sparse ps";
  }
  return "?";
}

std::vector<UnitSpec> PlanUnits(const Strategy& strategy, const std::vector<UnitParam>& params) {
  absl::flat_hash_map<std::string, const ParamSync*> sync_of;
  for (const ParamStrategy& e : strategy.params) sync_of[e.param] = &e.sync;
  // Fused units by (kind, group): the first entry's spec, later entries' parameters added.
  std::map<std::pair<const kinds::SyncKind*, int>, UnitSpec> fused;
  std::vector<UnitSpec> specs;
  for (int i = 0; i < static_cast<int>(params.size()); ++i) {
    const UnitParam& p = params[i];
    auto found = sync_of.find(p.name);
    CAVS_CHECK(found != sync_of.end(), "PlanUnits: no entry for parameter '", p.name, "'");
    const ParamSync& sync = *found->second;
    const kinds::SyncKind& kind = kinds::KindOf(sync);
    std::vector<UnitSpec> own = kind.Plan(sync, i, p);
    if (const std::optional<int> group = kind.FusionGroup(sync)) {
      CAVS_CHECK(own.size() == 1, kind.keyword(), " planned ", own.size(), " fused units");
      // Parameters are visited in creation order: the first is the earliest, the unit's key.
      auto [it, added] = fused.try_emplace({&kind, *group}, std::move(own[0]));
      if (!added) it->second.params.push_back(i);
      continue;
    }
    for (UnitSpec& spec : own) specs.push_back(std::move(spec));
  }
  for (auto& [group, spec] : fused) specs.push_back(std::move(spec));
  // Keys are distinct but for the shards of one parameter: the order is total.
  std::sort(specs.begin(), specs.end(), [](const UnitSpec& a, const UnitSpec& b) {
    return a.key != b.key ? a.key > b.key : a.shard < b.shard;
  });
  return specs;
}

}  // namespace cavs::distributed
