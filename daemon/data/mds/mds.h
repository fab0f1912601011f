// Format "mds": Mosaic Streaming's MDS datasets (MDSWriter's index.json and shards), read
// in place (no conversion).
//
//   spec.path   a directory holding index.json and its shards (or that index.json); a
//               directory whose subdirectories hold one each (as Mosaic's streams: read as
//               one set, in the order of the subdirectories' names; those without
//               index.json are ignored); or the http(s):// URL of such a directory (or of
//               its index.json), read through the node's shard cache
//               (remote/shard_cache.h): index.json by a ranged GET, each shard fetched
//               into the cache to be checked and indexed, samples then taken from the
//               cache, or by range GETs when their shard is not there (never a whole shard
//               for one sample); shards are fetched whole ahead of the streams that read
//               them and evicted in the order they will read them (remote/shard_reads.h).
//               Any other scheme:// goes the same way, as far as the cache's fetcher
//               reads it.
//   spec.split  recorded, not interpreted (Mosaic's split is a subdirectory: name it in
//               the path)
//
// Samples are numbered in index.json order (subdirectories in name order), then shard
// order. Registration reads index.json (mds_index.h: what is wrong with it is refused,
// naming the file and the field), then every shard once: its size against index.json's
// (a truncated shard is kDataLoss naming both), its hashes if index.json lists any
// (mds_hash.h: a mismatch is kDataLoss naming the shard and the algorithm), its sample
// offsets (mds_shard.h), and, where a column has no fixed size, every sample's head (for
// the longest bytes value, as webdataset's). It keeps 4 bytes per sample.
//
// Compressed shards (zstd; other compressions are refused at registration naming the shard
// and the compression) are decompressed once, when the set is loaded, into emberd's memory,
// and read from there for as long as the set is loaded: their uncompressed bytes are charged
// to the owner's dataset memory (DatasetMemory; a probe charges them too, so a set that
// would not fit is refused at registration). Reading MDS's small compressed shards in
// place would decompress a whole shard per sample in a shuffled order; keeping them in the
// shard cache would need the cache to hold bytes it did not fetch. A set too large for
// memory is stored uncompressed (MDSWriter's compression=None), which is read from the page
// cache or the shard cache like webdataset's shards.
//
// Tensors, from the columns (every shard's must be the first's):
//   "image"          the column named image if it is jpeg or png, else the first jpeg
//                    column, else the first png one: decoded by the spec's pipeline (its
//                    dtype and shape), as webdataset's jpg
//   "label"          a column named label with an integer encoding (int, int8 ... uint64,
//                    str_int): int64 scalar, as webdataset's cls
//   "<name>"         int8, int16, int32, int64 (int), uint8, uint16, float32, float64: a scalar
//                    of that dtype; uint32 and uint64 as int64 (a uint64 over INT64_MAX is
//                    the sample's data loss), float16 as float32; str_int int64, str_float
//                    float64
//   "<name>"         ndarray: its dtype (widened as scalars are) and shape, the encoding's or
//                    else the first sample's (another shape is the sample's data loss)
//   "<name>"         bytes, str, json, and other jpeg or png columns: the bytes (uint8 [n],
//   "<name>_size"    zero-padded to the longest of the set, n) and their count (int64), as
//                    webdataset's other extensions (field_values.h)
// in that order (the others in column order, which MDSWriter sorts by name). At most
// ring::kMaxTensors tensors, names of at most 15 bytes, each name once: a set that makes
// more, longer or the same twice is refused at registration naming index.json and the
// columns. A sample whose sizes do not add up, a value that does not parse and a corrupt
// image fail its read with kDataLoss naming the shard, the sample and its byte (the
// dataset's on_error decides).
#ifndef EMBER_DAEMON_DATA_MDS_MDS_H_
#define EMBER_DAEMON_DATA_MDS_MDS_H_

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

// Reads index.json and checks and indexes every shard (see above). kNotFound for a missing
// directory, index.json or shard; kInvalidArgument for a bad index.json, pipeline or set of
// columns, or no samples; kDataLoss for a shard whose size, hashes, header or compressed
// data is wrong; kFailedPrecondition for a URL without `cache`. `memory` (may be null) is
// charged with the index and the decompressed shards before they are made. `progress`
// (may be null) is told the shards with samples once listed and each once indexed
// (info().shards counts them).
Result<DatasetInfo> ProbeMds(Env& env, const DatasetSpec& spec,
                             const PluginRegistry* plugins = nullptr,
                             DatasetMemory::Charge* memory = nullptr,
                             ShardCache* cache = nullptr,
                             IndexingProgress* progress = nullptr);

// As ProbeMds, and the Source: local shards mapped (Env::MapReadOnly, no descriptor held),
// compressed ones decompressed in memory, remote ones through `cache`; ParallelDecode()
// when it decodes images; Prefetch() asks the kernel for local samples' bytes and the
// cache for remote shards (these and what Follow()ed readers read next); with
// spec.shuffle "shards", info().shard_starts are the shards' first sample ids.
// Thread-safe; `cache` must outlive it.
Result<std::unique_ptr<Source>> LoadMds(Env& env, const DatasetSpec& spec,
                                        const PluginRegistry* plugins = nullptr,
                                        DatasetMemory::Charge* memory = nullptr,
                                        ShardCache* cache = nullptr);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_MDS_MDS_H_
