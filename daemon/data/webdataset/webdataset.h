// Format "webdataset": WebDataset tar shards, read in place (no conversion).
//
//   spec.path   a directory of .tar shards, one .tar file, or a brace pattern as
//               webdataset writes them: /data/shard-{000000..000099}.tar (shard_list.h);
//               or http(s):// URLs, one or a brace pattern, read through the node's
//               shard cache (remote/shard_cache.h): registration fetches each shard to
//               index it (evicting others if it must); reads take a shard's members
//               from the cache, or by range GETs when it is not there (never a whole
//               shard for one sample); Prefetch() fetches the next batch's shards whole,
//               in the background, when they fit without evicting; or S3 objects,
//               s3://BUCKET/KEY.tar, a brace pattern of them or s3://BUCKET/PREFIX/ (its
//               .tar objects), read the same way with the daemon's S3 configuration
//               (remote/s3_config.h); its files are then s3+http(s)://ENDPOINT/BUCKET/KEY
//
// A sample is a run of consecutive members sharing a key, as webdataset groups them: a
// member's key is its path up to the first '.' of its file name, the rest (lowercased) its
// extension; members with no '.' in their file name are ignored. Samples are numbered in
// shard order, then archive order. Registration reads every shard's tar headers
// (tar_index.h) and keeps, per sample, where each of its tensors' bytes lie; reads then
// map the shards and take the bytes in place.
//
// Tensors, from the extensions of the first sample:
//   "image"          the first of jpg, jpeg, png: decoded by the spec's pipeline (its dtype
//                    and shape; pipeline.h), as imagefolder's
//   "label"          cls: an integer in ASCII (int64 scalar), as imagefolder's label
//   "<name>"         KEY.npy or KEY.<name>.npy: the array numpy.save wrote (its dtype and
//                    shape, the first sample's; another shape is the sample's data loss)
//   "<ext>"          any other extension: its bytes (uint8 [n], zero-padded to the longest
//   "<ext>_size"     of the set, n), and their count (int64 scalar): text, json, ...
// Extensions that only later samples have are ignored. At most ring::kMaxTensors tensors
// (8) and names of at most 15 bytes: a set whose first sample makes more, or longer, is
// refused at registration naming the extensions. A sample that lacks one of these
// extensions or has one twice, a cls that is not an integer and a corrupt image fail its
// read with kDataLoss naming the shard and the key (the dataset's on_error decides).
#ifndef EMBER_DAEMON_DATA_WEBDATASET_WEBDATASET_H_
#define EMBER_DAEMON_DATA_WEBDATASET_WEBDATASET_H_

#include <memory>

#include "common/env.h"
#include "daemon/catalog/dataset.h"
#include "daemon/catalog/indexing_progress.h"
#include "daemon/data/dataset_memory.h"
#include "daemon/data/plugin/plugin_registry.h"
#include "daemon/data/remote/shard_cache.h"
#include "daemon/data/source.h"
#include "ember/status.h"

namespace ember::daemon {

// Lists and indexes the shards and checks the pipeline. kNotFound for a missing shard or
// an empty directory; kDataLoss naming the shard for one that is not a plain tar
// (tar_index.h); kInvalidArgument for a bad pattern or pipeline, or a set whose first
// sample has nothing to serve. `memory` (may be null) is charged with the index, before
// it grows (16 bytes per tensor per sample). `progress` (may be null) is told the shards
// once listed and each shard once indexed (info().shards counts them).
Result<DatasetInfo> ProbeWebDataset(Env& env, const DatasetSpec& spec,
                                    const PluginRegistry* plugins = nullptr,
                                    DatasetMemory::Charge* memory = nullptr,
                                    ShardCache* cache = nullptr,
                                    IndexingProgress* progress = nullptr);

// As ProbeWebDataset, and the Source: local shards mapped (Env::MapReadOnly, no
// descriptor held), remote ones through `cache`; ParallelDecode() when it decodes images;
// Prefetch() asks the kernel for local samples' bytes and the cache for remote shards.
// Thread-safe; `cache` must outlive it.
Result<std::unique_ptr<Source>> LoadWebDataset(Env& env, const DatasetSpec& spec,
                                               const PluginRegistry* plugins = nullptr,
                                               DatasetMemory::Charge* memory = nullptr,
                                               ShardCache* cache = nullptr);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_WEBDATASET_WEBDATASET_H_
