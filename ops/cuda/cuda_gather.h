// Row gathers and scatters on CUDA: GatherRows, ScatterAddRows, SegmentReduce and its gradient
// (Kernels methods of the same names; shapes and semantics are in ops/kernels.h).
//
// Each is one launch of a 2-D block: threads along x walk a row's columns (float4 where the
// pointers, strides and width allow), threads along y and the grid walk rows. Scatters whose
// destination rows may repeat (DAGs: a child with several parents) use atomicAdd; ScatterAddRows
// with `unique` uses plain adds.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/kernels.h"

namespace cavs::ops::cuda {

cudaError_t LaunchGatherRows(cudaStream_t stream, const float* src, int64_t src_ld,
                             const int32_t* idx, int64_t m, int64_t w, float* dst, int64_t dst_ld);

cudaError_t LaunchScatterAddRows(cudaStream_t stream, const float* src, int64_t src_ld,
                                 const int32_t* idx, int64_t m, int64_t w, float* dst,
                                 int64_t dst_ld, bool unique);

// Up to kMaxRowCopies gathers / scatter-adds over the same m rows in one launch (blockIdx.y
// picks the copy).
cudaError_t LaunchGatherRowsMulti(cudaStream_t stream, const RowCopy* copies, int count, int64_t m);
cudaError_t LaunchScatterAddRowsMulti(cudaStream_t stream, const RowCopy* copies, int count,
                                      int64_t m, bool unique);

// argmax may be null (kMax then records no winners).
cudaError_t LaunchSegmentReduce(cudaStream_t stream, ReduceOp op, const float* src, int64_t src_ld,
                                const int32_t* offsets, const int32_t* ids, int64_t m, int64_t w,
                                float* dst, int64_t dst_ld, int32_t* argmax);

cudaError_t LaunchSegmentReduceGrad(cudaStream_t stream, ReduceOp op, const float* dy,
                                    int64_t dy_ld, const int32_t* offsets, const int32_t* ids,
                                    const int32_t* argmax, int64_t m, int64_t w, float* dsrc,
                                    int64_t dsrc_ld);

}  // namespace cavs::ops::cuda
