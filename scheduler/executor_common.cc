#include "scheduler/executor_common.h"

#include <algorithm>
#include <climits>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace cavs::scheduler {

namespace {

// Whether every value is in [-1, limit): one branch-free pass, so a valid batch costs little;
// the loops below name the first value outside.
bool AllWithin(const std::vector<int32_t>& values, int64_t limit) {
  // x in [-1, hi] exactly when x + 1, unsigned, is at most hi + 1: one compare a value.
  const uint32_t bound = static_cast<uint32_t>(std::min<int64_t>(limit - 1, INT32_MAX)) + 1u;
  uint32_t outside = 0;
  for (int32_t x : values) outside |= static_cast<uint32_t>(x) + 1u > bound;
  return outside == 0;
}

absl::Status CheckInputs(const vertex::Function& f, const Graph& g, int sample, int64_t classes) {
  const int64_t token_limit = f.uses_tokens() ? f.vocab_size() : INT64_MAX;
  const int64_t label_limit = classes > 0 ? classes : INT64_MAX;
  if (AllWithin(g.tokens, token_limit) && AllWithin(g.labels, label_limit) &&
      !(g.feature_dim > 0 && f.pull_width() > 0 && g.feature_dim != f.pull_width())) {
    return absl::OkStatus();
  }
  for (int v = 0; v < static_cast<int>(g.tokens.size()); ++v) {
    if (g.tokens[v] < -1 ||
        (g.tokens[v] >= 0 && g.tokens[v] >= f.vocab_size() && f.uses_tokens())) {
      return absl::InvalidArgumentError(absl::StrCat("sample ", sample, ", vertex ", v, ": token ",
                                                     g.tokens[v], " outside the vocabulary [0, ",
                                                     f.vocab_size(), ")"));
    }
  }
  for (int v = 0; v < static_cast<int>(g.labels.size()); ++v) {
    if (g.labels[v] < -1 || (classes > 0 && g.labels[v] >= classes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sample ", sample, ", vertex ", v, ": label ", g.labels[v],
          classes > 0 ? absl::StrCat(" outside [0, ", classes, ")")
                      : std::string(" is negative (-1 marks a vertex without a label)")));
    }
  }
  if (g.feature_dim > 0 && f.pull_width() > 0 && g.feature_dim != f.pull_width()) {
    return absl::InvalidArgumentError(absl::StrCat("sample ", sample, ": features of width ",
                                                   g.feature_dim, ", but '", f.name(), "' pulls ",
                                                   f.pull_width()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateBatch(const vertex::Function& f, const std::vector<Graph>& graphs) {
  const int64_t classes = f.pushes().empty() ? 0 : f.forward().nodes[f.pushes()[0]].width;
  for (int i = 0; i < static_cast<int>(graphs.size()); ++i) {
    CAVS_RETURN_IF_ERROR(ValidateGraph(graphs[i], i, f.max_arity()));
    CAVS_RETURN_IF_ERROR(CheckInputs(f, graphs[i], i, classes));
  }
  return absl::OkStatus();
}

absl::Status CheckParameters(const vertex::Function& f, const core::ParameterStore& store,
                             bool backward) {
  for (const vertex::ParamInfo& p : f.params()) {
    const core::Parameter* param = store.Find(p.name);
    if (param == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("parameter '", p.name, "' of function '",
                                                        f.name(), "' is no longer in the store"));
    }
    const core::Tensor& v = param->value;
    if (!v.defined() || v.dtype() != core::DType::kFloat32 || v.shape() != p.shape ||
        v.device() != store.device()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "parameter '", p.name, "' of function '", f.name(), "' is ",
          v.defined() ? absl::StrCat(core::DTypeName(v.dtype()), " ", v.shape().DebugString(),
                                     " on ", v.device().DebugString())
                      : "undefined",
          " in the store, but the function declares float32 ", p.shape.DebugString(), " on ",
          store.device().DebugString(), " (changed after the engine was created?)"));
    }
    if (param->sparse_grad != p.sparse_grad) {
      return absl::FailedPreconditionError(
          absl::StrCat("parameter '", p.name, "' has a ", param->sparse_grad ? "sparse" : "dense",
                       " gradient in the store but function '", f.name(), "' declares a ",
                       p.sparse_grad ? "sparse" : "dense", " one"));
    }
    if (backward && !p.sparse_grad &&
        (!param->grad.defined() || param->grad.shape() != p.shape ||
         param->grad.device() != store.device())) {
      return absl::FailedPreconditionError(
          absl::StrCat("parameter '", p.name, "' of function '", f.name(),
                       "' has no gradient of its shape in the store (",
                       param->grad.defined() ? param->grad.shape().DebugString() : "undefined",
                       "), which a backward run accumulates into"));
    }
  }
  return absl::OkStatus();
}

absl::Status CreateParameters(const vertex::Function& f, core::ParameterStore* store) {
  for (const vertex::ParamInfo& p : f.params()) {
    CAVS_ASSIGN_OR_RETURN(core::Parameter * param,
                          store->GetOrCreate(p.name, p.shape, p.init, p.sparse_grad));
    if (param->sparse_grad != p.sparse_grad) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter '", p.name, "' is used both as an embedding table and as a ",
                       "dense parameter"));
    }
  }
  return absl::OkStatus();
}

}  // namespace cavs::scheduler
