// Initializer: how a parameter's first value is drawn. A plain description (header-only, so
// the vertex DSL can carry it); the drawing is in core/random.h, reproducible from a seed and
// the parameter's name alone, identical on every machine and every rank.
#pragma once

#include <string>

#include "absl/strings/str_cat.h"

namespace cavs::core {

struct Initializer {
  enum class Kind { kZeros, kConstant, kUniform, kXavierUniform };
  Kind kind = Kind::kXavierUniform;
  float a = 0.0f;  // kConstant: the value; kUniform: low bound
  float b = 0.0f;  // kUniform: high bound

  static Initializer Zeros() { return {Kind::kZeros, 0, 0}; }
  static Initializer Constant(float v) { return {Kind::kConstant, v, 0}; }
  static Initializer Uniform(float lo, float hi) { return {Kind::kUniform, lo, hi}; }
  // U(-s, s) with s = sqrt(6 / (fan_in + fan_out)); fans are the first and last dimension.
  static Initializer XavierUniform() { return {Kind::kXavierUniform, 0, 0}; }

  std::string DebugString() const {
    switch (kind) {
      case Kind::kZeros:
        return "zeros";
      case Kind::kConstant:
        return absl::StrCat("constant(", a, ")");
      case Kind::kUniform:
        return absl::StrCat("uniform(", a, ", ", b, ")");
      case Kind::kXavierUniform:
        return "xavier_uniform";
    }
    return "?";
  }
};

}  // namespace cavs::core
