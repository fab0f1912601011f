// The header of a NumPy .npy array (format versions 1-3), as numpy.save writes it: what
// a webdataset member "KEY.npy" holds.
#ifndef EMBER_DAEMON_DATA_WEBDATASET_NPY_HEADER_H_
#define EMBER_DAEMON_DATA_WEBDATASET_NPY_HEADER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ember/ring_layout.h"
#include "ember/status.h"

namespace ember::daemon {

struct NpyHeader {
  ring::DType dtype = ring::DType::kUInt8;
  std::vector<int64_t> shape;  // () for a scalar
  uint64_t data_offset = 0;    // where the C-order elements start
  uint64_t data_bytes = 0;     // product(shape) * element size
};

// Parses the header of the .npy bytes `data` (`size` bytes), naming `name` in errors:
// kDataLoss for a bad magic, version or header, a dtype Ember has no tensor type for
// (little-endian or single-byte uint8/int8/int16/uint16/int32/int64/float32/float64;
// bool as uint8), Fortran order, more than 5 dimensions, or fewer bytes than the shape
// needs.
Result<NpyHeader> ParseNpyHeader(const std::string& name, const char* data, size_t size);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_WEBDATASET_NPY_HEADER_H_
