// Tensor: a dense, row-major array on one device.
//
// A Tensor is a handle: copies share the same storage (like a shared_ptr), and View/Rows make
// handles onto part of it. Element access through data<T>() is for host tensors only; device
// tensors are read and written by ops and by the copy functions here. Storage is returned to
// its device's allocator when the last handle goes away.
//
// Thread-safety: distinct handles may be used concurrently; writes to shared storage need the
// caller's synchronization.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/backend.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/shape.h"
#include "core/status.h"

namespace cavs::core {

class Tensor {
 public:
  Tensor() = default;  // undefined: no storage

  // Uninitialized storage for `shape` on `device`.
  [[nodiscard]] static absl::StatusOr<Tensor> Empty(Shape shape, DType dtype = DType::kFloat32,
                                                    Device device = Device::Cpu());
  // Zero-filled storage.
  [[nodiscard]] static absl::StatusOr<Tensor> Zeros(Shape shape, DType dtype = DType::kFloat32,
                                                    Device device = Device::Cpu());
  // A zero-filled host tensor. Host allocation failure is treated as fatal here (CAVS_CHECK);
  // use Zeros() where the caller can recover.
  static Tensor Host(Shape shape, DType dtype = DType::kFloat32);
  // A host float32 tensor holding `values`. REQUIRES: values.size() == shape.NumElements().
  static Tensor FromVector(const std::vector<float>& values, Shape shape);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  int64_t numel() const { return shape_.NumElements(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * SizeOf(dtype_); }
  int64_t rows() const { return shape_.Rows(); }
  int64_t cols() const { return shape_.Cols(); }

  void* raw_data() const {
    return storage_ ? static_cast<char*>(storage_->ptr) + offset_bytes_ : nullptr;
  }
  template <typename T>
  T* data() const {
    CAVS_DCHECK(dtype_ == DTypeOf<T>::value, "tensor dtype is ", DTypeName(dtype_));
    return static_cast<T*>(raw_data());
  }

  // The same storage under another shape. REQUIRES: same number of elements.
  Tensor View(Shape shape) const;
  // Rows [begin, end) of the tensor viewed as a [rows, cols] matrix.
  Tensor Rows(int64_t begin, int64_t end) const;

  // A copy of this tensor on `device`.
  [[nodiscard]] absl::StatusOr<Tensor> CopyTo(Device device) const;
  // Copies `src` into this tensor's storage. Shapes may differ if the element counts agree.
  [[nodiscard]] absl::Status CopyFrom(const Tensor& src);
  [[nodiscard]] absl::Status SetZero();
  // The elements as host floats (copied from the device if needed). REQUIRES: float32.
  std::vector<float> ToVector() const;

  std::string DebugString() const;

 private:
  struct Storage {
    void* ptr = nullptr;
    size_t bytes = 0;
    Allocator* allocator = nullptr;
    ~Storage() {
      if (allocator != nullptr) allocator->Deallocate(ptr, bytes);
    }
  };

  std::shared_ptr<Storage> storage_;
  size_t offset_bytes_ = 0;
  Shape shape_;
  DType dtype_ = DType::kFloat32;
  Device device_;
};

}  // namespace cavs::core
