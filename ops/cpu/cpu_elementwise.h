// CPU fused element-wise programs (Kernels::Elementwise): every row runs the instructions in
// order; rows are split over the ops' thread pool when the program is large enough. Also Fill.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "ops/kernels.h"

namespace cavs::ops::cpu {

// Checks `count` instructions for `rows` rows: sizes, operands present for the op, no
// destination whose rows overlap (ld 0 or ld < width with rows > 1), dropout rate in [0, 1)
// with uids, scratch operands only where `allow_scratch`. The error names the instruction.
[[nodiscard]] absl::Status ValidateProgram(const EwInstr* program, int count, int64_t rows,
                                           bool allow_scratch = true);

// Runs the program over rows [0, rows), or as its copy rebased to row0 would (see
// Kernels::Elementwise). An instruction's dst may equal its a or b exactly (in place); other
// overlaps between dst and an operand are not supported. Scratch operands live in a per-thread
// row buffer (in L1) that every row reuses.
[[nodiscard]] absl::Status Elementwise(const EwInstr* program, int count, int64_t rows,
                                       int64_t row0 = 0);

// dst: [n] = value.
[[nodiscard]] absl::Status Fill(float* dst, int64_t n, float value);

}  // namespace cavs::ops::cpu
