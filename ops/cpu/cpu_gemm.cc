#include "ops/cpu/cpu_gemm.h"

#include <cblas.h>

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/cpu/cpu_parallel.h"

namespace cavs::ops::cpu {
namespace {

// Below this many multiply-adds (~15 us on one core) a GEMM runs on the calling thread.
constexpr int64_t kGemmParallelMinMacs = int64_t{1} << 20;
// Blocks of C are multiples of this many rows or columns (a cache line of floats).
constexpr int64_t kGemmBlockAlign = 16;

absl::Status CheckGemmArgs(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                           const float* a, int64_t lda, const float* b, int64_t ldb, const float* c,
                           int64_t ldc) {
  if (m < 0 || n < 0 || k < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Gemm: negative size m=", m, " n=", n, " k=", k));
  }
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (m > kMax || n > kMax || k > kMax || lda > kMax || ldb > kMax || ldc > kMax) {
    return absl::InvalidArgumentError(
        absl::StrCat("Gemm: size beyond OpenBLAS' 32-bit range (m=", m, " n=", n, " k=", k, ")"));
  }
  if (m == 0 || n == 0) return absl::OkStatus();
  if (c == nullptr || ldc < n) {
    return absl::InvalidArgumentError(absl::StrCat("Gemm: c null or ldc=", ldc, " < n=", n));
  }
  if (k == 0) return absl::OkStatus();
  const int64_t a_cols = trans_a ? m : k;
  const int64_t b_cols = trans_b ? k : n;
  if (a == nullptr || lda < a_cols || b == nullptr || ldb < b_cols) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Gemm: a/b null or leading dimension too small (trans_a=", trans_a, " lda=", lda,
        " needs >= ", a_cols, ", trans_b=", trans_b, " ldb=", ldb, " needs >= ", b_cols, ")"));
  }
  return absl::OkStatus();
}

// c = beta * c, the whole product when k == 0 (BLAS semantics: beta == 0 overwrites).
void ScaleC(int64_t m, int64_t n, float beta, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    if (beta == 0.0f) {
      std::fill(row, row + n, 0.0f);
    } else {
      for (int64_t j = 0; j < n; ++j) row[j] *= beta;
    }
  }
}

void Sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}

}  // namespace

absl::Status Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                  const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                  int64_t ldc) {
  CAVS_RETURN_IF_ERROR(CheckGemmArgs(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc));
  if (m == 0 || n == 0) return absl::OkStatus();
  if (k == 0 || alpha == 0.0f) {
    ScaleC(m, n, beta, c, ldc);
    return absl::OkStatus();
  }
  const int threads = CpuThreads();
  const double macs = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const bool parallel = threads > 1 && std::max(m, n) >= kGemmBlockAlign * threads &&
                        macs >= static_cast<double>(kGemmParallelMinMacs);
  if (!parallel) {
    Sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return absl::OkStatus();
  }
  // One block of C per thread, along the longer side of C: each block is an independent
  // single-threaded sgemm that re-packs only the (shorter) shared operand.
  const bool split_rows = m >= n;
  const int64_t extent = split_rows ? m : n;
  int64_t block = (extent + threads - 1) / threads;
  block = (block + kGemmBlockAlign - 1) / kGemmBlockAlign * kGemmBlockAlign;
  RunTasks(NumChunks(extent, block), [&](int64_t t) {
    const int64_t begin = t * block;
    const int64_t size = std::min(extent, begin + block) - begin;
    if (split_rows) {
      // Rows [begin, begin + size) of op(a) and c.
      const float* a_part = trans_a ? a + begin : a + begin * lda;
      Sgemm(trans_a, trans_b, size, n, k, alpha, a_part, lda, b, ldb, beta, c + begin * ldc, ldc);
    } else {
      // Columns [begin, begin + size) of op(b) and c.
      const float* b_part = trans_b ? b + begin * ldb : b + begin;
      Sgemm(trans_a, trans_b, m, size, k, alpha, a, lda, b_part, ldb, beta, c + begin, ldc);
    }
  });
  return absl::OkStatus();
}

}  // namespace cavs::ops::cpu
