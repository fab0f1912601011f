// How the formats that read samples' fields in place (webdataset members, MDS columns)
// serve them as tensors, one convention for all:
//   integers in ASCII      "label" and the like: decimal, surrounding whitespace allowed
//   bytes of any length    "<name>"      uint8 [n], zero-padded to the longest of the set (n,
//                                        at least 1)
//                          "<name>_size" int64 scalar, the sample's own count
//   arrays                 their dtype and shape, as ShapeText names them in errors
// A field over kMaxFieldBytes is refused as the sample's data loss.
#ifndef EMBER_DAEMON_DATA_FIELD_VALUES_H_
#define EMBER_DAEMON_DATA_FIELD_VALUES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "daemon/catalog/dataset.h"
#include "ember/ring_layout.h"

namespace ember::daemon {

// The most bytes one field of one sample may have (as imagefolder's files).
inline constexpr uint64_t kMaxFieldBytes = uint64_t{1} << 30;

// An integer in ASCII decimal (a leading '+' and surrounding whitespace allowed): false for
// anything else or a value outside int64.
bool ParseDecimalInt64(const char* data, size_t size, int64_t& value);

// A number as Python's str(float) writes it ("1.5", "1e-05", "inf", "nan"), surrounding
// whitespace allowed: false for anything else.
bool ParseDecimalDouble(const char* data, size_t size, double& value);

// The integer of `bytes` (1, 2, 4 or 8) bytes at `data`, in this machine's byte order,
// signed or not, as int64: false for another width or an unsigned one over INT64_MAX.
bool LoadInt64(const char* data, size_t bytes, bool is_signed, int64_t& value);

// IEEE 754 half precision to single (exact; NaNs keep their sign).
float HalfToFloat(uint16_t half);

// "(3,) float32", "(2,4) uint8", "() int64".
std::string ShapeText(ring::DType dtype, const std::vector<int64_t>& shape);

// The two tensors of a bytes field `name` whose longest value has `max_size` bytes:
// "<name>" uint8 [max(max_size, 1)] and "<name>_size" int64.
std::vector<TensorSpec> BytesTensors(const std::string& name, uint32_t max_size);

// Writes a sample's `size` bytes (size <= max_size) to `bytes_dst`, zero-padded to
// max(max_size, 1), and `size` as an int64 to `size_dst`.
void WriteBytesTensors(const char* data, uint32_t size, uint32_t max_size, void* bytes_dst,
                       void* size_dst);

// A tensor a column makes (a bytes column makes two: "<name>" and "<name>_size").
struct ColumnTensor {
  std::string tensor;
  std::string column;
};

// What the ring can carry: at most ring::kMaxTensors tensors, names of at most
// ring::kNameBytes - 1 bytes, each once. kInvalidArgument otherwise, naming `where` (the
// set's first index or file) and the columns, e.g.
//   "WHERE: column 'C' makes tensor 'N', longer than 15 bytes"
//   "WHERE: columns 'A' and 'B' both make tensor 'N'"
//   "WHERE: the columns (COLUMNS) make 9 tensors, at most 8 fit a batch"
Status CheckColumnTensors(const std::string& where, const std::vector<ColumnTensor>& tensors,
                          const std::string& columns);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_FIELD_VALUES_H_
