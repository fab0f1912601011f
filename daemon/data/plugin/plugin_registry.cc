#include "daemon/data/plugin/plugin_registry.h"

namespace ember::daemon {

Result<std::unique_ptr<PluginRegistry>> PluginRegistry::Load(
    const std::vector<std::string>& allowed_paths) {
  auto registry = std::unique_ptr<PluginRegistry>(new PluginRegistry());
  for (const std::string& path : allowed_paths) {
    if (path.empty() || path[0] != '/') {
      return InvalidArgument("plugin path '" + path + "' must be absolute");
    }
    EMBER_ASSIGN_OR_RETURN(std::shared_ptr<const Plugin> plugin,
                           LoadAllowedPlugin(path, allowed_paths));
    auto [it, inserted] = registry->plugins_.emplace(plugin->format(), plugin);
    if (!inserted) {
      return AlreadyExists("plugins " + it->second->path() + " and " + plugin->path() +
                           " both read format '" + plugin->format() + "'");
    }
  }
  return registry;
}

std::shared_ptr<const Plugin> PluginRegistry::Find(const std::string& format) const {
  auto it = plugins_.find(format);
  return it == plugins_.end() ? nullptr : it->second;
}

std::vector<std::string> PluginRegistry::Formats() const {
  std::vector<std::string> formats;
  for (const auto& [format, plugin] : plugins_) formats.push_back(format);
  return formats;
}

}  // namespace ember::daemon
