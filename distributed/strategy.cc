#include "distributed/strategy.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/status.h"
#include "distributed/kinds/kind.h"
#include "distributed/text_format.h"

namespace cavs::distributed {

namespace {

constexpr int kVersion = 1;

absl::StatusOr<ParamSync> ParseSync(const std::vector<std::string>& tokens) {
  const kinds::SyncKind* kind = kinds::FindKind(tokens[2]);
  if (kind == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown synchronizer '", tokens[2],
                                                   "' for parameter '", tokens[1], "' (expected ",
                                                   kinds::KindKeywords(), ")"));
  }
  return kind->Parse(tokens);
}

// The parser's state between lines.
struct ParseState {
  Strategy strategy;
  bool have_version = false;
  bool have_world_size = false;
  absl::flat_hash_map<std::string, int> param_line;
};

absl::Status ParseLine(const std::vector<std::string>& tokens, int line, ParseState& st) {
  const std::string& key = tokens[0];
  if (!st.have_version && key != "version") {
    return absl::InvalidArgumentError("the first line must be 'version 1'");
  }
  auto want_args = [&](size_t n) -> absl::Status {
    if (tokens.size() == n + 1) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("'", key, "' takes ", n, " value",
                                                   n == 1 ? "" : "s", ", got ", tokens.size() - 1));
  };
  if (key == "version") {
    CAVS_RETURN_IF_ERROR(want_args(1));
    if (st.have_version) return absl::InvalidArgumentError("'version' given twice");
    if (tokens[1] != absl::StrCat(kVersion)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unsupported version '", tokens[1], "' (this build reads version ", kVersion, ")"));
    }
    st.have_version = true;
  } else if (key == "name") {
    CAVS_RETURN_IF_ERROR(want_args(1));
    st.strategy.name = tokens[1];
  } else if (key == "world_size") {
    CAVS_RETURN_IF_ERROR(want_args(1));
    CAVS_ASSIGN_OR_RETURN(st.strategy.world_size, kinds::ParseInt<int>("world_size", tokens[1], 1));
    st.have_world_size = true;
  } else if (key == "param") {
    if (tokens.size() < 3) {
      return absl::InvalidArgumentError("'param' needs a name and a synchronizer");
    }
    if (auto [it, added] = st.param_line.emplace(tokens[1], line); !added) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter '", tokens[1], "' given twice (first on line ", it->second, ")"));
    }
    CAVS_ASSIGN_OR_RETURN(ParamSync sync, ParseSync(tokens));
    st.strategy.params.push_back({tokens[1], std::move(sync)});
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown directive '", key, "' (expected version, name, world_size or param)"));
  }
  return absl::OkStatus();
}

absl::Status LineError(int line, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat("strategy line ", line, ": ", s.message()));
}

}  // namespace

const char* CompressorName(Compressor c) { return c == Compressor::kFp16 ? "fp16" : "none"; }

const ParamStrategy* Strategy::Find(absl::string_view param) const {
  for (const ParamStrategy& p : params) {
    if (p.param == param) return &p;
  }
  return nullptr;
}

const char* RouteName(PsRoute r) { return r == PsRoute::kDirect ? "direct" : "collective"; }

const char* TopologyName(AllReduceTopology t) {
  return t == AllReduceTopology::kHierarchical ? "hierarchical" : "flat";
}

std::string DescribeSync(const ParamSync& sync) { return kinds::KindOf(sync).Describe(sync); }

std::string SerializeStrategy(const Strategy& strategy) {
  std::string out = absl::StrCat("# cavs distributed strategy (see docs/distributed.md)\nversion ",
                                 kVersion, "\nname ", internal::QuoteToken(strategy.name),
                                 "\nworld_size ", strategy.world_size, "\n");
  for (const ParamStrategy& p : strategy.params) {
    absl::StrAppend(&out, "param ", internal::QuoteToken(p.param), " ", DescribeSync(p.sync), "\n");
  }
  return out;
}

absl::StatusOr<Strategy> ParseStrategy(absl::string_view text) {
  ParseState st;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    absl::StatusOr<std::vector<std::string>> tokens = internal::TokenizeLine(line);
    if (!tokens.ok()) return LineError(line_number, tokens.status());
    if (tokens->empty()) continue;
    absl::Status s = ParseLine(*tokens, line_number, st);
    if (!s.ok()) return LineError(line_number, s);
  }
  if (!st.have_version) return absl::InvalidArgumentError("strategy: no 'version 1' line");
  if (!st.have_world_size) return absl::InvalidArgumentError("strategy: no 'world_size' line");
  for (const ParamStrategy& p : st.strategy.params) {
    absl::Status s = kinds::KindOf(p.sync).CheckWorldSize(p.sync, p.param, st.strategy.world_size);
    if (!s.ok()) return LineError(st.param_line[p.param], s);
  }
  return st.strategy;
}

absl::Status ValidateStrategy(const Strategy& strategy, const core::ParameterStore& store) {
  if (strategy.world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("strategy '", strategy.name, "': world_size ", strategy.world_size));
  }
  absl::flat_hash_map<std::string, const ParamStrategy*> entries;
  for (const ParamStrategy& e : strategy.params) {
    if (!entries.emplace(e.param, &e).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("strategy '", strategy.name, "': parameter '", e.param, "' appears twice"));
    }
  }
  // Per (kind, fusion group): its earliest-created entry, which the others must fuse with.
  absl::flat_hash_map<std::pair<const kinds::SyncKind*, int>, const ParamStrategy*> group_first;
  for (const auto& p : store.parameters()) {
    auto it = entries.find(p->name);
    if (it == entries.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "strategy '", strategy.name, "' has no entry for parameter '", p->name, "'"));
    }
    const ParamStrategy& entry = *it->second;
    if (p->value.dtype() != core::DType::kFloat32) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", p->name, "' is ",
                                                     core::DTypeName(p->value.dtype()),
                                                     "; only float32 parameters are synchronized"));
    }
    const kinds::SyncKind& kind = kinds::KindOf(entry.sync);
    CAVS_RETURN_IF_ERROR(kind.CheckParameter(entry.sync, *p, strategy.world_size));
    const std::optional<int> group = kind.FusionGroup(entry.sync);
    if (!group.has_value()) continue;
    auto [first, added] = group_first.emplace(std::make_pair(&kind, *group), &entry);
    if (!added) {
      CAVS_RETURN_IF_ERROR(
          kind.CheckFusion(first->second->sync, first->second->param, entry.sync, entry.param));
    }
  }
  for (const ParamStrategy& e : strategy.params) {
    if (store.Find(e.param) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("strategy '", strategy.name,
                                                     "' has an entry for '", e.param,
                                                     "', which is not a parameter of the model"));
    }
  }
  return absl::OkStatus();
}

int NumShards(const ParameterServerSync& ps) {
  return static_cast<int>(ps.host_placement.empty() ? ps.placement.size()
                                                    : ps.host_placement.size());
}

absl::StatusOr<Strategy> ResolveHostPlacements(const Strategy& strategy,
                                               const std::vector<int>& host_of_rank) {
  Strategy out = strategy;
  for (ParamStrategy& e : out.params) {
    CAVS_RETURN_IF_ERROR(kinds::KindOf(e.sync).ResolveHosts(e.sync, e.param, host_of_rank));
  }
  return out;
}

std::vector<int64_t> ShardRowSplits(const ParameterServerSync& ps, int64_t rows) {
  if (!ps.row_splits.empty()) return ps.row_splits;
  const int64_t shards = std::max<int64_t>(1, static_cast<int64_t>(NumShards(ps)));
  std::vector<int64_t> splits = {0};
  for (int64_t s = 0; s < shards; ++s) {
    splits.push_back(splits.back() + rows / shards + (s < rows % shards ? 1 : 0));
  }
  return splits;
}

}  // namespace cavs::distributed
