// CPU softmax cross-entropy over rows of logits (Kernels::SoftmaxCrossEntropy), numerically
// stable: the row maximum is subtracted before exponentiating and the loss is
// log Σ e^(x - max) - (x[label] - max).
#pragma once

#include <cstdint>

#include "absl/status/status.h"

namespace cavs::ops::cpu {

// logits: [n, c] (row stride ld). Rows with labels[i] < 0 are masked: their dlogits row is 0
// and they add nothing to stats. dlogits: [n, c] (ld c) = scale * (softmax - onehot), or null
// to skip the gradient. stats: 2 floats, += Σ loss and += number of labelled rows whose argmax
// is the label, or null. pred: [n] argmax of every row (masked ones too; first maximum wins
// ties), or null. The loss sum is accumulated in double over fixed chunks of rows, so it is
// the same for any thread count. Errors: a label >= c (naming the row), bad sizes.
[[nodiscard]] absl::Status SoftmaxCrossEntropy(const float* logits, int64_t ld, int64_t n,
                                               int64_t c, const int32_t* labels, float scale,
                                               float* dlogits, float* stats, int32_t* pred);

}  // namespace cavs::ops::cpu
