// Shape: the dimensions of a dense, row-major tensor. A value type; rank 0 is a scalar.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"

namespace cavs::core {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t dim(int i) const { return dims_[i]; }
  int64_t operator[](int i) const { return dims_[i]; }
  const std::vector<int64_t>& dims() const { return dims_; }

  // The most elements a tensor may hold: 2^48, so that its byte size in any dtype, rounded up
  // for alignment, stays far from overflowing int64 or size_t. No machine holds that much.
  static constexpr int64_t kMaxElements = int64_t{1} << 48;

  // Product of the dimensions (1 for a scalar).
  // REQUIRES: CheckedNumElements() >= 0; a shape from user input is checked with that first.
  int64_t NumElements() const {
    int64_t n = 1;
    for (int64_t d : dims_) n *= d;
    return n;
  }
  // NumElements() if no dimension is negative and the product is at most kMaxElements, else
  // -1. Computed without overflow: NumElements() of dimensions like [2^62 + 1, 4] wraps to a
  // small number, which would then size a buffer.
  int64_t CheckedNumElements() const {
    int64_t n = 1;
    for (int64_t d : dims_) {
      if (d < 0) return -1;
      if (d != 0 && n > kMaxElements / d) return -1;
      n *= d;
    }
    return n;
  }
  // Rows and columns when the tensor is viewed as a matrix: all leading dims are rows.
  int64_t Cols() const { return dims_.empty() ? 1 : dims_.back(); }
  int64_t Rows() const { return Cols() == 0 ? 0 : NumElements() / Cols(); }

  std::string DebugString() const { return "[" + absl::StrJoin(dims_, ", ") + "]"; }

  friend bool operator==(const Shape& a, const Shape& b) { return a.dims_ == b.dims_; }
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }

 private:
  std::vector<int64_t> dims_;
};

}  // namespace cavs::core
