#include "distributed/kinds/sparse_allgather.h"

#include <utility>

namespace cavs::distributed::kinds {

namespace {

using core::Device;
using core::DType;
using core::Parameter;
using core::Tensor;

class SparseUnit final : public internal::SparseBase {
 public:
  SparseUnit(std::unique_ptr<Communicator> comm, Parameter* p, int index, std::string name)
      : SparseBase(std::move(comm), p, index, std::move(name), 0, p->value.rows()) {}

  absl::StatusOr<bool> Advance() override {
    CAVS_ASSIGN_OR_RETURN(bool done, stage_ops_.Test());
    if (!done) return false;
    stage_ops_.Clear();
    Progressed();
    if (stage_ == 2) return true;
    stage_ = 2;  // counts known: gather the rows and values themselves
    CAVS_ASSIGN_OR_RETURN(std::vector<int64_t> counts, Counts());
    int64_t total = 0;
    for (int64_t c : counts) total += c;
    const Device dev = comm_->buffer_device();
    CAVS_ASSIGN_OR_RETURN(all_rows_, Tensor::Empty({total}, DType::kInt64, dev));
    CAVS_ASSIGN_OR_RETURN(all_values_, Tensor::Empty({total, cols()}, DType::kFloat32, dev));
    CAVS_RETURN_IF_ERROR(stage_ops_.Add(comm_->StartAllGatherV(my_rows_, all_rows_, counts)));
    CAVS_RETURN_IF_ERROR(stage_ops_.Add(comm_->StartAllGatherV(my_values_, all_values_, counts)));
    return false;
  }

  absl::Status Complete(float scale) override {
    CAVS_RETURN_IF_ERROR(Reduce(all_rows_, all_values_));
    return internal::ScaleInPlace(result_.values, scale);
  }

 private:
  Tensor all_rows_, all_values_;
};

class SparseAllGather final : public SyncKindFor<SparseSync> {
 public:
  const char* keyword() const override { return "sparse"; }

  absl::StatusOr<ParamSync> Parse(const std::vector<std::string>& tokens) const override {
    CAVS_RETURN_IF_ERROR(ParseOptions(tokens, "sparse", {}).status());
    return SparseSync{};
  }

  std::string Describe(const ParamSync&) const override { return "sparse"; }

  absl::Status CheckParameter(const ParamSync&, const core::Parameter& p, int) const override {
    return CheckSparse(p.name, p.sparse_grad);
  }

  absl::Status CheckProfile(const ParamSync&, const ParamProfile& p, int) const override {
    return CheckSparse(p.name, p.sparse);
  }

  std::vector<UnitKind> unit_kinds() const override { return {UnitKind::kSparse}; }

  std::vector<UnitSpec> Plan(const ParamSync&, int index, const UnitParam& param) const override {
    UnitSpec spec;
    spec.kind = UnitKind::kSparse;
    spec.key = index;
    spec.params = {index};
    spec.end = param.rows;
    return {spec};
  }

  std::string UnitName(const UnitSpec& unit, const std::vector<UnitParam>& params) const override {
    return ShardUnitName("sparse allgather", params[unit.key], unit);
  }

  absl::StatusOr<std::unique_ptr<internal::SyncUnit>> MakeUnit(
      const UnitSpec& unit, UnitContext& context) const override {
    // Duplicates are collective: every rank makes them in the same order.
    CAVS_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, context.comm().Duplicate());
    return std::unique_ptr<internal::SyncUnit>(
        new SparseUnit(std::move(comm), context.store().parameters()[unit.key].get(), unit.key,
                       UnitName(unit, context.params())));
  }

  UnitCost Cost(const UnitSpec& unit, const ModelProfile& profile,
                internal::Collectives& c) const override {
    const std::vector<int>& all = c.layout().all;
    const ParamProfile& p = profile.params[unit.key];
    const double bytes = p.touched_rows * p.row_bytes();
    UnitCost cost;
    cost.payload_bytes = static_cast<int64_t>(bytes);
    cost.phases = {c.Run(Collective::kAllGather, all, 0, 8.0),  // the row counts
                   c.Run(Collective::kAllGather, all, 0, bytes)};
    return cost;
  }

 private:
  static absl::Status CheckSparse(const std::string& param, bool sparse) {
    if (sparse) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "parameter '", param, "' has a dense gradient; sparse needs a row-sparse one"));
  }
};

}  // namespace

const SyncKind& SparseAllGatherKind() {
  static const SparseAllGather* kind = new SparseAllGather();
  return *kind;
}

}  // namespace cavs::distributed::kinds
