// Device: where a tensor lives. A plain value type; core never includes a CUDA header, the
// CUDA backend plugs in through core/backend.h.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace cavs::core {

enum class DeviceType { kCpu = 0, kCuda = 1 };

struct Device {
  DeviceType type = DeviceType::kCpu;
  int ordinal = 0;

  static Device Cpu() { return {DeviceType::kCpu, 0}; }
  static Device Cuda(int ordinal = 0) { return {DeviceType::kCuda, ordinal}; }

  bool is_cpu() const { return type == DeviceType::kCpu; }
  bool is_cuda() const { return type == DeviceType::kCuda; }
  std::string DebugString() const {
    return is_cpu() ? std::string("cpu") : absl::StrCat("cuda:", ordinal);
  }
  friend bool operator==(const Device& a, const Device& b) {
    return a.type == b.type && a.ordinal == b.ordinal;
  }
  friend bool operator!=(const Device& a, const Device& b) { return !(a == b); }
};

// Parses "cpu", "cuda" or "cuda:N".
inline absl::StatusOr<Device> ParseDevice(absl::string_view s) {
  if (s == "cpu") return Device::Cpu();
  if (s == "cuda") return Device::Cuda(0);
  if (absl::StartsWith(s, "cuda:")) {
    int ordinal = 0;
    if (absl::SimpleAtoi(s.substr(5), &ordinal) && ordinal >= 0) return Device::Cuda(ordinal);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown device '", s, "': expected cpu, cuda or cuda:N"));
}

}  // namespace cavs::core
