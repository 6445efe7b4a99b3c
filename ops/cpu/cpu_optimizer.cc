#include "ops/cpu/cpu_optimizer.h"

#include <cstdint>

#include "core/flush_denormal.h"
#include "core/host_device.h"
#include "core/optimizer_math.h"

namespace cavs::ops::cpu {

namespace {

using core::AdagradHyper;
using core::AdamHyper;
using core::FloatBuffer;
using core::OptimizerSlot;
using core::SgdHyper;

// Calls f(param_offset, grad_offset, n) for each contiguous run of elements a slot updates:
// the whole tensor when dense, one row per gradient row when sparse.
template <typename F>
void ForEachRun(const OptimizerSlot& s, F f) {
  if (!s.sparse) {
    f(int64_t{0}, int64_t{0}, s.rows * s.cols);
    return;
  }
  for (int64_t r = 0; r < s.num_rows; ++r) f(s.row_ids[r] * s.cols, r * s.cols, s.cols);
}

}  // namespace

// Multi-versioned functions need external linkage (GCC's resolver); hence a named namespace.
namespace optimizer_internal {

// The update loops, one per optimizer, over n contiguous elements: vectorized (the rules are
// plain arithmetic and sqrtf, built without errno so sqrtf is one instruction) and, without
// FMA contraction, bit-identical to the scalar rule.
CAVS_CPU_VECTOR_CLONES
void SgdRun(const SgdHyper h, float* __restrict__ w, const float* __restrict__ g,
            float* __restrict__ velocity, int64_t n) {
  if (velocity == nullptr) {
    float unused = 0.0f;
    for (int64_t i = 0; i < n; ++i) core::SgdElement(h, w[i], g[i], unused);
    return;
  }
  for (int64_t i = 0; i < n; ++i) core::SgdElement(h, w[i], g[i], velocity[i]);
}

CAVS_CPU_VECTOR_CLONES
void AdagradRun(const AdagradHyper h, float* __restrict__ w, const float* __restrict__ g,
                float* __restrict__ accum, int64_t n) {
  for (int64_t i = 0; i < n; ++i) core::AdagradElement(h, w[i], g[i], accum[i]);
}

CAVS_CPU_VECTOR_CLONES
void AdamRun(const AdamHyper h, float* __restrict__ w, const float* __restrict__ g,
             float* __restrict__ m, float* __restrict__ v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) core::AdamElement(h, w[i], g[i], m[i], v[i]);
}

}  // namespace optimizer_internal

namespace {

using optimizer_internal::AdagradRun;
using optimizer_internal::AdamRun;
using optimizer_internal::SgdRun;

class CpuOptimizerKernelsImpl final : public core::OptimizerKernels {
 public:
  absl::Status Sgd(const SgdHyper& h, absl::Span<const OptimizerSlot> slots) override {
    core::ScopedFlushDenormal flush;  // core/flush_denormal.h
    for (const OptimizerSlot& s : slots) {
      ForEachRun(s, [&](int64_t p, int64_t g, int64_t n) {
        SgdRun(h, s.param + p, s.grad + g, s.state0 != nullptr ? s.state0 + p : nullptr, n);
      });
    }
    return absl::OkStatus();
  }
  absl::Status Adagrad(const AdagradHyper& h, absl::Span<const OptimizerSlot> slots) override {
    core::ScopedFlushDenormal flush;  // core/flush_denormal.h
    for (const OptimizerSlot& s : slots) {
      ForEachRun(s, [&](int64_t p, int64_t g, int64_t n) {
        AdagradRun(h, s.param + p, s.grad + g, s.state0 + p, n);
      });
    }
    return absl::OkStatus();
  }
  absl::Status Adam(const AdamHyper& h, absl::Span<const OptimizerSlot> slots) override {
    core::ScopedFlushDenormal flush;  // core/flush_denormal.h
    for (const OptimizerSlot& s : slots) {
      ForEachRun(s, [&](int64_t p, int64_t g, int64_t n) {
        AdamRun(h, s.param + p, s.grad + g, s.state0 + p, s.state1 + p, n);
      });
    }
    return absl::OkStatus();
  }
  absl::StatusOr<double> SumOfSquares(absl::Span<const FloatBuffer> buffers) override {
    double sum = 0.0;
    for (const FloatBuffer& b : buffers) {
      for (int64_t i = 0; i < b.size; ++i) sum += static_cast<double>(b.data[i]) * b.data[i];
    }
    return sum;
  }
  absl::Status Scale(absl::Span<const FloatBuffer> buffers, float factor) override {
    for (const FloatBuffer& b : buffers) {
      for (int64_t i = 0; i < b.size; ++i) b.data[i] *= factor;
    }
    return absl::OkStatus();
  }
};

}  // namespace

core::OptimizerKernels* CpuOptimizerKernels() {
  static CpuOptimizerKernelsImpl* kernels = new CpuOptimizerKernelsImpl();
  return kernels;
}

}  // namespace cavs::ops::cpu
