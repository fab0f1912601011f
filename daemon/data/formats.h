// The registry of dataset formats: from a spec's `format` to the code that probes and
// loads it. Adding a format means adding it here.
#ifndef EMBER_DAEMON_DATA_FORMATS_H_
#define EMBER_DAEMON_DATA_FORMATS_H_

#include <memory>
#include <optional>

#include "daemon/catalog/dataset.h"
#include "daemon/catalog/indexing_progress.h"
#include "common/caller_env.h"
#include "common/env.h"
#include "daemon/data/dataset_memory.h"
#include "daemon/data/plugin/plugin_registry.h"
#include "daemon/data/remote/shard_cache.h"
#include "daemon/data/source.h"
#include "ember/status.h"

namespace ember::daemon {

// What formats read with beyond a spec and its files: the plugins (format and transform;
// null: none) and the node's shard cache, through which shards at http(s):// URLs are read
// (null: such datasets are refused). Both must outlive the sources loaded with them.
// `progress` (null: none) is what a probe at registration reports its indexing into
// (formats with shards: webdataset, mds); it must outlive the probe.
struct FormatDeps {
  FormatDeps(const PluginRegistry* plugins = nullptr, ShardCache* shards = nullptr)  // NOLINT
      : plugins(plugins), shards(shards) {}
  const PluginRegistry* plugins;
  ShardCache* shards;
  IndexingProgress* progress = nullptr;
};

// kAlreadyExists naming the plugin if one of `plugins` claims a built-in format's name.
// main() checks this once, at start-up.
Status CheckPluginFormats(const PluginRegistry& plugins);

// Built-in formats first, then those of `deps.plugins`.
// kInvalidArgument naming the format and the known ones if `spec.format` is unknown.
// Plugin formats read their files directly, not through `env`. `memory` (may be null) is
// charged with what a format holds in emberd's memory (see DatasetMemory): a load's
// source holds it for its life; a probe only checks that the load would fit.
Result<DatasetInfo> ProbeDataset(Env& env, const DatasetSpec& spec, const FormatDeps& deps = {},
                                 DatasetMemory::Charge* memory = nullptr);
Result<std::unique_ptr<Source>> LoadDataset(Env& env, const DatasetSpec& spec,
                                            const FormatDeps& deps = {},
                                            DatasetMemory::Charge* memory = nullptr);

// ProbeDataset with the files read as `reads_as` (a CallerEnv over `base`; none: as the
// daemon). A plugin format's path, which the plugin reads itself, must then be readable
// by `reads_as` (a file it can open, or a directory it can list).
Result<DatasetInfo> ProbeDatasetAs(Env* base, const DatasetSpec& spec,
                                   const std::optional<Credentials>& reads_as,
                                   const FormatDeps& deps = {},
                                   DatasetMemory::Charge* memory = nullptr);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_FORMATS_H_
