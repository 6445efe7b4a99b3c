#include "ops/cuda/cuda_plugin.h"

#include "core/backend.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_optimizer.h"

namespace cavs::ops::cuda {

std::shared_ptr<const DevicePlugin> MakeCudaPlugin() {
  auto plugin = std::make_shared<DevicePlugin>();
  plugin->type = core::DeviceType::kCuda;
  plugin->backend = [](int ordinal) -> absl::StatusOr<core::Backend*> {
    return GetCudaBackend(ordinal);
  };
  plugin->optimizer_kernels = CudaOptimizerKernels::Global();
  plugin->pinned_host_block = [](size_t bytes) { return PinnedBlock(bytes); };
  plugin->kernels = [](int ordinal) -> absl::StatusOr<Kernels*> { return GetCudaKernels(ordinal); };
  return plugin;
}

}  // namespace cavs::ops::cuda
