#include "ops/cuda/cuda_register.h"

#include <mutex>

#include "core/backend.h"
#include "core/optimizer.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_optimizer.h"
#include "ops/kernels.h"

// Named by the linker option -u in ops/cuda/CMakeLists.txt, so that a static link keeps this
// object, and with it the static registration below, even when nothing calls into it.
extern "C" {
int cavs_cuda_register_anchor = 0;
}

namespace cavs::ops::cuda {

void RegisterCudaKernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    core::RegisterBackendFactory(
        core::DeviceType::kCuda,
        [](int ordinal) -> absl::StatusOr<core::Backend*> { return GetCudaBackend(ordinal); });
    RegisterKernels(core::DeviceType::kCuda, [](int ordinal) -> absl::StatusOr<Kernels*> {
      return GetCudaKernels(ordinal);
    });
    core::RegisterOptimizerKernels(core::DeviceType::kCuda, CudaOptimizerKernels::Global());
  });
}

namespace {
[[maybe_unused]] const bool kRegistered = (RegisterCudaKernels(), true);
}  // namespace

}  // namespace cavs::ops::cuda
