// NVRTC errors as absl::Status (see cuda_status.h for the conventions). A compile failure's
// log is the caller's to append (nvrtcGetProgramLog, as cuda_fused.cc does); this header only
// names the call. cavs_ops_cuda links CUDA::nvrtc for the generated element-wise kernels.
#pragma once

#include <nvrtc.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace cavs::ops::cuda {

inline absl::Status NvrtcStatus(nvrtcResult result, const char* call, const char* file, int line) {
  if (result == NVRTC_SUCCESS) return absl::OkStatus();
  const absl::StatusCode code =
      result == NVRTC_ERROR_OUT_OF_MEMORY ? absl::StatusCode::kResourceExhausted
      : result == NVRTC_ERROR_COMPILATION ? absl::StatusCode::kInvalidArgument
                                          : absl::StatusCode::kInternal;
  return absl::Status(
      code, absl::StrCat("NVRTC error ", nvrtcGetErrorString(result), " (",
                         static_cast<int>(result), ") in ", call, " at ", file, ":", line));
}

}  // namespace cavs::ops::cuda

#define CAVS_NVRTC_STATUS(expr) ::cavs::ops::cuda::NvrtcStatus((expr), #expr, __FILE__, __LINE__)

#define CAVS_NVRTC_RETURN_IF_ERROR(expr)                                                    \
  do {                                                                                      \
    const nvrtcResult cavs_nvrtc_result_ = (expr);                                          \
    if (cavs_nvrtc_result_ != NVRTC_SUCCESS) {                                              \
      return ::cavs::ops::cuda::NvrtcStatus(cavs_nvrtc_result_, #expr, __FILE__, __LINE__); \
    }                                                                                       \
  } while (0)
