#include "distributed/strategy.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/status.h"
#include "distributed/text_format.h"

namespace cavs::distributed {

namespace {

constexpr int kVersion = 1;

template <typename T>
absl::StatusOr<T> ParseInt(absl::string_view key, absl::string_view value, T min_value) {
  T v{};
  if (!absl::SimpleAtoi(value, &v) || v < min_value) {
    return absl::InvalidArgumentError(absl::StrCat("bad value '", value, "' for ", key,
                                                   " (expected an integer >= ", min_value, ")"));
  }
  return v;
}

template <typename T>
absl::StatusOr<std::vector<T>> ParseIntList(absl::string_view key, absl::string_view value) {
  std::vector<T> out;
  for (absl::string_view item : absl::StrSplit(value, ',')) {
    CAVS_ASSIGN_OR_RETURN(T v, ParseInt<T>(key, item, 0));
    out.push_back(v);
  }
  return out;
}

// key=value options after the synchronizer kind; each key at most once and among `allowed`.
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

absl::StatusOr<ParamSync> ParseAllReduce(const std::vector<std::string>& tokens) {
  CAVS_ASSIGN_OR_RETURN(auto options,
                        ParseOptions(tokens, "allreduce", {"group", "compressor", "topology"}));
  AllReduceSync sync;
  if (auto it = options.find("group"); it != options.end()) {
    CAVS_ASSIGN_OR_RETURN(sync.group, ParseInt<int>("group", it->second, 0));
  }
  if (auto it = options.find("compressor"); it != options.end()) {
    if (it->second == "fp16") {
      sync.compressor = Compressor::kFp16;
    } else if (it->second != "none") {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown compressor '", it->second, "' (expected none or fp16)"));
    }
  }
  if (auto it = options.find("topology"); it != options.end()) {
    if (it->second == "hierarchical") {
      sync.topology = AllReduceTopology::kHierarchical;
    } else if (it->second != "flat") {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown topology '", it->second, "' (expected flat or hierarchical)"));
    }
  }
  return sync;
}

// "h1.0,h0,h2.1": servers named by host (hH.L, or hH for local rank 0).
absl::StatusOr<std::vector<HostRank>> ParseHostList(absl::string_view text) {
  std::vector<HostRank> out;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    HostRank hr;
    std::pair<absl::string_view, absl::string_view> parts = absl::StrSplit(item, '.');
    const bool host_ok = absl::ConsumePrefix(&parts.first, "h") &&
                         absl::SimpleAtoi(parts.first, &hr.host) && hr.host >= 0;
    const bool local_ok = absl::StrContains(item, '.')
                              ? absl::SimpleAtoi(parts.second, &hr.local) && hr.local >= 0
                              : true;
    if (!host_ok || !local_ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad value '", item, "' for placement (a rank, or hH.L: host H's L-th rank)"));
    }
    out.push_back(hr);
  }
  return out;
}

absl::StatusOr<ParamSync> ParsePs(const std::vector<std::string>& tokens) {
  CAVS_ASSIGN_OR_RETURN(auto options,
                        ParseOptions(tokens, "ps", {"placement", "rows", "staleness"}));
  ParameterServerSync sync;
  auto placement = options.find("placement");
  if (placement == options.end()) {
    return absl::InvalidArgumentError("ps needs placement=<server rank per shard>");
  }
  if (absl::StartsWith(placement->second, "h")) {
    CAVS_ASSIGN_OR_RETURN(sync.host_placement, ParseHostList(placement->second));
  } else {
    CAVS_ASSIGN_OR_RETURN(sync.placement, ParseIntList<int>("placement", placement->second));
  }
  const size_t shards = static_cast<size_t>(NumShards(sync));
  if (auto it = options.find("rows"); it != options.end()) {
    CAVS_ASSIGN_OR_RETURN(sync.row_splits, ParseIntList<int64_t>("rows", it->second));
    if (sync.row_splits.size() != shards + 1) {
      return absl::InvalidArgumentError(absl::StrCat("rows has ", sync.row_splits.size(),
                                                     " boundaries for ", shards,
                                                     " shards (expected ", shards + 1, ")"));
    }
    if (sync.row_splits[0] != 0 ||
        std::adjacent_find(sync.row_splits.begin(), sync.row_splits.end(),
                           std::greater_equal<int64_t>()) != sync.row_splits.end()) {
      return absl::InvalidArgumentError("rows must start at 0 and increase strictly");
    }
  }
  if (auto it = options.find("staleness"); it != options.end()) {
    CAVS_ASSIGN_OR_RETURN(sync.staleness, ParseInt<int>("staleness", it->second, 0));
  }
  return sync;
}

absl::StatusOr<ParamSync> ParseSync(const std::vector<std::string>& tokens) {
  const std::string& kind = tokens[2];
  if (kind == "allreduce") return ParseAllReduce(tokens);
  if (kind == "ps") return ParsePs(tokens);
  if (kind == "sparse") {
    CAVS_RETURN_IF_ERROR(ParseOptions(tokens, "sparse", {}).status());
    return SparseSync{};
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown synchronizer '", kind,
                                                 "' for parameter '", tokens[1],
                                                 "' (expected allreduce, ps or sparse)"));
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
    CAVS_ASSIGN_OR_RETURN(st.strategy.world_size, ParseInt<int>("world_size", tokens[1], 1));
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

const char* TopologyName(AllReduceTopology t) {
  return t == AllReduceTopology::kHierarchical ? "hierarchical" : "flat";
}

std::string DescribeSync(const ParamSync& sync) {
  if (const auto* ar = std::get_if<AllReduceSync>(&sync)) {
    return absl::StrCat(
        "allreduce group=", ar->group, " compressor=", CompressorName(ar->compressor),
        ar->topology == AllReduceTopology::kHierarchical ? " topology=hierarchical" : "");
  }
  if (const auto* ps = std::get_if<ParameterServerSync>(&sync)) {
    std::string s = absl::StrCat("ps placement=");
    if (!ps->host_placement.empty()) {
      absl::StrAppend(&s, absl::StrJoin(ps->host_placement, ",", [](std::string* out, HostRank h) {
        absl::StrAppend(out, "h", h.host, ".", h.local);
      }));
    } else {
      absl::StrAppend(&s, absl::StrJoin(ps->placement, ","));
    }
    if (!ps->row_splits.empty()) absl::StrAppend(&s, " rows=", absl::StrJoin(ps->row_splits, ","));
    absl::StrAppend(&s, " staleness=", ps->staleness);
    return s;
  }
  return "sparse";
}

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
    const auto* ps = std::get_if<ParameterServerSync>(&p.sync);
    if (ps == nullptr) continue;
    for (int server : ps->placement) {
      if (server >= st.strategy.world_size) {
        return LineError(st.param_line[p.param],
                         absl::InvalidArgumentError(absl::StrCat(
                             "server rank ", server, " of parameter '", p.param,
                             "' is out of range for world_size ", st.strategy.world_size)));
      }
    }
  }
  return st.strategy;
}

namespace {

absl::Status CheckPs(const ParameterServerSync& ps, const core::Parameter& p, int world_size) {
  if (ps.placement.empty() && ps.host_placement.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("parameter '", p.name, "': ps has no server"));
  }
  if (!ps.placement.empty() && !ps.host_placement.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter '", p.name, "': ps names servers both by rank and by host"));
  }
  // Servers named by host are checked when they are resolved against the ranks' hosts.
  for (int server : ps.placement) {
    if (server < 0 || server >= world_size) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", p.name, "': server rank ",
                                                     server, " is out of range for world_size ",
                                                     world_size));
    }
  }
  const int64_t rows = p.value.rows();
  const int64_t shards = NumShards(ps);
  if (!ps.row_splits.empty() && ps.row_splits.back() != rows) {
    return absl::InvalidArgumentError(absl::StrCat("parameter '", p.name, "': shard rows end at ",
                                                   ps.row_splits.back(), " but it has ", rows,
                                                   " rows"));
  }
  if (ps.row_splits.empty() && shards > std::max<int64_t>(rows, 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter '", p.name, "': ", shards, " shards for ", rows, " rows"));
  }
  return absl::OkStatus();
}

absl::Status CheckEntry(const ParamStrategy& entry, const core::Parameter& p, int world_size) {
  if (p.value.dtype() != core::DType::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat("parameter '", p.name, "' is ",
                                                   core::DTypeName(p.value.dtype()),
                                                   "; only float32 parameters are synchronized"));
  }
  if (std::holds_alternative<AllReduceSync>(entry.sync) && p.sparse_grad) {
    return absl::InvalidArgumentError(absl::StrCat("parameter '", p.name,
                                                   "' has a row-sparse gradient; allreduce needs "
                                                   "a dense one (use sparse or ps)"));
  }
  if (std::holds_alternative<SparseSync>(entry.sync) && !p.sparse_grad) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameter '", p.name, "' has a dense gradient; sparse needs a row-sparse one"));
  }
  if (const auto* ps = std::get_if<ParameterServerSync>(&entry.sync)) {
    return CheckPs(*ps, p, world_size);
  }
  return absl::OkStatus();
}

}  // namespace

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
  absl::flat_hash_map<int, const core::Parameter*> group_first;
  for (const auto& p : store.parameters()) {
    auto it = entries.find(p->name);
    if (it == entries.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "strategy '", strategy.name, "' has no entry for parameter '", p->name, "'"));
    }
    CAVS_RETURN_IF_ERROR(CheckEntry(*it->second, *p, strategy.world_size));
    const auto* ar = std::get_if<AllReduceSync>(&it->second->sync);
    if (ar == nullptr) continue;
    auto [first, added] = group_first.emplace(ar->group, p.get());
    const auto& other = std::get<AllReduceSync>(entries[first->second->name]->sync);
    if (!added && other.compressor != ar->compressor) {
      return absl::InvalidArgumentError(
          absl::StrCat("allreduce group ", ar->group, " mixes compressors: parameter '", p->name,
                       "' uses ", CompressorName(ar->compressor), ", parameter '",
                       first->second->name, "' uses ", CompressorName(other.compressor)));
    }
    if (!added && other.topology != ar->topology) {
      return absl::InvalidArgumentError(
          absl::StrCat("allreduce group ", ar->group, " mixes topologies: parameter '", p->name,
                       "' uses ", TopologyName(ar->topology), ", parameter '", first->second->name,
                       "' uses ", TopologyName(other.topology)));
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
  int hosts = 0;
  for (int h : host_of_rank) hosts = std::max(hosts, h + 1);
  for (ParamStrategy& e : out.params) {
    auto* ps = std::get_if<ParameterServerSync>(&e.sync);
    if (ps == nullptr || ps->host_placement.empty()) continue;
    ps->placement.clear();
    for (const HostRank& hr : ps->host_placement) {
      int rank = -1, seen = 0;
      for (int r = 0; r < static_cast<int>(host_of_rank.size()) && rank < 0; ++r) {
        if (host_of_rank[r] == hr.host && seen++ == hr.local) rank = r;
      }
      if (rank < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "parameter '", e.param, "': server h", hr.host, ".", hr.local, ": ",
            hr.host >= hosts ? absl::StrCat("there are ", hosts, " hosts")
                             : absl::StrCat("host ", hr.host, " has ", seen, " ranks")));
      }
      ps->placement.push_back(rank);
    }
    ps->host_placement.clear();
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
