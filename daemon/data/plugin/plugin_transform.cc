#include "daemon/data/plugin/plugin_transform.h"

#include <cstring>

namespace ember::daemon {

namespace {

std::string Where(const std::string& step, const Plugin& plugin) {
  return "step '" + step + "' (plugin " + plugin.path() + ")";
}

}  // namespace

TransformStep::TransformStep(std::shared_ptr<const Plugin> plugin,
                             const ember_transform_v1* table, void* state)
    : plugin_(std::move(plugin)), table_(table), state_(state), name_(table->step_name) {}

TransformStep::~TransformStep() { table_->destroy(state_); }

Result<std::shared_ptr<const TransformStep>> TransformStep::Create(
    std::shared_ptr<const Plugin> plugin, const std::string& step,
    const TransformParams& params) {
  if (plugin == nullptr) return InvalidArgument("step '" + step + "': no plugin");
  const ember_transform_v1* table = plugin->FindTransform(step);
  if (table == nullptr) {
    return NotFound("plugin " + plugin->path() + " adds no pipeline step '" + step + "'");
  }
  std::vector<const char*> keys;
  std::vector<const char*> values;
  for (const auto& [key, value] : params) {
    for (const char* earlier : keys) {
      if (key == earlier) {
        return InvalidArgument(Where(step, *plugin) + ": key '" + key + "' is given twice");
      }
    }
    keys.push_back(key.c_str());
    values.push_back(value.c_str());
  }
  // The arrays must be valid pointers even when empty.
  const char* const empty[1] = {nullptr};
  PluginErrorBuffer err;
  void* state = table->create(keys.empty() ? empty : keys.data(),
                              values.empty() ? empty : values.data(), params.size(),
                              err.data(), err.size());
  if (state == nullptr) {
    return InvalidArgument(Where(step, *plugin) + ": " + err.Message("create"));
  }
  return std::shared_ptr<const TransformStep>(
      new TransformStep(std::move(plugin), table, state));
}

Status TransformStep::Apply(uint8_t* pixels, int width, int height, uint64_t random) const {
  if (pixels == nullptr || width < 1 || height < 1) {
    return InvalidArgument(Where(name_, *plugin_) + ": cannot apply to a " +
                           std::to_string(width) + "x" + std::to_string(height) +
                           (pixels == nullptr ? " image at NULL" : " image"));
  }
  PluginErrorBuffer err;
  if (table_->apply(state_, pixels, width, height, random, err.data(), err.size()) != 0) {
    return DataLoss(Where(name_, *plugin_) + ": " + err.Message("apply"));
  }
  return Status::Ok();
}

}  // namespace ember::daemon
