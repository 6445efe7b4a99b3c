// Column reductions and fills on CUDA: ColumnSum, ColumnDot, Fill (ops/kernels.h) and the
// bias rows of a GEMM that cannot add its bias itself (Kernels::GemmBias on cublasSgemm).
//
// ColumnSum/ColumnDot: one launch over a 2-D grid; a block owns 32 columns and a chunk of rows,
// reduces its partial sums in shared memory and adds them to dst with one atomicAdd per column
// per block (the number of row chunks is capped near four blocks per multiprocessor, so a
// column sees at most a few hundred atomics).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cavs::ops {

// dst: [w] += alpha * Σ_r x[r, c] * (y ? y[r, c] : 1), x: [m, w] (x_ld), y: [m, w] (y_ld).
cudaError_t LaunchColumnReduce(cudaStream_t stream, const float* x, int64_t x_ld, const float* y,
                               int64_t y_ld, int64_t m, int64_t w, float alpha, float* dst,
                               int num_sms);

// dst: [n] = value.
cudaError_t LaunchFill(cudaStream_t stream, float* dst, int64_t n, float value);

// c: [m, n] (row stride ldc) += bias, one row of n added to every row.
cudaError_t LaunchBiasRows(cudaStream_t stream, int64_t m, int64_t n, const float* bias, float* c,
                           int64_t ldc);

}  // namespace cavs::ops
