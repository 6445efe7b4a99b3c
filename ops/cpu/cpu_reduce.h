// CPU column reductions (Kernels::ColumnSum, Kernels::ColumnDot): bias and per-column
// gradients summed over all rows. Split over the pool by blocks of columns, so each column is
// summed in row order whatever the thread count (bit-identical results).
#pragma once

#include <cstdint>

#include "absl/status/status.h"

namespace cavs::ops::cpu {

// dst: [w] += alpha * Σ_r src row r, src: [m, w].
[[nodiscard]] absl::Status ColumnSum(const float* src, int64_t ld, int64_t m, int64_t w,
                                     float alpha, float* dst);

// dst: [w] += Σ_r x[r, c] * y[r, c]; x, y: [m, w].
[[nodiscard]] absl::Status ColumnDot(const float* x, int64_t x_ld, const float* y, int64_t y_ld,
                                     int64_t m, int64_t w, float* dst);

}  // namespace cavs::ops::cpu
