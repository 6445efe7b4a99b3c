// CPU GEMM: OpenBLAS sgemm, split over the ops' thread pool (see ops/cpu/cpu_parallel.h).
#pragma once

#include <cstdint>

#include "absl/status/status.h"

namespace cavs::ops::cpu {

// c: [m, n] = alpha * op(a) op(b) + beta * c, row-major; op(a): [m, k] (a stored [k, m] when
// trans_a), op(b): [k, n] (b stored [n, k] when trans_b). beta == 0 overwrites c (NaNs in c
// are not propagated). Errors: negative sizes, a leading dimension smaller than its stored row.
[[nodiscard]] absl::Status Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                float alpha, const float* a, int64_t lda, const float* b,
                                int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace cavs::ops::cpu
