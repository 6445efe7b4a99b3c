// The kernels registry: DeviceType -> factory, and the process's KernelOptions. The CPU kernels
// need no registration (they are constructed on first use, so static-initialization order never
// matters); CUDA kernels are registered by cavs::ops::cuda::RegisterCudaKernels() (ops/cuda), which
// GetKernels calls once on the first request for a CUDA device. Calling it explicitly, rather than
// relying on a static initializer alone, keeps the linker from dropping the CUDA objects out of the
// static library.
#include "ops/kernels.h"

#include <map>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "ops/cpu/cpu_kernels.h"

namespace cavs::ops {

#if defined(CAVS_OPS_HAVE_CUDA_KERNELS)
namespace cuda {
// Defined in ops/cuda: registers the CUDA factory (and core's CUDA backend).
void RegisterCudaKernels();
}  // namespace cuda
#endif

namespace {

struct Registry {
  std::mutex mu;
  std::map<core::DeviceType, KernelsFactory> factories;
  KernelOptions options;
  std::set<Kernels*> in_use;  // returned by a factory: SetKernelOptions configures them
};

Registry& GetRegistry() {
  static Registry* registry = new Registry();
  return *registry;
}

void EnsureBuiltinFactories(core::DeviceType type) {
#if defined(CAVS_OPS_HAVE_CUDA_KERNELS)
  if (type == core::DeviceType::kCuda) {
    static std::once_flag once;
    std::call_once(once, [] { cuda::RegisterCudaKernels(); });
  }
#else
  (void)type;
#endif
}

}  // namespace

void RegisterKernels(core::DeviceType type, KernelsFactory factory) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.factories[type] = std::move(factory);
}

absl::StatusOr<Kernels*> GetKernels(core::Device device) {
  if (device.is_cpu()) {
    if (device.ordinal != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("no kernels for cpu:", device.ordinal, ": the CPU is device cpu (0)"));
    }
    return cpu::CpuKernels::Get();
  }
  EnsureBuiltinFactories(device.type);
  KernelsFactory factory;
  {
    Registry& r = GetRegistry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.factories.find(device.type);
    if (it == r.factories.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "no kernels for device ", device.DebugString(),
          ": this build of cavs has none registered (configure with -DCAVS_WITH_CUDA=ON)"));
    }
    factory = it->second;
  }
  // Called outside the lock: a factory may take a while (driver and library start-up).
  absl::StatusOr<Kernels*> kernels = factory(device.ordinal);
  if (kernels.ok() && *kernels == nullptr) {
    return absl::InternalError(
        absl::StrCat("the kernels factory for ", device.DebugString(), " returned null"));
  }
  if (kernels.ok()) {
    Registry& r = GetRegistry();
    std::lock_guard<std::mutex> lock(r.mu);
    r.in_use.insert(*kernels);
  }
  return kernels;
}

absl::Status SetKernelOptions(const KernelOptions& options) {
  std::vector<Kernels*> kernels = {cpu::CpuKernels::Get()};
  {
    Registry& r = GetRegistry();
    std::lock_guard<std::mutex> lock(r.mu);
    r.options = options;
    kernels.insert(kernels.end(), r.in_use.begin(), r.in_use.end());
  }
  absl::Status status;
  for (Kernels* k : kernels) status.Update(k->Configure(options));
  return status;
}

KernelOptions GetKernelOptions() {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.options;
}

absl::StatusOr<std::string> ApplyEnvironmentKernelOptions(const std::string& program) {
  const EnvironmentOverride env = KernelOptionsFromEnvironment(GetKernelOptions());
  if (env.read.empty()) return std::string();
  CAVS_RETURN_IF_ERROR(SetKernelOptions(env.options));
  return absl::StrCat(program,
                      ": kernel options from the environment: ", absl::StrJoin(env.read, " "),
                      " -> ", KernelOptionsString(env.options));
}

}  // namespace cavs::ops
