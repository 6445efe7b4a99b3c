#include "ops/cuda/cuda_multi_tensor.h"

namespace cavs::ops::cuda {

namespace {

constexpr int kThreads = 256;

__device__ double BlockSum(double v) {
  __shared__ double warp_sums[kThreads / 32];
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = v;
  __syncthreads();
  v = 0.0;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kThreads / 32; ++i) v += warp_sums[i];
  }
  return v;
}

// Block b processes chunk b; threads stride over its elements.
template <MultiTensorOp kOp>
__global__ void __launch_bounds__(kThreads)
    MultiTensorKernel(MultiTensorHyper h, const MultiTensorSlot* __restrict__ slots,
                      const MultiTensorChunk* __restrict__ chunks, double* partials) {
  const MultiTensorChunk chunk = chunks[blockIdx.x];
  const MultiTensorSlot s = slots[chunk.slot];
  const int64_t end = min(chunk.begin + kMultiTensorChunk, s.count);
  double squares = 0.0;
  for (int64_t g = chunk.begin + threadIdx.x; g < end; g += kThreads) {
    int64_t p = g;  // the parameter element that gradient element g updates
    if (s.row_ids != nullptr) {
      const int64_t r = g / s.cols;
      p = s.row_ids[r] * s.cols + (g - r * s.cols);
    }
    if constexpr (kOp == MultiTensorOp::kSgd) {
      float unused = 0.0f;
      core::SgdElement(h.sgd, s.param[p], s.grad[g], s.state0 != nullptr ? s.state0[p] : unused);
    } else if constexpr (kOp == MultiTensorOp::kAdagrad) {
      core::AdagradElement(h.adagrad, s.param[p], s.grad[g], s.state0[p]);
    } else if constexpr (kOp == MultiTensorOp::kAdam) {
      core::AdamElement(h.adam, s.param[p], s.grad[g], s.state0[p], s.state1[p]);
    } else if constexpr (kOp == MultiTensorOp::kScale) {
      s.param[p] *= h.factor;
    } else {
      const double v = s.param[p];
      squares += v * v;
    }
  }
  if constexpr (kOp == MultiTensorOp::kSumOfSquares) {
    squares = BlockSum(squares);
    if (threadIdx.x == 0) partials[blockIdx.x] = squares;
  }
}

}  // namespace

cudaError_t LaunchMultiTensor(cudaStream_t stream, MultiTensorOp op, const MultiTensorHyper& h,
                              const MultiTensorSlot* slots, const MultiTensorChunk* chunks,
                              int64_t num_chunks, double* partials) {
  if (num_chunks <= 0) return cudaSuccess;
  if (num_chunks >= (int64_t{1} << 31)) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(num_chunks));
  switch (op) {
    case MultiTensorOp::kSgd:
      MultiTensorKernel<MultiTensorOp::kSgd>
          <<<grid, kThreads, 0, stream>>>(h, slots, chunks, partials);
      break;
    case MultiTensorOp::kAdagrad:
      MultiTensorKernel<MultiTensorOp::kAdagrad>
          <<<grid, kThreads, 0, stream>>>(h, slots, chunks, partials);
      break;
    case MultiTensorOp::kAdam:
      MultiTensorKernel<MultiTensorOp::kAdam>
          <<<grid, kThreads, 0, stream>>>(h, slots, chunks, partials);
      break;
    case MultiTensorOp::kScale:
      MultiTensorKernel<MultiTensorOp::kScale>
          <<<grid, kThreads, 0, stream>>>(h, slots, chunks, partials);
      break;
    case MultiTensorOp::kSumOfSquares:
      MultiTensorKernel<MultiTensorOp::kSumOfSquares>
          <<<grid, kThreads, 0, stream>>>(h, slots, chunks, partials);
      break;
  }
  return cudaGetLastError();
}

}  // namespace cavs::ops::cuda
