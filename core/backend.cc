#include "core/backend.h"

#include <cstring>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace cavs::core {

namespace {

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::Cpu(); }
  Allocator* allocator() override { return CpuAllocator::Global(); }
  absl::Status CopyFromHost(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    return CopyFromHost(dst, src, bytes);
  }
  absl::Status CopyWithin(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0) std::memmove(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status SetZero(void* dst, size_t bytes) override {
    if (bytes > 0) std::memset(dst, 0, bytes);
    return absl::OkStatus();
  }
  absl::Status Synchronize() override { return absl::OkStatus(); }
};

struct Registry {
  std::mutex mu;
  absl::flat_hash_map<int, BackendFactory> factories;
};

Registry& GetRegistry() {
  static Registry* registry = new Registry();
  return *registry;
}

}  // namespace

void RegisterBackendFactory(DeviceType type, BackendFactory factory) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.factories[static_cast<int>(type)] = std::move(factory);
}

absl::StatusOr<Backend*> GetBackend(Device device) {
  if (device.is_cpu()) {
    static CpuBackend* cpu = new CpuBackend();
    return cpu;
  }
  BackendFactory factory;
  {
    Registry& r = GetRegistry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.factories.find(static_cast<int>(device.type));
    if (it == r.factories.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "device ", device.DebugString(), " requested, but this build of cavs has no ",
          "backend for it (configure with -DCAVS_WITH_CUDA=ON and link cavs::ops)"));
    }
    factory = it->second;
  }
  return factory(device.ordinal);
}

bool DeviceAvailable(DeviceType type) {
  if (type == DeviceType::kCpu) return true;
  return GetBackend(Device{type, 0}).ok();
}

}  // namespace cavs::core
