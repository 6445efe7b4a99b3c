// cuBLAS errors as absl::Status (see cuda_status.h for the conventions).
#pragma once

#include <cublas_v2.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace cavs::ops::cuda {

inline absl::StatusCode CublasErrorCode(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_ALLOC_FAILED:
      return absl::StatusCode::kResourceExhausted;
    case CUBLAS_STATUS_INVALID_VALUE:
      return absl::StatusCode::kInvalidArgument;
    case CUBLAS_STATUS_NOT_INITIALIZED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kInternal;
  }
}

// "cuBLAS error CUBLAS_STATUS_INVALID_VALUE (7: ...) in cublasSgemm(...) at f.cc:12".
inline absl::Status CublasStatus(cublasStatus_t status, const char* call, const char* file,
                                 int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::Status(
      CublasErrorCode(status),
      absl::StrCat("cuBLAS error ", cublasGetStatusName(status), " (", static_cast<int>(status),
                   ": ", cublasGetStatusString(status), ") in ", call, " at ", file, ":", line));
}

}  // namespace cavs::ops::cuda

#define CAVS_CUBLAS_STATUS(expr) ::cavs::ops::cuda::CublasStatus((expr), #expr, __FILE__, __LINE__)

#define CAVS_CUBLAS_RETURN_IF_ERROR(expr)                                                     \
  do {                                                                                        \
    const cublasStatus_t cavs_cublas_status_ = (expr);                                        \
    if (cavs_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                                       \
      return ::cavs::ops::cuda::CublasStatus(cavs_cublas_status_, #expr, __FILE__, __LINE__); \
    }                                                                                         \
  } while (0)
