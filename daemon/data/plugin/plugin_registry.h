// What plugins add, built once at start-up from the paths listed under `plugins:` in
// emberd's config: dataset formats (format name -> plugin) and image pipeline steps
// (step name -> plugin).
#ifndef EMBER_DAEMON_DATA_PLUGIN_PLUGIN_REGISTRY_H_
#define EMBER_DAEMON_DATA_PLUGIN_PLUGIN_REGISTRY_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "daemon/data/plugin/plugin_loader.h"
#include "ember/status.h"

namespace ember::daemon {

// The image pipeline's built-in steps (daemon/data/image/pipeline.h), which no plugin
// may claim.
inline constexpr const char* kBuiltinImageSteps[] = {
    "random_resized_crop", "resize", "center_crop", "horizontal_flip", "normalize",
};

// Immutable once built; thread-safe.
class PluginRegistry {
 public:
  // Loads every path of `allowed_paths` (each must be absolute) and nothing else.
  // Fails on the first plugin that does not load (the error names its file), on two
  // plugins claiming the same format or step (kAlreadyExists naming both files) and on
  // a plugin claiming a built-in step (kAlreadyExists naming the file).
  static Result<std::unique_ptr<PluginRegistry>> Load(
      const std::vector<std::string>& allowed_paths);

  // The plugin for `format`, or nullptr if no plugin reads it.
  std::shared_ptr<const Plugin> Find(const std::string& format) const;

  // Format names in sorted order.
  std::vector<std::string> Formats() const;

  // The plugin that adds pipeline step `step`, or nullptr if none does. Build the step
  // with TransformStep::Create (plugin_transform.h).
  std::shared_ptr<const Plugin> FindTransform(const std::string& step) const;

  // Step names of all plugins in sorted order.
  std::vector<std::string> Transforms() const;

 private:
  std::map<std::string, std::shared_ptr<const Plugin>> plugins_;     // by format
  std::map<std::string, std::shared_ptr<const Plugin>> transforms_;  // by step name
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_PLUGIN_PLUGIN_REGISTRY_H_
