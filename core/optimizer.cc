#include "core/optimizer.h"

#include <cmath>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/device_plugin.h"

namespace cavs::core {

// ---------------------------------------------------------------------------------------------
// Names and configuration.

const char* OptimizerKindName(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kAdagrad:
      return "adagrad";
    case OptimizerKind::kAdam:
      return "adam";
  }
  return "unknown";
}

absl::StatusOr<OptimizerKind> ParseOptimizerKind(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (OptimizerKind k : {OptimizerKind::kSgd, OptimizerKind::kAdagrad, OptimizerKind::kAdam}) {
    if (lower == OptimizerKindName(k)) return k;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown optimizer '", name, "': expected sgd, adagrad or adam"));
}

namespace {

absl::Status CheckField(const char* field, float v, float lo, float hi, bool hi_open) {
  if (!std::isfinite(v) || v < lo || v > hi || (hi_open && v == hi)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer config: ", field, " = ", v, " is outside [", lo, ", ", hi, hi_open ? ")" : "]"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status OptimizerConfig::Validate() const {
  constexpr float kBig = 3.0e38f;
  CAVS_RETURN_IF_ERROR(CheckField("lr", lr, 0.0f, kBig, false));
  CAVS_RETURN_IF_ERROR(CheckField("momentum", momentum, 0.0f, 1.0f, false));
  CAVS_RETURN_IF_ERROR(CheckField("beta1", beta1, 0.0f, 1.0f, true));
  CAVS_RETURN_IF_ERROR(CheckField("beta2", beta2, 0.0f, 1.0f, true));
  CAVS_RETURN_IF_ERROR(CheckField("weight_decay", weight_decay, 0.0f, kBig, false));
  CAVS_RETURN_IF_ERROR(CheckField("initial_accumulator", initial_accumulator, 0.0f, kBig, false));
  CAVS_RETURN_IF_ERROR(CheckField("clip_norm", clip_norm, 0.0f, kBig, false));
  if (!(eps > 0.0f) || !std::isfinite(eps)) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer config: eps = ", eps, " must be positive and finite"));
  }
  if (nesterov && (kind != OptimizerKind::kSgd || momentum == 0.0f)) {
    return absl::InvalidArgumentError("optimizer config: nesterov needs sgd with momentum > 0");
  }
  return absl::OkStatus();
}

std::string OptimizerConfig::DebugString() const {
  return absl::StrCat(
      OptimizerKindName(kind), "(lr=", lr, ", momentum=", momentum, nesterov ? ", nesterov" : "",
      ", beta1=", beta1, ", beta2=", beta2, ", eps=", eps, ", weight_decay=", weight_decay,
      ", initial_accumulator=", initial_accumulator, ", clip_norm=", clip_norm, ")");
}

// ---------------------------------------------------------------------------------------------
// The registry.

absl::StatusOr<OptimizerKernels*> GetOptimizerKernels(DeviceType type) {
  std::shared_ptr<const DevicePlugin> plugin = GetDevicePlugin(type);
  if (plugin != nullptr && plugin->optimizer_kernels != nullptr) return plugin->optimizer_kernels;
  return absl::FailedPreconditionError(
      absl::StrCat("no optimizer kernels registered for ", Device{type, 0}.DebugString(),
                   " parameters (link cavs::ops, whose device plug-ins provide them)"));
}

// ---------------------------------------------------------------------------------------------
// Clipping.

absl::StatusOr<double> ClipGradNorm(ParameterStore& store, double max_norm) {
  if (!(max_norm > 0.0) || !std::isfinite(max_norm)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ClipGradNorm: max_norm = ", max_norm, " must be positive and finite"));
  }
  std::vector<FloatBuffer> grads;
  for (const auto& p : store.parameters()) {
    CAVS_RETURN_IF_ERROR(ValidateGradient(*p));
    const Tensor& g = p->sparse_grad ? p->grad_values : p->grad;
    if (g.numel() > 0) grads.push_back({g.data<float>(), g.numel()});
  }
  CAVS_ASSIGN_OR_RETURN(OptimizerKernels * kernels, GetOptimizerKernels(store.device().type));
  CAVS_ASSIGN_OR_RETURN(double sum, kernels->SumOfSquares(grads));
  const double norm = std::sqrt(sum);
  if (std::isfinite(norm) && norm > max_norm) {
    CAVS_RETURN_IF_ERROR(kernels->Scale(grads, static_cast<float>(max_norm / (norm + 1e-6))));
  }
  return norm;
}

// ---------------------------------------------------------------------------------------------
// Optimizer: state and the step.

absl::Status Optimizer::EnsureState(const ParameterStore& store) {
  const std::vector<std::string> slot_names = SlotNames();
  for (const auto& p : store.parameters()) {
    auto it = state_index_.find(p->name);
    if (it != state_index_.end()) {
      for (const Tensor& t : states_[it->second].slots) {
        if (t.shape() != p->value.shape()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "optimizer state of parameter '", p->name, "' has shape ", t.shape().DebugString(),
              " but the parameter has shape ", p->value.shape().DebugString()));
        }
      }
      continue;
    }
    ParamState state{p->name, {}};
    for (size_t i = 0; i < slot_names.size(); ++i) {
      Tensor host = Tensor::Host(p->value.shape());
      const float init = InitialStateValue();
      if (init != 0.0f) std::fill_n(host.data<float>(), host.numel(), init);
      CAVS_ASSIGN_OR_RETURN(Tensor t, host.CopyTo(p->value.device()));
      state.slots.push_back(std::move(t));
    }
    state_index_[p->name] = states_.size();
    states_.push_back(std::move(state));
  }
  return absl::OkStatus();
}

void Optimizer::ResetState() {
  states_.clear();
  state_index_.clear();
}

std::vector<std::pair<std::string, Tensor>> Optimizer::StateTensors() const {
  const std::vector<std::string> slot_names = SlotNames();
  std::vector<std::pair<std::string, Tensor>> out;
  for (const ParamState& s : states_) {
    for (size_t i = 0; i < s.slots.size(); ++i) {
      out.emplace_back(StateName(s.param, slot_names[i]), s.slots[i]);
    }
  }
  return out;
}

absl::StatusOr<std::vector<OptimizerSlot>> Optimizer::BuildSlots(const ParameterStore& store) {
  std::vector<OptimizerSlot> slots;
  for (const auto& p : store.parameters()) {
    if (p->value.numel() == 0 || (p->sparse_grad && p->grad_rows.empty())) continue;
    const std::vector<Tensor>& state = states_[state_index_.at(p->name)].slots;
    OptimizerSlot s;
    s.param = p->value.data<float>();
    s.rows = p->value.rows();
    s.cols = p->value.cols();
    s.state0 = state.size() > 0 ? state[0].data<float>() : nullptr;
    s.state1 = state.size() > 1 ? state[1].data<float>() : nullptr;
    s.sparse = p->sparse_grad;
    if (p->sparse_grad) {
      s.grad = p->grad_values.data<float>();
      s.row_ids = p->grad_rows.data();
      s.num_rows = static_cast<int64_t>(p->grad_rows.size());
    } else {
      s.grad = p->grad.data<float>();
    }
    slots.push_back(s);
  }
  return slots;
}

absl::Status Optimizer::Step(ParameterStore& store) {
  for (const auto& p : store.parameters()) CAVS_RETURN_IF_ERROR(ValidateGradient(*p));
  CAVS_ASSIGN_OR_RETURN(OptimizerKernels * kernels, GetOptimizerKernels(store.device().type));
  last_grad_norm_ = -1.0;
  if (config_.clip_norm > 0.0f) {
    CAVS_ASSIGN_OR_RETURN(last_grad_norm_, ClipGradNorm(store, config_.clip_norm));
    if (!std::isfinite(last_grad_norm_)) {
      return absl::InvalidArgumentError(absl::StrCat("optimizer step ", step_ + 1,
                                                     ": the gradient norm is ", last_grad_norm_,
                                                     "; parameters left unchanged"));
    }
  }
  CAVS_RETURN_IF_ERROR(EnsureState(store));
  CAVS_ASSIGN_OR_RETURN(std::vector<OptimizerSlot> slots, BuildSlots(store));
  CAVS_RETURN_IF_ERROR(Apply(*kernels, slots, step_ + 1));
  ++step_;
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// The three optimizers.

namespace {

class SgdOptimizer final : public Optimizer {
 public:
  explicit SgdOptimizer(const OptimizerConfig& c) : Optimizer(c) {}
  std::vector<std::string> SlotNames() const override {
    if (config().momentum == 0.0f) return {};
    return {"momentum"};
  }

 protected:
  absl::Status Apply(OptimizerKernels& k, absl::Span<const OptimizerSlot> slots, int64_t) override {
    const OptimizerConfig& c = config();
    return k.Sgd(SgdHyper{c.lr, c.momentum, c.weight_decay, c.nesterov}, slots);
  }
};

class AdagradOptimizer final : public Optimizer {
 public:
  explicit AdagradOptimizer(const OptimizerConfig& c) : Optimizer(c) {}
  std::vector<std::string> SlotNames() const override { return {"adagrad_accum"}; }

 protected:
  float InitialStateValue() const override { return config().initial_accumulator; }
  absl::Status Apply(OptimizerKernels& k, absl::Span<const OptimizerSlot> slots, int64_t) override {
    const OptimizerConfig& c = config();
    return k.Adagrad(AdagradHyper{c.lr, c.eps, c.weight_decay}, slots);
  }
};

class AdamOptimizer final : public Optimizer {
 public:
  explicit AdamOptimizer(const OptimizerConfig& c) : Optimizer(c) {}
  std::vector<std::string> SlotNames() const override { return {"adam_m", "adam_v"}; }

 protected:
  absl::Status Apply(OptimizerKernels& k, absl::Span<const OptimizerSlot> slots,
                     int64_t t) override {
    const OptimizerConfig& c = config();
    AdamHyper h{c.lr, c.beta1, c.beta2, c.eps, c.weight_decay, 1.0f, 1.0f};
    h.bias_correction1 = static_cast<float>(1.0 - std::pow(static_cast<double>(c.beta1), t));
    h.bias_correction2 = static_cast<float>(1.0 - std::pow(static_cast<double>(c.beta2), t));
    return k.Adam(h, slots);
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(const OptimizerConfig& config) {
  CAVS_RETURN_IF_ERROR(config.Validate());
  switch (config.kind) {
    case OptimizerKind::kSgd:
      return std::unique_ptr<Optimizer>(new SgdOptimizer(config));
    case OptimizerKind::kAdagrad:
      return std::unique_ptr<Optimizer>(new AdagradOptimizer(config));
    case OptimizerKind::kAdam:
      return std::unique_ptr<Optimizer>(new AdamOptimizer(config));
  }
  return absl::InvalidArgumentError("unknown optimizer kind");
}

}  // namespace cavs::core
