#include "core/backend.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/device_plugin.h"
#include "core/status.h"

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

// The default readback: copied at once into one heap buffer.
class CopiedReadback final : public Readback {
 public:
  static absl::StatusOr<std::unique_ptr<Readback>> Create(Backend& backend,
                                                          const std::vector<ReadbackPart>& parts) {
    auto r = std::unique_ptr<CopiedReadback>(new CopiedReadback());
    size_t total = 0;
    for (const ReadbackPart& p : parts) total += (p.bytes + 7) / 8;
    r->data_.resize(std::max<size_t>(total, 1));
    size_t at = 0;
    for (const ReadbackPart& p : parts) {
      void* dst = r->data_.data() + at;
      if (p.bytes > 0) CAVS_RETURN_IF_ERROR(backend.CopyToHost(dst, p.src, p.bytes));
      r->parts_.push_back(dst);
      at += (p.bytes + 7) / 8;
    }
    return r;
  }
  absl::Status Wait() override { return absl::OkStatus(); }

 private:
  CopiedReadback() = default;
  std::vector<uint64_t> data_;  // 8-byte aligned parts
};

}  // namespace

absl::StatusOr<std::unique_ptr<Readback>> Backend::StartReadback(
    const std::vector<ReadbackPart>& parts) {
  return CopiedReadback::Create(*this, parts);
}

Backend* HostBackend() {
  static CpuBackend* cpu = new CpuBackend();
  return cpu;
}

absl::StatusOr<Backend*> GetBackend(Device device) {
  std::shared_ptr<const DevicePlugin> plugin = GetDevicePlugin(device.type);
  if (plugin == nullptr || !plugin->backend) {
    if (device.is_cpu()) return HostBackend();
    return absl::FailedPreconditionError(
        absl::StrCat("device ", device.DebugString(), " requested, but this build of cavs has no ",
                     "backend for it (configure with -DCAVS_WITH_CUDA=ON and link cavs::ops)"));
  }
  return plugin->backend(device.ordinal);
}

bool DeviceAvailable(DeviceType type) {
  if (type == DeviceType::kCpu) return true;
  return GetBackend(Device{type, 0}).ok();
}

}  // namespace cavs::core
