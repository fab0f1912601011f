// An image pipeline step added by a plugin (ember_transform_v1 in ember/plugin.h): the
// plugin's create/apply/destroy behind a C++ object the image pipeline holds.
//
// Use from a pipeline: registry.FindTransform(name) gives the plugin adding step
// `name`; TransformStep::Create(plugin, name, the step's scalar settings as text) checks
// the settings; Apply transforms a rendered 8-bit RGB image (HWC, rows of width * 3
// bytes) in place, with a random value derived from (seed, epoch, sample id, step index).
#ifndef EMBER_DAEMON_DATA_PLUGIN_PLUGIN_TRANSFORM_H_
#define EMBER_DAEMON_DATA_PLUGIN_PLUGIN_TRANSFORM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "daemon/data/plugin/plugin_loader.h"
#include "ember/plugin.h"
#include "ember/status.h"

namespace ember::daemon {

// A step's settings in YAML order: (key, the scalar value's text), e.g.
// {{"threshold", "128"}, {"p", "0.5"}}.
using TransformParams = std::vector<std::pair<std::string, std::string>>;

// One configured step: holds the plugin's state, destroyed with the object, and keeps
// the plugin loaded while alive. Immutable; Apply may be called from many threads at
// once (ember/plugin.h requires the plugin to allow it).
class TransformStep {
 public:
  // Calls the plugin's create for step `step` with `params`. Errors name the step and
  // the plugin's file: kNotFound if `plugin` adds no such step; kInvalidArgument for a
  // key given twice or settings the plugin refuses (its message names the key and
  // value), e.g.
  //   "step 'solarize' (plugin /usr/lib/ember/libx.so): threshold: expected an integer
  //    in 0..255, got '300'"
  static Result<std::shared_ptr<const TransformStep>> Create(
      std::shared_ptr<const Plugin> plugin, const std::string& step,
      const TransformParams& params);

  TransformStep(const TransformStep&) = delete;
  TransformStep& operator=(const TransformStep&) = delete;
  ~TransformStep();  // the plugin's destroy

  const std::string& name() const { return name_; }
  const Plugin& plugin() const { return *plugin_; }

  // Transforms the width x height RGB image at `pixels` (width * height * 3 bytes) in
  // place through the plugin's apply. kInvalidArgument for a null image or a size < 1;
  // kDataLoss "step '<name>' (plugin <file>): <plugin's message>" if apply fails (the
  // sample cannot be produced, like a corrupt one).
  Status Apply(uint8_t* pixels, int width, int height, uint64_t random) const;

 private:
  TransformStep(std::shared_ptr<const Plugin> plugin, const ember_transform_v1* table,
                void* state);

  std::shared_ptr<const Plugin> plugin_;
  const ember_transform_v1* table_;  // owned by the plugin's library
  void* state_;                      // from create, passed to destroy
  std::string name_;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_PLUGIN_PLUGIN_TRANSFORM_H_
