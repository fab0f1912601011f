// Test helpers: MDS datasets as Mosaic's MDSWriter writes them (index.json and shards,
// optionally zstd-compressed and hashed), to a directory.
#ifndef EMBER_DAEMON_DATA_MDS_MDS_TESTING_H_
#define EMBER_DAEMON_DATA_MDS_MDS_TESTING_H_

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace ember::daemon {

struct MdsTestColumn {
  std::string name;
  std::string encoding;
  std::optional<uint32_t> size;  // the encoding's fixed size; none: variable
};

// A sample: each column's encoded bytes, in column order.
using MdsTestSample = std::vector<std::string>;

// The bytes of a value as numpy's tobytes() writes it (little-endian).
template <typename T>
std::string MdsBytesOf(T value) {
  std::string out(sizeof(T), '\0');
  std::memcpy(out.data(), &value, sizeof(T));
  return out;
}

// An ndarray value with its dtype code and shape (uint8 dims) in front, as the encoding
// "ndarray" writes it.
std::string MdsDynamicArray(uint8_t dtype_code, const std::vector<uint8_t>& shape,
                            const std::string& elements);

// One raw shard: header, the writer's config, then the samples.
std::string MdsShardBytes(const std::vector<MdsTestColumn>& columns,
                          const std::vector<MdsTestSample>& samples);

struct MdsTestOptions {
  size_t per_shard = 3;             // samples per shard
  std::string compression;          // "" or "zstd[:LEVEL]"
  std::vector<std::string> hashes;  // algorithms (mds_hash.h)
};

// Writes `samples` as shards of options.per_shard samples (shard.00000.mds, ... or
// .mds.zstd) and their index.json into `dir` (created). Fails the running test on error.
void WriteMdsDataset(const std::string& dir, const std::vector<MdsTestColumn>& columns,
                     const std::vector<MdsTestSample>& samples, const MdsTestOptions& options = {});

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_MDS_MDS_TESTING_H_
