#include "daemon/data/idx.h"

#include "common/paths.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "ember/ring_layout.h"

namespace ember::daemon {

namespace {

constexpr uint32_t kMaxIdxDims = 4;
// Deflate cannot expand more than about 1032:1; bounds what a gzip file can promise.
constexpr uint64_t kMaxDeflateRatio = 1032;

// Which of the two files of a split, and the dimension counts it may have.
struct IdxKind {
  const char* what;  // "images", "labels"
  uint32_t min_ndim;
  uint32_t max_ndim;
};
constexpr IdxKind kImages = {"images", 2, kMaxIdxDims};
constexpr IdxKind kLabels = {"labels", 1, 1};

struct IdxHeader {
  ring::DType dtype = ring::DType::kUInt8;
  std::vector<uint32_t> dims;  // dims[0] is the sample count
  uint64_t header_bytes = 0;
  uint64_t payload_bytes = 0;
};

// One checked file. `bytes` holds the whole decompressed file (header, then payload in
// native byte order) when loaded, and nothing when only probed.
struct IdxArray {
  std::string path;
  IdxHeader header;
  std::string bytes;

  const char* payload() const { return bytes.data() + header.header_bytes; }
};

std::string Hex(uint8_t byte) {
  char buffer[8];
  std::snprintf(buffer, sizeof(buffer), "0x%02x", byte);
  return buffer;
}

bool DTypeFromIdx(uint8_t code, ring::DType* dtype) {
  switch (code) {
    case 0x08: *dtype = ring::DType::kUInt8; return true;
    case 0x09: *dtype = ring::DType::kInt8; return true;
    case 0x0B: *dtype = ring::DType::kInt16; return true;
    case 0x0C: *dtype = ring::DType::kInt32; return true;
    case 0x0D: *dtype = ring::DType::kFloat32; return true;
    case 0x0E: *dtype = ring::DType::kFloat64; return true;
  }
  return false;
}

uint32_t BigEndian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Checks the first four bytes: magic, element type, dimension count.
Status CheckHeaderStart(const std::string& path, const IdxKind& kind, const unsigned char* p) {
  if (p[0] != 0 || p[1] != 0) {
    std::string hint =
        (p[0] == 0x1f && p[1] == 0x8b) ? " (a gzip file without the .gz suffix?)" : "";
    return DataLoss(path + ": bad magic: expected an IDX file starting with 0x00 0x00, got " +
                    Hex(p[0]) + " " + Hex(p[1]) + hint);
  }
  ring::DType dtype;
  if (!DTypeFromIdx(p[2], &dtype)) {
    return DataLoss(path + ": unknown IDX element type " + Hex(p[2]) +
                    " (known: 0x08 uint8, 0x09 int8, 0x0b int16, 0x0c int32, 0x0d float32, "
                    "0x0e float64)");
  }
  const uint32_t ndim = p[3];
  if (ndim < 1 || ndim > kMaxIdxDims) {
    return DataLoss(path + ": dimension count " + std::to_string(ndim) + " is out of range 1.." +
                    std::to_string(kMaxIdxDims));
  }
  if (ndim < kind.min_ndim || ndim > kind.max_ndim) {
    std::string expected = kind.min_ndim == kind.max_ndim ? std::to_string(kind.min_ndim)
                                                          : std::to_string(kind.min_ndim) + ".." +
                                                                std::to_string(kind.max_ndim);
    return DataLoss(path + ": an IDX " + kind.what + " file has " + expected +
                    " dimensions, this one has " + std::to_string(ndim));
  }
  return Status::Ok();
}

uint64_t HeaderBytes(const unsigned char* p) { return 4 + 4 * uint64_t{p[3]}; }

// Decodes a complete header (after CheckHeaderStart) and checks its dimensions.
Result<IdxHeader> DecodeHeader(const std::string& path, const unsigned char* p) {
  IdxHeader header;
  DTypeFromIdx(p[2], &header.dtype);
  header.header_bytes = HeaderBytes(p);
  uint64_t payload = ring::DTypeSize(header.dtype);
  for (uint32_t i = 0; i < p[3]; ++i) {
    uint32_t dim = BigEndian32(p + 4 + 4 * i);
    if (dim == 0) {
      if (i == 0) return DataLoss(path + ": holds no samples (dimension 0 is 0)");
      return DataLoss(path + ": dimension " + std::to_string(i) + " is 0");
    }
    if (__builtin_mul_overflow(payload, uint64_t{dim}, &payload)) {
      return DataLoss(path + ": the header's dimensions multiply past 64 bits");
    }
    header.dims.push_back(dim);
  }
  header.payload_bytes = payload;
  return header;
}

// Checks a whole file given its first bytes (`prefix`, at least the header if the file
// has one) and its total decompressed length.
Result<IdxHeader> CheckContents(const std::string& path, const IdxKind& kind,
                                const std::string& prefix, uint64_t total_bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(prefix.data());
  if (total_bytes < 4) {
    return DataLoss(path + ": truncated: an IDX header needs at least 4 bytes, file has " +
                    std::to_string(total_bytes));
  }
  EMBER_RETURN_IF_ERROR(CheckHeaderStart(path, kind, p));
  const uint64_t header_bytes = HeaderBytes(p);
  if (total_bytes < header_bytes) {
    return DataLoss(path + ": truncated: the IDX header of a " + std::to_string(p[3]) +
                    "-dimensional array needs " + std::to_string(header_bytes) +
                    " bytes, file has " + std::to_string(total_bytes));
  }
  EMBER_ASSIGN_OR_RETURN(IdxHeader header, DecodeHeader(path, p));
  const uint64_t have = total_bytes - header_bytes;
  if (have < header.payload_bytes) {
    return DataLoss(path + ": truncated: header promises " + std::to_string(header.payload_bytes) +
                    " payload bytes, file has " + std::to_string(have));
  }
  if (have > header.payload_bytes) {
    return DataLoss(path + ": " + std::to_string(have - header.payload_bytes) +
                    " trailing bytes after the " + std::to_string(header.payload_bytes) +
                    " payload bytes the header promises");
  }
  return header;
}

// Collects decompressed output: the header always, the payload too when `keep`. Checks
// the header as soon as it is complete, so a bad file fails before it is inflated, and
// stops storing past what the header promises.
class Accumulator {
 public:
  // `memory` (may be null) is charged with what the header promises, before any of it is
  // stored (or, without `keep`, to check that a load would fit).
  Accumulator(const std::string& path, const IdxKind& kind, bool keep, uint64_t reserve_limit,
              DatasetMemory::Charge* memory)
      : path_(path), kind_(kind), keep_(keep), reserve_limit_(reserve_limit), memory_(memory) {}

  Status Append(const char* data, size_t n) {
    total_ += n;
    size_t used = 0;
    while (!header_known_ && used < n) {
      const uint64_t want = bytes_.size() < 4 ? 4 : HeaderBytes(Bytes());
      const size_t take = static_cast<size_t>(std::min<uint64_t>(want - bytes_.size(), n - used));
      bytes_.append(data + used, take);
      used += take;
      if (bytes_.size() == 4) EMBER_RETURN_IF_ERROR(CheckHeaderStart(path_, kind_, Bytes()));
      if (bytes_.size() > 4 && bytes_.size() == HeaderBytes(Bytes())) {
        EMBER_ASSIGN_OR_RETURN(IdxHeader header, DecodeHeader(path_, Bytes()));
        if (memory_ != nullptr)
          EMBER_RETURN_IF_ERROR(memory_->Add(header.header_bytes + header.payload_bytes, path_));
        header_known_ = true;
        cap_ = header.header_bytes + (keep_ ? header.payload_bytes : 0);
        bytes_.reserve(static_cast<size_t>(std::min(cap_, reserve_limit_)));
      }
    }
    if (used < n && bytes_.size() < cap_) {
      bytes_.append(data + used,
                    static_cast<size_t>(std::min<uint64_t>(n - used, cap_ - bytes_.size())));
    }
    return Status::Ok();
  }

  uint64_t total() const { return total_; }
  std::string& bytes() { return bytes_; }

 private:
  const unsigned char* Bytes() const {
    return reinterpret_cast<const unsigned char*>(bytes_.data());
  }

  const std::string& path_;
  const IdxKind& kind_;
  const bool keep_;
  const uint64_t reserve_limit_;
  DatasetMemory::Charge* const memory_;
  bool header_known_ = false;
  uint64_t cap_ = 0;  // bytes to store, known with the header
  uint64_t total_ = 0;
  std::string bytes_;
};

// Inflates a whole gzip file (all members, as gzip(1) does) into `sink`.
Status Gunzip(const std::string& path, std::string_view compressed, Accumulator& sink) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
    return ResourceExhausted(path + ": cannot initialize zlib");
  }
  struct Ender {
    z_stream* zs;
    ~Ender() { inflateEnd(zs); }
  } ender{&zs};

  constexpr size_t kMaxInput = size_t{1} << 30;  // avail_in is 32 bits
  std::vector<char> out(256 * 1024);
  const auto* input = reinterpret_cast<const Bytef*>(compressed.data());
  size_t offset = 0;  // compressed bytes handed to zlib so far
  while (true) {
    if (zs.avail_in == 0 && offset < compressed.size()) {
      const size_t n = std::min(kMaxInput, compressed.size() - offset);
      zs.next_in = const_cast<Bytef*>(input + offset);
      zs.avail_in = static_cast<uInt>(n);
      offset += n;
    }
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    const int ret = inflate(&zs, Z_NO_FLUSH);
    const size_t produced = out.size() - zs.avail_out;
    const uint64_t position = offset - zs.avail_in;  // compressed bytes consumed
    if (produced > 0) EMBER_RETURN_IF_ERROR(sink.Append(out.data(), produced));
    switch (ret) {
      case Z_OK: break;
      case Z_STREAM_END: {
        if (position == compressed.size()) return Status::Ok();
        const auto* next = input + position;
        if (compressed.size() - position >= 2 && next[0] == 0x1f && next[1] == 0x8b) {
          inflateReset(&zs);  // another gzip member follows
          break;
        }
        return DataLoss(path + ": " + std::to_string(compressed.size() - position) +
                        " bytes of trailing garbage after the gzip stream ends at byte " +
                        std::to_string(position));
      }
      case Z_BUF_ERROR:
        if (produced == 0 && zs.avail_in == 0 && offset == compressed.size()) {
          return DataLoss(path + ": truncated: the gzip stream stops at compressed byte " +
                          std::to_string(position) + " before its end (" +
                          std::to_string(sink.total()) + " bytes decompressed)");
        }
        break;
      case Z_MEM_ERROR: return ResourceExhausted(path + ": out of memory while decompressing");
      default:  // Z_DATA_ERROR (bad data, CRC or length), Z_NEED_DICT, Z_STREAM_ERROR
        return DataLoss(path + ": corrupt gzip data near compressed byte " +
                        std::to_string(position) + ": " +
                        (zs.msg != nullptr ? zs.msg : "error " + std::to_string(ret)));
    }
  }
}

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

template <typename Word, Word (*Swap)(Word)>
void SwapAll(char* data, uint64_t count) {
  for (uint64_t i = 0; i < count; ++i) {
    Word word;
    std::memcpy(&word, data + i * sizeof(Word), sizeof(Word));
    word = Swap(word);
    std::memcpy(data + i * sizeof(Word), &word, sizeof(Word));
  }
}

uint16_t Swap16(uint16_t v) { return __builtin_bswap16(v); }
uint32_t Swap32(uint32_t v) { return __builtin_bswap32(v); }
uint64_t Swap64(uint64_t v) { return __builtin_bswap64(v); }

// IDX payloads are big-endian; converts one in place to the host's order.
void ToNativeOrder(IdxArray& array) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  char* data = array.bytes.data() + array.header.header_bytes;
  const size_t size = ring::DTypeSize(array.header.dtype);
  const uint64_t count = array.header.payload_bytes / size;
  switch (size) {
    case 2: SwapAll<uint16_t, Swap16>(data, count); break;
    case 4: SwapAll<uint32_t, Swap32>(data, count); break;
    case 8: SwapAll<uint64_t, Swap64>(data, count); break;
    default: break;
  }
#else
  (void)array;
#endif
}

// The first `n` bytes of `file` (fewer if it is shorter).
Result<std::string> ReadPrefix(const ReadableFile& file, uint64_t n) {
  std::string bytes(static_cast<size_t>(std::min(n, file.Size())), '\0');
  EMBER_RETURN_IF_ERROR(file.ReadAt(0, bytes.size(), bytes.data()));
  return bytes;
}

// Reads and checks one file; with `keep`, also holds its payload in native order.
// `memory` (may be null) is charged with what is read into memory, before it is: a gzip
// file while it is inflated, the array the header promises; without `keep` (a probe) a raw
// file's payload is not read, but charged all the same, so that a probe fails where the
// load would.
Result<IdxArray> ReadIdx(Env& env, const std::string& path, const IdxKind& kind, bool keep,
                         DatasetMemory::Charge* memory) {
  IdxArray array;
  array.path = path;
  if (EndsWith(path, ".gz")) {
    // Inflated straight from the mapped file: no copy of the compressed bytes on the heap
    // (where, freed, they would stay in the allocator's arena beside the payload).
    EMBER_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mapped, env.MapReadOnly(path));
    const uint64_t size = mapped->size();
    if (memory != nullptr) EMBER_RETURN_IF_ERROR(memory->Add(size, path));
    (void)mapped->Advise(MappedFile::Access::kSequential);
    const uint64_t reserve_limit = size * kMaxDeflateRatio + 4096;
    Accumulator sink(path, kind, keep, reserve_limit, memory);
    Status inflated = Gunzip(path, std::string_view(mapped->data(), size), sink);
    if (mapped->shrunk()) inflated = mapped->ShrunkError();
    mapped.reset();
    if (memory != nullptr) memory->Remove(size);  // the compressed bytes are unmapped
    EMBER_RETURN_IF_ERROR(inflated);
    EMBER_ASSIGN_OR_RETURN(array.header, CheckContents(path, kind, sink.bytes(), sink.total()));
    if (keep) array.bytes = std::move(sink.bytes());
  } else {
    EMBER_ASSIGN_OR_RETURN(std::unique_ptr<ReadableFile> file, env.OpenForRead(path));
    const uint64_t size = file->Size();
    if (memory != nullptr) EMBER_RETURN_IF_ERROR(memory->Add(size, path));
    // The header's length is in its 4th byte; a probe reads no more than the header.
    EMBER_ASSIGN_OR_RETURN(std::string contents, ReadPrefix(*file, keep ? size : 4));
    if (!keep && contents.size() == 4) {
      const uint64_t header_bytes = HeaderBytes(reinterpret_cast<const unsigned char*>(contents.data()));
      EMBER_ASSIGN_OR_RETURN(contents, ReadPrefix(*file, header_bytes));
    }
    EMBER_ASSIGN_OR_RETURN(array.header, CheckContents(path, kind, contents, size));
    if (keep) array.bytes = std::move(contents);
  }
  if (keep) ToNativeOrder(array);
  return array;
}

// "<dir>/<base>.gz" if it exists, else "<dir>/<base>"; kNotFound naming both otherwise.
Result<std::string> FindFile(Env& env, const std::string& dir, const std::string& base) {
  const std::string raw = dir + "/" + base;
  const std::string gz = raw + ".gz";
  if (env.FileExists(gz)) return gz;
  if (env.FileExists(raw)) return raw;
  return NotFound(gz + ": no such file (nor an uncompressed " + raw + ")");
}

struct Split {
  DatasetInfo info;
  IdxArray images;
  IdxArray labels;
};

Result<Split> ReadSplit(Env& env, const DatasetSpec& spec, bool keep,
                        DatasetMemory::Charge* memory) {
  std::string prefix;
  if (spec.split == "train") {
    prefix = "train";
  } else if (spec.split == "test") {
    prefix = "t10k";
  } else {
    return InvalidArgument("unknown split '" + spec.split + "' (known: train, test)");
  }
  EMBER_ASSIGN_OR_RETURN(std::string dir, AbsolutePath(spec.path, "the dataset path"));
  if (!env.IsDirectory(dir)) {
    if (!env.FileExists(dir)) return NotFound(dir + ": no such directory");
    return InvalidArgument(dir + ": not a directory (an idx dataset is a directory)");
  }

  EMBER_ASSIGN_OR_RETURN(std::string images_path,
                         FindFile(env, dir, prefix + "-images-idx3-ubyte"));
  EMBER_ASSIGN_OR_RETURN(std::string labels_path,
                         FindFile(env, dir, prefix + "-labels-idx1-ubyte"));

  Split split;
  EMBER_ASSIGN_OR_RETURN(split.images, ReadIdx(env, images_path, kImages, keep, memory));
  EMBER_ASSIGN_OR_RETURN(split.labels, ReadIdx(env, labels_path, kLabels, keep, memory));
  const uint32_t count = split.images.header.dims[0];
  if (split.labels.header.dims[0] != count) {
    return DataLoss(images_path + ": holds " + std::to_string(count) + " images but " +
                    labels_path + " holds " + std::to_string(split.labels.header.dims[0]) +
                    " labels");
  }

  DatasetInfo& info = split.info;
  info.spec = spec;
  info.spec.path = dir;
  info.count = count;
  TensorSpec image{"image", split.images.header.dtype, {}};
  const std::vector<uint32_t>& dims = split.images.header.dims;
  image.shape.assign(dims.begin() + 1, dims.end());
  info.tensors.push_back(std::move(image));
  info.tensors.push_back(TensorSpec{"label", split.labels.header.dtype, {}});
  info.files = {images_path, labels_path};
  return split;
}

// The loaded split: immutable after construction, so ReadSample needs no lock.
class IdxSource : public Source {
 public:
  explicit IdxSource(Split split) : split_(std::move(split)) {
    for (const TensorSpec& tensor : split_.info.tensors)
      sample_bytes_.push_back(tensor.SampleBytes());
  }

  const DatasetInfo& info() const override { return split_.info; }

  Status ReadSample(uint64_t id, const SampleContext&, void* const* dsts) const override {
    EMBER_RETURN_IF_ERROR(CheckInRange(id));
    std::memcpy(dsts[0], split_.images.payload() + id * sample_bytes_[0],
                static_cast<size_t>(sample_bytes_[0]));
    std::memcpy(dsts[1], split_.labels.payload() + id * sample_bytes_[1],
                static_cast<size_t>(sample_bytes_[1]));
    return Status::Ok();
  }

 private:
  const Split split_;
  std::vector<uint64_t> sample_bytes_;  // per tensor
};

}  // namespace

Result<DatasetInfo> ProbeIdx(Env& env, const DatasetSpec& spec, DatasetMemory::Charge* memory) {
  EMBER_ASSIGN_OR_RETURN(Split split, ReadSplit(env, spec, /*keep=*/false, memory));
  return std::move(split.info);
}

Result<std::unique_ptr<Source>> LoadIdx(Env& env, const DatasetSpec& spec,
                                        DatasetMemory::Charge* memory) {
  EMBER_ASSIGN_OR_RETURN(Split split, ReadSplit(env, spec, /*keep=*/true, memory));
  return std::unique_ptr<Source>(std::make_unique<IdxSource>(std::move(split)));
}

}  // namespace ember::daemon
