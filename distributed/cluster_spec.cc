#include "distributed/cluster_spec.h"

#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/status.h"
#include "distributed/text_format.h"

namespace cavs::distributed {

namespace {

using internal::FieldError;
using internal::FormatNumber;
using internal::LineOption;
using internal::NumberRange;
using internal::ParseNumber;

constexpr int kVersion = 1;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kMaxRanks = 1 << 20;
constexpr double kGbit = 1e9 / 8;  // bytes/s
constexpr double kUs = 1e-6;       // s
constexpr double kNs = 1e-9;       // s

// Names of an enum's values, in order.
template <typename E>
absl::StatusOr<E> ParseEnum(absl::string_view value, const std::vector<std::string>& names) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (value == names[i]) return static_cast<E>(i);
  }
  std::string expected;
  for (size_t i = 0; i < names.size(); ++i) {
    absl::StrAppend(&expected, i == 0 ? "" : i + 1 == names.size() ? " or " : ", ", names[i]);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown algorithm '", value, "' (expected ", expected, ")"));
}

const std::vector<std::string> kAllReduceNames = {"ring", "recursive_doubling", "rabenseifner"};
const std::vector<std::string> kReduceNames = {"linear", "binomial"};
const std::vector<std::string> kBroadcastNames = {"linear", "binomial", "libnbc"};
const std::vector<std::string> kAllGatherNames = {"linear", "ring"};

struct ParseState {
  ClusterSpec cluster;
  bool have_version = false;
  absl::flat_hash_map<std::string, int> key_line;  // name, inter, intra, algorithms
  absl::flat_hash_map<std::string, int> host_line;
  int64_t ranks = 0;  // cluster.world_size(), kept as hosts are added (summing is O(hosts))
};

// Sets `*out` from `o` when its key is `key`: a number in `range` times `unit`.
absl::Status SetNumber(const LineOption& o, absl::string_view key, const NumberRange& range,
                       double unit, double* out) {
  if (o.key != key) return absl::OkStatus();
  absl::StatusOr<double> v = ParseNumber(o.value, range);
  if (!v.ok()) return FieldError(key, v.status());
  *out = *v * unit;
  return absl::OkStatus();
}

absl::Status ParseInter(const std::vector<std::string>& tokens, ClusterSpec& c) {
  CAVS_ASSIGN_OR_RETURN(
      std::vector<LineOption> options,
      internal::ParseLineOptions(tokens, 1, {"latency_us", "overhead_us", "efficiency", "duplex"}));
  for (const LineOption& o : options) {
    CAVS_RETURN_IF_ERROR(SetNumber(o, "latency_us", {0, false, kInf}, kUs, &c.inter_latency));
    CAVS_RETURN_IF_ERROR(SetNumber(o, "overhead_us", {0, false, kInf}, kUs, &c.message_overhead));
    CAVS_RETURN_IF_ERROR(SetNumber(o, "efficiency", {0, true, 1}, 1, &c.efficiency));
    CAVS_RETURN_IF_ERROR(SetNumber(o, "duplex", {0, true, 1}, 1, &c.duplex));
  }
  return absl::OkStatus();
}

absl::Status ParseIntra(const std::vector<std::string>& tokens, ClusterSpec& c) {
  CAVS_ASSIGN_OR_RETURN(std::vector<LineOption> options,
                        internal::ParseLineOptions(tokens, 1, {"bandwidth_gbit", "latency_us"}));
  for (const LineOption& o : options) {
    CAVS_RETURN_IF_ERROR(
        SetNumber(o, "bandwidth_gbit", {0, true, kInf}, kGbit, &c.intra_bandwidth));
    CAVS_RETURN_IF_ERROR(SetNumber(o, "latency_us", {0, false, kInf}, kUs, &c.intra_latency));
  }
  return absl::OkStatus();
}

absl::Status ParseCalibration(const std::vector<std::string>& tokens, ClusterSpec& c) {
  std::vector<std::string> keys;
  for (int k = 0; k < 5; ++k) {
    const std::string name = CollectiveName(static_cast<Collective>(k));
    for (const char* suffix : {"", "_us", "_min"}) keys.push_back(name + suffix);
  }
  CAVS_ASSIGN_OR_RETURN(std::vector<LineOption> options,
                        internal::ParseLineOptions(tokens, 1, keys));
  for (const LineOption& o : options) {
    for (int k = 0; k < 5; ++k) {
      const std::string name = CollectiveName(static_cast<Collective>(k));
      CAVS_RETURN_IF_ERROR(SetNumber(o, name, {0, true, 1000}, 1, &c.factor[k]));
      CAVS_RETURN_IF_ERROR(SetNumber(o, name + "_us", {-1e9, false, 1e9}, kUs, &c.extra[k]));
      CAVS_RETURN_IF_ERROR(SetNumber(o, name + "_min", {0, false, 1000}, 1, &c.min_factor[k]));
    }
  }
  // A negative fixed time is the line of a two-part calibration: without the ratio below it,
  // small collectives would take no time, or less than none.
  for (int k = 0; k < 5; ++k) {
    if (c.extra[k] < 0 && c.min_factor[k] == 0) {
      const std::string name = CollectiveName(static_cast<Collective>(k));
      return FieldError(name + "_us", absl::InvalidArgumentError(absl::StrCat(
                                          "a negative fixed time needs ", name,
                                          "_min (the ratio to the model below the line)")));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseFp16(const std::vector<std::string>& tokens, ClusterSpec& c) {
  CAVS_ASSIGN_OR_RETURN(
      std::vector<LineOption> options,
      internal::ParseLineOptions(tokens, 1, {"encode_ns", "decode_ns", "sum_ns"}));
  for (const LineOption& o : options) {
    CAVS_RETURN_IF_ERROR(SetNumber(o, "encode_ns", {0, false, kInf}, kNs, &c.fp16.encode));
    CAVS_RETURN_IF_ERROR(SetNumber(o, "decode_ns", {0, false, kInf}, kNs, &c.fp16.decode));
    CAVS_RETURN_IF_ERROR(SetNumber(o, "sum_ns", {0, false, kInf}, kNs, &c.fp16.sum));
  }
  return absl::OkStatus();
}

absl::Status ParseAlgorithms(const std::vector<std::string>& tokens, CollectiveAlgorithms& a) {
  CAVS_ASSIGN_OR_RETURN(
      std::vector<LineOption> options,
      internal::ParseLineOptions(tokens, 1, {"allreduce", "reduce", "broadcast", "allgather"}));
  for (const LineOption& o : options) {
    absl::Status s;
    if (o.key == "allreduce") {
      absl::StatusOr<AllReduceAlgorithm> v =
          ParseEnum<AllReduceAlgorithm>(o.value, kAllReduceNames);
      if (v.ok()) a.allreduce = *v;
      s = v.status();
    } else if (o.key == "reduce") {
      absl::StatusOr<ReduceAlgorithm> v = ParseEnum<ReduceAlgorithm>(o.value, kReduceNames);
      if (v.ok()) a.reduce = *v;
      s = v.status();
    } else if (o.key == "broadcast") {
      absl::StatusOr<BroadcastAlgorithm> v =
          ParseEnum<BroadcastAlgorithm>(o.value, kBroadcastNames);
      if (v.ok()) a.broadcast = *v;
      s = v.status();
    } else {
      absl::StatusOr<AllGatherAlgorithm> v =
          ParseEnum<AllGatherAlgorithm>(o.value, kAllGatherNames);
      if (v.ok()) a.allgather = *v;
      s = v.status();
    }
    if (!s.ok()) return FieldError(o.key, s);
  }
  return absl::OkStatus();
}

// `host NAME ranks=R bandwidth_gbit=G [duplex=D]` or `hosts N ranks=R bandwidth_gbit=G ...`.
absl::Status ParseHosts(const std::vector<std::string>& tokens, int line, ParseState& st) {
  const bool many = tokens[0] == "hosts";
  if (tokens.size() < 2) {
    return absl::InvalidArgumentError(many ? "'hosts' needs a count" : "'host' needs a name");
  }
  int64_t count = 1;
  if (many) {
    absl::StatusOr<int64_t> n = internal::ParseInteger(tokens[1], 1, kMaxRanks);
    if (!n.ok()) return FieldError("count", n.status());
    count = *n;
  }
  CAVS_ASSIGN_OR_RETURN(
      std::vector<LineOption> options,
      internal::ParseLineOptions(tokens, 2, {"ranks", "bandwidth_gbit", "duplex"}));
  HostSpec host;
  bool have_bandwidth = false;
  for (const LineOption& o : options) {
    if (o.key == "ranks") {
      absl::StatusOr<int64_t> r = internal::ParseInteger(o.value, 1, kMaxRanks);
      if (!r.ok()) return FieldError("ranks", r.status());
      host.ranks = static_cast<int>(*r);
    }
    CAVS_RETURN_IF_ERROR(SetNumber(o, "bandwidth_gbit", {0, true, kInf}, kGbit, &host.bandwidth));
    CAVS_RETURN_IF_ERROR(SetNumber(o, "duplex", {0, true, 1}, 1, &host.duplex));
    have_bandwidth |= o.key == "bandwidth_gbit";
  }
  if (!have_bandwidth) return FieldError("bandwidth_gbit", absl::InvalidArgumentError("missing"));
  if (st.ranks + count * host.ranks > kMaxRanks) {
    return absl::InvalidArgumentError(absl::StrCat("more than ", kMaxRanks, " ranks in all"));
  }
  st.ranks += count * host.ranks;
  for (int64_t i = 0; i < count; ++i) {
    host.name = many ? absl::StrCat("h", st.cluster.hosts.size()) : tokens[1];
    if (auto [it, added] = st.host_line.emplace(host.name, line); !added) {
      return absl::InvalidArgumentError(
          absl::StrCat("host '", host.name, "' given twice (first on line ", it->second, ")"));
    }
    st.cluster.hosts.push_back(host);
  }
  return absl::OkStatus();
}

absl::Status ParseLine(const std::vector<std::string>& tokens, int line, ParseState& st) {
  const std::string& key = tokens[0];
  if (!st.have_version && key != "version") {
    return absl::InvalidArgumentError("the first line must be 'version 1'");
  }
  if (key == "host" || key == "hosts") return ParseHosts(tokens, line, st);
  if (auto [it, added] = st.key_line.emplace(key, line); !added) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", key, "' given twice (first on line ", it->second, ")"));
  }
  if (key == "version" || key == "name") {
    if (tokens.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", key, "' takes 1 value, got ", tokens.size() - 1));
    }
    if (key == "name") {
      st.cluster.name = tokens[1];
      return absl::OkStatus();
    }
    if (tokens[1] != absl::StrCat(kVersion)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unsupported version '", tokens[1], "' (this build reads version ", kVersion, ")"));
    }
    st.have_version = true;
    return absl::OkStatus();
  }
  if (key == "inter") return ParseInter(tokens, st.cluster);
  if (key == "intra") return ParseIntra(tokens, st.cluster);
  if (key == "algorithms") return ParseAlgorithms(tokens, st.cluster.algorithms);
  if (key == "calibration") return ParseCalibration(tokens, st.cluster);
  if (key == "fp16") return ParseFp16(tokens, st.cluster);
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown directive '", key,
      "' (expected version, name, inter, intra, algorithms, calibration, fp16, host or hosts)"));
}

}  // namespace

int ClusterSpec::world_size() const {
  int n = 0;
  for (const HostSpec& h : hosts) n += h.ranks;
  return n;
}

double ClusterSpec::HostDuplex(int h) const {
  return hosts[h].duplex > 0 ? hosts[h].duplex : duplex;
}

std::vector<int> ClusterSpec::HostOfRank() const {
  std::vector<int> host_of;
  for (int h = 0; h < static_cast<int>(hosts.size()); ++h)
    host_of.insert(host_of.end(), hosts[h].ranks, h);
  return host_of;
}

const char* CollectiveName(Collective c) {
  static const char* const kNames[] = {"allreduce", "reduce", "broadcast", "allgather", "gather"};
  return kNames[static_cast<int>(c)];
}

const char* AlgorithmName(AllReduceAlgorithm a) {
  return kAllReduceNames[static_cast<int>(a)].c_str();
}
const char* AlgorithmName(ReduceAlgorithm a) { return kReduceNames[static_cast<int>(a)].c_str(); }
const char* AlgorithmName(BroadcastAlgorithm a) {
  return kBroadcastNames[static_cast<int>(a)].c_str();
}
const char* AlgorithmName(AllGatherAlgorithm a) {
  return kAllGatherNames[static_cast<int>(a)].c_str();
}

std::string SerializeClusterSpec(const ClusterSpec& c) {
  std::string out = absl::StrCat(
      "# cavs cluster description (see docs/distributed.md)\nversion ", kVersion, "\nname ",
      internal::QuoteToken(c.name), "\ninter latency_us=", FormatNumber(c.inter_latency / kUs),
      " overhead_us=", FormatNumber(c.message_overhead / kUs),
      " efficiency=", FormatNumber(c.efficiency), " duplex=", FormatNumber(c.duplex),
      "\nintra bandwidth_gbit=", FormatNumber(c.intra_bandwidth / kGbit),
      " latency_us=", FormatNumber(c.intra_latency / kUs),
      "\nalgorithms allreduce=", AlgorithmName(c.algorithms.allreduce),
      " reduce=", AlgorithmName(c.algorithms.reduce),
      " broadcast=", AlgorithmName(c.algorithms.broadcast),
      " allgather=", AlgorithmName(c.algorithms.allgather), "\n");
  if (c.factor != std::array<double, 5>{1, 1, 1, 1, 1} ||
      c.extra != std::array<double, 5>{0, 0, 0, 0, 0} ||
      c.min_factor != std::array<double, 5>{0, 0, 0, 0, 0}) {
    absl::StrAppend(&out, "calibration");
    for (int k = 0; k < 5; ++k) {
      const std::string name = CollectiveName(static_cast<Collective>(k));
      absl::StrAppend(&out, " ", name, "=", FormatNumber(c.factor[k]));
      if (c.extra[k] != 0) absl::StrAppend(&out, " ", name, "_us=", FormatNumber(c.extra[k] / kUs));
      if (c.min_factor[k] != 0) {
        absl::StrAppend(&out, " ", name, "_min=", FormatNumber(c.min_factor[k]));
      }
    }
    absl::StrAppend(&out, "\n");
  }
  if (c.fp16 != Fp16Costs{}) {
    absl::StrAppend(&out, "fp16 encode_ns=", FormatNumber(c.fp16.encode / kNs),
                    " decode_ns=", FormatNumber(c.fp16.decode / kNs),
                    " sum_ns=", FormatNumber(c.fp16.sum / kNs), "\n");
  }
  for (const HostSpec& h : c.hosts) {
    absl::StrAppend(&out, "host ", internal::QuoteToken(h.name), " ranks=", h.ranks,
                    " bandwidth_gbit=", FormatNumber(h.bandwidth / kGbit));
    if (h.duplex > 0) absl::StrAppend(&out, " duplex=", FormatNumber(h.duplex));
    absl::StrAppend(&out, "\n");
  }
  return out;
}

absl::StatusOr<ClusterSpec> ParseClusterSpec(absl::string_view text, absl::string_view file) {
  ParseState st;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    absl::StatusOr<std::vector<std::string>> tokens = internal::TokenizeLine(line);
    if (!tokens.ok()) return internal::LineError(file, line_number, tokens.status());
    if (tokens->empty()) continue;
    absl::Status s = ParseLine(*tokens, line_number, st);
    if (!s.ok()) return internal::LineError(file, line_number, s);
  }
  if (!st.have_version) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": no 'version 1' line"));
  }
  if (st.cluster.hosts.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": no 'host' or 'hosts' line"));
  }
  return st.cluster;
}

ClusterSpec ScaleCluster(const ClusterSpec& base, int hosts, int ranks_per_host) {
  ClusterSpec c = base;
  c.name = absl::StrCat(base.name, " x", hosts, "x", ranks_per_host);
  c.hosts.clear();
  for (int i = 0; i < hosts; ++i) {
    const HostSpec& like = base.hosts[i % base.hosts.size()];
    c.hosts.push_back({absl::StrCat("h", i), ranks_per_host, like.bandwidth, like.duplex});
  }
  return c;
}

}  // namespace cavs::distributed
