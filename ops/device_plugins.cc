// The device plug-ins of this build, registered with core at static initialization: the one
// place a device type is added to cavs (a plug-in, ops/device_plugin.h, and a line here).
//
// This file is cavs_ops's only object, above cavs_ops_cpu and cavs_ops_cuda (which know
// nothing of each other's registration), so the libraries link one way. Its registration runs
// in every program that links cavs::ops: the target's link option -u keeps the object (a static
// library's object that nothing calls into is otherwise left out of the link).
#include <memory>

#include "core/device_plugin.h"
#include "ops/cpu/cpu_plugin.h"
#if defined(CAVS_OPS_HAVE_CUDA)
#include "ops/cuda/cuda_plugin.h"
#endif

// Named by the -u link option of cavs_ops (ops/CMakeLists.txt).
extern "C" {
int cavs_device_plugins_anchor = 0;
}

namespace cavs::ops {
namespace {

bool RegisterBuiltinPlugins() {
  core::RegisterDevicePlugin(core::DeviceType::kCpu, cpu::MakeCpuPlugin());
#if defined(CAVS_OPS_HAVE_CUDA)
  core::RegisterDevicePlugin(core::DeviceType::kCuda, cuda::MakeCudaPlugin());
#endif
  return true;
}

[[maybe_unused]] const bool kRegistered = RegisterBuiltinPlugins();

}  // namespace
}  // namespace cavs::ops
