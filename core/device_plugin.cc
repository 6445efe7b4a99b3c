#include "core/device_plugin.h"

#include <map>
#include <mutex>
#include <utility>

#include "core/status.h"

namespace cavs::core {

namespace {

struct Registry {
  std::mutex mu;
  std::map<DeviceType, std::shared_ptr<const DevicePlugin>> plugins;
};

Registry& GetRegistry() {
  static Registry* registry = new Registry();  // never destroyed: used by static destructors
  return *registry;
}

}  // namespace

std::shared_ptr<const DevicePlugin> RegisterDevicePlugin(
    DeviceType type, std::shared_ptr<const DevicePlugin> plugin) {
  CAVS_CHECK(plugin == nullptr || plugin->type == type,
             "RegisterDevicePlugin: the plug-in is for another device type");
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::shared_ptr<const DevicePlugin>& slot = r.plugins[type];
  std::swap(slot, plugin);
  return plugin;
}

std::shared_ptr<const DevicePlugin> GetDevicePlugin(DeviceType type) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.plugins.find(type);
  return it == r.plugins.end() ? nullptr : it->second;
}

std::shared_ptr<void> PinnedHostBlock(DeviceType type, size_t bytes) {
  std::shared_ptr<const DevicePlugin> plugin = GetDevicePlugin(type);
  if (plugin == nullptr || !plugin->pinned_host_block) return nullptr;
  return plugin->pinned_host_block(bytes);
}

}  // namespace cavs::core
