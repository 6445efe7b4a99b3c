// The rounds' small GEMM on CUDA (small_gemm.h): one launch, a 16 x 32 tile of C per block.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/cuda/small_gemm.h"

namespace cavs::ops::cuda {

// Opts the kernel in to as much shared memory as it can use on the current device (a chunk of
// small_gemm::kMaxChunk inputs, or less where the device allows less) and returns the bytes a
// launch may take there in `*shared_bytes`. Once per device, before its first launch.
cudaError_t PrepareSmallGemm(size_t* shared_bytes);

// c: [m, n] = alpha * a [m, k] op(b) + beta * c (+ g.bias, one row of n, where not null),
// row-major, as `g` says (small_gemm::Args; op(b) = b [k, n] or, with g.trans_b, b^T).
// REQUIRES: PrepareSmallGemm on the current device, a chunk's shared memory
// (small_gemm::SharedFloats<RoundTile>(g.chunk) floats) within what it returned,
// 0 < g.m <= small_gemm::kMaxRows, g.n > 0, g.k > 0, g.chunk = min(g.k, small_gemm::kMaxChunk).
cudaError_t LaunchSmallGemm(cudaStream_t stream, const small_gemm::Args& g);

}  // namespace cavs::ops::cuda
