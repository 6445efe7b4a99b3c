// The CPU's device plug-in (ops/device_plugin.h): host memory (core::HostBackend), the CPU
// kernels (cpu_kernels.h) and optimizer kernels (cpu_optimizer.h); no pinned memory, which the
// host does not need.
#pragma once

#include <memory>

#include "ops/device_plugin.h"

namespace cavs::ops::cpu {

// A new plug-in record for DeviceType::kCpu (ops/device_plugins.cc registers it).
std::shared_ptr<const DevicePlugin> MakeCpuPlugin();

}  // namespace cavs::ops::cpu
