// CudaDeviceGuard: makes a device current for a scope and restores the previous one, so that
// ops/cuda calls land on their tensor's GPU whatever the calling thread had selected.
// cudaGetDevice/cudaSetDevice are cheap once a context exists; the guard skips the set when
// the device is already current.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "ops/cuda/cuda_status.h"

namespace cavs::ops::cuda {

class CudaDeviceGuard {
 public:
  CudaDeviceGuard() = default;
  ~CudaDeviceGuard() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;

  [[nodiscard]] absl::Status Set(int ordinal) {
    int current = -1;
    CAVS_CUDA_RETURN_IF_ERROR(cudaGetDevice(&current));
    if (current != ordinal) {
      CAVS_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal));
      previous_ = current;
    }
    return absl::OkStatus();
  }

 private:
  int previous_ = -1;
};

}  // namespace cavs::ops::cuda
