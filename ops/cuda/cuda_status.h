// CUDA runtime errors as absl::Status.
//
// Every CUDA runtime call in ops/cuda goes through one of these macros, so that a failure
// becomes a Status naming the error, the call, the file and the line instead of a crash or a
// silently ignored code:
//
//   CAVS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, kind, stream));
//   absl::Status s = CAVS_CUDA_STATUS(cudaStreamSynchronize(stream));
//
// Kernel launches report through CAVS_CUDA_RETURN_IF_ERROR(cudaGetLastError()) right after
// the launch (a bad configuration); faults inside a kernel surface at the next synchronizing
// call. Sibling headers do the same for cuBLAS (cublas_status.h), cuDNN (cudnn_status.h) and
// NVRTC (nvrtc_status.h). Only ops/cuda includes these headers: no CUDA type leaves ops/cuda.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace cavs::ops::cuda {

// The absl code a CUDA runtime error maps to: memory exhaustion and missing devices are
// conditions a caller can act on; everything else is internal.
inline absl::StatusCode CudaErrorCode(cudaError_t err) {
  switch (err) {
    case cudaErrorMemoryAllocation:
      return absl::StatusCode::kResourceExhausted;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
      return absl::StatusCode::kFailedPrecondition;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidConfiguration:
      return absl::StatusCode::kInvalidArgument;
    default:
      return absl::StatusCode::kInternal;
  }
}

// "CUDA error cudaErrorMemoryAllocation (2: out of memory) in cudaMalloc(&p, n) at f.cc:12".
inline absl::Status CudaStatus(cudaError_t err, const char* call, const char* file, int line) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::Status(
      CudaErrorCode(err),
      absl::StrCat("CUDA error ", cudaGetErrorName(err), " (", static_cast<int>(err), ": ",
                   cudaGetErrorString(err), ") in ", call, " at ", file, ":", line));
}

}  // namespace cavs::ops::cuda

// The Status of a CUDA runtime call (OK on cudaSuccess).
#define CAVS_CUDA_STATUS(expr) ::cavs::ops::cuda::CudaStatus((expr), #expr, __FILE__, __LINE__)

// Returns the error Status from the enclosing function if the call fails.
#define CAVS_CUDA_RETURN_IF_ERROR(expr)                                                \
  do {                                                                                 \
    const cudaError_t cavs_cuda_err_ = (expr);                                         \
    if (cavs_cuda_err_ != cudaSuccess) {                                               \
      return ::cavs::ops::cuda::CudaStatus(cavs_cuda_err_, #expr, __FILE__, __LINE__); \
    }                                                                                  \
  } while (0)
