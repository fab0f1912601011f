#include "daemon/data/plugin/plugin_source.h"

#include <cstring>
#include <string>
#include <vector>

#include "ember/ring_layout.h"

namespace ember::daemon {

namespace {

// No sample tensor may exceed this many bytes (1 GiB): a sanity bound on what a
// plugin reports, well above any real sample.
constexpr uint64_t kMaxTensorBytes = 1ull << 30;

Result<std::vector<TensorSpec>> ConvertTensors(const Plugin& plugin,
                                               const ember_dataset_info& info) {
  auto bad = [&](const std::string& what) {
    return InvalidArgument(plugin.format() + ": plugin " + plugin.path() +
                           " reported an invalid dataset: " + what);
  };
  if (info.count == 0) return bad("0 samples");
  if (info.num_tensors < 1 || info.num_tensors > EMBER_PLUGIN_MAX_TENSORS) {
    return bad(std::to_string(info.num_tensors) + " tensors (expected 1.." +
               std::to_string(EMBER_PLUGIN_MAX_TENSORS) + ")");
  }
  std::vector<TensorSpec> tensors;
  for (uint32_t t = 0; t < info.num_tensors; ++t) {
    const ember_tensor_info& in = info.tensors[t];
    const size_t name_len = strnlen(in.name, EMBER_PLUGIN_NAME_BYTES);
    const std::string where = "tensor " + std::to_string(t);
    if (name_len == 0 || name_len == EMBER_PLUGIN_NAME_BYTES) {
      return bad(where + ": name must be 1.." + std::to_string(EMBER_PLUGIN_NAME_BYTES - 1) +
                 " bytes, NUL-terminated");
    }
    TensorSpec spec;
    spec.name.assign(in.name, name_len);
    const auto dtype = static_cast<ring::DType>(in.dtype);
    if (ring::DTypeSize(dtype) == 0) {
      return bad(where + " '" + spec.name + "': unknown dtype code " + std::to_string(in.dtype));
    }
    spec.dtype = dtype;
    if (in.rank > EMBER_PLUGIN_MAX_RANK) {
      return bad(where + " '" + spec.name + "': rank " + std::to_string(in.rank) +
                 " (at most " + std::to_string(EMBER_PLUGIN_MAX_RANK) + ")");
    }
    uint64_t bytes = ring::DTypeSize(dtype);
    for (uint32_t d = 0; d < in.rank; ++d) {
      if (in.shape[d] < 1 || static_cast<uint64_t>(in.shape[d]) > kMaxTensorBytes / bytes) {
        return bad(where + " '" + spec.name + "': dimension " + std::to_string(d) + " is " +
                   std::to_string(in.shape[d]) + " (a sample tensor is 1 byte..1 GiB)");
      }
      bytes *= static_cast<uint64_t>(in.shape[d]);
      spec.shape.push_back(in.shape[d]);
    }
    tensors.push_back(std::move(spec));
  }
  return tensors;
}

Result<ember_dataset_info> CallProbe(const Plugin& plugin, const DatasetSpec& spec) {
  if (!plugin.has_reader()) {
    return FailedPrecondition("plugin " + plugin.path() + " reads no dataset format");
  }
  ember_dataset_info info;
  std::memset(&info, 0, sizeof(info));
  PluginErrorBuffer err;
  if (plugin.table().probe(spec.path.c_str(), spec.pipeline.c_str(), &info, err.data(),
                           err.size()) != 0) {
    return InvalidArgument(plugin.format() + ": " + err.Message("probe"));
  }
  return info;
}

class PluginSource : public Source {
 public:
  PluginSource(std::shared_ptr<const Plugin> plugin, DatasetInfo info, void* handle)
      : plugin_(std::move(plugin)), info_(std::move(info)), handle_(handle) {}
  ~PluginSource() override { plugin_->table().close(handle_); }

  const DatasetInfo& info() const override { return info_; }

  Status ReadSample(uint64_t id, const SampleContext& context,
                    void* const* dsts) const override {
    if (id >= info_.count) {
      return InvalidArgument("dataset '" + info_.spec.name + "': sample " + std::to_string(id) +
                             " is out of range (" + std::to_string(info_.count) + " samples)");
    }
    PluginErrorBuffer err;
    if (plugin_->table().read_sample(handle_, id, context.seed, context.epoch, dsts,
                                     err.data(), err.size()) != 0) {
      return DataLoss(plugin_->format() + ": " + err.Message("read_sample"));
    }
    return Status::Ok();
  }

  bool ParallelDecode() const override { return plugin_->table().parallel_decode != 0; }

 private:
  std::shared_ptr<const Plugin> plugin_;
  DatasetInfo info_;
  void* handle_;  // the plugin's, closed in the destructor
};

// The dataset `spec` as the plugin's probe described it.
Result<DatasetInfo> InfoFromProbe(const Plugin& plugin, const DatasetSpec& spec,
                                  const ember_dataset_info& probed) {
  DatasetInfo info;
  info.spec = spec;
  info.count = probed.count;
  EMBER_ASSIGN_OR_RETURN(info.tensors, ConvertTensors(plugin, probed));
  info.files.push_back(spec.path);
  return info;
}

}  // namespace

Result<DatasetInfo> ProbeWithPlugin(const std::shared_ptr<const Plugin>& plugin,
                                    const DatasetSpec& spec) {
  EMBER_ASSIGN_OR_RETURN(ember_dataset_info probed, CallProbe(*plugin, spec));
  return InfoFromProbe(*plugin, spec, probed);
}

Result<std::unique_ptr<Source>> LoadWithPlugin(const std::shared_ptr<const Plugin>& plugin,
                                               const DatasetSpec& spec) {
  EMBER_ASSIGN_OR_RETURN(ember_dataset_info probed, CallProbe(*plugin, spec));
  EMBER_ASSIGN_OR_RETURN(DatasetInfo info, InfoFromProbe(*plugin, spec, probed));
  PluginErrorBuffer err;
  void* handle = plugin->table().open(spec.path.c_str(), spec.pipeline.c_str(), &probed,
                                      err.data(), err.size());
  if (handle == nullptr) return InvalidArgument(plugin->format() + ": " + err.Message("open"));
  return std::unique_ptr<Source>(new PluginSource(plugin, std::move(info), handle));
}

}  // namespace ember::daemon
