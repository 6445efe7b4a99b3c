#include <algorithm>
#include <cstring>

#include "ops/cuda/cuda_reduce.h"

namespace cavs::ops {

namespace {

constexpr int kColumns = 32;  // per block, one per lane
constexpr int kRowThreads = 8;
constexpr int kMinRowsPerChunk = 64;

// Block (32, 8): lanes over columns, threadIdx.y over the chunk's rows.
template <bool kDot>
__global__ void ColumnReduceKernel(const float* __restrict__ x, int64_t x_ld,
                                   const float* __restrict__ y, int64_t y_ld, int64_t m, int64_t w,
                                   int64_t rows_per_chunk, float alpha, float* __restrict__ dst) {
  __shared__ float partial[kRowThreads][kColumns + 1];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kColumns + threadIdx.x;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t end = min(begin + rows_per_chunk, m);
  float sum = 0.0f;
  if (c < w) {
    for (int64_t r = begin + threadIdx.y; r < end; r += kRowThreads) {
      const float v = x[r * x_ld + c];
      sum += kDot ? v * y[r * y_ld + c] : v;
    }
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && c < w) {
    for (int i = 1; i < kRowThreads; ++i) sum += partial[i][threadIdx.x];
    atomicAdd(&dst[c], alpha * sum);
  }
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
                               int num_sms) {
  if (m <= 0 || w <= 0) return cudaSuccess;
  const int64_t column_blocks = (w + kColumns - 1) / kColumns;
  if (column_blocks >= (int64_t{1} << 31)) return cudaErrorInvalidValue;
  // Enough row chunks for about four blocks per multiprocessor, each at least 64 rows long.
  const int64_t target = std::max<int64_t>(1, 4 * static_cast<int64_t>(num_sms) / column_blocks);
  const int64_t chunks = std::clamp<int64_t>((m + kMinRowsPerChunk - 1) / kMinRowsPerChunk, 1,
                                             std::min<int64_t>(target, 65535));
  const int64_t rows_per_chunk = (m + chunks - 1) / chunks;
  const dim3 grid(static_cast<unsigned>(column_blocks), static_cast<unsigned>(chunks));
  const dim3 block(kColumns, kRowThreads);
  if (y != nullptr) {
    ColumnReduceKernel<true>
        <<<grid, block, 0, stream>>>(x, x_ld, y, y_ld, m, w, rows_per_chunk, alpha, dst);
  } else {
    ColumnReduceKernel<false>
        <<<grid, block, 0, stream>>>(x, x_ld, nullptr, 0, m, w, rows_per_chunk, alpha, dst);
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

}  // namespace cavs::ops
