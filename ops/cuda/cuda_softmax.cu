#include <algorithm>
#include <cfloat>

#include "ops/cuda/block_meet.cuh"
#include "ops/cuda/cuda_softmax.h"

namespace cavs::ops::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

struct ArgMax {
  float value;
  int64_t index;
};

// The larger value; the smaller index among equals (the first maximum, as on the CPU).
__device__ __forceinline__ ArgMax Better(ArgMax a, ArgMax b) {
  if (b.value > a.value || (b.value == a.value && b.index < a.index)) return b;
  return a;
}

__device__ __forceinline__ ArgMax WarpArgMax(ArgMax v) {
  for (int off = 16; off > 0; off >>= 1) {
    ArgMax o{__shfl_xor_sync(0xffffffffu, v.value, off),
             __shfl_xor_sync(0xffffffffu, v.index, off)};
    v = Better(v, o);
  }
  return v;
}

__device__ __forceinline__ float WarpSum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// A row is handled by a group: one warp, or (kBlock) the whole block. Group reductions return
// the result to every thread of the group.
template <bool kBlock>
struct Group {
  __device__ static int Rank() { return kBlock ? threadIdx.x : threadIdx.x & 31; }
  __device__ static int Size() { return kBlock ? kThreads : 32; }
  __device__ static float Sum(float v, float* scratch) {
    v = WarpSum(v);
    if constexpr (kBlock) {
      __syncthreads();  // scratch may still be read from the previous reduction
      if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
      __syncthreads();
      v = 0.0f;
      for (int i = 0; i < kWarps; ++i) v += scratch[i];
    }
    return v;
  }
  __device__ static ArgMax Max(ArgMax v, ArgMax* scratch) {
    v = WarpArgMax(v);
    if constexpr (kBlock) {
      __syncthreads();
      if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
      __syncthreads();
      v = scratch[0];
      for (int i = 1; i < kWarps; ++i) v = Better(v, scratch[i]);
    }
    return v;
  }
};

// Rows are walked by groups. The statistics are summed in a fixed order: each group's rows in
// row order, the block's warps in warp order, the blocks in block order where they meet in the
// workspace (block_meet.cuh); so the loss has the same bits from run to run.
template <bool kBlock>
__global__ void __launch_bounds__(kThreads)
    SoftmaxXentKernel(const float* __restrict__ logits, int64_t ld, int64_t n, int64_t c,
                      const int32_t* __restrict__ labels, float scale, float* __restrict__ dlogits,
                      float* stats, int32_t* __restrict__ pred, float* partial, unsigned* arrival) {
  using G = Group<kBlock>;
  __shared__ float sum_scratch[kWarps];
  __shared__ ArgMax max_scratch[kWarps];
  __shared__ float meet[block_meet::kSharedFloats<kThreads>];
  float loss = 0.0f, correct = 0.0f;  // the group's rows (its rank 0 only)
  const int groups_per_block = kBlock ? 1 : kWarps;
  const int64_t first =
      static_cast<int64_t>(blockIdx.x) * groups_per_block + (kBlock ? 0 : threadIdx.x >> 5);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * groups_per_block;
  for (int64_t row = first; row < n; row += stride) {
    const float* x = logits + row * ld;
    ArgMax best{-FLT_MAX, c};
    for (int64_t j = G::Rank(); j < c; j += G::Size()) best = Better(best, ArgMax{x[j], j});
    best = G::Max(best, max_scratch);
    float sum = 0.0f;
    for (int64_t j = G::Rank(); j < c; j += G::Size()) sum += expf(x[j] - best.value);
    sum = G::Sum(sum, sum_scratch);
    const int32_t label = labels[row];
    const bool labelled = label >= 0 && label < c;
    if (G::Rank() == 0) {
      if (pred != nullptr) pred[row] = static_cast<int32_t>(best.index);
      if (labelled) {
        loss += logf(sum) + best.value - x[label];
        if (best.index == label) correct += 1.0f;
      }
    }
    if (dlogits == nullptr) continue;
    float* d = dlogits + row * c;
    const float inv = 1.0f / sum;
    for (int64_t j = G::Rank(); j < c; j += G::Size()) {
      d[j] = labelled ? scale * (expf(x[j] - best.value) * inv - (j == label ? 1.0f : 0.0f)) : 0.0f;
    }
  }
  if (stats == nullptr) return;
  const int warp = threadIdx.x >> 5;
  if ((threadIdx.x & 31) == 0) {
    meet[2 * warp] = loss;
    meet[2 * warp + 1] = correct;
  }
  __syncthreads();
  float block_sum = 0.0f;  // statistic threadIdx.x (0: loss, 1: correct) over the block's warps
  if (threadIdx.x < 2) {
    for (int w = 0; w < kWarps; ++w) block_sum += meet[2 * w + threadIdx.x];
  }
  __syncthreads();  // meet is read: block_meet may take it
  block_meet::Meet<2, kThreads>(block_sum, blockIdx.x, gridDim.x, threadIdx.x, partial, 2, arrival,
                                meet, [&](int i, float total) { stats[i] += total; });
}

}  // namespace

cudaError_t LaunchSoftmaxCrossEntropy(cudaStream_t stream, const float* logits, int64_t ld,
                                      int64_t n, int64_t c, const int32_t* labels, float scale,
                                      float* dlogits, float* stats, int32_t* pred,
                                      const ReduceWorkspace& workspace) {
  if (n <= 0 || c <= 0) return cudaSuccess;
  // Rows are strided over the blocks, so fewer blocks than rows only lengthen the loop; each
  // block's 2 statistics must fit in the workspace.
  const int64_t max_blocks = std::min<int64_t>(int64_t{1} << 16, workspace.floats / 2);
  if (c <= kSoftmaxWarpMaxClasses) {
    const int64_t blocks = std::min((n + kWarps - 1) / kWarps, max_blocks);
    SoftmaxXentKernel<false><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        logits, ld, n, c, labels, scale, dlogits, stats, pred, workspace.partial,
        workspace.arrivals);
  } else {
    const int64_t blocks = std::min(n, max_blocks);
    SoftmaxXentKernel<true><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        logits, ld, n, c, labels, scale, dlogits, stats, pred, workspace.partial,
        workspace.arrivals);
  }
  return cudaGetLastError();
}

}  // namespace cavs::ops::cuda
