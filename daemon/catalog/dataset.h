// What the daemon knows about a dataset: how it was registered (DatasetSpec) and what
// probing its files found (DatasetInfo, more than clients see of it: PublicInfo). Plain
// values, copied freely.
#ifndef EMBER_DAEMON_CATALOG_DATASET_H_
#define EMBER_DAEMON_CATALOG_DATASET_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/caller_env.h"
#include "daemon/access/principal.h"
#include "ember/daemon_status.h"
#include "ember/ring_layout.h"
#include "ember/status.h"

namespace ember::daemon {

// How a dataset is registered: the wire's own struct (ember/daemon_status.h).
using ::ember::DatasetSpec;

// Whose dataset it is, and whose rights its files are read with.
struct DatasetOwner {
  Principal principal;                  // unknown: registered before owners were kept
  std::optional<Credentials> reads_as;  // none: the daemon's own (a privileged owner)
};

// kInvalidArgument naming the value unless it is "fail" or "skip".
Status ValidateOnError(const std::string& on_error);

// kInvalidArgument naming the value unless `shuffle` is "samples" or "shards" and
// `shuffle_window` is in 1..kMaxShuffleWindow.
inline constexpr uint32_t kMaxShuffleWindow = 4096;
Status ValidateShuffle(const DatasetSpec& spec);

// kInvalidArgument naming the field and the value unless `spec.endpoint` is empty or
// "http(s)://HOST[:PORT]" (lowercase scheme, a host name or [IPv6] address, a port in
// 1..65535, at most a trailing '/': no path, query, fragment or user name), and for a
// set endpoint unless the path is an s3:// URL ("endpoint is for s3:// paths").
Status ValidateEndpoint(const DatasetSpec& spec);

// The most bytes each text field of a DatasetSpec may hold (what a client sends is
// bounded, and so are the errors that quote it).
inline constexpr size_t kMaxFormatBytes = 64;
inline constexpr size_t kMaxPathBytes = 4096;
inline constexpr size_t kMaxSplitBytes = 64;
inline constexpr size_t kMaxPipelineBytes = 64 * 1024;
inline constexpr size_t kMaxEndpointBytes = 256;

// kInvalidArgument naming the first field over its limit ("pipeline: 70000 bytes, at most
// 65536") or the first of path, format, split and endpoint holding a NUL byte; the name is
// ValidateDatasetName's.
Status ValidateSpecSizes(const DatasetSpec& spec);

struct TensorSpec {
  std::string name;  // "image", "label"
  ring::DType dtype;
  std::vector<int64_t> shape;  // per sample, without the batch dimension

  uint64_t SampleBytes() const;  // product(shape) * DTypeSize(dtype)
};

struct DatasetInfo {
  DatasetSpec spec;
  uint64_t count = 0;
  std::vector<TensorSpec> tensors;
  std::vector<std::string> files;  // absolute paths the dataset reads
  uint64_t fingerprint = 0;        // fingerprint.h; 0: not known
  DatasetOwner owner;
  // With spec.shuffle "shards": the first sample id of each shard its format found
  // (shards hold consecutive ids), then the count: the blocks of its jobs' shuffle
  // (ShuffleShape). Empty: shuffled over the set.
  std::vector<uint64_t> shard_starts;
  // The shards its format found (webdataset, mds); 0: a format without shards, or
  // registered before they were counted.
  uint64_t shards = 0;
  // What its format charged to the owner's dataset memory at registration (its index,
  // and what a load holds in memory besides); 0: nothing, or not known.
  uint64_t index_bytes = 0;
};

// What clients see of the dataset (ember/daemon_status.h): dtypes by name (DTypeName),
// the owner's uid only (0xffffffff when not known).
::ember::DatasetInfo PublicInfo(const DatasetInfo& info);

// Whether `caller` may stream and inspect the dataset (its owner, a shared dataset, see
// MayAccess). Removing it takes MayAccess to its owner.
bool MayRead(const Principal& caller, const DatasetInfo& info);

// kNotFound "dataset 'NAME' not found": what a missing dataset says, and all that a caller
// that may not read a dataset learns of it (no owner, no other code), so that errors are
// no oracle of other users' datasets.
Status DatasetNotFound(const std::string& name);

// Checks a dataset name: 1-64 characters of [A-Za-z0-9_.-], not starting with '.'.
Status ValidateDatasetName(const std::string& name);

// "uint8", "int8", "int16", "uint16", "int32", "int64", "float32", "float64".
const char* DTypeName(ring::DType dtype);
Result<ring::DType> ParseDType(const std::string& name);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_CATALOG_DATASET_H_
