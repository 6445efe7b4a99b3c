// Softmax cross-entropy on CUDA (Kernels::SoftmaxCrossEntropy; semantics in ops/kernels.h).
//
// One launch: a warp per row for up to kSoftmaxWarpMaxClasses classes, a 256-thread block per
// row beyond. Each row is read three times (max and argmax, sum of exponentials, gradient) and
// is numerically stable (exponentials of x - max). The loss and accuracy statistics are summed
// in a fixed order (rows, warps, then blocks meeting in the reductions' workspace,
// block_meet.cuh), so they have the same bits from run to run.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/cuda/cuda_reduce.h"  // ReduceWorkspace

namespace cavs::ops::cuda {

inline constexpr int64_t kSoftmaxWarpMaxClasses = 1024;

// logits: [n, c] (row stride ld); labels: [n]; dlogits: [n, c] (ld c, may be null);
// stats: [2] accumulated (may be null); pred: [n] (may be null). `workspace`: CudaKernels' (at
// least 2 floats and 1 count).
cudaError_t LaunchSoftmaxCrossEntropy(cudaStream_t stream, const float* logits, int64_t ld,
                                      int64_t n, int64_t c, const int32_t* labels, float scale,
                                      float* dlogits, float* stats, int32_t* pred,
                                      const ReduceWorkspace& workspace);

}  // namespace cavs::ops::cuda
