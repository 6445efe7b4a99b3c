#include "distributed/kinds/allreduce.h"

#include <utility>

#include "absl/strings/str_join.h"
#include "distributed/half.h"

namespace cavs::distributed::kinds {

namespace {

using core::Device;
using core::DType;
using core::Parameter;
using core::Tensor;
using internal::OnDevice;

// Elements [offset, offset + n) of a flat tensor, as an [n, 1] view.
Tensor FlatSlice(const Tensor& flat, int64_t offset, int64_t n) {
  return flat.View(core::Shape({flat.numel(), 1})).Rows(offset, offset + n);
}

// The communicators a bucket's sum travels over. Flat: one allreduce on `flat` (shared with
// the other flat buckets, which start in the same order on every rank). Hierarchical: a reduce
// to the host's leader on `local`, an allreduce among the leaders on `leaders` (null off the
// leaders), a broadcast on `local`; both owned by this bucket (its stages start at different
// times on different ranks).
struct BucketComms {
  Communicator* flat = nullptr;
  std::unique_ptr<Communicator> local;
  std::unique_ptr<Communicator> leaders;
};

class BucketUnit final : public internal::SyncUnit {
 public:
  BucketUnit(BucketComms comms, std::vector<Parameter*> params, std::vector<int> indices,
             std::string name, Compressor compressor, Tensor flat)
      : SyncUnit(std::move(indices), std::move(name)),
        comms_(std::move(comms)),
        params_(std::move(params)),
        compressor_(compressor),
        flat_(std::move(flat)) {}

  bool NeedsScaleAtStart() const override { return compressor_ == Compressor::kFp16; }

  absl::Status Start(float prescale) override {
    int64_t offset = 0;
    for (Parameter* p : params_) {
      CAVS_RETURN_IF_ERROR(core::ValidateGradient(*p));
      CAVS_RETURN_IF_ERROR(FlatSlice(flat_, offset, p->grad.numel()).CopyFrom(p->grad));
      offset += p->grad.numel();
    }
    wire_ = flat_;
    if (compressor_ == Compressor::kFp16) {
      // Scaled before the cast, so that sums of many samples stay within float16's range.
      // Into the same host buffer every step (a fresh one each step would cost its pages).
      CAVS_ASSIGN_OR_RETURN(Tensor host, OnDevice(flat_, Device::Cpu()));
      if (!half_.defined()) half_ = Tensor::Host(flat_.shape(), DType::kFloat16);
      FloatsToHalves(host.data<float>(), prescale, static_cast<uint16_t*>(half_.raw_data()),
                     host.numel());
      CAVS_ASSIGN_OR_RETURN(wire_, OnDevice(half_, flat_.device()));
    }
    stage_ = -1;
    return StartNext();
  }

  absl::StatusOr<bool> Advance() override {
    while (work_ != nullptr) {
      CAVS_ASSIGN_OR_RETURN(bool done, work_->Test());
      if (!done) return false;
      Progressed();
      CAVS_RETURN_IF_ERROR(StartNext());
    }
    return true;
  }

  absl::Status Complete(float scale) override {
    if (compressor_ == Compressor::kFp16) {
      CAVS_ASSIGN_OR_RETURN(Tensor half, OnDevice(wire_, Device::Cpu()));
      const auto* halves = static_cast<const uint16_t*>(half.raw_data());
      if (flat_.device() == Device::Cpu()) {
        HalvesToFloats(halves, flat_.data<float>(), flat_.numel());
      } else {
        Tensor host = Tensor::Host(flat_.shape());
        HalvesToFloats(halves, host.data<float>(), host.numel());
        CAVS_RETURN_IF_ERROR(flat_.CopyFrom(host));
      }
    } else {
      CAVS_RETURN_IF_ERROR(internal::ScaleInPlace(flat_, scale));
    }
    int64_t offset = 0;
    for (Parameter* p : params_) {
      CAVS_RETURN_IF_ERROR(p->grad.CopyFrom(FlatSlice(flat_, offset, p->grad.numel())));
      offset += p->grad.numel();
    }
    work_.reset();
    return absl::OkStatus();
  }

 private:
  // Starts the next stage that has something to do (work_ stays null after the last).
  absl::Status StartNext() {
    work_.reset();
    if (comms_.flat != nullptr) {
      if (++stage_ == 0) {
        CAVS_ASSIGN_OR_RETURN(work_, comms_.flat->StartAllReduce(wire_));
      }
      return absl::OkStatus();
    }
    Communicator* local = comms_.local.get();
    Communicator* leaders = comms_.leaders.get();
    while (work_ == nullptr && ++stage_ < 3) {
      if (stage_ == 0 && local->world_size() > 1) {
        CAVS_ASSIGN_OR_RETURN(work_, local->StartReduce(wire_, 0));
      } else if (stage_ == 1 && leaders != nullptr && leaders->world_size() > 1) {
        CAVS_ASSIGN_OR_RETURN(work_, leaders->StartAllReduce(wire_));
      } else if (stage_ == 2 && local->world_size() > 1) {
        CAVS_ASSIGN_OR_RETURN(work_, local->StartBroadcast(wire_, 0));
      }
    }
    return absl::OkStatus();
  }

  BucketComms comms_;
  std::vector<Parameter*> params_;
  Compressor compressor_;
  Tensor flat_;  // float32 [sum of numel], on the communicator's buffer device
  Tensor wire_;  // what is summed: flat_, or its float16 copy
  Tensor half_;  // the float16 copy on the host, kept from step to step
  int stage_ = -1;
  std::unique_ptr<Work> work_;
};

class AllReduce final : public SyncKindFor<AllReduceSync> {
 public:
  const char* keyword() const override { return "allreduce"; }

  absl::StatusOr<ParamSync> Parse(const std::vector<std::string>& tokens) const override {
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

  std::string Describe(const ParamSync& sync) const override {
    const auto& ar = Get(sync);
    return absl::StrCat(
        "allreduce group=", ar.group, " compressor=", CompressorName(ar.compressor),
        ar.topology == AllReduceTopology::kHierarchical ? " topology=hierarchical" : "");
  }

  absl::Status CheckParameter(const ParamSync&, const core::Parameter& p, int) const override {
    if (!p.sparse_grad) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("parameter '", p.name,
                                                   "' has a row-sparse gradient; allreduce needs "
                                                   "a dense one (use sparse or ps)"));
  }

  absl::Status CheckProfile(const ParamSync&, const ParamProfile& p, int) const override {
    if (!p.sparse) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "parameter '", p.name, "' has a row-sparse gradient; allreduce needs a dense one"));
  }

  std::optional<int> FusionGroup(const ParamSync& sync) const override { return Get(sync).group; }

  absl::Status CheckFusion(const ParamSync& first_sync, const std::string& first_param,
                           const ParamSync& sync, const std::string& param) const override {
    const auto& first = Get(first_sync);
    const auto& ar = Get(sync);
    if (first.compressor != ar.compressor) {
      return absl::InvalidArgumentError(
          absl::StrCat("allreduce group ", ar.group, " mixes compressors: parameter '", param,
                       "' uses ", CompressorName(ar.compressor), ", parameter '", first_param,
                       "' uses ", CompressorName(first.compressor)));
    }
    if (first.topology != ar.topology) {
      return absl::InvalidArgumentError(
          absl::StrCat("allreduce group ", ar.group, " mixes topologies: parameter '", param,
                       "' uses ", TopologyName(ar.topology), ", parameter '", first_param,
                       "' uses ", TopologyName(first.topology)));
    }
    return absl::OkStatus();
  }

  std::vector<UnitKind> unit_kinds() const override { return {UnitKind::kBucket}; }

  std::vector<UnitSpec> Plan(const ParamSync& sync, int index, const UnitParam&) const override {
    const auto& ar = Get(sync);
    UnitSpec spec;
    spec.kind = UnitKind::kBucket;
    spec.key = index;
    spec.params = {index};
    spec.group = ar.group;
    spec.compressor = ar.compressor;
    spec.topology = ar.topology;
    return {spec};
  }

  std::string UnitName(const UnitSpec& unit, const std::vector<UnitParam>& params) const override {
    std::vector<std::string> names;
    for (int i : unit.params) names.push_back(params[i].name);
    return absl::StrCat("allreduce bucket ", unit.group, " (", absl::StrJoin(names, ", "),
                        unit.compressor == Compressor::kFp16 ? "; fp16" : "",
                        unit.topology == AllReduceTopology::kHierarchical ? "; hierarchical" : "",
                        ")");
  }

  absl::StatusOr<std::unique_ptr<internal::SyncUnit>> MakeUnit(
      const UnitSpec& unit, UnitContext& context) const override {
    BucketComms comms;
    if (unit.topology == AllReduceTopology::kHierarchical) {
      // Split is collective: every rank makes each bucket's pair in this same order.
      CAVS_ASSIGN_OR_RETURN(const Topology* topology, context.topology());
      Communicator& comm = context.comm();
      const int rank = comm.rank();
      CAVS_ASSIGN_OR_RETURN(comms.local,
                            comm.Split(topology->host_of_rank[rank], rank, "host-local"));
      CAVS_ASSIGN_OR_RETURN(
          comms.leaders, comm.Split(topology->LocalRank(rank) == 0 ? 0 : -1, rank, "host leaders"));
      if (comms.local == nullptr) {
        return absl::InvalidArgumentError("hierarchical bucket: no local group");
      }
    } else {
      comms.flat = context.shared();
    }
    const Device device =
        comms.flat != nullptr ? comms.flat->buffer_device() : comms.local->buffer_device();
    std::vector<Parameter*> ps;
    int64_t total = 0;
    for (int i : unit.params) {
      ps.push_back(context.store().parameters()[i].get());
      total += ps.back()->value.numel();
    }
    CAVS_ASSIGN_OR_RETURN(Tensor flat, Tensor::Zeros({total}, DType::kFloat32, device));
    return std::unique_ptr<internal::SyncUnit>(
        new BucketUnit(std::move(comms), std::move(ps), unit.params,
                       UnitName(unit, context.params()), unit.compressor, std::move(flat)));
  }

  UnitCost Cost(const UnitSpec& unit, const ModelProfile& profile,
                internal::Collectives& c) const override {
    const internal::RankLayout& l = c.layout();
    double bytes = 0;
    for (int i : unit.params) bytes += static_cast<double>(profile.params[i].bytes());
    const bool fp16 = unit.compressor == Compressor::kFp16;
    if (fp16) bytes /= 2;
    UnitCost cost;
    cost.payload_bytes = static_cast<int64_t>(bytes);
    if (unit.topology == AllReduceTopology::kFlat) {
      cost.phases = {c.Run(Collective::kAllReduce, l.all, 0, bytes)};
    } else {
      internal::Phase reduce, broadcast;
      for (const std::vector<int>& host : l.host_ranks) {
        reduce.Merge(c.Run(Collective::kReduce, host, 0, bytes));
        broadcast.Merge(c.Run(Collective::kBroadcast, host, 0, bytes));
      }
      cost.phases = {reduce, c.Run(Collective::kAllReduce, l.leaders, 0, bytes), broadcast};
    }
    if (fp16) {
      // The conversions on every rank, and each reduction's float16 sum on the reducing rank's
      // CPU, serial with its messages (libnbc adds a received block before it sends on).
      const Fp16Costs& costs = c.cluster().fp16;
      const double elements = bytes / 2;
      cost.start_s = elements * costs.encode;
      cost.complete_s = elements * costs.decode;
      for (internal::Phase& ph : cost.phases) ph.ChargeSums(costs.sum / 2);  // 2 bytes a value
    }
    return cost;
  }
};

}  // namespace

const SyncKind& AllReduceKind() {
  static const AllReduce* kind = new AllReduce();
  return *kind;
}

}  // namespace cavs::distributed::kinds
