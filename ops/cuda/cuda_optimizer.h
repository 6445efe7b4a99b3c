// CudaOptimizerKernels: core::OptimizerKernels for parameters on CUDA devices.
//
// Each call (one optimizer step, a gradient-norm clip's sum of squares or scaling) is one
// upload and one launch of the multi-tensor kernel (cuda_multi_tensor.h) over every tensor of
// the call: the host writes the tensor and chunk tables, and the row ids of sparse gradients,
// into a pinned staging buffer, copies it to a block of the device's caching allocator in one
// transfer, and launches. The update formulas are core/optimizer_math.h's, shared with the CPU.
// SumOfSquares waits for its result; the others return once queued.
//
// The device is the one holding the first tensor of a call (all tensors of a call must be on
// it). Held by the CUDA device plug-in (ops/cuda/cuda_plugin.h).
//
// Thread-safety: calls are serialized by an internal mutex.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/optimizer.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/cuda_multi_tensor.h"

namespace cavs::ops::cuda {

class CudaOptimizerKernels final : public core::OptimizerKernels {
 public:
  CudaOptimizerKernels() = default;
  CudaOptimizerKernels(const CudaOptimizerKernels&) = delete;
  CudaOptimizerKernels& operator=(const CudaOptimizerKernels&) = delete;

  absl::Status Sgd(const core::SgdHyper& h, absl::Span<const core::OptimizerSlot> slots) override;
  absl::Status Adagrad(const core::AdagradHyper& h,
                       absl::Span<const core::OptimizerSlot> slots) override;
  absl::Status Adam(const core::AdamHyper& h, absl::Span<const core::OptimizerSlot> slots) override;
  absl::StatusOr<double> SumOfSquares(absl::Span<const core::FloatBuffer> buffers) override;
  absl::Status Scale(absl::Span<const core::FloatBuffer> buffers, float factor) override;

  // The process-wide instance (never destroyed).
  static CudaOptimizerKernels* Global();

 private:
  // Uploads the tables for `slots` (host row ids included) and launches `op`. For
  // kSumOfSquares, also reads back the per-chunk sums and returns their total.
  absl::StatusOr<double> Run(MultiTensorOp op, const MultiTensorHyper& h,
                             absl::Span<const core::OptimizerSlot> slots);
  absl::StatusOr<PinnedStaging*> Staging(CudaBackend* backend);

  std::mutex mu_;
  std::vector<std::unique_ptr<PinnedStaging>> staging_;  // per device ordinal
};

}  // namespace cavs::ops::cuda
