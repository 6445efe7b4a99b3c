// The column reductions' launch arguments and shape (ColumnSum, ColumnDot on CUDA): host C++,
// shared by the kernel (column_reduce.cuh), its launch (cuda_reduce.cu) and the tests that run
// it on host threads.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/host_device.h"

namespace cavs::ops::cuda::column_reduce {

inline constexpr int kColumns = 32;    // per block, one per lane of a warp
inline constexpr int kRowThreads = 8;  // per column: the block's warps
inline constexpr int kThreads = kColumns * kRowThreads;
inline constexpr int kPitch = kColumns + 1;
// The block's shared memory: the row threads' sums [kRowThreads][kPitch], later block_meet's
// (kThreads + 1 floats).
inline constexpr int kSharedFloats =
    kRowThreads * kPitch > kThreads + 1 ? kRowThreads* kPitch : kThreads + 1;

struct Args {
  const float* x;
  int64_t x_ld;
  const float* y;  // null: ColumnSum
  int64_t y_ld;
  int64_t m, w;
  int64_t rows_per_chunk;
  int chunks;  // row chunks (grid.y); above 1 they meet in the workspace
  float alpha;
  float* dst;
  float* partial = nullptr;      // [chunks][PaddedWidth(w)] where chunks > 1
  unsigned* arrivals = nullptr;  // one count per column block, zero before and after a launch
};

// The sums of `sums`'s kRowThreads rows for lane `lane`, in row order.
CAVS_HOST_DEVICE inline float AddRowThreads(const float* sums, int lane) {
  float total = 0.0f;
  for (int i = 0; i < kRowThreads; ++i) total += sums[i * kPitch + lane];
  return total;
}

// The workspace's floats per chunk: every column block's kColumns.
CAVS_HOST_DEVICE inline int64_t PaddedWidth(int64_t w) {
  return (w + kColumns - 1) / kColumns * kColumns;
}

// The row chunks (grid.y) of a column reduction of m x w on `sms` multiprocessors with a
// workspace of `workspace_floats` and `counts` counters: enough for about four blocks per
// multiprocessor, each at least 64 rows long, where every column block has a count and the
// chunks' sums fit in the workspace; else 1.
inline int64_t Chunks(int64_t m, int64_t w, int sms, int64_t workspace_floats, int counts) {
  constexpr int64_t kMinRowsPerChunk = 64;
  const int64_t column_blocks = (w + kColumns - 1) / kColumns;
  if (m <= 0 || w <= 0 || sms <= 0 || column_blocks > counts) return 1;
  const int64_t target = std::max<int64_t>(1, 4 * static_cast<int64_t>(sms) / column_blocks);
  const int64_t chunks = std::clamp<int64_t>((m + kMinRowsPerChunk - 1) / kMinRowsPerChunk, 1,
                                             std::min<int64_t>(target, 65535));
  return std::max<int64_t>(1, std::min(chunks, workspace_floats / PaddedWidth(w)));
}

}  // namespace cavs::ops::cuda::column_reduce
