// The small GEMM's device code (small_gemm.h): one block's tile of C, and the grid-wide barrier
// of a forward round's single launch. Shared by the precompiled kernel (cuda_small_gemm.cu) and
// the generated round kernels (cuda_fused.h, NVRTC: this header travels to it as a string, so it
// includes only small_gemm.h and uses inline PTX, not cuda_pipeline.h, for the copies).
#pragma once

#include "ops/cuda/small_gemm.h"

namespace cavs::ops::small_gemm {

// One float into shared memory without waiting for it (cp.async, 4 bytes); zero past the edges.
struct AsyncCopy {
  __device__ __forceinline__ void operator()(float* dst, const float* src) const {
    if (src != nullptr) {
      const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(dst));
      asm volatile("cp.async.ca.shared.global [%0], [%1], 4, 4;\n" ::"r"(to), "l"(src) : "memory");
    } else {
      *dst = 0.0f;
    }
  }
};

// Waits for this thread's copies issued so far.
__device__ __forceinline__ void WaitCopies() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

// Block-wide (kThreads threads): tile (bx, by) of C, through `shared` (SharedFloats(g.chunk)
// floats, 16-byte aligned). Every thread of the block calls it; it starts and ends with a
// barrier, so a block may run several tiles, or other block-wide work, one after another.
__device__ __forceinline__ void RunTile(const Args& g, int bx, int by, float* shared) {
  float* as = shared;
  float* bs = shared + g.chunk * kPitchA;
  float acc[16] = {};
  for (int k0 = 0; k0 < g.k; k0 += g.chunk) {
    const int len = min(g.chunk, g.k - k0);
    __syncthreads();  // shared memory's last readers are done before it is overwritten
    LoadChunk(g, bx, by, threadIdx.x, k0, len, as, bs, AsyncCopy{});
    WaitCopies();
    __syncthreads();
    AccumulateChunk(threadIdx.x, len, as, bs, acc);
  }
  __syncthreads();  // the partial tiles overwrite the operands
  Park(threadIdx.x, acc, shared);
  __syncthreads();
  Store(g, bx, by, threadIdx.x, shared);
}

// A barrier over every block of the grid, which must all be resident at once (a cooperative
// launch guarantees it or refuses). `state` is two words of device memory, zero before the
// grid's first barrier, used by one grid at a time (launches on one stream): an arrival count
// and a generation. Every block's earlier writes are visible to every block after it.
//
// The last block to arrive resets the count and advances the generation; the others wait for
// the generation to move past the one they read before arriving (it cannot move before they
// arrive), so the state is ready for the next barrier, in this grid or the next.
__device__ __forceinline__ void GridBarrier(unsigned* state) {
  __syncthreads();
  if (threadIdx.x == 0) {
    volatile unsigned* generation = state + 1;
    const unsigned seen = *generation;
    __threadfence();  // this block's writes before its arrival; `seen` read before it
    if (atomicAdd(state, 1u) == gridDim.x * gridDim.y * gridDim.z - 1) {
      atomicExch(state, 0u);
      __threadfence();
      atomicAdd(state + 1, 1u);
    } else {
      while (*generation == seen) __nanosleep(64);
    }
    __threadfence();  // the other blocks' writes before this block's later reads
  }
  __syncthreads();
}

}  // namespace cavs::ops::small_gemm
