// Softmax cross-entropy on CUDA (Kernels::SoftmaxCrossEntropy; semantics in ops/kernels.h).
//
// One launch: a warp per row for up to kSoftmaxWarpMaxClasses classes, a 256-thread block per
// row beyond. Each row is read three times (max and argmax, sum of exponentials, gradient) and
// is numerically stable (exponentials of x - max). The loss and accuracy statistics are summed
// per block in shared memory and added to `stats` with one atomic per block and statistic.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cavs::ops {

inline constexpr int64_t kSoftmaxWarpMaxClasses = 1024;

// logits: [n, c] (row stride ld); labels: [n]; dlogits: [n, c] (ld c, may be null);
// stats: [2] accumulated (may be null); pred: [n] (may be null).
cudaError_t LaunchSoftmaxCrossEntropy(cudaStream_t stream, const float* logits, int64_t ld,
                                      int64_t n, int64_t c, const int32_t* labels, float scale,
                                      float* dlogits, float* stats, int32_t* pred);

}  // namespace cavs::ops
