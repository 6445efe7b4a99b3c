// cuDNN errors as absl::Status (see cuda_status.h for the conventions). The target whose code
// calls these functions links cavs_deps::cudnn (cavs_ops_cuda does not yet: no kernel of it
// uses cuDNN so far) and is built only where CAVS_WITH_CUDNN.
#pragma once

#include <cudnn.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace cavs::ops::cuda {

inline absl::StatusCode CudnnErrorCode(cudnnStatus_t status) {
  switch (status) {
    case CUDNN_STATUS_ALLOC_FAILED:
      return absl::StatusCode::kResourceExhausted;
    case CUDNN_STATUS_BAD_PARAM:
      return absl::StatusCode::kInvalidArgument;
    case CUDNN_STATUS_NOT_SUPPORTED:
    case CUDNN_STATUS_NOT_INITIALIZED:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kInternal;
  }
}

// "cuDNN error CUDNN_STATUS_BAD_PARAM (2000) in cudnnRNNForward(...) at f.cc:12".
inline absl::Status CudnnStatus(cudnnStatus_t status, const char* call, const char* file,
                                int line) {
  if (status == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  return absl::Status(
      CudnnErrorCode(status),
      absl::StrCat("cuDNN error ", cudnnGetErrorString(status), " (", static_cast<int>(status),
                   ") in ", call, " at ", file, ":", line));
}

}  // namespace cavs::ops::cuda

#define CAVS_CUDNN_STATUS(expr) ::cavs::ops::cuda::CudnnStatus((expr), #expr, __FILE__, __LINE__)

#define CAVS_CUDNN_RETURN_IF_ERROR(expr)                                                    \
  do {                                                                                      \
    const cudnnStatus_t cavs_cudnn_status_ = (expr);                                        \
    if (cavs_cudnn_status_ != CUDNN_STATUS_SUCCESS) {                                       \
      return ::cavs::ops::cuda::CudnnStatus(cavs_cudnn_status_, #expr, __FILE__, __LINE__); \
    }                                                                                       \
  } while (0)
