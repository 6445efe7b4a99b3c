// Helpers for the CUDA tests: device arrays from the backend's allocator, copied to and from
// host vectors, the GEMM settings kept for a test, and the skip when the machine has no GPU.
#pragma once

#include <cstddef>
#include <vector>

#include "core/backend.h"
#include "core/status.h"
#include "gtest/gtest.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/cuda_kernels.h"

namespace cavs::ops::testing {

// Skips the calling test where no CUDA device is present (the normal case on CI).
#define CAVS_SKIP_WITHOUT_CUDA()                                           \
  do {                                                                     \
    if (!::cavs::core::DeviceAvailable(::cavs::core::DeviceType::kCuda)) { \
      GTEST_SKIP() << "no CUDA device on this machine";                    \
    }                                                                      \
  } while (0)

// The backend of cuda:0. REQUIRES: a device is present.
inline cuda::CudaBackend* Backend0() {
  absl::StatusOr<cuda::CudaBackend*> backend = cuda::GetCudaBackend(0);
  CAVS_CHECK(backend.ok(), backend.status().ToString());
  return *backend;
}

// `n` elements of T in device memory of cuda:0, freed with the object.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) {
    absl::StatusOr<void*> p = Backend0()->allocator()->Allocate(bytes());
    CAVS_CHECK(p.ok(), p.status().ToString());
    ptr_ = static_cast<T*>(*p);
  }
  explicit DeviceArray(const std::vector<T>& values) : DeviceArray(values.size()) {
    Upload(values);
  }
  ~DeviceArray() { Backend0()->allocator()->Deallocate(ptr_, bytes()); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return ptr_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }

  void Upload(const std::vector<T>& values) {
    CAVS_CHECK(values.size() == n_);
    CAVS_CHECK(Backend0()->CopyFromHost(ptr_, values.data(), bytes()).ok());
  }
  std::vector<T> Download() const {
    std::vector<T> out(n_);
    CAVS_CHECK(Backend0()->CopyToHost(out.data(), ptr_, bytes()).ok());
    return out;
  }

 private:
  size_t n_;
  T* ptr_ = nullptr;
};

// The small-GEMM and cuBLASLt settings of `k` as they were, put back when
// this goes out of scope (also after a failed ASSERT).
class KeepGemmSettings {
 public:
  explicit KeepGemmSettings(cuda::CudaKernels* k)
      : k_(k), small_(k->small_gemm()), lt_(k->cublas_lt()) {}
  ~KeepGemmSettings() {
    k_->SetSmallGemm(small_);
    EXPECT_TRUE(k_->SetCublasLt(lt_).ok());
  }
  KeepGemmSettings(const KeepGemmSettings&) = delete;
  KeepGemmSettings& operator=(const KeepGemmSettings&) = delete;

 private:
  cuda::CudaKernels* k_;
  cuda::CudaKernels::SmallGemm small_;
  bool lt_;
};

}  // namespace cavs::ops::testing
