// Backend: what core needs from a device to hold and move tensors. Each device type's backend
// comes with its plug-in (core/device_plugin.h); host memory (HostBackend) is built into core,
// so core never includes a CUDA header and a CPU-only build simply has no CUDA backend.
//
// Thread-safety: GetBackend may be called concurrently.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/allocator.h"
#include "core/device.h"

namespace cavs::core {

// Device-to-host copies queued together and waited for together (Backend::StartReadback), so
// a caller can queue more work (the next batch) before it needs the data.
class Readback {
 public:
  virtual ~Readback() = default;
  // Returns once every copy has arrived. Idempotent.
  [[nodiscard]] virtual absl::Status Wait() = 0;
  // Where part `i`'s bytes are on the host (8-byte aligned). Valid after Wait, for the
  // Readback's lifetime.
  const void* part(size_t i) const { return parts_[i]; }

 protected:
  std::vector<const void*> parts_;
};

// One copy of a readback: `bytes` from device memory at `src`.
struct ReadbackPart {
  const void* src;
  size_t bytes;
};

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
  // Queues a copy of every part to host memory the Readback owns, after the work queued so far,
  // and returns without waiting where the backend can (CUDA: pinned memory and an event); the
  // default copies with CopyToHost, so it has waited when it returns. The device memory must
  // stay valid until the copies are queued (stream order keeps a stream-ordered free after
  // them safe).
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<Readback>> StartReadback(
      const std::vector<ReadbackPart>& parts);
};

// Host memory: memcpy and memset, waiting for nothing. The CPU plug-in's backend, and the one
// GetBackend(Device::Cpu()) answers where no plug-in is registered for the CPU.
Backend* HostBackend();

// The backend of `device`, from its type's plug-in; an error if the build or the machine has
// no such device.
[[nodiscard]] absl::StatusOr<Backend*> GetBackend(Device device);

// True if a plug-in for `type` is registered and its backend reports at least one device.
bool DeviceAvailable(DeviceType type);

}  // namespace cavs::core
