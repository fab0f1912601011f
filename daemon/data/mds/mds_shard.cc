#include "daemon/data/mds/mds_shard.h"

#include <zstd.h>

#include <cmath>
#include <cstring>
#include <memory>

#include "daemon/data/field_values.h"
#include "daemon/data/mds/mds_hash.h"

namespace ember::daemon {
namespace {

uint32_t LoadU32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// The dtype codes of NDArray._int2value_dtype.
bool TypeOfCode(uint8_t code, MdsType& type) {
  switch (code) {
    case 8: type = MdsType::kUInt8; return true;
    case 9: type = MdsType::kInt8; return true;
    case 16: type = MdsType::kUInt16; return true;
    case 17: type = MdsType::kInt16; return true;
    case 18: type = MdsType::kFloat16; return true;
    case 32: type = MdsType::kUInt32; return true;
    case 33: type = MdsType::kInt32; return true;
    case 34: type = MdsType::kFloat32; return true;
    case 64: type = MdsType::kUInt64; return true;
    case 65: type = MdsType::kInt64; return true;
    case 66: type = MdsType::kFloat64; return true;
    default: return false;
  }
}

template <typename From, typename To>
void Widen(const char* src, uint64_t count, void* dst) {
  for (uint64_t i = 0; i < count; ++i) {
    From value;
    std::memcpy(&value, src + i * sizeof(From), sizeof(From));
    const To wide = static_cast<To>(value);
    std::memcpy(static_cast<char*>(dst) + i * sizeof(To), &wide, sizeof(To));
  }
}

}  // namespace

Result<std::vector<uint32_t>> ReadMdsOffsets(const std::string& name, const char* data,
                                             uint64_t size, uint32_t samples) {
  const uint64_t header = 4 + 4 * (uint64_t{samples} + 1);
  if (size < header) {
    return DataLoss(name + ": " + std::to_string(size) + " bytes, too short for the header of " +
                    std::to_string(samples) + " samples (" + std::to_string(header) + " bytes)");
  }
  const uint32_t count = LoadU32(data);
  if (count != samples) {
    return DataLoss(name + ": holds " + std::to_string(count) + " samples, its index says " +
                    std::to_string(samples));
  }
  std::vector<uint32_t> offsets(uint64_t{samples} + 1);
  std::memcpy(offsets.data(), data + 4, offsets.size() * sizeof(uint32_t));
  for (size_t i = 0; i < offsets.size(); ++i) {
    const uint32_t previous = i == 0 ? static_cast<uint32_t>(header) : offsets[i - 1];
    if (offsets[i] < previous || offsets[i] > size) {
      return DataLoss(name + ": sample offset " + std::to_string(i) + " is " +
                      std::to_string(offsets[i]) + ", outside [" + std::to_string(previous) + ", " +
                      std::to_string(size) + "]");
    }
  }
  if (offsets.back() != size) {
    return DataLoss(name + ": its samples end at byte " + std::to_string(offsets.back()) +
                    ", the shard at " + std::to_string(size));
  }
  return offsets;
}

Status SplitMdsSample(const std::string& where, const std::vector<MdsColumn>& columns,
                      const char* data, uint32_t size, MdsSpan* out) {
  uint64_t head = 0;
  for (const MdsColumn& column : columns)
    if (!column.size) head += 4;
  if (head > size) {
    return DataLoss(where + ": " + std::to_string(size) + " bytes, too short for its " +
                    std::to_string(head / 4) + " column sizes");
  }
  uint64_t at = head;
  const char* sizes = data;
  for (size_t c = 0; c < columns.size(); ++c) {
    uint32_t column_size;
    if (columns[c].size) {
      column_size = *columns[c].size;
    } else {
      column_size = LoadU32(sizes);
      sizes += 4;
    }
    if (at + column_size > size) {
      return DataLoss(where + ": column '" + columns[c].name + "' (" + std::to_string(column_size) +
                      " bytes at byte " + std::to_string(at) + ") runs past the sample's " +
                      std::to_string(size) + " bytes");
    }
    out[c] = MdsSpan{static_cast<uint32_t>(at), column_size};
    at += column_size;
  }
  if (at != size) {
    return DataLoss(where + ": its columns end at byte " + std::to_string(at) + " of its " +
                    std::to_string(size));
  }
  return Status::Ok();
}

Result<MdsArray> ParseMdsArray(const std::string& where, const MdsColumn& column, const char* data,
                               uint32_t size) {
  MdsArray array;
  uint64_t at = 0;
  auto byte = [&]() -> int { return at < size ? static_cast<uint8_t>(data[at++]) : -1; };
  if (column.type) {
    array.type = *column.type;
  } else {
    const int code = byte();
    if (code < 0 || !TypeOfCode(static_cast<uint8_t>(code), array.type)) {
      return DataLoss(
          where + ": " +
          (code < 0 ? "empty" : "dtype code " + std::to_string(code) + " is not an ndarray dtype"));
    }
  }
  if (!column.shape.empty()) {
    array.shape = column.shape;
  } else {
    const int packed = byte();
    if (packed < 0) return DataLoss(where + ": cut short before its shape");
    const size_t ndim = static_cast<size_t>(packed >> 2);
    const size_t dim_bytes = size_t{1} << (packed & 3);
    if (ndim == 0 || ndim + 1 > ring::kMaxDims) {
      return DataLoss(where + ": " + std::to_string(ndim) + " dimensions, Ember serves 1 to " +
                      std::to_string(ring::kMaxDims - 1));
    }
    if (at + ndim * dim_bytes > size) return DataLoss(where + ": cut short in its shape");
    for (size_t d = 0; d < ndim; ++d) {
      uint64_t dim = 0;
      std::memcpy(&dim, data + at, dim_bytes);  // little-endian
      at += dim_bytes;
      if (dim == 0 || dim > size) {
        return DataLoss(where + ": dimension " + std::to_string(d) + " is " + std::to_string(dim) +
                        " (its value has " + std::to_string(size) + " bytes)");
      }
      array.shape.push_back(static_cast<int64_t>(dim));
    }
  }
  // Each dimension is below 2^32 (at most `size`, or the encoding's, checked at 4 GiB) and
  // multiplies a product of at most `left` (< 2^32): no overflow.
  const uint64_t left = size - at;
  uint64_t bytes = MdsTypeSize(array.type);
  bool exact = true;
  for (int64_t dim : array.shape) {
    if (bytes > left) {
      exact = false;
      break;
    }
    bytes *= static_cast<uint64_t>(dim);
  }
  if (!exact || bytes != left) {
    return DataLoss(where + ": " + std::to_string(left) + " bytes of elements, its dtype " +
                    MdsTypeName(array.type) + " and shape make " +
                    (exact ? std::to_string(bytes) : "more than that"));
  }
  array.data_offset = static_cast<uint32_t>(at);
  array.elements = bytes / MdsTypeSize(array.type);
  return array;
}

ring::DType TensorDTypeOf(MdsType type) {
  switch (type) {
    case MdsType::kUInt8: return ring::DType::kUInt8;
    case MdsType::kInt8: return ring::DType::kInt8;
    case MdsType::kUInt16: return ring::DType::kUInt16;
    case MdsType::kInt16: return ring::DType::kInt16;
    case MdsType::kInt32: return ring::DType::kInt32;
    case MdsType::kUInt32:
    case MdsType::kUInt64:
    case MdsType::kInt64: return ring::DType::kInt64;
    case MdsType::kFloat16:
    case MdsType::kFloat32: return ring::DType::kFloat32;
    case MdsType::kFloat64: return ring::DType::kFloat64;
  }
  return ring::DType::kUInt8;
}

bool ConvertMdsValues(MdsType type, const char* src, uint64_t count, void* dst) {
  switch (type) {
    case MdsType::kUInt32: Widen<uint32_t, int64_t>(src, count, dst); return true;
    case MdsType::kUInt64:
      for (uint64_t i = 0; i < count; ++i) {
        uint64_t value;
        std::memcpy(&value, src + i * 8, 8);
        if (value > static_cast<uint64_t>(INT64_MAX)) return false;
      }
      std::memcpy(dst, src, count * 8);
      return true;
    case MdsType::kFloat16:
      for (uint64_t i = 0; i < count; ++i) {
        uint16_t half;
        std::memcpy(&half, src + i * 2, 2);
        const float value = HalfToFloat(half);
        std::memcpy(static_cast<char*>(dst) + i * 4, &value, 4);
      }
      return true;
    default: std::memcpy(dst, src, count * MdsTypeSize(type)); return true;
  }
}

Status DecompressMdsShard(const std::string& name, const std::string& compression, const char* zip,
                          size_t zip_size, char* raw, size_t raw_size) {
  if (compression.substr(0, compression.find(':')) != "zstd") {
    return InvalidArgument(name + ": compression '" + compression +
                           "': Ember decompresses zstd only");
  }
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> context(ZSTD_createDCtx(), ZSTD_freeDCtx);
  if (context == nullptr) return ResourceExhausted(name + ": no memory to decompress it");
  ZSTD_inBuffer in{zip, zip_size, 0};
  ZSTD_outBuffer out{raw, raw_size, 0};
  // One frame or several back to back (as the zstd tool concatenates them). Once `raw` is
  // full, output goes to `probe`: any byte there is one too many.
  size_t hint = 1;  // 0 once a frame is decoded and flushed
  while (in.pos < in.size || hint != 0) {
    const size_t in_before = in.pos;
    const size_t out_before = out.pos;
    char probe;
    ZSTD_outBuffer extra{&probe, 1, 0};
    hint = ZSTD_decompressStream(context.get(), out.pos < out.size ? &out : &extra, &in);
    if (ZSTD_isError(hint)) {
      return DataLoss(name + ": not zstd data, or damaged (near compressed byte " +
                      std::to_string(in.pos) + "): " + ZSTD_getErrorName(hint));
    }
    if (extra.pos != 0) {
      return DataLoss(name + ": decompresses to more than the " + std::to_string(raw_size) +
                      " bytes its index says");
    }
    if (in.pos == in_before && out.pos == out_before)
      return DataLoss(name + ": cut short (its last zstd frame is not complete)");
  }
  if (out.pos != raw_size) {
    return DataLoss(name + ": decompresses to " + std::to_string(out.pos) +
                    " bytes, its index says " + std::to_string(raw_size));
  }
  return Status::Ok();
}

Status CheckMdsHashes(const std::string& name, const std::string& field, const MdsFileInfo& file,
                      const char* data, size_t size) {
  for (const auto& [algorithm, expected] : file.hashes) {
    EMBER_ASSIGN_OR_RETURN(std::string digest, MdsHexDigest(algorithm, data, size));
    if (digest != expected) {
      return DataLoss(name + ": its " + algorithm + " is " + digest + ", " + field + " says " +
                      expected);
    }
  }
  return Status::Ok();
}

}  // namespace ember::daemon
