#include "ops/cpu/cpu_packed_gemm.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "ops/cpu/cpu_parallel.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CAVS_PACKED_GEMM_X86 1
#include <immintrin.h>
#endif

namespace cavs::ops::cpu {
namespace {

constexpr int kMaxRows = 12;  // rows of c per micro-kernel call, at most (AVX-512's)
// Below this many multiply-adds a packed GEMM runs on the calling thread.
constexpr int64_t kParallelMinMacs = int64_t{1} << 18;

enum class Isa { kNone, kAvx2Fma, kAvx512 };

// The CPU's, read once.
Isa CpuIsa() {
  static const Isa isa = [] {
#if defined(CAVS_PACKED_GEMM_X86)
    if (__builtin_cpu_supports("avx512f")) return Isa::kAvx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::kAvx2Fma;
#endif
    return Isa::kNone;
  }();
  return isa;
}

std::atomic<bool>& Enabled() {
  static std::atomic<bool> enabled = [] { return CpuIsa() != Isa::kNone; }();
  return enabled;
}

// The kernel the calls run: the CPU's best, or AVX2's where SetPackedGemmAvx2 asked for it and
// the CPU has both (resolved when set, so that a call reads one word).
std::atomic<Isa>& KernelIsaSlot() {
  static std::atomic<Isa> isa{CpuIsa()};
  return isa;
}

Isa KernelIsa() { return KernelIsaSlot().load(std::memory_order_relaxed); }

int64_t Panels(int64_t n) { return (n + kPackedPanel - 1) / kPackedPanel; }

#if defined(CAVS_PACKED_GEMM_X86)

// c rows [0, R) x panel columns [0, cols) (cols <= 32) = a rows times the panel, plus the
// panel's columns of `bias` (if any), plus beta * c.
template <int R>
__attribute__((target("avx512f"))) void MicroKernel(int64_t k, const float* a, int64_t lda,
                                                    const float* panel, const float* bias,
                                                    float beta, float* c, int64_t ldc,
                                                    int64_t cols) {
  const __mmask16 mlo = static_cast<__mmask16>(cols >= 16 ? 0xFFFF : (1u << cols) - 1);
  const __mmask16 mhi = static_cast<__mmask16>(cols >= 32   ? 0xFFFF
                                               : cols <= 16 ? 0
                                                            : (1u << (cols - 16)) - 1);
  const __m512 blo = bias != nullptr ? _mm512_maskz_loadu_ps(mlo, bias) : _mm512_setzero_ps();
  const __m512 bhi = bias != nullptr ? _mm512_maskz_loadu_ps(mhi, bias + 16) : _mm512_setzero_ps();
  __m512 lo[R], hi[R];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    lo[r] = blo;
    hi[r] = bhi;
  }
  for (int64_t p = 0; p < k; ++p) {
    const __m512 b0 = _mm512_loadu_ps(panel + p * kPackedPanel);
    const __m512 b1 = _mm512_loadu_ps(panel + p * kPackedPanel + 16);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_set1_ps(a[r * lda + p]);
      lo[r] = _mm512_fmadd_ps(x, b0, lo[r]);
      hi[r] = _mm512_fmadd_ps(x, b1, hi[r]);
    }
  }
  const __m512 vb = _mm512_set1_ps(beta);
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    float* row = c + r * ldc;
    if (beta != 0.0f) {
      lo[r] = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mlo, row), lo[r]);
      hi[r] = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mhi, row + 16), hi[r]);
    }
    _mm512_mask_storeu_ps(row, mlo, lo[r]);
    _mm512_mask_storeu_ps(row + 16, mhi, hi[r]);
  }
}

// The same with AVX2 and FMA: a panel row is 4 registers of 8, so 3 rows of c (12
// accumulators) fit the 16 registers. Each element of c is the same chain of FMAs in k order as
// in the AVX-512 kernel, so both give the same bits, whatever rows share a call.
template <int R>
__attribute__((target("avx2,fma"))) void MicroKernel2(int64_t k, const float* a, int64_t lda,
                                                      const float* panel, const float* bias,
                                                      float beta, float* c, int64_t ldc,
                                                      int64_t cols) {
  // Lane i of register q is column 8 q + i: on where that is below `cols`.
  __m256i mask[4];
  for (int q = 0; q < 4; ++q) {
    mask[q] = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(cols) - 8 * q),
                                 _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  __m256 acc[R][4];
  for (int q = 0; q < 4; ++q) {
    const __m256 b =
        bias != nullptr ? _mm256_maskload_ps(bias + 8 * q, mask[q]) : _mm256_setzero_ps();
    for (int r = 0; r < R; ++r) acc[r][q] = b;
  }
  for (int64_t p = 0; p < k; ++p) {
    const float* row = panel + p * kPackedPanel;
    const __m256 w0 = _mm256_loadu_ps(row), w1 = _mm256_loadu_ps(row + 8);
    const __m256 w2 = _mm256_loadu_ps(row + 16), w3 = _mm256_loadu_ps(row + 24);
    for (int r = 0; r < R; ++r) {
      const __m256 x = _mm256_set1_ps(a[r * lda + p]);
      acc[r][0] = _mm256_fmadd_ps(x, w0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(x, w1, acc[r][1]);
      acc[r][2] = _mm256_fmadd_ps(x, w2, acc[r][2]);
      acc[r][3] = _mm256_fmadd_ps(x, w3, acc[r][3]);
    }
  }
  const __m256 vb = _mm256_set1_ps(beta);
  for (int r = 0; r < R; ++r) {
    float* out = c + r * ldc;
    for (int q = 0; q < 4; ++q) {
      __m256 v = acc[r][q];
      if (beta != 0.0f) v = _mm256_fmadd_ps(vb, _mm256_maskload_ps(out + 8 * q, mask[q]), v);
      _mm256_maskstore_ps(out + 8 * q, mask[q], v);
    }
  }
}

using MicroKernelFn = void (*)(int64_t, const float*, int64_t, const float*, const float*, float,
                               float*, int64_t, int64_t);

// The ISA's rows per call, and its kernel for `rows` of them (1 <= rows <= RowsPerCall).
int RowsPerCall(Isa isa) { return isa == Isa::kAvx512 ? 12 : 3; }

MicroKernelFn KernelFor(Isa isa, int rows) {
  static constexpr MicroKernelFn kKernels[kMaxRows] = {
      MicroKernel<1>, MicroKernel<2>,  MicroKernel<3>,  MicroKernel<4>,
      MicroKernel<5>, MicroKernel<6>,  MicroKernel<7>,  MicroKernel<8>,
      MicroKernel<9>, MicroKernel<10>, MicroKernel<11>, MicroKernel<12>};
  static constexpr MicroKernelFn kKernels2[3] = {MicroKernel2<1>, MicroKernel2<2>, MicroKernel2<3>};
  return isa == Isa::kAvx512 ? kKernels[rows - 1] : kKernels2[rows - 1];
}

// Row blocks [rb0, rb1) x panels [p0, p1) of c.
// Row blocks [rb0, rb1) x panels [p0, p1) of c. The panels go in groups that fit in L2 with
// room to spare, each group streamed once per row block: a weight larger than L2 (hidden 256:
// U packed is 2.6 MB) is then read from L2, not from L3, for every 12 rows.
void Block(Isa isa, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* packed, const float* bias, float beta, float* c, int64_t ldc, int64_t rb0,
           int64_t rb1, int64_t p0, int64_t p1) {
  const int kRows = RowsPerCall(isa);
  constexpr int64_t kGroupBytes = 512 * 1024;
  const int64_t group =
      std::max<int64_t>(1, kGroupBytes / (k * kPackedPanel * static_cast<int64_t>(sizeof(float))));
  for (int64_t g0 = p0; g0 < p1; g0 += group) {
    const int64_t g1 = std::min(p1, g0 + group);
    for (int64_t rb = rb0; rb < rb1; ++rb) {
      const int64_t r0 = rb * kRows;
      const int rows = static_cast<int>(std::min<int64_t>(kRows, m - r0));
      const MicroKernelFn kernel = KernelFor(isa, rows);
      for (int64_t p = g0; p < g1; ++p) {
        const int64_t c0 = p * kPackedPanel;
        kernel(k, a + r0 * lda, lda, packed + p * k * kPackedPanel,
               bias != nullptr ? bias + c0 : nullptr, beta, c + r0 * ldc + c0, ldc,
               std::min(kPackedPanel, n - c0));
      }
    }
  }
}

#endif  // CAVS_PACKED_GEMM_X86

}  // namespace

void SetPackedGemmEnabled(bool enabled) { Enabled().store(enabled && CpuIsa() != Isa::kNone); }

void SetPackedGemmAvx2(bool avx2) {
  bool has_avx2 = false;
#if defined(CAVS_PACKED_GEMM_X86)
  has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  const Isa best = CpuIsa();
  KernelIsaSlot().store(avx2 && best == Isa::kAvx512 && has_avx2 ? Isa::kAvx2Fma : best);
}

bool PackedGemmFast() { return Enabled().load() && KernelIsa() == Isa::kAvx512; }

int64_t PackedGemmBytes(int64_t k, int64_t n) {
  if (!Enabled().load() || k <= 0 || n <= 0) return 0;
  return Panels(n) * kPackedPanel * k * static_cast<int64_t>(sizeof(float));
}

absl::Status PackGemmB(bool trans_b, int64_t k, int64_t n, const float* b, int64_t ldb,
                       float* packed) {
  if (k <= 0 || n <= 0 || b == nullptr || packed == nullptr || ldb < (trans_b ? k : n)) {
    return absl::InvalidArgumentError(
        absl::StrCat("PackGemmB: k=", k, " n=", n, " ldb=", ldb,
                     b == nullptr || packed == nullptr ? " (null)" : ""));
  }
  ParallelFor(Panels(n), k * kPackedPanel, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      float* dst = packed + p * k * kPackedPanel;
      const int64_t c0 = p * kPackedPanel;
      const int64_t cols = std::min(kPackedPanel, n - c0);
      if (cols < kPackedPanel) std::fill(dst, dst + k * kPackedPanel, 0.0f);
      if (trans_b) {  // column j of the panel is row c0 + j of b: transpose 16 x 32 tiles
        for (int64_t r0 = 0; r0 < k; r0 += 16) {
          const int64_t r1 = std::min(k, r0 + 16);
          for (int64_t j = 0; j < cols; ++j) {
            const float* src = b + (c0 + j) * ldb;
            for (int64_t r = r0; r < r1; ++r) dst[r * kPackedPanel + j] = src[r];
          }
        }
      } else {
        for (int64_t r = 0; r < k; ++r) {
          std::memcpy(dst + r * kPackedPanel, b + r * ldb + c0, cols * sizeof(float));
        }
      }
    }
  });
  return absl::OkStatus();
}

absl::Status GemmPackedB(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                         const float* packed, const float* bias, float beta, float* c,
                         int64_t ldc) {
  if (m < 0 || n <= 0 || k <= 0 || lda < k || ldc < n ||
      (m > 0 && (a == nullptr || c == nullptr || packed == nullptr))) {
    return absl::InvalidArgumentError(
        absl::StrCat("GemmPackedB: m=", m, " n=", n, " k=", k, " lda=", lda, " ldc=", ldc));
  }
  if (m == 0) return absl::OkStatus();
#if defined(CAVS_PACKED_GEMM_X86)
  const Isa isa = KernelIsa();
  if (isa == Isa::kNone) return absl::FailedPreconditionError("GemmPackedB: no AVX2/FMA");
  const int64_t row_blocks = (m + RowsPerCall(isa) - 1) / RowsPerCall(isa);
  const int64_t panels = Panels(n);
  const int threads = CpuThreads();
  if (threads == 1 || m * n * k < kParallelMinMacs) {
    Block(isa, m, n, k, a, lda, packed, bias, beta, c, ldc, 0, row_blocks, 0, panels);
    return absl::OkStatus();
  }
  // Enough row blocks: split the rows (each task streams every panel); else split the panels
  // (each task reads all of a's few rows).
  if (row_blocks >= 2 * threads) {
    const int64_t tasks = std::min<int64_t>(row_blocks, 4 * threads);
    RunTasks(tasks, [&](int64_t t) {
      Block(isa, m, n, k, a, lda, packed, bias, beta, c, ldc, row_blocks * t / tasks,
            row_blocks * (t + 1) / tasks, 0, panels);
    });
  } else {
    const int64_t tasks = std::min<int64_t>(panels, 2 * threads);
    RunTasks(tasks, [&](int64_t t) {
      Block(isa, m, n, k, a, lda, packed, bias, beta, c, ldc, 0, row_blocks, panels * t / tasks,
            panels * (t + 1) / tasks);
    });
  }
  return absl::OkStatus();
#else
  (void)lda, (void)bias, (void)beta;
  return absl::FailedPreconditionError("GemmPackedB: not built for this CPU");
#endif
}

}  // namespace cavs::ops::cpu
