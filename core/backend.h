// Backend: what core needs from a device to hold and move tensors. The CPU backend is built
// in; the CUDA backend (ops/cuda) registers a factory at static-initialization time, so core
// never includes a CUDA header and a CPU-only build simply has no CUDA backend.
//
// Thread-safety: GetBackend and RegisterBackendFactory may be called concurrently.
#pragma once

#include <cstddef>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/allocator.h"
#include "core/device.h"

namespace cavs::core {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual Allocator* allocator() = 0;
  // Copies are ordered on the backend's stream; CopyToHost returns when the data is on the host.
  [[nodiscard]] virtual absl::Status CopyFromHost(void* dst, const void* src, size_t bytes) = 0;
  [[nodiscard]] virtual absl::Status CopyToHost(void* dst, const void* src, size_t bytes) = 0;
  [[nodiscard]] virtual absl::Status CopyWithin(void* dst, const void* src, size_t bytes) = 0;
  [[nodiscard]] virtual absl::Status SetZero(void* dst, size_t bytes) = 0;
  // Waits for all work queued on this backend.
  [[nodiscard]] virtual absl::Status Synchronize() = 0;
  // Reusable host memory for one upload at a time (the executor's per-batch plan): at least
  // `bytes`, valid until the next call, which first waits until the device has read the last
  // CopyFromHost from it; such a copy returns at once instead of waiting. nullptr where the
  // backend has no better host memory than the caller's own (the CPU). REQUIRES: one caller
  // at a time per device.
  [[nodiscard]] virtual absl::StatusOr<void*> HostStaging(size_t /*bytes*/) { return nullptr; }
};

using BackendFactory = std::function<absl::StatusOr<Backend*>(int ordinal)>;

// Registers the factory for a device type (the CUDA backend does this for kCuda).
void RegisterBackendFactory(DeviceType type, BackendFactory factory);

// The backend of `device`; an error if the build or the machine has no such device.
[[nodiscard]] absl::StatusOr<Backend*> GetBackend(Device device);

// True if a backend for `type` is registered and reports at least one device.
bool DeviceAvailable(DeviceType type);

}  // namespace cavs::core
