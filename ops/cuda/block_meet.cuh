// Where the blocks of one reduction meet without an atomic add of a float, so that the result
// has the same bits from run to run whichever blocks finish first (ColumnSum and ColumnDot,
// column_reduce.cuh; the loss statistics of SoftmaxCrossEntropy, cuda_softmax.cu).
//
// As the CUDA samples' threadFenceReduction ends a reduction: each block writes its values to a
// workspace, fences, and counts itself in; the last block to arrive (whichever that is) adds every
// block's values in block order and sets the count back to zero for the next launch.
//
// Plain C++ with CUDA's names, so that tests/ops/ew_emulation_test.cc runs it on host threads.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace cavs::ops::cuda::block_meet {

// A float of the workspace where the blocks meet, through L2 only on the GPU (other blocks write
// and read it within one launch, and L1 is not coherent between multiprocessors).
CAVS_HOST_DEVICE inline void StoreL2(float* p, float v) {
#if defined(__CUDA_ARCH__)
  __stcg(p, v);
#else
  *p = v;
#endif
}
CAVS_HOST_DEVICE inline float LoadL2(const float* p) {
#if defined(__CUDA_ARCH__)
  return __ldcg(p);
#else
  return *p;
#endif
}

// The shared floats Meet needs.
template <int kThreads>
inline constexpr int kSharedFloats = kThreads + 1;

// Block-wide, every thread of the block (kThreads, a multiple of kCount) calls it: the values of
// threads 0 .. kCount - 1 (`value`; the other threads' are ignored) of `block` of `blocks` go to
// partial[block * ld + i]; the last block to count itself in at *arrival (zero before, left
// zero) calls finish(i, total) on thread i < kCount, total the sum of every block's value i in
// block order. `shared`: kSharedFloats<kThreads> floats that no thread reads meanwhile.
template <int kCount, int kThreads, typename Finish>
__device__ __forceinline__ void Meet(float value, int block, int blocks, int tid, float* partial,
                                     int64_t ld, unsigned* arrival, float* shared, Finish finish) {
  static_assert(kThreads % kCount == 0, "whole groups of threads per value");
  if (tid < kCount) StoreL2(partial + block * ld + tid, value);
  __threadfence();  // this block's values are visible to every block before its count
  __syncthreads();
  unsigned* last = reinterpret_cast<unsigned*>(shared + kThreads);
  if (tid == 0) {
    const unsigned before = atomicAdd(arrival, 1u);
    *last = before + 1 == static_cast<unsigned>(blocks) ? 1u : 0u;
    if (*last != 0) *arrival = 0;  // every block has counted: none adds again
  }
  __syncthreads();
  if (*last == 0) return;
  __threadfence();  // the other blocks' values, read after their counts
  // Thread (i, j) adds blocks j, j + kPer, ... of value i in order; then value i's kPer sums in
  // j order.
  constexpr int kPer = kThreads / kCount;
  const int i = tid % kCount, j = tid / kCount;
  float sum = 0.0f;
  for (int b = j; b < blocks; b += kPer) sum += LoadL2(partial + b * ld + i);
  shared[j * kCount + i] = sum;
  __syncthreads();
  if (tid < kCount) {
    float total = 0.0f;
    for (int k = 0; k < kPer; ++k) total += shared[k * kCount + tid];
    finish(tid, total);
  }
}

}  // namespace cavs::ops::cuda::block_meet
