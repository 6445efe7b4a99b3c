// Packed-weight GEMM for the CPU: c: [m, n] = a op(b) + beta * c, with op(b): [k, n] packed
// once and reused by every call. A batch's rounds multiply a few to a few hundred rows by the
// same weight, round after round; OpenBLAS re-packs the whole weight on every call (and runs
// its small-matrix path below ~64^3 multiply-adds), which for those skinny products costs as
// much as the arithmetic. OpenBLAS exposes no packed-operand API (MKL's cblas_sgemm_pack is the
// model), so this file has the one kernel it lacks.
//
// Layout: op(b) in column panels of kPackedPanel (32) floats; panel j holds columns
// [32 j, 32 j + 32) as k rows of 32 floats, zeros past n. The micro-kernel keeps a 12 x 32 block
// of c in 24 AVX-512 registers and, per step of k, broadcasts 12 values of a against one panel
// row: 24 FMAs per 2 loads of b. Row blocks of a stay in L1 while the panels stream from L2.
// Measured on this project's 2-core machine (bench/RESULTS.md): within a Tree-LSTM training
// step, where the weight is cold and the rows fresh, the rounds' GEMMs ran at 260-305 GFLOP/s
// packed against 140-240 with OpenBLAS (m = 16 to 511); in isolation with everything hot
// (BM_RoundGemm) the gap is smaller: 245 vs 193 at m = 8, 301 vs 196 at 32, even at 128.
//
// Available on x86-64 CPUs with AVX-512F, or AVX2 and FMA (3 x 32 blocks of c in 12 registers),
// checked at run time; elsewhere PackedGemmBytes is 0 and callers use Gemm. Both kernels compute
// each element of c as the same chain of FMAs in k order, so a row's result never depends on
// the rows beside it (OpenBLAS's Haswell/Zen sgemm rounds a row by its place in the call:
// batch invariance, scheduler/executor_common.h). The AVX2 kernel is slower than OpenBLAS's
// Haswell sgemm but at the fewest rows (BM_RoundGemm at [m, 300] x [300, 750] on an AVX-512
// Xeon, SetPackedGemmAvx2: 155 against 115 GFLOP/s at m = 8, 145-197 against 177-211 at 32 to
// 512), so it is taken for batch invariance alone: PackedGemmFast() says whether to prefer the
// packed GEMM for speed.
// KernelOptions::cpu.packed_gemm = false (ops/kernel_options.h), or SetPackedGemmEnabled(false),
// turns it off (for comparisons).
#pragma once

#include <cstdint>

#include "absl/status/status.h"

namespace cavs::ops::cpu {

inline constexpr int64_t kPackedPanel = 32;

// Bytes of the packed form of a [k, n] operand; 0 where the packed GEMM is unavailable.
int64_t PackedGemmBytes(int64_t k, int64_t n);

// packed <- op(b), op(b): [k, n] (b stored [n, k] when trans_b, leading dimension ldb).
[[nodiscard]] absl::Status PackGemmB(bool trans_b, int64_t k, int64_t n, const float* b,
                                     int64_t ldb, float* packed);

// c: [m, n] = a: [m, k] (leading dimension lda) times the packed op(b), plus the row `bias`
// (n floats; nullptr: none), plus beta * c (beta == 0 overwrites c). The bias starts the
// accumulators, so it costs nothing.
[[nodiscard]] absl::Status GemmPackedB(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                                       const float* packed, const float* bias, float beta, float* c,
                                       int64_t ldc);

// Turns the packed GEMM on or off for the process (it starts on where the CPU has it).
void SetPackedGemmEnabled(bool enabled);

// Where the CPU has AVX-512F: whether the calls run the AVX2 + FMA kernel instead (off at
// start), so that one machine runs what CPUs without AVX-512 run (the tests, the benchmarks'
// comparison). Elsewhere it changes nothing. The packed layout is the same for both kernels.
void SetPackedGemmAvx2(bool avx2);

// Whether the packed GEMM is on and measured faster than OpenBLAS (the AVX-512 kernel, not
// chosen away by SetPackedGemmAvx2).
bool PackedGemmFast();

}  // namespace cavs::ops::cpu
