// A GEMM for the engine's rounds, whose few rows leave cuBLAS's tiles on a few multiprocessors:
// C[m, n] = alpha * A[m, k] op(B) + beta * C, row-major, op(B) = B [k, n] or B^T (B [n, k]).
//
// A block of kThreads threads owns a kRows x kCols tile of C (16 x 32: 64 rows x 750 columns
// is 96 blocks; cuBLAS's 64 x 128 tiles are 6), so the arithmetic spreads over the chip
// (docs/gpu_performance.md, "Next steps for inference"). For each chunk of up to kMaxChunk of
// the k inputs, the block copies its rows of A and its columns of op(B) into shared memory,
// once (no per-slice wait), then every thread adds its 2 x 2 outputs' products; sums run in k
// order within a chunk, so results do not depend on timing.
//
// The three phases are plain functions of the thread and block indices, shared by the CUDA
// kernel (ops/cuda/cuda_small_gemm.cu, with a barrier between phases) and a host emulation
// that runs every thread of a phase before the next (tests/ops/small_gemm_test.cc), so the
// indexing is checked without a GPU. No CUDA types here: the header is host C++ as well.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace cavs::ops::small_gemm {

inline constexpr int kRows = 16;           // rows of C per block
inline constexpr int kCols = 32;           // columns of C per block
inline constexpr int kThreads = 128;       // each thread 2 x 2 outputs
inline constexpr int kMaxChunk = 512;      // inputs (k) per shared-memory fill
inline constexpr int kPitchA = kRows;      // shared A: [chunk][kRows]
inline constexpr int kPitchB = kCols + 2;  // shared op(B): [chunk][kCols + 2]
inline constexpr int64_t kMaxRows = 512;   // above this, cuBLAS's tiles fill the chip
static_assert(kThreads * 4 == kRows * kCols, "2 x 2 outputs per thread");

// The floats of shared memory a chunk of `chunk` inputs takes.
CAVS_HOST_DEVICE inline int SharedFloats(int chunk) { return chunk * (kPitchA + kPitchB); }

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

// Phase 1 of a chunk (inputs k0 .. k0 + len): thread `tid` of block (bx, by) copies its share
// of the block's rows of A and columns of op(B) into `as` and `bs`, zeros past the matrices'
// edges. Global reads run along each matrix's rows (coalesced for B; A's few rows are read
// across, so that the shared writes are consecutive).
CAVS_HOST_DEVICE inline void LoadChunk(const Args& g, int bx, int by, int tid, int k0, int len,
                                       float* as, float* bs) {
  const int row0 = by * kRows, col0 = bx * kCols;
  for (int i = tid; i < kRows * len; i += kThreads) {
    const int r = i % kRows, kk = i / kRows, row = row0 + r;
    as[kk * kPitchA + r] = row < g.m ? g.a[row * g.lda + k0 + kk] : 0.0f;
  }
  if (!g.trans_b) {  // B [k, n]
    for (int i = tid; i < len * kCols; i += kThreads) {
      const int kk = i / kCols, cc = i % kCols, col = col0 + cc;
      bs[kk * kPitchB + cc] = col < g.n ? g.b[(k0 + kk) * g.ldb + col] : 0.0f;
    }
  } else {  // B [n, k]: op(B)[kk, cc] = B[cc, kk]
    for (int i = tid; i < len * kCols; i += kThreads) {
      const int cc = i / len, kk = i % len, col = col0 + cc;
      bs[kk * kPitchB + cc] = col < g.n ? g.b[col * g.ldb + k0 + kk] : 0.0f;
    }
  }
}

// Phase 2: thread `tid` adds the chunk's products to its outputs: rows 2 * (tid / 16) + {0, 1},
// columns 2 * (tid % 16) + {0, 1} of the tile; acc = {r0c0, r0c1, r1c0, r1c1}.
CAVS_HOST_DEVICE inline void AccumulateChunk(int tid, int len, const float* as, const float* bs,
                                             float acc[4]) {
  const int r = 2 * (tid / 16), cc = 2 * (tid % 16);
  for (int kk = 0; kk < len; ++kk) {
    const float a0 = as[kk * kPitchA + r], a1 = as[kk * kPitchA + r + 1];
    const float b0 = bs[kk * kPitchB + cc], b1 = bs[kk * kPitchB + cc + 1];
    acc[0] += a0 * b0;
    acc[1] += a0 * b1;
    acc[2] += a1 * b0;
    acc[3] += a1 * b1;
  }
}

// Phase 3: thread `tid` writes its outputs inside C: alpha * acc + beta * C (C not read when
// beta is 0, so garbage there does not leak through).
CAVS_HOST_DEVICE inline void Store(const Args& g, int bx, int by, int tid, const float acc[4]) {
  const int row = by * kRows + 2 * (tid / 16), col = bx * kCols + 2 * (tid % 16);
  for (int i = 0; i < 4; ++i) {
    const int r = row + i / 2, c = col + i % 2;
    if (r >= g.m || c >= g.n) continue;
    float* out = g.c + r * g.ldc + c;
    *out = g.beta == 0.0f ? g.alpha * acc[i] : g.alpha * acc[i] + g.beta * *out;
  }
}

}  // namespace cavs::ops::small_gemm
