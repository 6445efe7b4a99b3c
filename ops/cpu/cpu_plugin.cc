#include "ops/cpu/cpu_plugin.h"

#include "core/backend.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/cpu_optimizer.h"

namespace cavs::ops::cpu {

std::shared_ptr<const DevicePlugin> MakeCpuPlugin() {
  auto plugin = std::make_shared<DevicePlugin>();
  plugin->type = core::DeviceType::kCpu;
  plugin->backend = [](int) -> absl::StatusOr<core::Backend*> { return core::HostBackend(); };
  plugin->optimizer_kernels = CpuOptimizerKernels();
  plugin->kernels = [](int) -> absl::StatusOr<Kernels*> { return CpuKernels::Get(); };
  return plugin;
}

}  // namespace cavs::ops::cpu
