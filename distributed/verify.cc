#include "distributed/verify.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/random.h"
#include "core/status.h"

namespace cavs::distributed {

namespace {

using core::DType;
using core::Tensor;

// One line of a rank's description.
struct Record {
  std::string kind;  // "param", "strategy", "extra" (an entry for no parameter), "error"
  std::string name;
  std::string value;  // param: "float32[8, 6] dense"; strategy: "world_size 2"
  std::string sync;   // param and extra: the synchronizer's text
};

std::string Describe(const Strategy& strategy, const core::ParameterStore& store) {
  absl::flat_hash_map<std::string, const ParamStrategy*> entries;
  for (const ParamStrategy& e : strategy.params) entries.emplace(e.param, &e);
  std::vector<std::string> lines;
  auto add = [&](absl::string_view kind, absl::string_view name, absl::string_view value,
                 absl::string_view sync) {
    lines.push_back(absl::StrCat(kind, "\t", absl::CEscape(name), "\t", absl::CEscape(value), "\t",
                                 absl::CEscape(sync)));
  };
  for (const auto& p : store.parameters()) {
    auto it = entries.find(p->name);
    const ParamStrategy* entry = it == entries.end() ? nullptr : it->second;
    add("param", p->name,
        absl::StrCat(core::DTypeName(p->value.dtype()), p->value.shape().DebugString(),
                     p->sparse_grad ? " row-sparse" : " dense"),
        entry != nullptr ? DescribeSync(entry->sync) : "(none)");
  }
  add("strategy", strategy.name, absl::StrCat("world_size ", strategy.world_size), "");
  for (const ParamStrategy& e : strategy.params) {
    if (store.Find(e.param) == nullptr) add("extra", e.param, "", DescribeSync(e.sync));
  }
  absl::Status valid = ValidateStrategy(strategy, store);
  if (!valid.ok()) add("error", "", valid.ToString(), "");
  return absl::StrJoin(lines, "\n");
}

std::vector<Record> Parse(const std::string& description) {
  std::vector<Record> records;
  for (absl::string_view line : absl::StrSplit(description, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, '\t');
    f.resize(4);
    Record r{f[0], "", "", ""};
    absl::CUnescape(f[1], &r.name);
    absl::CUnescape(f[2], &r.value);
    absl::CUnescape(f[3], &r.sync);
    records.push_back(std::move(r));
  }
  return records;
}

std::string ParamText(const Record& r) { return absl::StrCat("'", r.name, "' ", r.value); }

// The message for the first difference between rank 0's and rank r's records at index i, or ""
// if they agree there.
std::string Difference(const std::vector<Record>& a, const std::vector<Record>& b, size_t i,
                       int r) {
  const Record* x = i < a.size() ? &a[i] : nullptr;
  const Record* y = i < b.size() ? &b[i] : nullptr;
  if (x == nullptr && y == nullptr) return "";
  if (x == nullptr || y == nullptr || x->kind != y->kind || x->name != y->name) {
    auto show = [&](const Record* rec) {
      if (rec == nullptr || rec->kind != "param") return std::string("no parameter there");
      return absl::StrCat("parameter ", ParamText(*rec));
    };
    return absl::StrCat("parameter #", i, " differs: rank 0 has ", show(x), ", rank ", r, " has ",
                        show(y));
  }
  if (x->kind == "param" && x->value != y->value) {
    return absl::StrCat("parameter '", x->name, "': rank 0 has ", x->value, ", rank ", r, " has ",
                        y->value);
  }
  if (x->kind == "param" && x->sync != y->sync) {
    return absl::StrCat("strategy for parameter '", x->name, "': rank 0 has '", x->sync, "', rank ",
                        r, " has '", y->sync, "'");
  }
  if (x->value != y->value || x->sync != y->sync) {
    if (x->kind == "pieces") {
      return absl::StrCat("the PS shards' piece size (CommOptions::piece_bytes, cavs-train's ",
                          "--comm-piece-bytes): rank 0 has ", x->value, " bytes, rank ", r, " has ",
                          y->value);
    }
    if (x->kind == "error") return absl::StrCat("rank 0: ", x->value, "; rank ", r, ": ", y->value);
    return absl::StrCat(x->kind, " '", x->name, "': rank 0 has ", x->value, " ", x->sync, ", rank ",
                        r, " has ", y->value, " ", y->sync);
  }
  return "";
}

std::string FirstMismatch(const std::vector<std::string>& descriptions) {
  std::vector<std::vector<Record>> records;
  size_t longest = 0;
  for (const std::string& d : descriptions) {
    records.push_back(Parse(d));
    longest = std::max(longest, records.back().size());
  }
  for (size_t i = 0; i < longest; ++i) {
    for (size_t r = 1; r < records.size(); ++r) {
      std::string diff = Difference(records[0], records[r], i, static_cast<int>(r));
      if (!diff.empty()) return diff;
    }
  }
  return "the descriptions differ in a way this check cannot name";
}

// Every rank's description.
absl::StatusOr<std::vector<std::string>> GatherDescriptions(Communicator& comm,
                                                            const std::string& mine) {
  const int w = comm.world_size();
  Tensor length = Tensor::Host({1}, DType::kInt64);
  length.data<int64_t>()[0] = static_cast<int64_t>(mine.size());
  CAVS_ASSIGN_OR_RETURN(Tensor length_dev, length.CopyTo(comm.buffer_device()));
  CAVS_ASSIGN_OR_RETURN(Tensor lengths_dev, Tensor::Empty({static_cast<int64_t>(w)}, DType::kInt64,
                                                          comm.buffer_device()));
  CAVS_RETURN_IF_ERROR(comm.AllGather(length_dev, lengths_dev));
  CAVS_ASSIGN_OR_RETURN(Tensor lengths_host, lengths_dev.CopyTo(core::Device::Cpu()));
  const std::vector<int64_t> lengths(lengths_host.data<int64_t>(),
                                     lengths_host.data<int64_t>() + w);
  std::vector<int64_t> words(lengths.size());
  int64_t total = 0;
  for (size_t r = 0; r < lengths.size(); ++r) total += words[r] = (lengths[r] + 7) / 8;
  Tensor send = Tensor::Host({words[comm.rank()]}, DType::kInt64);
  if (!mine.empty()) std::memcpy(send.raw_data(), mine.data(), mine.size());
  CAVS_ASSIGN_OR_RETURN(Tensor send_dev, send.CopyTo(comm.buffer_device()));
  CAVS_ASSIGN_OR_RETURN(Tensor all_dev,
                        Tensor::Empty({total}, DType::kInt64, comm.buffer_device()));
  CAVS_RETURN_IF_ERROR(comm.AllGatherV(send_dev, all_dev, words));
  CAVS_ASSIGN_OR_RETURN(Tensor all, all_dev.CopyTo(core::Device::Cpu()));
  std::vector<std::string> out;
  const char* bytes = static_cast<const char*>(all.raw_data());
  int64_t offset = 0;
  for (size_t r = 0; r < lengths.size(); ++r) {
    out.emplace_back(bytes + offset * 8, static_cast<size_t>(lengths[r]));
    offset += words[r];
  }
  return out;
}

}  // namespace

absl::StatusOr<std::optional<RankDifference>> FirstDifference(
    Communicator& comm, const std::vector<std::string>& values) {
  const int64_t n = static_cast<int64_t>(values.size()), w = comm.world_size();
  Tensor mine = Tensor::Host({2 * n}, DType::kInt64);
  for (int64_t i = 0; i < n; ++i) {
    mine.data<int64_t>()[2 * i] = static_cast<int64_t>(core::Fnv1a(values[i]));
    mine.data<int64_t>()[2 * i + 1] = static_cast<int64_t>(values[i].size());
  }
  CAVS_ASSIGN_OR_RETURN(Tensor mine_dev, mine.CopyTo(comm.buffer_device()));
  CAVS_ASSIGN_OR_RETURN(Tensor all_dev,
                        Tensor::Empty({2 * n * w}, DType::kInt64, comm.buffer_device()));
  CAVS_RETURN_IF_ERROR(comm.AllGather(mine_dev, all_dev));
  CAVS_ASSIGN_OR_RETURN(Tensor all, all_dev.CopyTo(core::Device::Cpu()));
  const int64_t* k = all.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t r = 1; r < w; ++r) {
      const int64_t* theirs = k + 2 * (r * n + i);
      if (theirs[0] != k[2 * i] || theirs[1] != k[2 * i + 1]) {
        return RankDifference{i, static_cast<int>(r)};
      }
    }
  }
  return std::nullopt;
}

absl::Status VerifyConsistent(Communicator& comm, const Strategy& strategy,
                              const core::ParameterStore& store) {
  // The PS shards' pieces too: ranks that cut a shard differently would issue different
  // collectives.
  const std::string mine =
      absl::StrCat(Describe(strategy, store), "\npieces\tpiece_bytes\t", comm.PieceBytes(), "\t");
  CAVS_ASSIGN_OR_RETURN(std::optional<RankDifference> difference, FirstDifference(comm, {mine}));
  if (!difference.has_value()) {
    absl::Status valid = ValidateStrategy(strategy, store);
    if (valid.ok()) return valid;
    return absl::FailedPreconditionError(
        absl::StrCat("the strategy does not fit the model (on every rank): ", valid.message()));
  }
  CAVS_ASSIGN_OR_RETURN(std::vector<std::string> all, GatherDescriptions(comm, mine));
  return absl::FailedPreconditionError(
      absl::StrCat("ranks disagree on the model or the strategy: ", FirstMismatch(all)));
}

}  // namespace cavs::distributed
