// DevicePlugin: what one device type brings to cavs, in one record registered once.
//
// A plug-in holds, for one core::DeviceType, the backend of each of its devices (memory and
// copies, core/backend.h), the optimizer kernels for parameters on it (core/optimizer.h) and
// its page-locked host memory; the ops layer's extension of the record (ops::DevicePlugin,
// ops/device_plugin.h) adds its ops::Kernels. Core finds a device's parts here (GetBackend,
// GetOptimizerKernels, PinnedHostBlock) and never names a device library.
//
// The plug-ins a build of cavs has (the CPU; CUDA where configured) are registered in one place,
// ops/device_plugins.cc, at static initialization: linking cavs::ops is enough. A program that
// links core alone has host memory (GetBackend(Device::Cpu()) falls back to HostBackend()) and
// nothing else. Tests replace a plug-in with RegisterDevicePlugin and put the old one back.
//
// Thread-safety: the registry may be used from any thread. A registered plug-in is immutable;
// a replaced one stays alive while anyone holds it.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "core/device.h"

namespace cavs::core {

class Backend;
class OptimizerKernels;

struct DevicePlugin {
  DevicePlugin() = default;
  DevicePlugin(const DevicePlugin&) = default;
  DevicePlugin& operator=(const DevicePlugin&) = default;
  virtual ~DevicePlugin() = default;

  DeviceType type = DeviceType::kCpu;
  // The backend of device `ordinal` (one for the life of the process); an error Status where
  // the machine has no such device.
  std::function<absl::StatusOr<Backend*>(int ordinal)> backend;
  // The optimizer kernels for parameters on this device type (not owned, live for the
  // process); nullptr: none.
  OptimizerKernels* optimizer_kernels = nullptr;
  // A block of at least `bytes` of page-locked host memory from the plug-in's one pool, back in
  // the pool when the last copy of the pointer goes; a copy from it to the device may run
  // asynchronously. Empty, or nullptr returned: none (the CPU, or none to be had).
  std::function<std::shared_ptr<void>(size_t bytes)> pinned_host_block;
};

// Registers `plugin` for `type` (nullptr removes it) and returns the one it replaces.
// REQUIRES: plugin == nullptr || plugin->type == type.
std::shared_ptr<const DevicePlugin> RegisterDevicePlugin(
    DeviceType type, std::shared_ptr<const DevicePlugin> plugin);

// The plug-in of `type`; nullptr if none is registered.
std::shared_ptr<const DevicePlugin> GetDevicePlugin(DeviceType type);

// Page-locked host memory of `type`'s plug-in (DevicePlugin::pinned_host_block); nullptr where
// it has none.
std::shared_ptr<void> PinnedHostBlock(DeviceType type, size_t bytes);

}  // namespace cavs::core
