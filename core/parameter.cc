#include "core/parameter.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "core/random.h"

namespace cavs::core {

namespace {

absl::Status CheckNewShape(const std::string& name, const Shape& shape, bool sparse_grad) {
  for (int64_t d : shape.dims()) {
    if (d < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter '", name, "': negative dimension in shape ", shape.DebugString()));
    }
  }
  if (shape.CheckedNumElements() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("parameter '", name, "': shape ",
                                                   shape.DebugString(), " has more than ",
                                                   Shape::kMaxElements, " elements"));
  }
  if (sparse_grad && shape.rank() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameter '", name, "': a sparse gradient needs rows, but the shape is a scalar"));
  }
  return absl::OkStatus();
}

// True if `rows` holds no id twice.
bool AllUnique(const std::vector<int64_t>& rows) {
  if (std::adjacent_find(rows.begin(), rows.end(), std::greater_equal<int64_t>()) == rows.end()) {
    return true;  // strictly increasing: the common case, no copy
  }
  std::vector<int64_t> sorted = rows;
  std::sort(sorted.begin(), sorted.end());
  return std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
}

}  // namespace

absl::Status ValidateGradient(const Parameter& p) {
  const Shape& shape = p.value.shape();
  if (!p.sparse_grad) {
    if (!p.grad.defined() || p.grad.shape() != shape || p.grad.dtype() != DType::kFloat32) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter '", p.name, "': gradient ",
                       p.grad.defined() ? p.grad.DebugString() : std::string("undefined"),
                       " does not match the value's float32", shape.DebugString()));
    }
    return absl::OkStatus();
  }
  const int64_t n = static_cast<int64_t>(p.grad_rows.size());
  const Shape want({n, p.value.cols()});
  if (!p.grad_values.defined() || p.grad_values.shape() != want ||
      p.grad_values.dtype() != DType::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameter '", p.name, "': sparse gradient values ",
        p.grad_values.defined() ? p.grad_values.DebugString() : std::string("undefined"), " for ",
        n, " rows; expected float32", want.DebugString()));
  }
  for (int64_t r : p.grad_rows) {
    if (r < 0 || r >= p.value.rows()) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", p.name, "': gradient row ", r,
                                                     " out of range [0, ", p.value.rows(), ")"));
    }
  }
  if (!AllUnique(p.grad_rows)) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter '", p.name, "': sparse gradient rows are not unique"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Parameter*> ParameterStore::GetOrCreate(const std::string& name, const Shape& shape,
                                                       const Initializer& init, bool sparse_grad) {
  if (name.empty()) return absl::InvalidArgumentError("a parameter needs a non-empty name");
  if (Parameter* p = Find(name)) {
    if (p->value.shape() != shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter '", name, "' exists with shape ", p->value.shape().DebugString(),
                       " but is requested with shape ", shape.DebugString()));
    }
    if (p->sparse_grad != sparse_grad) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter '", name, "' exists with a ", p->sparse_grad ? "sparse" : "dense",
          " gradient but is requested with a ", sparse_grad ? "sparse" : "dense", " one"));
    }
    return p;
  }
  CAVS_RETURN_IF_ERROR(CheckNewShape(name, shape, sparse_grad));
  auto p = std::make_unique<Parameter>();
  p->name = name;
  p->sparse_grad = sparse_grad;
  CAVS_ASSIGN_OR_RETURN(p->value, Tensor::Empty(shape, DType::kFloat32, device_));
  CAVS_RETURN_IF_ERROR(InitializeTensor(p->value, init, seed_, name));
  if (sparse_grad) {
    CAVS_ASSIGN_OR_RETURN(p->grad_values,
                          Tensor::Zeros(Shape({0, shape.Cols()}), DType::kFloat32, device_));
  } else {
    CAVS_ASSIGN_OR_RETURN(p->grad, Tensor::Zeros(shape, DType::kFloat32, device_));
  }
  Parameter* raw = p.get();
  by_name_[name] = raw;
  params_.push_back(std::move(p));
  return raw;
}

Parameter* ParameterStore::Find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

absl::Status ParameterStore::ZeroGrad() {
  for (const auto& p : params_) {
    if (p->sparse_grad) {
      p->grad_rows.clear();
      CAVS_ASSIGN_OR_RETURN(p->grad_values, Tensor::Zeros(Shape({0, p->value.cols()}),
                                                          DType::kFloat32, p->value.device()));
    } else {
      CAVS_RETURN_IF_ERROR(p->grad.SetZero());
    }
  }
  return absl::OkStatus();
}

int64_t ParameterStore::NumElements() const {
  int64_t n = 0;
  for (const auto& p : params_) n += p->value.numel();
  return n;
}

absl::Status ParameterStore::AccumulateSparseGrad(Parameter* p, const std::vector<int64_t>& rows,
                                                  const Tensor& values) {
  CAVS_CHECK(p != nullptr);
  if (!p->sparse_grad) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter '", p->name, "' has a dense gradient, not a sparse one"));
  }
  CAVS_RETURN_IF_ERROR(ValidateGradient(*p));
  const int64_t cols = p->value.cols();
  const Shape want({static_cast<int64_t>(rows.size()), cols});
  if (!values.defined() || values.shape() != want || values.dtype() != DType::kFloat32) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter '", p->name, "': sparse gradient update ",
                     values.defined() ? values.DebugString() : std::string("undefined"), " for ",
                     rows.size(), " rows; expected float32", want.DebugString()));
  }
  for (int64_t r : rows) {
    if (r < 0 || r >= p->value.rows()) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", p->name, "': gradient row ", r,
                                                     " out of range [0, ", p->value.rows(), ")"));
    }
  }
  // Old rows first, then the new ones in order; a stable sort keeps that order within a row,
  // so the sums are the same on every run.
  std::vector<int64_t> all = p->grad_rows;
  all.insert(all.end(), rows.begin(), rows.end());
  std::vector<float> src = p->grad_values.ToVector();
  const std::vector<float> added = values.ToVector();
  src.insert(src.end(), added.begin(), added.end());
  std::vector<size_t> order(all.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return all[a] < all[b]; });
  std::vector<int64_t> merged_rows;
  std::vector<float> merged;
  for (size_t i : order) {
    const float* row = src.data() + i * cols;
    if (merged_rows.empty() || merged_rows.back() != all[i]) {
      merged_rows.push_back(all[i]);
      merged.insert(merged.end(), row, row + cols);
    } else {
      float* dst = merged.data() + merged.size() - cols;
      for (int64_t c = 0; c < cols; ++c) dst[c] += row[c];
    }
  }
  const Shape shape({static_cast<int64_t>(merged_rows.size()), cols});
  CAVS_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(shape, DType::kFloat32, p->value.device()));
  CAVS_RETURN_IF_ERROR(out.CopyFrom(Tensor::FromVector(merged, shape)));
  p->grad_rows = std::move(merged_rows);
  p->grad_values = std::move(out);
  return absl::OkStatus();
}

}  // namespace cavs::core
