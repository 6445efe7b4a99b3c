// The rounds' small GEMM on CUDA (small_gemm.h): one launch, a 16 x 32 tile of C per block.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cavs::ops {

// c: [m, n] = alpha * a [m, k] op(b) + beta * c, row-major; op(b) = b [k, n] or, with
// trans_b, b^T (b [n, k]). REQUIRES: 0 < m <= small_gemm::kMaxRows, n > 0, k > 0, sizes and
// strides within 32 bits. Opts the kernel in to more than 48 KB of shared memory on the
// current device at its first launch there.
cudaError_t LaunchSmallGemm(cudaStream_t stream, bool trans_b, int64_t m, int64_t n, int64_t k,
                            float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                            float beta, float* c, int64_t ldc);

}  // namespace cavs::ops
