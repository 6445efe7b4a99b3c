// Column reductions and fills on CUDA: ColumnSum, ColumnDot, Fill (ops/kernels.h) and the
// bias rows of a GEMM that cannot add its bias itself (Kernels::GemmBias on cublasSgemm).
//
// ColumnSum/ColumnDot: one launch over a 2-D grid; a block owns 32 columns and a chunk of rows
// (about four blocks per multiprocessor). With several chunks, their sums meet in a workspace
// and the last chunk of each column block to finish adds them in chunk order
// (column_reduce.cuh): deterministic, no atomic add of a float.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cavs::ops::cuda {

// Device memory where a reduction's blocks meet (zeroed counts, left zero by each launch):
// `floats` of partial sums and `counts` counters. Launches on one stream may share it.
struct ReduceWorkspace {
  float* partial = nullptr;
  int64_t floats = 0;
  unsigned* arrivals = nullptr;
  int counts = 0;
};

// dst: [w] += alpha * Σ_r x[r, c] * (y ? y[r, c] : 1), x: [m, w] (x_ld), y: [m, w] (y_ld), in
// column_reduce::Chunks chunks of rows meeting in `workspace` (CudaKernels').
cudaError_t LaunchColumnReduce(cudaStream_t stream, const float* x, int64_t x_ld, const float* y,
                               int64_t y_ld, int64_t m, int64_t w, float alpha, float* dst,
                               int num_sms, const ReduceWorkspace& workspace);

// dst: [n] = value.
cudaError_t LaunchFill(cudaStream_t stream, float* dst, int64_t n, float value);

// c: [m, n] (row stride ldc) += bias, one row of n added to every row.
cudaError_t LaunchBiasRows(cudaStream_t stream, int64_t m, int64_t n, const float* bias, float* c,
                           int64_t ldc);

}  // namespace cavs::ops::cuda
