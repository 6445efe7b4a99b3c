// Optimizers: SGD (momentum, Nesterov), Adagrad and Adam over a ParameterStore.
//
// An Optimizer owns its state (momentum, accumulators, moments) as tensors of each parameter's
// shape on the parameter's device, created lazily at a parameter's first Step() and named
// "<parameter>/<slot>" ("W/momentum", "W/adagrad_accum", "W/adam_m", "W/adam_v") so that
// checkpoints can store them. The update math runs through the OptimizerKernels of the
// parameters' device type, which its plug-in holds (core/device_plugin.h): the CPU's loops in
// ops/cpu/cpu_optimizer.h, CUDA's fused multi-tensor kernels in ops/cuda (so a program that
// steps an Optimizer links cavs::ops, which registers the plug-ins); the formulas are in
// core/optimizer_math.h.
//
// Weight decay: SGD and Adagrad use classic L2 decay added to the gradient (g += wd * w);
// Adam uses decoupled decay (AdamW: w -= lr * wd * w), since L2 decay in Adam is scaled away by
// the second-moment normalization.
//
// Sparse gradients (embedding tables) are updated lazily: only the rows in grad_rows are
// read or written, parameter and state alike. So weight decay, momentum and Adam's moments of
// an untouched row do not advance while it is untouched (as in TensorFlow's lazy Adam); Adam's
// bias correction uses the global step.
//
// Thread-safety: an Optimizer is not thread-safe; the kernel registry is.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/device.h"
#include "core/optimizer_math.h"
#include "core/parameter.h"
#include "core/tensor.h"

namespace cavs::core {

enum class OptimizerKind { kSgd, kAdagrad, kAdam };

// "sgd", "adagrad", "adam".
const char* OptimizerKindName(OptimizerKind kind);
// The inverse of OptimizerKindName; an error listing the known names otherwise.
[[nodiscard]] absl::StatusOr<OptimizerKind> ParseOptimizerKind(absl::string_view name);

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kSgd;
  float lr = 0.01f;
  float momentum = 0.0f;  // SGD; 0 keeps no state
  bool nesterov = false;  // SGD; needs momentum > 0
  float beta1 = 0.9f;     // Adam
  float beta2 = 0.999f;   // Adam
  float eps = 1e-8f;      // Adagrad and Adam: added to the denominator's sqrt
  float weight_decay = 0.0f;
  float initial_accumulator = 0.0f;  // Adagrad
  float clip_norm = 0.0f;            // > 0: Step() first clips the global gradient norm to it

  // An error naming the first field out of range.
  [[nodiscard]] absl::Status Validate() const;
  std::string DebugString() const;
};

// One parameter's buffers as a kernel sees them. Pointers are on the parameter's device, except
// row_ids, which is a host array (a device implementation uploads it).
struct OptimizerSlot {
  float* param = nullptr;       // [rows, cols]
  const float* grad = nullptr;  // dense: [rows, cols]; sparse: [num_rows, cols]
  float* state0 = nullptr;      // [rows, cols]; nullptr where the optimizer keeps no state
  float* state1 = nullptr;      // [rows, cols]; Adam's second moment
  int64_t rows = 0;
  int64_t cols = 0;
  bool sparse = false;
  const int64_t* row_ids = nullptr;  // sparse: grad row i updates param row row_ids[i] (unique)
  int64_t num_rows = 0;              // sparse: number of row_ids
};

// A span of floats on some device.
struct FloatBuffer {
  float* data = nullptr;
  int64_t size = 0;
};

// The device-dispatch interface: each call covers all parameters of a step, so a device
// implementation can launch one multi-tensor kernel. Implementations must be stateless
// (or internally synchronized) and live for the whole process.
class OptimizerKernels {
 public:
  virtual ~OptimizerKernels() = default;
  [[nodiscard]] virtual absl::Status Sgd(const SgdHyper& h,
                                         absl::Span<const OptimizerSlot> slots) = 0;
  [[nodiscard]] virtual absl::Status Adagrad(const AdagradHyper& h,
                                             absl::Span<const OptimizerSlot> slots) = 0;
  [[nodiscard]] virtual absl::Status Adam(const AdamHyper& h,
                                          absl::Span<const OptimizerSlot> slots) = 0;
  // Sum of the squares of all elements, accumulated in double.
  [[nodiscard]] virtual absl::StatusOr<double> SumOfSquares(
      absl::Span<const FloatBuffer> buffers) = 0;
  // Multiplies all elements by `factor`.
  [[nodiscard]] virtual absl::Status Scale(absl::Span<const FloatBuffer> buffers, float factor) = 0;
};

// The kernels for parameters on `type`: its plug-in's (DevicePlugin::optimizer_kernels);
// FailedPrecondition if there are none.
[[nodiscard]] absl::StatusOr<OptimizerKernels*> GetOptimizerKernels(DeviceType type);

// Scales all gradients (dense and sparse) by max_norm / (norm + 1e-6) when their global L2
// norm exceeds max_norm, and returns the norm before clipping. A non-finite norm is returned
// as it is, and nothing is scaled. Errors: max_norm not positive, a malformed gradient.
[[nodiscard]] absl::StatusOr<double> ClipGradNorm(ParameterStore& store, double max_norm);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter from its gradient: checks all gradients (nothing changes
  // if one is malformed), clips if config().clip_norm > 0 (a non-finite norm is an error and
  // nothing changes), creates missing state, updates, and counts the step.
  [[nodiscard]] absl::Status Step(ParameterStore& store);

  // Steps taken; Adam's bias correction uses step() + 1. Checkpoints restore it.
  int64_t step() const { return step_; }
  void set_step(int64_t step) { step_ = step; }
  const OptimizerConfig& config() const { return config_; }
  const char* name() const { return OptimizerKindName(config_.kind); }
  // The pre-clip gradient norm of the last Step(); -1 if it did not clip.
  double last_grad_norm() const { return last_grad_norm_; }

  // The state slots kept per parameter, e.g. {"adam_m", "adam_v"}; state tensors are named
  // "<parameter>/<slot>" and have the parameter's shape.
  virtual std::vector<std::string> SlotNames() const = 0;
  static std::string StateName(const std::string& param, const std::string& slot) {
    return param + "/" + slot;
  }

  // Creates the state of every parameter of `store` that has none (at its initial value).
  // Error: existing state whose shape no longer matches its parameter.
  [[nodiscard]] absl::Status EnsureState(const ParameterStore& store);
  // Drops all state; it is created again, fresh, at the next Step().
  void ResetState();
  // (name, tensor handle) of all state, in creation order; the handles share storage.
  std::vector<std::pair<std::string, Tensor>> StateTensors() const;

 protected:
  explicit Optimizer(const OptimizerConfig& config) : config_(config) {}
  // The value new state starts at (Adagrad's initial accumulator).
  virtual float InitialStateValue() const { return 0.0f; }
  // Updates `slots` as step number `t` (1-based).
  [[nodiscard]] virtual absl::Status Apply(OptimizerKernels& kernels,
                                           absl::Span<const OptimizerSlot> slots, int64_t t) = 0;

 private:
  struct ParamState {
    std::string param;
    std::vector<Tensor> slots;  // one per SlotNames() entry
  };
  absl::StatusOr<std::vector<OptimizerSlot>> BuildSlots(const ParameterStore& store);

  OptimizerConfig config_;
  int64_t step_ = 0;
  double last_grad_norm_ = -1.0;
  std::vector<ParamState> states_;
  absl::flat_hash_map<std::string, size_t> state_index_;  // parameter name -> states_ index
};

// Validates `config` and builds the optimizer it names.
[[nodiscard]] absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(
    const OptimizerConfig& config);

}  // namespace cavs::core
