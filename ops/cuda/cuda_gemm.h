// Row-major SGEMM through cuBLAS (Kernels::Gemm).
//
// cuBLAS is column-major; a row-major [r, c] matrix with row stride ld is the column-major
// [c, r] matrix with leading dimension ld, its transpose. So C = op(A) op(B) in row-major is
// C^T = op(B)^T op(A)^T in column-major: one cublasSgemm with the operands swapped and m, n
// exchanged, and no copies.
#pragma once

#include <cublas_v2.h>

#include <cstdint>

#include "absl/status/status.h"

namespace cavs::ops {

// c: [m, n] = alpha * op(a) op(b) + beta * c (row-major; see Kernels::Gemm). Queued on the
// handle's stream with the handle's math mode.
[[nodiscard]] absl::Status CublasGemmRowMajor(cublasHandle_t handle, bool trans_a, bool trans_b,
                                              int64_t m, int64_t n, int64_t k, float alpha,
                                              const float* a, int64_t lda, const float* b,
                                              int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace cavs::ops
