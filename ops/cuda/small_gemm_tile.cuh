// The small GEMM's device code (small_gemm.h): one block's tile of C, for the precompiled kernel
// (cuda_small_gemm.cu). It includes only small_gemm.h and uses inline PTX, not cuda_pipeline.h,
// for the copies, so that tests/ops/ew_emulation_test.cc builds it as host C++ too.
#pragma once

#include "ops/cuda/small_gemm.h"

namespace cavs::ops::cuda::small_gemm {

// One float into shared memory without waiting for it (cp.async, 4 bytes, from sm_80; a plain
// copy before); zero past the edges.
struct AsyncCopy {
  __device__ __forceinline__ void operator()(float* dst, const float* src) const {
    if (src == nullptr) {
      *dst = 0.0f;
      return;
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, 4;\n" ::"r"(to), "l"(src) : "memory");
#else
    *dst = *src;
#endif
  }
};

// Waits for this thread's copies issued so far.
__device__ __forceinline__ void WaitCopies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#endif
}

// Block-wide (kThreads threads): the products of tile (bx, by) of a T (RoundTile) over inputs
// k_begin .. k_end, parked as the slices' sums in `shared` (SharedFloats<T>(g.chunk)
// floats, 16-byte aligned). Every thread of the block calls it; it starts and ends with a
// barrier.
template <typename T>
__device__ __forceinline__ void AccumulateAndPark(const Args& g, int bx, int by, int k_begin,
                                                  int k_end, float* shared) {
  float* as = shared;
  float* bs = shared + g.chunk * T::kPitchA;
  float acc[T::kPerThread] = {};
  for (int k0 = k_begin; k0 < k_end; k0 += g.chunk) {
    const int len = min(g.chunk, k_end - k0);
    __syncthreads();  // shared memory's last readers are done before it is overwritten
    LoadChunk<T>(g, bx, by, threadIdx.x, k0, len, as, bs, AsyncCopy{});
    WaitCopies();
    __syncthreads();
    AccumulateChunk<T>(threadIdx.x, len, as, bs, acc);
  }
  __syncthreads();  // the partial tiles overwrite the operands
  Park<T>(threadIdx.x, acc, shared);
  __syncthreads();
}

// Block-wide: tile (bx, by) of C over all of k. It starts with a barrier before it writes
// shared memory, so a block may run several tiles, or other block-wide work that starts so,
// one after another.
template <typename T>
__device__ __forceinline__ void RunTile(const Args& g, int bx, int by, float* shared) {
  AccumulateAndPark<T>(g, bx, by, 0, g.k, shared);
  Store<T>(g, bx, by, threadIdx.x, shared);
}

}  // namespace cavs::ops::cuda::small_gemm
