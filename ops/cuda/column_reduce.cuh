// The column reductions' device code (ColumnSum, ColumnDot; cuda_reduce.h): dst[c] += alpha *
// the sum over rows of x[r, c] (times y[r, c]), deterministic: the same bits from run to run,
// whichever blocks run first.
//
// A block of kThreads threads owns kColumns columns and a chunk of rows: its 8 row threads per
// column sum every 8th row of the chunk, then their sums are added in row-thread order. With one
// chunk the block adds that to dst itself; with several, the chunks of a column block meet in a
// workspace and the last to arrive adds them in chunk order (block_meet.cuh). There is no atomic
// add of a float, so the result does not depend on which chunk is last. (The first version added
// each block's sums with atomicAdd: bias gradients differed in the last bits from run to run.)
//
// Plain C++ with CUDA's names, so that tests/ops/ew_emulation_test.cc runs it on host threads
// (every block of a grid at once) against the CPU. Included by cuda_reduce.cu.
#pragma once

#include "ops/cuda/block_meet.cuh"
#include "ops/cuda/column_reduce.h"

namespace cavs::ops::cuda::column_reduce {

// Block-wide: block (bx, by) of the grid (column blocks x chunks), thread `tid` of kThreads,
// `shared` kSharedFloats floats.
template <bool kDot>
__device__ __forceinline__ void ReduceColumns(const Args& g, int bx, int by, int tid,
                                              float* shared) {
  const int lane = tid % kColumns, ty = tid / kColumns;
  const int64_t c = static_cast<int64_t>(bx) * kColumns + lane;
  const int64_t begin = static_cast<int64_t>(by) * g.rows_per_chunk;
  const int64_t end = begin + g.rows_per_chunk < g.m ? begin + g.rows_per_chunk : g.m;
  float sum = 0.0f;
  if (c < g.w) {
    for (int64_t r = begin + ty; r < end; r += kRowThreads) {
      const float v = g.x[r * g.x_ld + c];
      sum += kDot ? v * g.y[r * g.y_ld + c] : v;
    }
  }
  shared[ty * kPitch + lane] = sum;
  __syncthreads();
  // Threads 0 .. 31 (ty 0) hold the chunk's sums of the block's columns.
  const float chunk_sum = ty == 0 ? AddRowThreads(shared, lane) : 0.0f;
  if (g.chunks <= 1) {
    if (ty == 0 && c < g.w) g.dst[c] += g.alpha * chunk_sum;
    return;
  }
  __syncthreads();  // the row threads' sums are read: Meet may take the shared memory
  const int64_t ld = PaddedWidth(g.w);
  block_meet::Meet<kColumns, kThreads>(chunk_sum, by, g.chunks, tid, g.partial + bx * kColumns, ld,
                                       g.arrivals + bx, shared, [&](int i, float total) {
                                         const int64_t col =
                                             static_cast<int64_t>(bx) * kColumns + i;
                                         if (col < g.w) g.dst[col] += g.alpha * total;
                                       });
}

}  // namespace cavs::ops::cuda::column_reduce
