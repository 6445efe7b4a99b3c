// A GEMM for the engine's rounds, whose few rows leave cuBLAS's tiles on a few multiprocessors:
// C[m, n] = alpha * A[m, k] op(B) + beta * C, row-major, op(B) = B [k, n] or B^T (B [n, k]).
//
// A block of kThreads threads owns a kRows x kCols tile of C (16 x 32: 64 rows x 750 columns
// is 96 blocks; cuBLAS's 64 x 128 tiles are 6), so the work spreads over the chip
// (docs/gpu_performance.md, "Next steps for inference"). Run 7 measured the first version
// (128 threads of 2 x 2 outputs, each thread's copies waiting on its loads) at 13.9 us for
// 64 x 750 x 300, slower than cuBLAS's 9.3; this second version is shaped by what that showed:
//
// - Copies are asynchronous (cp.async on the GPU): every thread issues all of its copies of a
//   chunk before any waits, so the chunk costs about one memory latency, not one per copy.
// - Both operands sit in shared memory with the k index outermost (A^T [k][kRows], op(B)
//   [k][kCols]), so that a thread's 4 rows of A and 4 columns of op(B) at one k are two 16-byte
//   reads. Transposed sources (A always, B^T) are copied as 8 k x 4 lines per warp: each line's
//   8 floats are one 32-byte sector, and the pitches (20 and 36 floats) put the warp's 32
//   writes in 32 banks.
// - The k range of a chunk is split over the block's 16 warps (kSlices): each warp's 32 threads
//   own the whole tile at 4 x 4 outputs, over 1/16 of the inputs, so the chains are short and
//   16 warps hide each other's latency. The slices' sums are then added in slice order through
//   shared memory, one output per thread; results do not depend on timing.
//
// The phases are plain functions of the thread and block indices, shared by the CUDA kernels
// (small_gemm_tile.cuh: the precompiled kernel in cuda_small_gemm.cu and the generated round
// kernels of cuda_fused.h, with a barrier between phases, the copies asynchronous) and a
// host emulation that runs every thread of a phase before the next (tests/ops/
// small_gemm_test.cc), so the indexing is checked without a GPU. No CUDA types here: the
// header is host C++ as well.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace cavs::ops::small_gemm {

inline constexpr int kRows = 16;               // rows of C per block
inline constexpr int kCols = 32;               // columns of C per block
inline constexpr int kSlices = 16;             // warps, each over 1/kSlices of a chunk's k
inline constexpr int kThreads = 32 * kSlices;  // 512
inline constexpr int kTile = kRows * kCols;    // outputs per block: one per thread at the end
inline constexpr int kMaxChunk = 512;          // inputs (k) per shared-memory fill
inline constexpr int kPitchA = kRows + 4;      // shared A^T: [chunk][kPitchA]
inline constexpr int kPitchB = kCols + 4;      // shared op(B): [chunk][kPitchB]
inline constexpr int64_t kMaxRows = 512;       // above this, cuBLAS's tiles fill the chip
static_assert(kTile == 16 * 32, "a warp's 32 threads own the tile at 4 x 4 outputs each");
static_assert(kTile == kThreads, "one output per thread when the slices are added");
static_assert(kPitchA % 4 == 0 && kPitchB % 4 == 0, "16-byte reads of 4 rows or columns");

// The blocks of a GEMM with m rows and n columns.
CAVS_HOST_DEVICE inline int64_t Blocks(int64_t m, int64_t n) {
  return ((m + kRows - 1) / kRows) * ((n + kCols - 1) / kCols);
}

// Whether the kernel is faster than cuBLAS for this GEMM on a device with `sms`
// multiprocessors, by run 7's measurements (bench/RESULTS.md, H100, device time behind a delay
// kernel): at most one block per multiprocessor, one chunk of k, B not transposed. The Tree-LSTM
// forward round at 64 rows (96 blocks) took 7.4 us against cuBLAS's 9.3 to 9.7, with 4.4 us of
// host time against 16; with two blocks per multiprocessor (the LSTM's 64 x 2048 x 512, 256
// blocks) 16.7 against 12.3, at 512 rows 29 against 13, and transposed with two chunks (64 x
// 300 x 750) 16.8 against 10.8.
CAVS_HOST_DEVICE inline bool Faster(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                    int sms) {
  return !trans_a && !trans_b && m > 0 && n > 0 && k > 0 && k <= kMaxChunk && Blocks(m, n) <= sms;
}

// The floats of shared memory a chunk of `chunk` inputs takes (the operands, then the slices'
// partial tiles in the same memory).
CAVS_HOST_DEVICE inline int SharedFloats(int chunk) {
  const int operands = chunk * (kPitchA + kPitchB), partials = kSlices * kTile;
  return operands > partials ? operands : partials;
}

struct Args {
  int m, n, k;
  float alpha, beta;
  const float* a;
  int64_t lda;
  const float* b;
  int64_t ldb;
  float* c;
  int64_t ldc;
  bool trans_b;
  int chunk;  // inputs per fill: min(k, kMaxChunk)
};

// Copy(dst, src) copies one float into shared memory (asynchronously on the GPU); src null
// means zero (past the matrix's edge).
//
// Copies `lines` lines of a row-major source (line l at src + l * ld, valid while l <
// valid_lines), inputs k0 .. k0 + len, into dst[kk * pitch + l]: the transposing copy, 8
// inputs x 4 lines per warp-sized group of 32 indices. Thread `tid` takes every kThreads-th
// index.
template <typename CopyFn>
CAVS_HOST_DEVICE inline void CopyTransposed(const float* src, int64_t ld, int valid_lines,
                                            int lines, int k0, int len, float* dst, int pitch,
                                            int tid, CopyFn copy) {
  const int line_groups = lines / 4, k_groups = (len + 7) / 8;
  for (int i = tid; i < 32 * line_groups * k_groups; i += kThreads) {
    const int lane = i % 32, group = i / 32;
    const int l = (group % line_groups) * 4 + lane / 8, kk = (group / line_groups) * 8 + lane % 8;
    if (kk >= len) continue;
    copy(dst + kk * pitch + l, l < valid_lines ? src + l * ld + k0 + kk : nullptr);
  }
}

// Phase 1 of a chunk (inputs k0 .. k0 + len): thread `tid` of block (bx, by) copies its share
// of the block's rows of A (as A^T) and columns of op(B) into `as` and `bs`, zeros past the
// matrices' edges.
template <typename CopyFn>
CAVS_HOST_DEVICE inline void LoadChunk(const Args& g, int bx, int by, int tid, int k0, int len,
                                       float* as, float* bs, CopyFn copy) {
  const int row0 = by * kRows, col0 = bx * kCols;
  CopyTransposed(g.a + row0 * g.lda, g.lda, g.m - row0, kRows, k0, len, as, kPitchA, tid, copy);
  if (g.trans_b) {  // B [n, k]: op(B)[kk, cc] = B[cc, kk]
    CopyTransposed(g.b + col0 * g.ldb, g.ldb, g.n - col0, kCols, k0, len, bs, kPitchB, tid, copy);
  } else {  // B [k, n]: a warp copies one input's 32 columns, 128 consecutive bytes
    for (int i = tid; i < len * kCols; i += kThreads) {
      const int kk = i / kCols, cc = i % kCols, col = col0 + cc;
      copy(bs + kk * kPitchB + cc, col < g.n ? g.b + (k0 + kk) * g.ldb + col : nullptr);
    }
  }
}

// Thread `tid`'s slice (its warp) and its 4 x 4 outputs: rows 4 * (lane / 8) + {0..3},
// columns 4 * (lane % 8) + {0..3} of the tile.
CAVS_HOST_DEVICE inline int Slice(int tid) { return tid / 32; }
CAVS_HOST_DEVICE inline int Row0(int tid) { return 4 * ((tid % 32) / 8); }
CAVS_HOST_DEVICE inline int Col0(int tid) { return 4 * (tid % 8); }

// Four consecutive floats at p (16-byte aligned): one 16-byte read on the GPU.
CAVS_HOST_DEVICE inline void Read4(const float* p, float v[4]) {
#if defined(__CUDA_ARCH__)
  const float4 q = *reinterpret_cast<const float4*>(p);
  v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
#else
  for (int i = 0; i < 4; ++i) v[i] = p[i];
#endif
}

// Phase 2: thread `tid` adds its slice's share of the chunk's products to its outputs, acc[4 *
// i + j] for row Row0 + i and column Col0 + j, in k order.
CAVS_HOST_DEVICE inline void AccumulateChunk(int tid, int len, const float* as, const float* bs,
                                             float acc[16]) {
  const int s = Slice(tid), r0 = Row0(tid), c0 = Col0(tid);
  const int begin = s * len / kSlices, end = (s + 1) * len / kSlices;
  for (int kk = begin; kk < end; ++kk) {
    float a[4], b[4];
    Read4(as + kk * kPitchA + r0, a);
    Read4(bs + kk * kPitchB + c0, b);
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 4; ++j) acc[4 * i + j] += a[i] * b[j];
    }
  }
}

// Phase 3 (after the last chunk's reads): thread `tid` parks its slice's sums in the partial
// tiles, partials[slice][row][col].
CAVS_HOST_DEVICE inline void Park(int tid, const float acc[16], float* partials) {
  float* tile = partials + Slice(tid) * kTile;
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) tile[(Row0(tid) + i) * kCols + Col0(tid) + j] = acc[4 * i + j];
  }
}

// Phase 4: thread `tid` adds output `tid` of the tile over the slices, in slice order, and
// writes it inside C: alpha * sum + beta * C (C not read when beta is 0, so garbage there does
// not leak through). Consecutive threads write consecutive columns.
CAVS_HOST_DEVICE inline void Store(const Args& g, int bx, int by, int tid, const float* partials) {
  const int row = by * kRows + tid / kCols, col = bx * kCols + tid % kCols;
  if (row >= g.m || col >= g.n) return;
  float sum = 0.0f;
  for (int s = 0; s < kSlices; ++s) sum += partials[s * kTile + tid];
  float* out = g.c + row * g.ldc + col;
  *out = g.beta == 0.0f ? g.alpha * sum : g.alpha * sum + g.beta * *out;
}

}  // namespace cavs::ops::small_gemm
