// A stand-in "cuda:0" backed by host memory, for the device code paths (copies through the
// backend, dispatch by device type) on machines without a GPU. Shared by the core and
// distributed tests.
#pragma once

#include <cstring>

#include "absl/status/statusor.h"
#include "core/allocator.h"
#include "core/backend.h"

namespace cavs::core::test_devices {

class HostMemoryDevice final : public Backend {
 public:
  Device device() const override { return Device::Cuda(0); }
  Allocator* allocator() override { return CpuAllocator::Global(); }
  absl::Status CopyFromHost(void* dst, const void* src, size_t bytes) override {
    std::memmove(dst, src, bytes);
    ++copies;
    return absl::OkStatus();
  }
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    return CopyFromHost(dst, src, bytes);
  }
  absl::Status CopyWithin(void* dst, const void* src, size_t bytes) override {
    return CopyFromHost(dst, src, bytes);
  }
  absl::Status SetZero(void* dst, size_t bytes) override {
    std::memset(dst, 0, bytes);
    return absl::OkStatus();
  }
  absl::Status Synchronize() override { return absl::OkStatus(); }
  int copies = 0;  // copies made through this backend
};

// Registers the stand-in as the CUDA backend, once, and returns it; nullptr when a real CUDA
// backend is linked (then the stand-in is neither needed nor registered).
inline HostMemoryDevice* UseHostMemoryDevice() {
  static HostMemoryDevice* const device = []() -> HostMemoryDevice* {
    if (DeviceAvailable(DeviceType::kCuda)) return nullptr;
    static HostMemoryDevice* d = new HostMemoryDevice();
    RegisterBackendFactory(DeviceType::kCuda, [](int) -> absl::StatusOr<Backend*> { return d; });
    return d;
  }();
  return device;
}

}  // namespace cavs::core::test_devices
