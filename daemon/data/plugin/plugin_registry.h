// The dataset formats that plugins add: format name -> loaded plugin, built once at
// start-up from the paths listed under `plugins:` in emberd's config.
#ifndef EMBER_DAEMON_DATA_PLUGIN_PLUGIN_REGISTRY_H_
#define EMBER_DAEMON_DATA_PLUGIN_PLUGIN_REGISTRY_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "daemon/data/plugin/plugin_loader.h"
#include "ember/status.h"

namespace ember::daemon {

// Immutable once built; thread-safe.
class PluginRegistry {
 public:
  // Loads every path of `allowed_paths` (each must be absolute) and nothing else.
  // Fails on the first plugin that does not load (the error names its file) and on two
  // plugins claiming the same format (kAlreadyExists naming both files).
  static Result<std::unique_ptr<PluginRegistry>> Load(
      const std::vector<std::string>& allowed_paths);

  // The plugin for `format`, or nullptr if no plugin reads it.
  std::shared_ptr<const Plugin> Find(const std::string& format) const;

  // Format names in sorted order.
  std::vector<std::string> Formats() const;

 private:
  std::map<std::string, std::shared_ptr<const Plugin>> plugins_;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_PLUGIN_PLUGIN_REGISTRY_H_
