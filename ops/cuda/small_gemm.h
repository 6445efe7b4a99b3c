// A GEMM for the engine's rounds, whose few rows leave cuBLAS's tiles on a few multiprocessors:
// C[m, n] = alpha * A[m, k] op(B) + beta * C (+ a bias row), row-major, op(B) = B [k, n] or B^T
// (B [n, k]).
//
// A block of kThreads threads owns a 16 x 32 tile of C (RoundTile), so the work spreads over the
// chip (docs/gpu_performance.md, "Next steps for inference"): 64 rows x 750 columns is 96
// blocks, where cuBLAS's 64 x 128 tiles are 6.
//
// A first version (128 threads of 2 x 2 outputs, each thread's copies waiting on its loads)
// measured 13.9 us for 64 x 750 x 300 on an H100, slower than cuBLAS's 9.3 (bench/RESULTS.md);
// this one is shaped by what that showed:
//
// - Copies are asynchronous (cp.async on the GPU): every thread issues all of its copies of a
//   chunk before any waits, so the chunk costs about one memory latency, not one per copy.
// - Both operands sit in shared memory with the k index outermost (A^T [k][kRows], op(B)
//   [k][kCols]), so that a thread's rows of A and 4 columns of op(B) at one k are 16-byte
//   reads. Transposed sources (A always, B^T) are copied as 8 k x 4 lines per warp: each line's
//   8 floats are one 32-byte sector, and the pitches (the tile's side + 4 floats: 20, 36 and
//   68, which are 20 or 4 mod 32) put the warp's 32 writes in 32 banks.
// - The k range of a chunk is split over the block's 16 warps (kSlices): each warp's 32 threads
//   own the whole tile (4 x 4 outputs each) over 1/16 of the
//   inputs, so the chains are short and 16 warps hide each other's latency. The slices' sums
//   are then added in slice order through shared memory; results do not depend on timing.
//
// The phases are plain functions of the thread and block indices, shared by the CUDA kernel
// (small_gemm_tile.cuh: the precompiled kernel in cuda_small_gemm.cu, with a barrier between
// phases, the copies asynchronous) and a
// host emulation that runs every thread of a phase before the next (tests/ops/
// small_gemm_test.cc), so the indexing is checked without a GPU. No CUDA types here: the
// header is host C++ as well.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace cavs::ops::cuda::small_gemm {

inline constexpr int kSlices = 16;             // warps, each over 1/kSlices of a chunk's k
inline constexpr int kThreads = 32 * kSlices;  // 512
inline constexpr int kMaxChunk = 512;          // inputs (k) per shared-memory fill
inline constexpr int64_t kMaxRows = 512;       // above this, cuBLAS's tiles fill the chip

// A block's tile of C, Rows x Cols. Each warp owns all of it: its 32 threads in a grid of
// 32 / kLaneCols x kLaneCols, each with kThreadRows x 4 outputs, its rows in groups of 4
// consecutive rows kGroupStride apart, so that a thread's rows of A at one k are 16-byte reads
// and its parked sums 16-byte writes. Those writes take no more wavefronts than their bytes need
// (SmallGemmTest.FewBankConflictsInSharedMemory): a quarter warp writes 32 floats of one row.
template <int Rows, int Cols>
struct Tile {
  static constexpr int kRows = Rows;
  static constexpr int kCols = Cols;
  static constexpr int kOutputs = Rows * Cols;
  static constexpr int kLaneCols = Cols / 4;                 // threads across the tile
  static constexpr int kThreadRows = Rows * kLaneCols / 32;  // rows per thread
  static constexpr int kPerThread = kThreadRows * 4;         // outputs per thread
  static constexpr int kGroupStride = 4 * (32 / kLaneCols);  // rows between a thread's groups
  static constexpr int kPitchA = Rows + 4;                   // shared A^T: [chunk][kPitchA]
  static constexpr int kPitchB = Cols + 4;                   // shared op(B): [chunk][kPitchB]
  static constexpr int kPitchC = Cols + 4;                   // a partial tile: [Rows][kPitchC]
  static_assert(Cols % 4 == 0 && 32 % kLaneCols == 0, "whole 4-column groups in a warp");
  static_assert(kThreadRows % 4 == 0 && kThreadRows * 32 == Rows * kLaneCols,
                "each thread's rows are whole groups of 4");
  static_assert(kGroupStride * (kThreadRows / 4) == Rows, "the groups cover the tile's rows");
  static_assert(kOutputs % kThreads == 0, "whole outputs per thread when the slices are added");
  static_assert(kPitchA % 4 == 0 && kPitchB % 4 == 0 && kPitchC % 4 == 0,
                "16-byte reads and writes of 4 rows or columns");
};
using RoundTile = Tile<16, 32>;  // the rounds of a few dozen rows

// The blocks of a GEMM with m rows and n columns.
template <typename T>
CAVS_HOST_DEVICE inline int64_t Blocks(int64_t m, int64_t n) {
  return ((m + T::kRows - 1) / T::kRows) * ((n + T::kCols - 1) / T::kCols);
}

// Whether the kernel is faster than cuBLAS for this GEMM on a device with `sms`
// multiprocessors, as measured (bench/RESULTS.md, H100, device time behind a delay
// kernel): at most one block per multiprocessor, one chunk of k, B not transposed. The Tree-LSTM
// forward round at 64 rows (96 blocks) took 7.4 us against cuBLAS's 9.3 to 9.7, with 4.4 us of
// host time against 16; with two blocks per multiprocessor (the LSTM's 64 x 2048 x 512, 256
// blocks) 16.7 against 12.3, at 512 rows 29 against 13, and transposed with two chunks (64 x
// 300 x 750) 16.8 against 10.8. RoundTile.
CAVS_HOST_DEVICE inline bool Faster(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                    int sms) {
  return !trans_a && !trans_b && m > 0 && n > 0 && k > 0 && k <= kMaxChunk &&
         Blocks<RoundTile>(m, n) <= sms;
}

// The floats of shared memory a chunk of `chunk` inputs takes (the operands, then the slices'
// partial tiles in the same memory).
template <typename T>
CAVS_HOST_DEVICE inline int SharedFloats(int chunk) {
  const int operands = chunk * (T::kPitchA + T::kPitchB);
  const int partials = kSlices * T::kRows * T::kPitchC;
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
  int chunk;                    // inputs per fill: min(k, kMaxChunk)
  const float* bias = nullptr;  // one row of n added to every row of C, or none
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
template <typename T, typename CopyFn>
CAVS_HOST_DEVICE inline void LoadChunk(const Args& g, int bx, int by, int tid, int k0, int len,
                                       float* as, float* bs, CopyFn copy) {
  const int row0 = by * T::kRows, col0 = bx * T::kCols;
  CopyTransposed(g.a + row0 * g.lda, g.lda, g.m - row0, T::kRows, k0, len, as, T::kPitchA, tid,
                 copy);
  if (g.trans_b) {  // B [n, k]: op(B)[kk, cc] = B[cc, kk]
    CopyTransposed(g.b + col0 * g.ldb, g.ldb, g.n - col0, T::kCols, k0, len, bs, T::kPitchB, tid,
                   copy);
  } else {  // B [k, n]: a warp copies consecutive columns of one or more inputs
    for (int i = tid; i < len * T::kCols; i += kThreads) {
      const int kk = i / T::kCols, cc = i % T::kCols, col = col0 + cc;
      copy(bs + kk * T::kPitchB + cc, col < g.n ? g.b + (k0 + kk) * g.ldb + col : nullptr);
    }
  }
}

// Thread `tid`'s slice (its warp) and its kThreadRows x 4 outputs: acc[4 * i + j] is row
// Row(tid, i) and column Col0 + j of the tile.
CAVS_HOST_DEVICE inline int Slice(int tid) { return tid / 32; }
template <typename T>
CAVS_HOST_DEVICE inline int Row(int tid, int i) {
  return 4 * ((tid % 32) / T::kLaneCols) + (i / 4) * T::kGroupStride + i % 4;
}
template <typename T>
CAVS_HOST_DEVICE inline int Col0(int tid) {
  return 4 * (tid % T::kLaneCols);
}

// Four consecutive floats at p (16-byte aligned): one 16-byte read or write on the GPU.
CAVS_HOST_DEVICE inline void Read4(const float* p, float v[4]) {
#if defined(__CUDA_ARCH__)
  const float4 q = *reinterpret_cast<const float4*>(p);
  v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
#else
  for (int i = 0; i < 4; ++i) v[i] = p[i];
#endif
}
// A shared-memory p on the GPU: st.shared.v4 said outright, as NVVM split the first of a
// thread's row writes into four.
CAVS_HOST_DEVICE inline void Write4(float* p, const float v[4]) {
#if defined(__CUDA_ARCH__)
  const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(to), "f"(v[0]), "f"(v[1]),
               "f"(v[2]), "f"(v[3])
               : "memory");
#else
  for (int i = 0; i < 4; ++i) p[i] = v[i];
#endif
}

// Phase 2: thread `tid` adds its slice's share of the chunk's products to its outputs, in k
// order.
template <typename T>
CAVS_HOST_DEVICE inline void AccumulateChunk(int tid, int len, const float* as, const float* bs,
                                             float acc[T::kPerThread]) {
  const int s = Slice(tid), c0 = Col0<T>(tid);
  const int begin = s * len / kSlices, end = (s + 1) * len / kSlices;
  for (int kk = begin; kk < end; ++kk) {
    float a[T::kThreadRows], b[4];
    for (int i = 0; i < T::kThreadRows; i += 4) Read4(as + kk * T::kPitchA + Row<T>(tid, i), a + i);
    Read4(bs + kk * T::kPitchB + c0, b);
    for (int i = 0; i < T::kThreadRows; ++i) {
      for (int j = 0; j < 4; ++j) acc[4 * i + j] += a[i] * b[j];
    }
  }
}

// Phase 3 (after the last chunk's reads): thread `tid` parks its slice's sums in the partial
// tiles, partials[slice][row][col] with rows kPitchC apart, a 16-byte write per row.
template <typename T>
CAVS_HOST_DEVICE inline void Park(int tid, const float acc[T::kPerThread], float* partials) {
  float* tile = partials + Slice(tid) * T::kRows * T::kPitchC;
  const int c0 = Col0<T>(tid);
  for (int i = 0; i < T::kThreadRows; ++i)
    Write4(tile + Row<T>(tid, i) * T::kPitchC + c0, acc + 4 * i);
}

// Where output o of the tile (o = tid, tid + kThreads, ... in the phases below) lies: row
// OutputRow, column OutputCol. Each warp's 32 outputs are 32 consecutive columns of one row.
template <typename T>
CAVS_HOST_DEVICE inline int OutputRow(int o) {
  static_assert(T::kCols == 32, "a warp's outputs in one row");
  return o / 32;
}
template <typename T>
CAVS_HOST_DEVICE inline int OutputCol(int o) {
  return o % T::kCols;
}

// Output o of the tile summed over the parked slices, in slice order.
template <typename T>
CAVS_HOST_DEVICE inline float SumSlices(const float* partials, int o) {
  const int r = OutputRow<T>(o), cc = OutputCol<T>(o);
  float sum = 0.0f;
  for (int s = 0; s < kSlices; ++s) sum += partials[(s * T::kRows + r) * T::kPitchC + cc];
  return sum;
}

// C's element (row, col) from its sum: alpha * sum + beta * C + bias[col] (C not read when beta
// is 0, so garbage there does not leak through; no bias where g.bias is null).
CAVS_HOST_DEVICE inline void Output(const Args& g, int row, int col, float sum) {
  float* out = g.c + row * g.ldc + col;
  float v = g.beta == 0.0f ? g.alpha * sum : g.alpha * sum + g.beta * *out;
  if (g.bias != nullptr) v += g.bias[col];
  *out = v;
}

// Phase 4: thread `tid` adds outputs tid, tid + kThreads, ... of the tile over the slices and
// writes them inside C (Output). Consecutive threads write consecutive columns, 32 of a row.
template <typename T>
CAVS_HOST_DEVICE inline void Store(const Args& g, int bx, int by, int tid, const float* partials) {
  for (int i = 0; i < T::kOutputs / kThreads; ++i) {
    const int o = tid + i * kThreads;
    const int row = by * T::kRows + OutputRow<T>(o), col = bx * T::kCols + OutputCol<T>(o);
    if (row >= g.m || col >= g.n) continue;
    Output(g, row, col, SumSlices<T>(partials, o));
  }
}

}  // namespace cavs::ops::cuda::small_gemm
