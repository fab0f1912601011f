// The bytes of one MDS shard (streaming/base/format/mds/writer.py), uncompressed:
//
//   uint32 num_samples | uint32 offsets[num_samples + 1] | the writer's config (JSON) | samples
//
// little-endian; offsets count from the start of the shard, sample i is
// [offsets[i], offsets[i + 1]) and the last offset is the shard's size. A sample is
//
//   uint32 size of each variable-size column, in column order | each column's bytes, in order
//
// (fixed-size columns take their encoding's size, mds_index.h). An ndarray column's value is
//   [dtype: 1 byte, unless the encoding fixes it]
//   [ndim << 2 | log2(bytes per dim): 1 byte, then ndim uint8..uint64 dims, unless the
//    encoding fixes the shape]
//   elements, C order
// with dtype codes 8 uint8, 9 int8, 16 uint16, 17 int16, 18 float16, 32 uint32, 33 int32,
// 34 float32, 64 uint64, 65 int64, 66 float64.
//
// Compressed shards (zstd) hold these bytes compressed whole; DecompressMdsShard undoes it.
#ifndef EMBER_DAEMON_DATA_MDS_MDS_SHARD_H_
#define EMBER_DAEMON_DATA_MDS_MDS_SHARD_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "daemon/data/mds/mds_index.h"
#include "ember/ring_layout.h"
#include "ember/status.h"

namespace ember::daemon {

// The sample offsets (samples + 1 of them) of the shard `data` (`size` bytes), which its
// index says holds `samples` samples. kDataLoss naming `name` for a shard too short for
// its header, another sample count, or offsets that go back, point into the header or
// past the end, or do not end at its end.
Result<std::vector<uint32_t>> ReadMdsOffsets(const std::string& name, const char* data,
                                             uint64_t size, uint32_t samples);

// Where one column's bytes lie within a sample: [offset, offset + size).
struct MdsSpan {
  uint32_t offset = 0;
  uint32_t size = 0;
};

// Splits one sample (`size` bytes at `data`) into its columns: out[c] for columns[c].
// kDataLoss "WHERE: ..." when its head of sizes is cut short or the sizes do not add up
// to the sample's.
Status SplitMdsSample(const std::string& where, const std::vector<MdsColumn>& columns,
                      const char* data, uint32_t size, MdsSpan* out);

// An ndarray column's value: its dtype and shape (the encoding's, else the value's own)
// and where its elements lie within the value.
struct MdsArray {
  MdsType type = MdsType::kUInt8;
  std::vector<int64_t> shape;
  uint32_t data_offset = 0;
  uint64_t elements = 0;
};

// Parses the ndarray value of `column` (`size` bytes at `data`). kDataLoss "WHERE: ..." for
// an unknown dtype code, no dimension or more than ring::kMaxDims - 1, a dimension of 0, or
// a size other than what the dtype and shape make.
Result<MdsArray> ParseMdsArray(const std::string& where, const MdsColumn& column,
                               const char* data, uint32_t size);

// The tensor dtype of a value type: itself, or where the ring has none, the one that holds
// every value: uint32 and uint64 -> int64, float16 -> float32.
ring::DType TensorDTypeOf(MdsType type);

// Copies `count` values of `type` (little-endian, unaligned) from `src` to `dst` as
// TensorDTypeOf(type). False for a uint64 over INT64_MAX (dst is then partly written).
bool ConvertMdsValues(MdsType type, const char* src, uint64_t count, void* dst);

// Decompresses the shard `zip` (`zip_size` bytes, compressed as `compression` says: "zstd"
// or "zstd:LEVEL") into exactly `raw_size` bytes at `raw`. kDataLoss naming `name` when it
// is not zstd, is cut short, or holds another number of bytes.
Status DecompressMdsShard(const std::string& name, const std::string& compression,
                          const char* zip, size_t zip_size, char* raw, size_t raw_size);

// Checks `size` bytes at `data` against every hash of `file` (what `field` of index.json
// lists). kDataLoss "NAME: its ALGORITHM is X, FIELD says Y" on the first mismatch.
Status CheckMdsHashes(const std::string& name, const std::string& field,
                      const MdsFileInfo& file, const char* data, size_t size);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_MDS_MDS_SHARD_H_
