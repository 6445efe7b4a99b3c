#include "distributed/sync_units.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/optimizer.h"
#include "core/status.h"

namespace cavs::distributed::internal {

using core::Device;
using core::DType;
using core::Tensor;

absl::StatusOr<Tensor> OnDevice(const Tensor& t, Device device) {
  if (t.device() == device) return t;
  return t.CopyTo(device);
}

absl::Status ScaleInPlace(const Tensor& t, float factor) {
  if (factor == 1.0f || t.numel() == 0) return absl::OkStatus();
  CAVS_ASSIGN_OR_RETURN(core::OptimizerKernels * kernels,
                        core::GetOptimizerKernels(t.device().type));
  const core::FloatBuffer buffer{t.data<float>(), t.numel()};
  return kernels->Scale({&buffer, 1}, factor);
}

Tensor HostScalar(int64_t v) {
  Tensor t = Tensor::Host({1}, DType::kInt64);
  t.data<int64_t>()[0] = v;
  return t;
}

absl::Status Stage::Add(absl::StatusOr<std::unique_ptr<Work>> work) {
  CAVS_RETURN_IF_ERROR(work.status());
  works_.push_back(*std::move(work));
  return absl::OkStatus();
}

absl::StatusOr<bool> Stage::Test() {
  for (auto& w : works_) {
    CAVS_ASSIGN_OR_RETURN(bool done, w->Test());
    if (!done) return false;
  }
  return true;
}

absl::Status SparseBase::StartCounts() {
  CAVS_RETURN_IF_ERROR(core::ValidateGradient(*param_));
  result_ = SparseRows{};
  CAVS_ASSIGN_OR_RETURN(Tensor values, OnDevice(param_->grad_values, Device::Cpu()));
  const int64_t cols = param_->value.cols();
  std::vector<int64_t> picked;
  for (size_t i = 0; i < param_->grad_rows.size(); ++i) {
    const int64_t r = param_->grad_rows[i];
    if (r >= begin_ && r < end_) picked.push_back(static_cast<int64_t>(i));
  }
  const int64_t n = static_cast<int64_t>(picked.size());
  Tensor rows = Tensor::Host({n}, DType::kInt64);
  Tensor vals = Tensor::Host({n, cols});
  for (int64_t k = 0; k < n; ++k) {
    rows.data<int64_t>()[k] = param_->grad_rows[picked[k]];
    std::memcpy(vals.data<float>() + k * cols, values.data<float>() + picked[k] * cols,
                cols * sizeof(float));
  }
  const Device dev = comm_->buffer_device();
  CAVS_ASSIGN_OR_RETURN(my_rows_, OnDevice(rows, dev));
  CAVS_ASSIGN_OR_RETURN(my_values_, OnDevice(vals, dev));
  CAVS_ASSIGN_OR_RETURN(Tensor count, OnDevice(HostScalar(n), dev));
  const int world = comm_->world_size();
  counts_ = Tensor();  // a sender to counts_root_ learns no one's count
  if (counts_root_ < 0 || comm_->rank() == counts_root_) {
    CAVS_ASSIGN_OR_RETURN(counts_, Tensor::Empty({world}, DType::kInt64, dev));
  }
  if (counts_root_ < 0) return stage_ops_.Add(comm_->StartAllGather(count, counts_));
  return stage_ops_.Add(
      comm_->StartGatherV(count, counts_, std::vector<int64_t>(world, 1), counts_root_));
}

absl::StatusOr<std::vector<int64_t>> SparseBase::Counts() const {
  if (!counts_.defined()) {
    std::vector<int64_t> own(comm_->world_size(), 0);
    own[comm_->rank()] = my_rows_.numel();
    return own;
  }
  CAVS_ASSIGN_OR_RETURN(Tensor host, OnDevice(counts_, Device::Cpu()));
  const int64_t* c = host.data<int64_t>();
  return std::vector<int64_t>(c, c + host.numel());
}

absl::Status SparseBase::Reduce(const Tensor& rows, const Tensor& values) {
  CAVS_ASSIGN_OR_RETURN(Tensor host_rows, OnDevice(rows, Device::Cpu()));
  CAVS_ASSIGN_OR_RETURN(Tensor host_values, OnDevice(values, Device::Cpu()));
  result_ = SumDuplicateRows(host_rows.data<int64_t>(), host_rows.numel(), host_values);
  return absl::OkStatus();
}

SparseRows SumDuplicateRows(const int64_t* rows, int64_t n, const Tensor& values) {
  const int64_t cols = values.cols();
  SparseRows out;
  out.rows.assign(rows, rows + n);
  std::sort(out.rows.begin(), out.rows.end());
  out.rows.erase(std::unique(out.rows.begin(), out.rows.end()), out.rows.end());
  out.values = Tensor::Host({static_cast<int64_t>(out.rows.size()), cols});
  float* dst = out.values.data<float>();
  const float* src = values.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k =
        std::lower_bound(out.rows.begin(), out.rows.end(), rows[i]) - out.rows.begin();
    for (int64_t c = 0; c < cols; ++c) dst[k * cols + c] += src[i * cols + c];
  }
  return out;
}

}  // namespace cavs::distributed::internal
