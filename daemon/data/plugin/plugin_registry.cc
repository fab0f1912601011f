#include "daemon/data/plugin/plugin_registry.h"

namespace ember::daemon {

namespace {

bool IsBuiltinStep(const std::string& step) {
  for (const char* builtin : kBuiltinImageSteps) {
    if (step == builtin) return true;
  }
  return false;
}

std::vector<std::string> Keys(const std::map<std::string, std::shared_ptr<const Plugin>>& map) {
  std::vector<std::string> keys;
  for (const auto& [key, plugin] : map) keys.push_back(key);
  return keys;
}

}  // namespace

Result<std::unique_ptr<PluginRegistry>> PluginRegistry::Load(
    const std::vector<std::string>& allowed_paths) {
  auto registry = std::unique_ptr<PluginRegistry>(new PluginRegistry());
  for (const std::string& path : allowed_paths) {
    if (path.empty() || path[0] != '/') {
      return InvalidArgument("plugin path '" + path + "' must be absolute");
    }
    EMBER_ASSIGN_OR_RETURN(std::shared_ptr<const Plugin> plugin,
                           LoadAllowedPlugin(path, allowed_paths));
    if (plugin->has_reader()) {
      auto [it, inserted] = registry->plugins_.emplace(plugin->format(), plugin);
      if (!inserted) {
        return AlreadyExists("plugins " + it->second->path() + " and " + plugin->path() +
                             " both read format '" + plugin->format() + "'");
      }
    }
    for (const ember_transform_v1* transform : plugin->transforms()) {
      const std::string step = transform->step_name;
      if (IsBuiltinStep(step)) {
        return AlreadyExists("plugin " + plugin->path() + ": step '" + step +
                             "' is a built-in pipeline step");
      }
      auto [it, inserted] = registry->transforms_.emplace(step, plugin);
      if (!inserted) {
        return AlreadyExists("plugins " + it->second->path() + " and " + plugin->path() +
                             " both add pipeline step '" + step + "'");
      }
    }
  }
  return registry;
}

std::shared_ptr<const Plugin> PluginRegistry::Find(const std::string& format) const {
  auto it = plugins_.find(format);
  return it == plugins_.end() ? nullptr : it->second;
}

std::vector<std::string> PluginRegistry::Formats() const { return Keys(plugins_); }

std::shared_ptr<const Plugin> PluginRegistry::FindTransform(const std::string& step) const {
  auto it = transforms_.find(step);
  return it == transforms_.end() ? nullptr : it->second;
}

std::vector<std::string> PluginRegistry::Transforms() const { return Keys(transforms_); }

}  // namespace ember::daemon
