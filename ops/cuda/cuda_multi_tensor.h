// The multi-tensor kernel behind the CUDA optimizer (cuda_optimizer.h): one launch updates,
// scales or sums the squares of every element of many tensors.
//
// The host cuts each tensor into chunks of kMultiTensorChunk elements and uploads, in one
// transfer, a table of tensors (MultiTensorSlot) and of chunks (MultiTensorChunk); block b of
// the launch takes chunk b. Row-sparse tensors (embedding gradients) address their elements
// through row_ids: element i of the gradient updates parameter row row_ids[i / cols].
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/optimizer_math.h"

namespace cavs::ops::cuda {

inline constexpr int64_t kMultiTensorChunk = 16384;

enum class MultiTensorOp : int32_t { kSgd, kAdagrad, kAdam, kScale, kSumOfSquares };

// One tensor as the kernel sees it (all pointers on the device).
struct MultiTensorSlot {
  float* param = nullptr;            // [rows, cols]; the buffer for kScale and kSumOfSquares
  const float* grad = nullptr;       // dense: [rows, cols]; sparse: [num_rows, cols]
  float* state0 = nullptr;           // [rows, cols] or null (SGD without momentum)
  float* state1 = nullptr;           // [rows, cols] (Adam's second moment)
  const int64_t* row_ids = nullptr;  // sparse: [num_rows]; null for dense
  int64_t cols = 1;
  int64_t count = 0;  // elements updated: rows * cols dense, num_rows * cols sparse
};

// Elements [begin, min(begin + kMultiTensorChunk, count)) of slot `slot`.
struct MultiTensorChunk {
  int64_t slot = 0;
  int64_t begin = 0;
};

struct MultiTensorHyper {
  core::SgdHyper sgd;
  core::AdagradHyper adagrad;
  core::AdamHyper adam;
  float factor = 1.0f;  // kScale
};

// slots, chunks: device tables; partials: [num_chunks] doubles on the device, written by
// kSumOfSquares only (one sum of squares per chunk, summed by the caller in a fixed order).
cudaError_t LaunchMultiTensor(cudaStream_t stream, MultiTensorOp op, const MultiTensorHyper& h,
                              const MultiTensorSlot* slots, const MultiTensorChunk* chunks,
                              int64_t num_chunks, double* partials);

}  // namespace cavs::ops::cuda
