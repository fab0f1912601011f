// Datasets read through a loaded plugin: the plugin's probe/open/read_sample behind the
// daemon's DatasetInfo and Source.
#ifndef EMBER_DAEMON_DATA_PLUGIN_PLUGIN_SOURCE_H_
#define EMBER_DAEMON_DATA_PLUGIN_PLUGIN_SOURCE_H_

#include <memory>

#include "daemon/catalog/dataset.h"
#include "daemon/data/plugin/plugin_loader.h"
#include "daemon/data/source.h"
#include "ember/status.h"

namespace ember::daemon {

// Calls the plugin's probe on spec.path and spec.pipeline and checks what it reports
// (1..4 tensors with names, known dtypes and positive dimensions; at least one sample).
// kInvalidArgument "<format>: <plugin's message>" if the plugin refuses the dataset or
// reports an invalid layout; kFailedPrecondition if `plugin` has no reader.
Result<DatasetInfo> ProbeWithPlugin(const std::shared_ptr<const Plugin>& plugin,
                                    const DatasetSpec& spec);

// Probes, then opens the dataset. The Source keeps the plugin loaded and closes its
// handle when destroyed; ReadSample is as thread-safe as the plugin promises
// (ember/plugin.h requires it) and returns kDataLoss "<format>: <message>" when the
// plugin's read_sample fails, kInvalidArgument for an id out of range.
Result<std::unique_ptr<Source>> LoadWithPlugin(const std::shared_ptr<const Plugin>& plugin,
                                               const DatasetSpec& spec);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_PLUGIN_PLUGIN_SOURCE_H_
