// Decoding packed image records: the codec that lets format "packed" serve an image
// folder packed by `emberctl pack`, through the same pipeline as format "imagefolder".
#ifndef EMBER_DAEMON_DATA_IMAGE_PACKED_IMAGES_H_
#define EMBER_DAEMON_DATA_IMAGE_PACKED_IMAGES_H_

#include "daemon/catalog/dataset.h"
#include "pack/packed_dataset.h"
#include "daemon/data/packed/packed_source.h"
#include "daemon/data/plugin/plugin_registry.h"
#include "ember/status.h"

namespace ember::daemon {

// A RecordCodecFactory: tensors "image" (the pipeline's output) and "label" (int64), as
// imagefolder gives them. kInvalidArgument if the pack's source format is not
// "imagefolder" or the spec's pipeline does not parse. Pipeline steps that are not built
// in come from `plugins` (none if null).
Result<RecordCodec> ImageRecordCodec(const pack::PackedDataset& dataset, const DatasetSpec& spec,
                                     const PluginRegistry* plugins = nullptr);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_IMAGE_PACKED_IMAGES_H_
