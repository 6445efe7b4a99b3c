#include "core/tensor.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace cavs::core {

absl::StatusOr<Tensor> Tensor::Empty(Shape shape, DType dtype, Device device) {
  for (int64_t d : shape.dims()) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("negative dimension in shape ", shape.DebugString()));
    }
  }
  CAVS_ASSIGN_OR_RETURN(Backend * backend, GetBackend(device));
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  t.storage_ = std::make_shared<Storage>();
  t.storage_->bytes = t.nbytes();
  CAVS_ASSIGN_OR_RETURN(t.storage_->ptr, backend->allocator()->Allocate(t.storage_->bytes));
  t.storage_->allocator = backend->allocator();
  return t;
}

absl::StatusOr<Tensor> Tensor::Zeros(Shape shape, DType dtype, Device device) {
  CAVS_ASSIGN_OR_RETURN(Tensor t, Empty(std::move(shape), dtype, device));
  CAVS_RETURN_IF_ERROR(t.SetZero());
  return t;
}

Tensor Tensor::Host(Shape shape, DType dtype) {
  absl::StatusOr<Tensor> t = Zeros(std::move(shape), dtype, Device::Cpu());
  CAVS_CHECK(t.ok(), t.status().ToString());
  return *std::move(t);
}

Tensor Tensor::FromVector(const std::vector<float>& values, Shape shape) {
  CAVS_CHECK(static_cast<int64_t>(values.size()) == shape.NumElements(),
             "FromVector: ", values.size(), " values for shape ", shape.DebugString());
  Tensor t = Host(std::move(shape));
  if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(float));
  return t;
}

Tensor Tensor::View(Shape shape) const {
  CAVS_CHECK(shape.NumElements() == numel(), "View ", shape.DebugString(), " of ",
             shape_.DebugString());
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::Rows(int64_t begin, int64_t end) const {
  CAVS_CHECK(0 <= begin && begin <= end && end <= rows(), "Rows [", begin, ", ", end, ") of ",
             shape_.DebugString());
  Tensor t = *this;
  t.offset_bytes_ += static_cast<size_t>(begin * cols()) * SizeOf(dtype_);
  t.shape_ = Shape({end - begin, cols()});
  return t;
}

absl::StatusOr<Tensor> Tensor::CopyTo(Device device) const {
  CAVS_ASSIGN_OR_RETURN(Tensor t, Empty(shape_, dtype_, device));
  CAVS_RETURN_IF_ERROR(t.CopyFrom(*this));
  return t;
}

absl::Status Tensor::CopyFrom(const Tensor& src) {
  if (src.numel() != numel() || src.dtype() != dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("copy of ", DTypeName(src.dtype()),
                                                   src.shape().DebugString(), " into ",
                                                   DTypeName(dtype_), shape_.DebugString()));
  }
  if (nbytes() == 0) return absl::OkStatus();
  if (src.device().is_cpu()) {
    CAVS_ASSIGN_OR_RETURN(Backend * b, GetBackend(device_));
    return b->CopyFromHost(raw_data(), src.raw_data(), nbytes());
  }
  CAVS_ASSIGN_OR_RETURN(Backend * sb, GetBackend(src.device()));
  if (device_.is_cpu()) return sb->CopyToHost(raw_data(), src.raw_data(), nbytes());
  if (device_ == src.device()) return sb->CopyWithin(raw_data(), src.raw_data(), nbytes());
  return absl::UnimplementedError(
      absl::StrCat("copy from ", src.device().DebugString(), " to ", device_.DebugString()));
}

absl::Status Tensor::SetZero() {
  if (nbytes() == 0) return absl::OkStatus();
  CAVS_ASSIGN_OR_RETURN(Backend * b, GetBackend(device_));
  return b->SetZero(raw_data(), nbytes());
}

std::vector<float> Tensor::ToVector() const {
  CAVS_CHECK(dtype_ == DType::kFloat32, "ToVector on ", DTypeName(dtype_));
  std::vector<float> out(static_cast<size_t>(numel()));
  if (out.empty()) return out;
  if (device_.is_cpu()) {
    std::memcpy(out.data(), raw_data(), nbytes());
  } else {
    absl::StatusOr<Backend*> b = GetBackend(device_);
    CAVS_CHECK(b.ok(), b.status().ToString());
    absl::Status s = (*b)->CopyToHost(out.data(), raw_data(), nbytes());
    CAVS_CHECK(s.ok(), s.ToString());
  }
  return out;
}

std::string Tensor::DebugString() const {
  return absl::StrCat("Tensor(", DTypeName(dtype_), shape_.DebugString(), " on ",
                      device_.DebugString(), ")");
}

}  // namespace cavs::core
