#include "ops/cuda/cuda_gemm.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "ops/cuda/cublas_status.h"

namespace cavs::ops {

absl::Status CublasGemmRowMajor(cublasHandle_t handle, bool trans_a, bool trans_b, int64_t m,
                                int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                                const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m < 0 || n < 0 || k < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Gemm: negative size m=", m, " n=", n, " k=", k));
  }
  if (m == 0 || n == 0) return absl::OkStatus();
  // The column-major views: op(B)^T is [n, k], op(A)^T is [k, m], C^T is [n, m]. cuBLAS wants
  // each leading dimension at least the view's row count (and at least 1).
  const int64_t need_a = trans_a ? m : k;
  const int64_t need_b = trans_b ? k : n;
  if (lda < need_a || ldb < need_b || ldc < n) {
    return absl::InvalidArgumentError(absl::StrCat("Gemm: row strides too small: lda=", lda,
                                                   " (needs ", need_a, "), ldb=", ldb, " (needs ",
                                                   need_b, "), ldc=", ldc, " (needs ", n, ")"));
  }
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (m > kMax || n > kMax || k > kMax || lda > kMax || ldb > kMax || ldc > kMax) {
    return absl::InvalidArgumentError(
        absl::StrCat("Gemm: sizes beyond 32 bits: m=", m, " n=", n, " k=", k));
  }
  const auto to_int = [](int64_t v) { return static_cast<int>(std::max<int64_t>(v, 1)); };
  CAVS_CUBLAS_RETURN_IF_ERROR(cublasSgemm(handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                          trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
                                          static_cast<int>(m), static_cast<int>(k), &alpha, b,
                                          to_int(ldb), a, to_int(lda), &beta, c, to_int(ldc)));
  return absl::OkStatus();
}

}  // namespace cavs::ops
