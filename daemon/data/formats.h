// The registry of dataset formats: from a spec's `format` to the code that probes and
// loads it. Adding a format means adding it here.
#ifndef EMBER_DAEMON_DATA_FORMATS_H_
#define EMBER_DAEMON_DATA_FORMATS_H_

#include <memory>

#include "daemon/catalog/dataset.h"
#include "daemon/core/env.h"
#include "daemon/data/source.h"
#include "ember/status.h"

namespace ember::daemon {

// kInvalidArgument naming the format and the known ones if `spec.format` is unknown.
Result<DatasetInfo> ProbeDataset(Env& env, const DatasetSpec& spec);
Result<std::unique_ptr<Source>> LoadDataset(Env& env, const DatasetSpec& spec);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_FORMATS_H_
