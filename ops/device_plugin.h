// ops::DevicePlugin: a device type's plug-in (core/device_plugin.h) with its ops::Kernels.
//
// One record per device type holds everything the device brings: its backend, optimizer kernels
// and page-locked host memory (the core part) and its kernels (GetKernels). The built-in ones,
// the CPU's (ops/cpu/cpu_plugin.h) and CUDA's (ops/cuda/cuda_plugin.h), are registered in
// ops/device_plugins.cc, the one list of the devices a build has; a new device is one plug-in
// and one line there.
//
// Thread-safety: as core::DevicePlugin's (immutable once registered).
#pragma once

#include <functional>

#include "absl/status/statusor.h"
#include "core/device_plugin.h"
#include "ops/kernels.h"

namespace cavs::ops {

struct DevicePlugin : core::DevicePlugin {
  // The kernels of device `ordinal` (one object per device for the life of the process), made
  // with GetKernelOptions() where made later than SetKernelOptions; an error Status where the
  // machine has no such device.
  std::function<absl::StatusOr<Kernels*>(int ordinal)> kernels;
};

}  // namespace cavs::ops
