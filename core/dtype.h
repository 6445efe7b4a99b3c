// Element types. float32 is computed everywhere today; the half types and the index types are
// declared so that tensors, checkpoints and communicators can name them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cavs::core {

enum class DType : uint8_t { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2, kInt32 = 3, kInt64 = 4 };

constexpr size_t SizeOf(DType t) {
  switch (t) {
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kInt64:
      return 8;
  }
  return 0;
}

constexpr const char* DTypeName(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
  }
  return "unknown";
}

// True for the values a checkpoint or a peer may send; anything else is corrupt input.
constexpr bool IsValidDType(uint8_t raw) { return raw <= static_cast<uint8_t>(DType::kInt64); }

template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kFloat32;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::kInt32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kInt64;
};

}  // namespace cavs::core
