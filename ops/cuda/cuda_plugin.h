// The CUDA device plug-in (ops/device_plugin.h): the backend of each GPU (cuda_backend.h), its
// kernels (cuda_kernels.h), the fused multi-tensor optimizer kernels (cuda_optimizer.h) and the
// process's pool of page-locked host memory (PinnedBlock, cuda_backend.h), which the backend's
// readbacks and the distributed layer's host staging share.
//
// Making the record touches no CUDA API: a machine without a GPU only learns it when a device
// is first requested (the backend and kernels factories then answer FailedPrecondition). This
// header has no CUDA types, so CPU-side code may include it under CAVS_WITH_CUDA.
#pragma once

#include <memory>

#include "ops/device_plugin.h"

namespace cavs::ops::cuda {

// A new plug-in record for DeviceType::kCuda (ops/device_plugins.cc registers it).
std::shared_ptr<const DevicePlugin> MakeCudaPlugin();

}  // namespace cavs::ops::cuda
