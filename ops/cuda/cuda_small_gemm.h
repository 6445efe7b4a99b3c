// The rounds' small GEMM on CUDA (small_gemm.h): one launch, a 16 x 32 tile of C per block.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cavs::ops {

// Opts the kernel in to as much shared memory as it can use on the current device (a chunk
// of small_gemm::kMaxChunk inputs, or less where the device allows less) and returns the bytes
// a launch may take there in `*shared_bytes`. Once per device, before its first launch.
cudaError_t PrepareSmallGemm(size_t* shared_bytes);

// c: [m, n] = alpha * a [m, k] op(b) + beta * c, row-major; op(b) = b [k, n] or, with
// trans_b, b^T (b [n, k]). REQUIRES: PrepareSmallGemm on the current device, and a chunk's
// shared memory (small_gemm::SharedFloats(min(k, kMaxChunk)) floats) within what it returned;
// 0 < m <= small_gemm::kMaxRows, n > 0, k > 0, sizes and strides within 32 bits.
cudaError_t LaunchSmallGemm(cudaStream_t stream, bool trans_b, int64_t m, int64_t n, int64_t k,
                            float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                            float beta, float* c, int64_t ldc);

}  // namespace cavs::ops
