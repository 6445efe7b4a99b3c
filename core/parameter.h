// ParameterStore: the named parameters of a model, with their gradients.
//
// A parameter has a dense value and either a dense gradient (same shape) or, for embedding
// tables, a row-sparse one: the touched row ids (unique) and one gradient row per id; such a
// parameter has no dense gradient storage (an embedding table's gradient would be as large as
// the table). Gradients live on the store's device and exist from creation on. Names
// are unique; creating an existing name again returns the same parameter if the shape agrees
// and an error naming the parameter and both shapes if not. Parameters keep their creation
// order, which is the order optimizers, checkpoints and communicators see them in.
//
// Values are drawn from (seed, name) alone (core/random.h), so the same seed gives the same
// parameters on every machine and rank, whatever the creation order.
//
// Thread-safety: not thread-safe; one trainer owns a store.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/device.h"
#include "core/initializer.h"
#include "core/shape.h"
#include "core/tensor.h"

namespace cavs::core {

struct Parameter {
  std::string name;
  Tensor value;  // the parameter, on the store's device
  Tensor grad;   // dense gradient, same shape as value; undefined when sparse_grad
  bool sparse_grad = false;
  // Row-sparse gradient (sparse_grad only): unique row ids and their gradient rows. The
  // store's own helpers keep the ids sorted; consumers only rely on them being unique.
  std::vector<int64_t> grad_rows;
  Tensor grad_values;  // [grad_rows.size(), value.cols()]
};

// OK if `p`'s gradient is well formed: a dense gradient of the value's shape, or unique sparse
// row ids within [0, value.rows()) with grad_values of shape [grad_rows.size(), value.cols()].
// Optimizers and communicators call it before trusting the gradient; the error names `p`.
[[nodiscard]] absl::Status ValidateGradient(const Parameter& p);

class ParameterStore {
 public:
  explicit ParameterStore(uint64_t seed = 1, Device device = Device::Cpu())
      : seed_(seed), device_(device) {}

  // Creates `name` with a value drawn from `init`, or returns the existing parameter if the
  // shape agrees. `sparse_grad` asks for a row-sparse gradient (embedding tables).
  [[nodiscard]] absl::StatusOr<Parameter*> GetOrCreate(const std::string& name, const Shape& shape,
                                                       const Initializer& init,
                                                       bool sparse_grad = false);
  // nullptr if absent.
  Parameter* Find(const std::string& name) const;
  const std::vector<std::unique_ptr<Parameter>>& parameters() const { return params_; }
  int size() const { return static_cast<int>(params_.size()); }

  // Zeroes every dense gradient and empties every sparse one.
  [[nodiscard]] absl::Status ZeroGrad();
  // Adds `values` (float32 [rows.size(), p->value.cols()], any device) to the sparse gradient
  // of `p` at `rows`; a row given twice, or already present, is summed, and grad_rows stays
  // unique and sorted. Errors (nothing changed): `p` not sparse_grad, a row out of range,
  // values of the wrong shape. Merges on the host; device gradients are copied both ways.
  [[nodiscard]] absl::Status AccumulateSparseGrad(Parameter* p, const std::vector<int64_t>& rows,
                                                  const Tensor& values);
  // Total number of parameter elements.
  int64_t NumElements() const;

  uint64_t seed() const { return seed_; }
  Device device() const { return device_; }

 private:
  uint64_t seed_;
  Device device_;
  std::vector<std::unique_ptr<Parameter>> params_;
  absl::flat_hash_map<std::string, Parameter*> by_name_;
};

}  // namespace cavs::core
