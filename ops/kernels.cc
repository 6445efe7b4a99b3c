// The kernels registry: GetKernels asks the device type's plug-in (ops/device_plugin.h,
// registered by ops/device_plugins.cc) and remembers the kernels it returned, so that
// SetKernelOptions can configure every device's kernels in use; and the process's KernelOptions.
#include "ops/kernels.h"

#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "ops/device_plugin.h"

namespace cavs::ops {

namespace {

struct Registry {
  std::mutex mu;
  KernelOptions options;
  std::set<Kernels*> in_use;  // returned by a plug-in: SetKernelOptions configures them
};

Registry& GetRegistry() {
  static Registry* registry = new Registry();
  return *registry;
}

}  // namespace

absl::StatusOr<Kernels*> GetKernels(core::Device device) {
  if (device.is_cpu() && device.ordinal != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("no kernels for cpu:", device.ordinal, ": the CPU is device cpu (0)"));
  }
  const std::shared_ptr<const core::DevicePlugin> registered = core::GetDevicePlugin(device.type);
  const auto* plugin = dynamic_cast<const DevicePlugin*>(registered.get());
  if (plugin == nullptr || !plugin->kernels) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no kernels for device ", device.DebugString(),
        ": this build of cavs has none registered (configure with -DCAVS_WITH_CUDA=ON)"));
  }
  // Called outside the lock: a factory may take a while (driver and library start-up).
  absl::StatusOr<Kernels*> kernels = plugin->kernels(device.ordinal);
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
  // The CPU's kernels take the options even before first use (they always exist).
  std::vector<Kernels*> kernels;
  if (absl::StatusOr<Kernels*> cpu = GetKernels(core::Device::Cpu()); cpu.ok()) {
    kernels.push_back(*cpu);
  }
  {
    Registry& r = GetRegistry();
    std::lock_guard<std::mutex> lock(r.mu);
    r.options = options;
    for (Kernels* k : r.in_use) {
      if (kernels.empty() || k != kernels.front()) kernels.push_back(k);
    }
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
