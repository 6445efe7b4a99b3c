#include "distributed/kinds/kind.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_join.h"
#include "distributed/kinds/allreduce.h"
#include "distributed/kinds/parameter_server.h"
#include "distributed/kinds/sparse_allgather.h"

namespace cavs::distributed::kinds {

const std::vector<const SyncKind*>& AllKinds() {
  // The one list of kinds: a new kind adds its line here.
  static const auto* kinds = new std::vector<const SyncKind*>{
      &AllReduceKind(),
      &ParameterServerKind(),
      &SparseAllGatherKind(),
  };
  return *kinds;
}

const SyncKind& KindOf(const ParamSync& sync) {
  for (const SyncKind* kind : AllKinds()) {
    if (kind->Holds(sync)) return *kind;
  }
  CAVS_CHECK(false, "no synchronizer kind holds alternative ", sync.index(), " of ParamSync");
  return *AllKinds().front();
}

const SyncKind& KindOf(UnitKind unit) {
  for (const SyncKind* kind : AllKinds()) {
    const std::vector<UnitKind> units = kind->unit_kinds();
    if (std::find(units.begin(), units.end(), unit) != units.end()) return *kind;
  }
  CAVS_CHECK(false, "no synchronizer kind plans units of kind ", static_cast<int>(unit));
  return *AllKinds().front();
}

const SyncKind* FindKind(absl::string_view keyword) {
  for (const SyncKind* kind : AllKinds()) {
    if (keyword == kind->keyword()) return kind;
  }
  return nullptr;
}

std::string KindKeywords() {
  std::vector<std::string> words;
  for (const SyncKind* kind : AllKinds()) words.push_back(kind->keyword());
  const std::string last = words.back();
  words.pop_back();
  return words.empty() ? last : absl::StrCat(absl::StrJoin(words, ", "), " or ", last);
}

absl::StatusOr<const Topology*> UnitContext::topology() {
  if (!topology_.has_value()) {
    CAVS_ASSIGN_OR_RETURN(topology_, comm_->DiscoverTopology());
  }
  return &*topology_;
}

// ---- What most kinds do not have

absl::Status SyncKind::CheckWorldSize(const ParamSync&, const std::string&, int) const {
  return absl::OkStatus();
}

std::optional<int> SyncKind::FusionGroup(const ParamSync&) const { return std::nullopt; }

absl::Status SyncKind::CheckFusion(const ParamSync&, const std::string&, const ParamSync&,
                                   const std::string&) const {
  return absl::OkStatus();
}

bool SyncKind::NamesHosts(const ParamSync&) const { return false; }

absl::Status SyncKind::ResolveHosts(ParamSync&, const std::string&, const std::vector<int>&) const {
  return absl::OkStatus();
}

absl::Status SyncKind::CheckRunnable(const ParamSync&, const std::string&) const {
  return absl::OkStatus();
}

// ---- For the kinds

absl::StatusOr<absl::flat_hash_map<std::string, std::string>> ParseOptions(
    const std::vector<std::string>& tokens, absl::string_view kind,
    const std::vector<std::string>& allowed) {
  absl::flat_hash_map<std::string, std::string> options;
  for (size_t i = 3; i < tokens.size(); ++i) {
    std::pair<std::string, std::string> kv = absl::StrSplit(tokens[i], absl::MaxSplits('=', 1));
    if (std::find(allowed.begin(), allowed.end(), kv.first) == allowed.end() ||
        tokens[i].find('=') == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown option '", tokens[i], "' for ", kind,
          allowed.empty() ? " (it takes none)"
                          : absl::StrCat(" (expected ", absl::StrJoin(allowed, "=, "), "=)")));
    }
    if (!options.emplace(kv.first, kv.second).second) {
      return absl::InvalidArgumentError(absl::StrCat("option '", kv.first, "' given twice"));
    }
  }
  return options;
}

std::string ShardUnitName(absl::string_view kind, const UnitParam& param, const UnitSpec& unit) {
  std::string name = absl::StrCat(kind, " '", param.name, "'");
  if (unit.begin != 0 || unit.end != param.rows) {
    absl::StrAppend(&name, " rows [", unit.begin, ", ", unit.end, ")");
  }
  if (unit.server >= 0) absl::StrAppend(&name, " on server ", unit.server);
  return name;
}

}  // namespace cavs::distributed::kinds
