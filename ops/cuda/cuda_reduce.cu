#include <algorithm>
#include <cstring>

#include "ops/cuda/column_reduce.cuh"
#include "ops/cuda/cuda_reduce.h"

namespace cavs::ops::cuda {

namespace {

namespace cr = column_reduce;

template <bool kDot>
__global__ void __launch_bounds__(cr::kThreads) ColumnReduceKernel(cr::Args g) {
  __shared__ float shared[cr::kSharedFloats];
  cr::ReduceColumns<kDot>(g, blockIdx.x, blockIdx.y, threadIdx.x, shared);
}

__global__ void FillKernel(float* __restrict__ dst, int64_t n, float value) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = value;
  }
}

__global__ void BiasRowsKernel(int64_t m, int64_t n, const float* __restrict__ bias,
                               float* __restrict__ c, int64_t ldc) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < m * n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    c[(i / n) * ldc + i % n] += bias[i % n];
  }
}

}  // namespace

cudaError_t LaunchColumnReduce(cudaStream_t stream, const float* x, int64_t x_ld, const float* y,
                               int64_t y_ld, int64_t m, int64_t w, float alpha, float* dst,
                               int num_sms, const ReduceWorkspace& workspace) {
  if (m <= 0 || w <= 0) return cudaSuccess;
  const int64_t column_blocks = (w + cr::kColumns - 1) / cr::kColumns;
  if (column_blocks >= (int64_t{1} << 31)) return cudaErrorInvalidValue;
  const int64_t chunks = cr::Chunks(m, w, num_sms, workspace.floats, workspace.counts);
  cr::Args g{x,     x_ld, y, y_ld, m, w, (m + chunks - 1) / chunks, static_cast<int>(chunks),
             alpha, dst};
  if (chunks > 1) {
    g.partial = workspace.partial;
    g.arrivals = workspace.arrivals;
  }
  const dim3 grid(static_cast<unsigned>(column_blocks), static_cast<unsigned>(chunks));
  if (y != nullptr) {
    ColumnReduceKernel<true><<<grid, cr::kThreads, 0, stream>>>(g);
  } else {
    ColumnReduceKernel<false><<<grid, cr::kThreads, 0, stream>>>(g);
  }
  return cudaGetLastError();
}

cudaError_t LaunchFill(cudaStream_t stream, float* dst, int64_t n, float value) {
  if (n <= 0) return cudaSuccess;
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  if (bits == 0) return cudaMemsetAsync(dst, 0, static_cast<size_t>(n) * sizeof(float), stream);
  constexpr int kThreads = 256;
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, 4096);
  FillKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(dst, n, value);
  return cudaGetLastError();
}

cudaError_t LaunchBiasRows(cudaStream_t stream, int64_t m, int64_t n, const float* bias, float* c,
                           int64_t ldc) {
  if (m <= 0 || n <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t blocks = std::min<int64_t>((m * n + kThreads - 1) / kThreads, 4096);
  BiasRowsKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(m, n, bias, c, ldc);
  return cudaGetLastError();
}

}  // namespace cavs::ops::cuda
