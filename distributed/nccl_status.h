// NCCL results (and the CUDA runtime calls the NCCL backend makes) as absl::Status: every such
// call in distributed/ goes through these macros, so that a failure becomes a Status naming the
// call, the error string, the file and the line:
//
//   CAVS_NCCL_RETURN_IF_ERROR(ncclAllReduce(p, p, n, ncclFloat32, ncclSum, comm, stream));
//   CAVS_NCCL_CUDA_RETURN_IF_ERROR(cudaEventRecord(event, stream));
//
// ncclInProgress (a nonblocking communicator still working) is not an error here; callers poll
// ncclCommGetAsyncError for it. Internal to distributed/: it includes nccl.h and the CUDA
// runtime header, and only nccl_communicator.cc includes it.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace cavs::distributed::internal {

inline absl::Status NcclStatus(ncclResult_t result, absl::string_view call, const char* file,
                               int line) {
  if (result == ncclSuccess || result == ncclInProgress) return absl::OkStatus();
  const absl::StatusCode code = result == ncclInvalidArgument || result == ncclInvalidUsage
                                    ? absl::StatusCode::kInvalidArgument
                                    : absl::StatusCode::kInternal;
  const char* last = ncclGetLastError(nullptr);
  return absl::Status(
      code,
      absl::StrCat("NCCL error in ", call.substr(0, call.find('(')), " at ", file, ":", line, ": ",
                   ncclGetErrorString(result), last != nullptr && *last != '\0' ? " (" : "",
                   last != nullptr ? last : "", last != nullptr && *last != '\0' ? ")" : ""));
}

inline absl::Status NcclCudaStatus(cudaError_t error, absl::string_view call, const char* file,
                                   int line) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("CUDA error ", cudaGetErrorName(error), " (",
                                          cudaGetErrorString(error), ") in ",
                                          call.substr(0, call.find('(')), " at ", file, ":", line));
}

}  // namespace cavs::distributed::internal

#define CAVS_NCCL_RETURN_IF_ERROR(expr)                                                    \
  do {                                                                                     \
    const ncclResult_t cavs_nccl_result_ = (expr);                                         \
    if (cavs_nccl_result_ != ncclSuccess && cavs_nccl_result_ != ncclInProgress) {         \
      return ::cavs::distributed::internal::NcclStatus(cavs_nccl_result_, #expr, __FILE__, \
                                                       __LINE__);                          \
    }                                                                                      \
  } while (0)

#define CAVS_NCCL_CUDA_RETURN_IF_ERROR(expr)                                                       \
  do {                                                                                             \
    const cudaError_t cavs_nccl_cuda_error_ = (expr);                                              \
    if (cavs_nccl_cuda_error_ != cudaSuccess) {                                                    \
      return ::cavs::distributed::internal::NcclCudaStatus(cavs_nccl_cuda_error_, #expr, __FILE__, \
                                                           __LINE__);                              \
    }                                                                                              \
  } while (0)
