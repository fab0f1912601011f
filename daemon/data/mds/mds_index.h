// An MDS dataset's index.json (Mosaic Streaming, version 2), parsed and checked:
//
//   {"version": 2, "shards": [
//     {"version": 2, "format": "mds", "samples": 3, "size_limit": 67108864,
//      "column_names": ["image", "label"], "column_encodings": ["jpeg", "int"],
//      "column_sizes": [null, 8], "compression": null | "zstd" | "zstd:7",
//      "hashes": ["sha1", "xxh64"],
//      "raw_data": {"basename": "shard.00000.mds", "bytes": 2435,
//                   "hashes": {"sha1": "9589...", "xxh64": "a311..."}},
//      "zip_data": null | {"basename": "shard.00000.mds.zstd", "bytes": 818, "hashes": {...}}},
//     ...]}
//
// raw_data describes the shard's uncompressed bytes, zip_data (there iff compression is) the
// compressed file, which is then the only one written. Keys Ember does not use (size_limit,
// the "hashes" list, which each file's own "hashes" repeat) are ignored. Shards of other
// formats (json, csv, tsv) are refused.
//
// Encodings (streaming/base/format/mds/encodings.py) and their size in a sample:
//   bytes, str, json       variable   kBytes: served as bytes
//   jpeg, png              variable   kImage: decoded by the image pipeline
//   int (int64), int8 ... uint64, float16, float32, float64
//                          fixed      kScalar
//   str_int, str_float     variable   kStrInt / kStrFloat: a number in ASCII
//   ndarray[:DTYPE[:D1,D2,...]]       kNdArray: fixed when the encoding fixes both the dtype
//                                     and the shape, else variable, the value carrying
//                                     what the encoding leaves out (mds_shard.h)
// Others (pil, pkl, list[...], jpeg_array, str_decimal) are refused.
#ifndef EMBER_DAEMON_DATA_MDS_MDS_INDEX_H_
#define EMBER_DAEMON_DATA_MDS_MDS_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ember/status.h"

namespace ember::daemon {

// The most bytes an index.json may have, and the most shards it may list.
inline constexpr uint64_t kMaxMdsIndexBytes = uint64_t{256} << 20;
inline constexpr size_t kMaxMdsShards = 100000;

// The value types of the scalar and ndarray encodings (numpy's names).
enum class MdsType { kUInt8, kInt8, kUInt16, kInt16, kUInt32, kInt32, kUInt64, kInt64,
                     kFloat16, kFloat32, kFloat64 };

size_t MdsTypeSize(MdsType type);
const char* MdsTypeName(MdsType type);  // "uint8", ..., "float64"
bool ParseMdsType(const std::string& name, MdsType& type);
bool IsIntegerType(MdsType type);

enum class MdsEncoding { kBytes, kImage, kScalar, kStrInt, kStrFloat, kNdArray };

struct MdsColumn {
  std::string name;
  std::string encoding;  // as index.json writes it: "jpeg", "ndarray:float32:3,4"
  MdsEncoding kind = MdsEncoding::kBytes;
  std::optional<MdsType> type;  // kScalar: its type; kNdArray: the encoding's dtype, if any
  std::vector<int64_t> shape;   // kNdArray: the encoding's shape, if any (else empty)
  std::optional<uint32_t> size;  // bytes per sample when fixed; none: in each sample's head
};

struct MdsFileInfo {
  std::string basename;  // relative to index.json's directory (may hold '/', never "..")
  uint64_t bytes = 0;
  std::vector<std::pair<std::string, std::string>> hashes;  // (algorithm, hex digest)
};

struct MdsShardInfo {
  std::vector<MdsColumn> columns;
  std::string compression;  // "" (none), "zstd" or "zstd:LEVEL"
  MdsFileInfo raw;                 // its uncompressed bytes (at most 4 GiB: uint32 offsets)
  std::optional<MdsFileInfo> zip;  // the compressed file, iff compression is not ""
  uint32_t samples = 0;

  // The file that is there to read: zip's if compressed, else raw's.
  const MdsFileInfo& file() const { return zip ? *zip : raw; }
};

struct MdsIndex {
  std::vector<MdsShardInfo> shards;
};

// Parses the index.json `text`; `name` (its path or URL) begins every error.
// kInvalidArgument naming the field and its value: "NAME: not JSON: ...",
// "NAME: shards[2].column_sizes[1]: 4, encoding 'int64' has 8 bytes",
// "NAME: shards[0].compression: 'gz' (shard.00000.mds.gz): Ember decompresses zstd only",
// for a missing field or one of the wrong type, a version other than 2, an encoding Ember
// does not read, a hash algorithm it cannot check (mds_hash.h), a basename that leaves the
// directory, or more than kMaxMdsShards shards.
Result<MdsIndex> ParseMdsIndex(const std::string& name, const std::string& text);

// Whether two shards' columns are the same (names and encodings, in order).
bool SameColumns(const std::vector<MdsColumn>& a, const std::vector<MdsColumn>& b);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_MDS_MDS_INDEX_H_
