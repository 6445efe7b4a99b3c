// A GEMM for the engine's rounds, whose few rows leave cuBLAS's tiles on a few multiprocessors:
// C[m, n] = alpha * A[m, k] op(B) + beta * C (+ a bias row), row-major, op(B) = B [k, n] or B^T
// (B [n, k]).
//
// A block of kThreads threads owns a tile of C, so the work spreads over the chip
// (docs/gpu_performance.md, "Next steps for inference"). There are two tiles (Tile<Rows, Cols>):
// - RoundTile, 16 x 32, the default: 64 rows x 750 columns is 96 blocks, where cuBLAS's
//   64 x 128 tiles are 6.
// - TallTile, 64 x 16, for GEMMs whose 16 x 32 tiles are more than one wave or few (TallSplits,
//   with k split over the multiprocessors the tiles leave; off unless CudaKernels::SetTallTile
//   or CAVS_SMALL_GEMM_TALL=1, as it is not yet measured on a GPU). The LSTM's recurrent 64 x 2048
//   x 512 is 128 of them, one wave on an H100's 132 multiprocessors, against 256 RoundTiles
//   (docs/gpu_performance.md, "Next steps for inference", item 3).
//
// Run 7 measured the first version (128 threads of 2 x 2 outputs, each thread's copies waiting
// on its loads) at 13.9 us for 64 x 750 x 300, slower than cuBLAS's 9.3; this second version is
// shaped by what that showed:
//
// - Copies are asynchronous (cp.async on the GPU): every thread issues all of its copies of a
//   chunk before any waits, so the chunk costs about one memory latency, not one per copy.
// - Both operands sit in shared memory with the k index outermost (A^T [k][kRows], op(B)
//   [k][kCols]), so that a thread's rows of A and 4 columns of op(B) at one k are 16-byte
//   reads. Transposed sources (A always, B^T) are copied as 8 k x 4 lines per warp: each line's
//   8 floats are one 32-byte sector, and the pitches (the tile's side + 4 floats: 20, 36 and
//   68, which are 20 or 4 mod 32) put the warp's 32 writes in 32 banks.
// - The k range of a chunk is split over the block's 16 warps (kSlices): each warp's 32 threads
//   own the whole tile (4 x 4 outputs each in RoundTile, 8 x 4 in TallTile) over 1/16 of the
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

namespace cavs::ops::small_gemm {

inline constexpr int kSlices = 16;             // warps, each over 1/kSlices of a chunk's k
inline constexpr int kThreads = 32 * kSlices;  // 512
inline constexpr int kMaxChunk = 512;          // inputs (k) per shared-memory fill
inline constexpr int64_t kMaxRows = 512;       // above this, cuBLAS's tiles fill the chip

// A block's tile of C, Rows x Cols. Each warp owns all of it: its 32 threads in a grid of
// 32 / kLaneCols x kLaneCols, each with kThreadRows x 4 outputs, its rows in groups of 4
// consecutive rows kGroupStride apart (one group in RoundTile, two in TallTile), so that a
// thread's rows of A at one k are 16-byte reads and its parked sums 16-byte writes. Those
// writes take no more wavefronts than their bytes need (SmallGemmTest.
// FewBankConflictsInSharedMemory): a quarter warp of RoundTile writes 32 floats of one row;
// one of TallTile writes 16 floats of each of two rows 4 apart, which its partial tiles' pitch
// of 20 floats puts 16 banks apart (at 16 floats they would share banks).
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
using RoundTile = Tile<16, 32>;  // the default: the rounds of a few dozen rows
using TallTile = Tile<64, 16>;   // GEMMs whose RoundTiles are more than one wave
enum class TileShape { kRound, kTall };

// The blocks of a GEMM with m rows and n columns.
template <typename T>
CAVS_HOST_DEVICE inline int64_t Blocks(int64_t m, int64_t n) {
  return ((m + T::kRows - 1) / T::kRows) * ((n + T::kCols - 1) / T::kCols);
}

// Whether the kernel is faster than cuBLAS for this GEMM on a device with `sms`
// multiprocessors, by run 7's measurements (bench/RESULTS.md, H100, device time behind a delay
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

// Where TallTile runs when it is on, and in how many splits of k (0 where it does not): A not
// transposed, RoundTile not Faster, TallTile's blocks in one wave, k split over as many of the
// multiprocessors as the tiles leave (each split at least kMinSplitK inputs) and each split one
// chunk. A split of k parks its tile's sums in a workspace; the tile's last split to arrive adds
// them in split order into C (RunSplitTile), so results do not depend on timing. On an H100:
// the LSTM's recurrent 64 x 2048 x 512 (128 tiles, 1 split, against 256 RoundTiles), its
// backward to h, 64 x 512 x 2048 with B transposed (32 tiles x 4 splits), the Tree-LSTM's
// forward rounds of 81 to 128 rows (94 tiles) and its backward to the children, 64 x 300 x 750
// transposed (19 tiles x 6 splits). A prediction from the floor, not a measurement
// (docs/gpu_performance.md).
inline constexpr int kMinSplitK = 128;
CAVS_HOST_DEVICE inline int TallSplits(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                       int sms) {
  if (trans_a || m <= 0 || m > kMaxRows || n <= 0 || k <= 0 || sms <= 0 ||
      Faster(trans_a, trans_b, m, n, k, sms)) {
    return 0;
  }
  const int64_t tiles = Blocks<TallTile>(m, n);
  if (tiles > sms) return 0;
  const int64_t by_k = (k + kMinSplitK - 1) / kMinSplitK, by_sms = sms / tiles;
  const int64_t splits = by_k < by_sms ? by_k : by_sms;
  return (k + splits - 1) / splits <= kMaxChunk ? static_cast<int>(splits) : 0;
}

// The floats of shared memory a chunk of `chunk` inputs takes (the operands, then the slices'
// partial tiles in the same memory).
template <typename T>
CAVS_HOST_DEVICE inline int SharedFloats(int chunk) {
  const int operands = chunk * (T::kPitchA + T::kPitchB);
  const int partials = kSlices * T::kRows * T::kPitchC;
  return operands > partials ? operands : partials;
}
CAVS_HOST_DEVICE inline int SharedFloats(TileShape shape, int chunk) {
  return shape == TileShape::kTall ? SharedFloats<TallTile>(chunk) : SharedFloats<RoundTile>(chunk);
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
  int chunk;  // inputs per fill: min(k, kMaxChunk), or min(split_k, kMaxChunk) with splits
  const float* bias = nullptr;  // one row of n added to every row of C, or none
  // Splits of k (RunSplitTile; 0 or 1: none): split z takes inputs z * split_k onwards. Its
  // tile's sums go to partial[(tile * splits + z) * kOutputs ...] (tiles numbered along the rows
  // of tiles), and arrivals[tile], zero before and after a launch, counts the tile's splits done.
  int splits = 0, split_k = 0;
  float* partial = nullptr;
  unsigned* arrivals = nullptr;
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
// OutputRow, column OutputCol. Each warp's 32 outputs are 32 consecutive columns of one row in
// RoundTile; in TallTile 16 columns of row R and the same of row R + 4, whose parked sums
// (pitch 20) are 16 banks apart, so the warp's reads of them take one wavefront (consecutive
// rows would share 4 banks).
template <typename T>
CAVS_HOST_DEVICE inline int OutputRow(int o) {
  if constexpr (T::kCols == 32) {
    return o / 32;
  } else {
    static_assert(T::kCols == 16 && T::kRows % 8 == 0, "rows paired 4 apart");
    const int q = o / 32;  // the pair: rows 8 * (q / 4) + q % 4 and 4 below it
    return 8 * (q / 4) + q % 4 + 4 * (o % 32 / 16);
  }
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
// writes them inside C (Output). Consecutive threads write consecutive columns, 16 or 32 of a
// row.
template <typename T>
CAVS_HOST_DEVICE inline void Store(const Args& g, int bx, int by, int tid, const float* partials) {
  for (int i = 0; i < T::kOutputs / kThreads; ++i) {
    const int o = tid + i * kThreads;
    const int row = by * T::kRows + OutputRow<T>(o), col = bx * T::kCols + OutputCol<T>(o);
    if (row >= g.m || col >= g.n) continue;
    Output(g, row, col, SumSlices<T>(partials, o));
  }
}

// A float of a workspace where blocks meet (split GEMMs, column sums), through L2 only on the GPU
// (other blocks write and read it within one launch, and L1 is not coherent between
// multiprocessors).
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

// The tile's index among the grid's, for the split workspace.
template <typename T>
CAVS_HOST_DEVICE inline int TileIndex(const Args& g, int bx, int by) {
  return by * ((g.n + T::kCols - 1) / T::kCols) + bx;
}

// Phase 4 of split z of a tile (g.splits > 1): thread `tid` adds its outputs over the slices
// into the split's partial tile in the workspace, every output of the tile (those past C's edges
// are zero).
template <typename T>
CAVS_HOST_DEVICE inline void StoreSplit(const Args& g, int tile, int z, int tid,
                                        const float* partials) {
  float* out = g.partial + (static_cast<int64_t>(tile) * g.splits + z) * T::kOutputs;
  for (int i = 0; i < T::kOutputs / kThreads; ++i) {
    const int o = tid + i * kThreads;
    StoreL2(out + o, SumSlices<T>(partials, o));
  }
}

// Phase 5, in the tile's last split to arrive: thread `tid` adds its outputs over the splits'
// partial tiles, in split order, and writes them inside C as Store does.
template <typename T>
CAVS_HOST_DEVICE inline void StoreSplits(const Args& g, int bx, int by, int tid) {
  const float* in =
      g.partial + static_cast<int64_t>(TileIndex<T>(g, bx, by)) * g.splits * T::kOutputs;
  for (int i = 0; i < T::kOutputs / kThreads; ++i) {
    const int o = tid + i * kThreads;
    const int row = by * T::kRows + OutputRow<T>(o), col = bx * T::kCols + OutputCol<T>(o);
    if (row >= g.m || col >= g.n) continue;
    float sum = 0.0f;
    for (int z = 0; z < g.splits; ++z) sum += LoadL2(in + z * T::kOutputs + o);
    Output(g, row, col, sum);
  }
}

}  // namespace cavs::ops::small_gemm
