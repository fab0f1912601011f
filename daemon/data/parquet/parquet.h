// Format "parquet": Parquet files (the format Hugging Face datasets stores its sets in, and
// pandas', Spark's ...), read in place with Arrow C++ (no conversion).
//
//   spec.path   a .parquet file; a directory of them (sorted by name; when every one is a
//               Hugging Face split file, SPLIT-NNNNN-of-NNNNN.parquet, those of spec.split);
//               a brace pattern, /d/part-{0..9}.parquet; or http(s):// URLs (one or a brace
//               pattern) or S3 objects (s3://BUCKET/KEY.parquet, a brace pattern of them,
//               or s3://BUCKET/PREFIX/: its .parquet objects), as webdataset's shards
//               (webdataset/shard_list.h), read through the node's shard cache
//               (remote/shard_cache.h): registration fetches each file whole to read its
//               footer and scan it; a read decodes its row group from the cache's mapping,
//               or, for a file not in the cache, from range GETs of the row group's column
//               chunks (never the whole file for one sample); files are fetched whole ahead
//               of the streams that read them and evicted in the order they will read them
//               (remote/shard_reads.h)
//   spec.split  picks Hugging Face's split files of a directory (above); otherwise recorded
//   spec.pipeline  the image pipeline (pipeline_spec.h), and optionally a top-level
//               `columns: [image, label, ...]`: the columns served (by default all of them;
//               the others' types are not checked); the rest is the image pipeline
//
// A file is a shard; its rows are the samples, numbered in file order, then row order.
// Registration reads each file's footer (a file that is not Parquet, or a damaged one, is
// kDataLoss naming it), checks that every file has the first's columns, and decodes the
// columns whose longest value sizes a tensor (bytes, strings, lists of varying length). A
// load keeps each file's footer and its row groups' first rows (random access is by file,
// row group, row) and the most recently used row groups decoded, so that the rows of a
// row group, which a shuffle by shards reads close together, decode it once
// (row_group_cache.h).
//
// Tensors, from the columns:
//   "image"          the column named image if it holds images (binary, or a struct
//                    {bytes, path} as Hugging Face's Image feature stores them), else the
//                    first Image struct: decoded by the spec's pipeline (its dtype and shape)
//   "label"          an integer column named label: int64 scalar
//   "<name>"         integers and bools: int64 scalar (a uint64 over INT64_MAX is the
//                    sample's data loss); float16 and float32: float32; float64: float64
//   "<name>"         a fixed_size_list of numbers, or a list of numbers whose rows all have
//                    one length: an array of that length (elements: bool as uint8, uint32 and
//                    uint64 as int64, float16 as float32, others their own type)
//   "<name>"         binary and string columns, and the bytes of other image structs (and of
//   "<name>_size"    Hugging Face's Audio): the bytes zero-padded to the longest of the set,
//                    and their count (field_values.h); lists of numbers of varying lengths,
//                    and a list of integers named input_ids (token ids) always: the elements
//                    zero-padded to the longest row (input_ids as int64), and their count
// in that order ("image", "label", then column order). Any other type (timestamps,
// decimals, dictionaries, nested lists, maps, other structs) is refused at registration
// naming the file, the column and its type; so is a set that makes more than
// ring::kMaxTensors tensors, names over 15 bytes or a name twice.
//
// A null in a column served (a null list, a list holding a null, an image whose bytes are
// null), a corrupt image and a row group that does not decode fail the sample's read with
// kDataLoss naming the file, the row (in the file) and the column (the dataset's on_error
// decides).
//
// Memory (DatasetMemory, charged before it is held, by probes too): the index (per file its
// path, footer and row-group table) and the decoded row groups' budget: four times the
// largest row group's columns uncompressed (as footers say), at least 64 MiB, at most
// 1 GiB (or that one row group), and no more than the whole set uncompressed. What the
// decode threads are reading right now comes on top of it (a row group each at most).
#ifndef EMBER_DAEMON_DATA_PARQUET_PARQUET_H_
#define EMBER_DAEMON_DATA_PARQUET_PARQUET_H_

#include <memory>

#include "common/env.h"
#include "daemon/catalog/dataset.h"
#include "daemon/catalog/indexing_progress.h"
#include "daemon/data/dataset_memory.h"
#include "daemon/data/parquet/parquet_file.h"
#include "daemon/data/plugin/plugin_registry.h"
#include "daemon/data/remote/shard_cache.h"
#include "daemon/data/source.h"
#include "ember/status.h"

namespace ember::daemon {

// Lists the files and reads and scans each (see above) with `backend` (LoadParquetBackend
// in parquet_backend.h). kNotFound for a missing file or a directory without .parquet
// files; kDataLoss for a file that is not Parquet or does not decode; kInvalidArgument for
// a bad pattern or pipeline, columns that differ between files, a type not read, a set of
// tensors the ring cannot carry, or no rows; kFailedPrecondition for a URL without `cache`.
// `memory` (may be null) is charged as above; `progress` (may be null) is told the files
// once listed and each once read (info().shards counts them).
Result<DatasetInfo> ProbeParquet(const ParquetBackend& backend, Env& env, const DatasetSpec& spec,
                                 const PluginRegistry* plugins = nullptr,
                                 DatasetMemory::Charge* memory = nullptr,
                                 ShardCache* cache = nullptr, IndexingProgress* progress = nullptr);

// As ProbeParquet, and the Source: local files mapped (Env::MapReadOnly, no descriptor
// held), remote ones through `cache`; ParallelDecode() (it decodes row groups);
// Prefetch() asks the cache for remote files (these and what Follow()ed readers read next);
// with spec.shuffle "shards", info().shard_starts are the files' first sample ids.
// Thread-safe; `backend` and `cache` must outlive it.
Result<std::unique_ptr<Source>> LoadParquet(const ParquetBackend& backend, Env& env,
                                            const DatasetSpec& spec,
                                            const PluginRegistry* plugins = nullptr,
                                            DatasetMemory::Charge* memory = nullptr,
                                            ShardCache* cache = nullptr);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_PARQUET_PARQUET_H_
