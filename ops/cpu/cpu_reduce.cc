#include "ops/cpu/cpu_reduce.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/cpu/cpu_math.h"
#include "ops/cpu/cpu_parallel.h"

namespace cavs::ops::cpu {
namespace {

// The reduction runs over a fixed grid of tiles, kRowChunk rows by kColumnBlock columns; each
// tile's column sums are then added in row-chunk order. The grid does not depend on the thread
// count, so neither do the results.
constexpr int64_t kRowChunk = 1024;
constexpr int64_t kColumnBlock = 64;

absl::Status CheckArgs(const char* op, const float* x, int64_t x_ld, const float* y, int64_t y_ld,
                       bool has_y, int64_t m, int64_t w, const float* dst) {
  if (m < 0 || w < 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": negative size m=", m, " w=", w));
  }
  if (m == 0 || w == 0) return absl::OkStatus();
  if (x == nullptr || x_ld < 0 || dst == nullptr || (has_y && (y == nullptr || y_ld < 0))) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": null operand or negative ld"));
  }
  return absl::OkStatus();
}

}  // namespace

namespace internal {

// out: [c1 - c0] = Σ_{r in [r0, r1)} x[r, c] (* y[r, c] when y is not null).
CAVS_CPU_VECTOR_CLONES
void ColumnTile(const float* x, int64_t x_ld, const float* y, int64_t y_ld, int64_t r0, int64_t r1,
                int64_t c0, int64_t c1, float* out) {
  const int64_t w = c1 - c0;
  std::fill(out, out + w, 0.0f);
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * x_ld + c0;
    if (y != nullptr) {
      const float* yr = y + r * y_ld + c0;
#pragma GCC ivdep
      for (int64_t c = 0; c < w; ++c) out[c] += xr[c] * yr[c];
    } else {
#pragma GCC ivdep
      for (int64_t c = 0; c < w; ++c) out[c] += xr[c];
    }
  }
}

// dst: [w] += alpha * Σ_r x[r, :] (* y[r, :]).
void ColumnReduce(const float* x, int64_t x_ld, const float* y, int64_t y_ld, int64_t m, int64_t w,
                  float alpha, float* dst) {
  const int64_t row_chunks = NumChunks(m, kRowChunk);
  const int64_t col_blocks = NumChunks(w, kColumnBlock);
  std::vector<float> partial(static_cast<size_t>(row_chunks * w));
  const int64_t tiles = row_chunks * col_blocks;
  ParallelForChunks(
      tiles, 1, std::max<int64_t>(1, m * w / tiles), [&](int64_t t, int64_t, int64_t) {
        const int64_t rc = t / col_blocks, cb = t % col_blocks;
        const int64_t c0 = cb * kColumnBlock, c1 = std::min(w, c0 + kColumnBlock);
        ColumnTile(x, x_ld, y, y_ld, rc * kRowChunk, std::min(m, (rc + 1) * kRowChunk), c0, c1,
                   partial.data() + rc * w + c0);
      });
  for (int64_t c = 0; c < w; ++c) {
    float sum = 0.0f;
    for (int64_t rc = 0; rc < row_chunks; ++rc) sum += partial[rc * w + c];
    dst[c] += alpha * sum;
  }
}

}  // namespace internal

absl::Status ColumnSum(const float* src, int64_t ld, int64_t m, int64_t w, float alpha,
                       float* dst) {
  CAVS_RETURN_IF_ERROR(CheckArgs("ColumnSum", src, ld, nullptr, 0, false, m, w, dst));
  if (m == 0 || w == 0) return absl::OkStatus();
  internal::ColumnReduce(src, ld, nullptr, 0, m, w, alpha, dst);
  return absl::OkStatus();
}

absl::Status ColumnDot(const float* x, int64_t x_ld, const float* y, int64_t y_ld, int64_t m,
                       int64_t w, float* dst) {
  CAVS_RETURN_IF_ERROR(CheckArgs("ColumnDot", x, x_ld, y, y_ld, true, m, w, dst));
  if (m == 0 || w == 0) return absl::OkStatus();
  internal::ColumnReduce(x, x_ld, y, y_ld, m, w, 1.0f, dst);
  return absl::OkStatus();
}

}  // namespace cavs::ops::cpu
