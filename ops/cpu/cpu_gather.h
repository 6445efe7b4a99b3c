// CPU row movement: gather, scatter-add, and segment reductions with their gradient (the
// gather/scatter primitives and gather_sum/mean/max of the vertex DSL). See ops/kernels.h for
// the contracts; the checks here return InvalidArgument for malformed sizes or index arrays.
//
// Determinism: every result is bit-identical for any thread count. Accumulations into a
// destination row happen in increasing source order, as in a serial loop: parallel
// scatter-adds split the work by destination row (or by column), never by source row.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "ops/kernels.h"

namespace cavs::ops::cpu {

// dst: [m, w] row i = src row idx[i], or zeros where idx[i] < 0.
[[nodiscard]] absl::Status GatherRows(const float* src, int64_t src_ld, const int32_t* idx,
                                      int64_t m, int64_t w, float* dst, int64_t dst_ld);

// dst row idx[i] += src row i, src: [m, w]; skipped where idx[i] < 0. `unique` promises that
// no index repeats (rows are then split freely).
[[nodiscard]] absl::Status ScatterAddRows(const float* src, int64_t src_ld, const int32_t* idx,
                                          int64_t m, int64_t w, float* dst, int64_t dst_ld,
                                          bool unique);

// dst: [m, w] row i = op over src rows ids[offsets[i] .. offsets[i+1]); zeros for an empty
// segment. kMax writes the winning id per element into argmax: [m, w] (ld w; -1 for an empty
// segment; the first maximum wins ties); argmax may be null. Errors: offsets not
// non-decreasing from >= 0, a negative id.
[[nodiscard]] absl::Status SegmentReduce(ReduceOp op, const float* src, int64_t src_ld,
                                         const int32_t* offsets, const int32_t* ids, int64_t m,
                                         int64_t w, float* dst, int64_t dst_ld, int32_t* argmax);

// dsrc row ids[j] += dy row i for j in segment i (divided by the segment length for kMean);
// kMax adds dy[i, c] into dsrc[argmax[i, c], c] only (argmax: [m, w], ld w; -1 skipped).
[[nodiscard]] absl::Status SegmentReduceGrad(ReduceOp op, const float* dy, int64_t dy_ld,
                                             const int32_t* offsets, const int32_t* ids,
                                             const int32_t* argmax, int64_t m, int64_t w,
                                             float* dsrc, int64_t dsrc_ld);

}  // namespace cavs::ops::cpu
