// A stand-in "cuda:0" backed by host memory, for the device code paths (copies through the
// backend, dispatch by device type) on machines without a GPU. Shared by the core and
// distributed tests.
#pragma once

#include <cstring>
#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "core/allocator.h"
#include "core/backend.h"
#include "core/device_plugin.h"
#include "core/optimizer.h"

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

// Registers the stand-in's plug-in for kCuda: its backend, and `optimizer_kernels` (nullptr:
// none). REQUIRES: `device` from UseHostMemoryDevice.
inline void RegisterHostMemoryDevice(HostMemoryDevice* device,
                                     OptimizerKernels* optimizer_kernels = nullptr) {
  auto plugin = std::make_shared<DevicePlugin>();
  plugin->type = DeviceType::kCuda;
  plugin->backend = [device](int) -> absl::StatusOr<Backend*> { return device; };
  plugin->optimizer_kernels = optimizer_kernels;
  RegisterDevicePlugin(DeviceType::kCuda, std::move(plugin));
}

// Registers the stand-in as the CUDA device (a plug-in with its backend and no optimizer
// kernels), once, and returns it; nullptr when a real CUDA device is present (then the
// stand-in is neither needed nor registered).
inline HostMemoryDevice* UseHostMemoryDevice() {
  static HostMemoryDevice* const device = []() -> HostMemoryDevice* {
    if (DeviceAvailable(DeviceType::kCuda)) return nullptr;
    static HostMemoryDevice* d = new HostMemoryDevice();
    RegisterHostMemoryDevice(d);
    return d;
  }();
  return device;
}

// The optimizer kernels of the CPU's plug-in (host memory: the stand-in's math).
inline OptimizerKernels* HostOptimizerKernels() { return *GetOptimizerKernels(DeviceType::kCpu); }

}  // namespace cavs::core::test_devices
