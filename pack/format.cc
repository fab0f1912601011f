#include "pack/format.h"

#include <libdeflate.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace ember::pack {

namespace {

// Header field offsets (see format.h).
constexpr size_t kHeaderCrcOffset = 60;

void Put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void Put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t Get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t Get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string Hex32(uint32_t v) {
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "0x%08x", v);
  return buffer;
}

bool IsPowerOfTwo(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Appends little-endian values and strings to a byte string.
class Encoder {
 public:
  void U32(uint32_t v) {
    uint8_t b[4];
    Put32(b, v);
    out_.append(reinterpret_cast<const char*>(b), 4);
  }
  void U64(uint64_t v) {
    uint8_t b[8];
    Put64(b, v);
    out_.append(reinterpret_cast<const char*>(b), 8);
  }
  void Bytes(const char* p, size_t n) { out_.append(p, n); }
  void String(const std::string& s) {
    U32(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

// Reads little-endian values and strings from a byte range; every read is bounds-checked
// and a failure names the file, the field and its offset.
class Decoder {
 public:
  Decoder(const std::string& path, const std::string& bytes, size_t end)
      : path_(path), bytes_(bytes), end_(end) {}

  Status U32(const char* field, uint32_t* v) {
    EMBER_RETURN_IF_ERROR(Need(field, 4));
    *v = Get32(Data());
    pos_ += 4;
    return Status::Ok();
  }
  Status U64(const char* field, uint64_t* v) {
    EMBER_RETURN_IF_ERROR(Need(field, 8));
    *v = Get64(Data());
    pos_ += 8;
    return Status::Ok();
  }
  Status String(const std::string& field, std::string* s) {
    uint32_t n = 0;
    const size_t at = pos_;
    EMBER_RETURN_IF_ERROR(U32(field.c_str(), &n));
    if (n > end_ - pos_) {
      return DataLoss(path_ + ": " + field + " at byte " + std::to_string(at) + " claims " +
                      std::to_string(n) + " bytes, only " + std::to_string(end_ - pos_) +
                      " remain");
    }
    s->assign(bytes_.data() + pos_, n);
    pos_ += n;
    return Status::Ok();
  }
  size_t pos() const { return pos_; }

 private:
  const uint8_t* Data() const { return reinterpret_cast<const uint8_t*>(bytes_.data()) + pos_; }
  Status Need(const std::string& field, size_t n) const {
    if (end_ - pos_ >= n) return Status::Ok();
    return DataLoss(path_ + ": truncated: " + field + " at byte " + std::to_string(pos_) +
                    " needs " + std::to_string(n) + " bytes, only " +
                    std::to_string(end_ - pos_) + " remain");
  }

  const std::string& path_;
  const std::string& bytes_;
  const size_t end_;
  size_t pos_ = 0;
};

Status CheckShardFileName(const std::string& path, const std::string& name, size_t shard) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    return DataLoss(path + ": shard " + std::to_string(shard) + " has an invalid file name '" +
                    name + "'");
  }
  return Status::Ok();
}

}  // namespace

std::string ShardFileName(uint32_t shard_number) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "shard-%05u.emb", shard_number);
  return buffer;
}

uint32_t Crc32(const void* data, size_t size, uint32_t crc) {
  // zlib's CRC-32, computed by libdeflate (carry-less multiply where the CPU has it: ~5x
  // zlib's speed on a record, which emberd checks each time it reads one).
  return libdeflate_crc32(crc, data, size);
}

void EncodeShardHeader(const ShardHeader& header, uint8_t* out) {
  std::memset(out, 0, kShardHeaderBytes);
  std::memcpy(out, kShardMagic, 8);
  Put32(out + 8, kFormatVersion);
  Put32(out + 12, static_cast<uint32_t>(kShardHeaderBytes));
  Put64(out + 16, header.record_count);
  Put64(out + 24, header.index_offset);
  Put64(out + 32, header.index_bytes);
  Put32(out + 40, header.record_alignment);
  Put32(out + 44, header.index_crc);
  Put32(out + 48, header.shard_number);
  Put32(out + kHeaderCrcOffset, Crc32(out, kHeaderCrcOffset));
}

Result<ShardHeader> DecodeShardHeader(const std::string& path, const uint8_t* data,
                                      uint64_t file_bytes) {
  if (file_bytes < kShardHeaderBytes) {
    return DataLoss(path + ": truncated: a shard header needs " +
                    std::to_string(kShardHeaderBytes) + " bytes, file has " +
                    std::to_string(file_bytes));
  }
  if (std::memcmp(data, kShardMagic, 8) != 0) {
    return DataLoss(path + ": bad magic at byte 0: not an Ember shard file (or one whose "
                           "writing never finished)");
  }
  const uint32_t version = Get32(data + 8);
  if (version != kFormatVersion) {
    return DataLoss(path + ": shard format version " + std::to_string(version) +
                    " at byte 8 is not supported (this build reads version " +
                    std::to_string(kFormatVersion) + ")");
  }
  const uint32_t stored_crc = Get32(data + kHeaderCrcOffset);
  const uint32_t crc = Crc32(data, kHeaderCrcOffset);
  if (stored_crc != crc) {
    return DataLoss(path + ": header checksum mismatch (bytes 0..63): stored " +
                    Hex32(stored_crc) + ", computed " + Hex32(crc));
  }
  const uint32_t header_bytes = Get32(data + 12);
  if (header_bytes != kShardHeaderBytes) {
    return DataLoss(path + ": header size " + std::to_string(header_bytes) + " at byte 12 is not " +
                    std::to_string(kShardHeaderBytes));
  }
  ShardHeader header;
  header.record_count = Get64(data + 16);
  header.index_offset = Get64(data + 24);
  header.index_bytes = Get64(data + 32);
  header.record_alignment = Get32(data + 40);
  header.index_crc = Get32(data + 44);
  header.shard_number = Get32(data + 48);
  if (!IsPowerOfTwo(header.record_alignment) || header.record_alignment < kMinRecordAlignment ||
      header.record_alignment > kMaxRecordAlignment) {
    return DataLoss(path + ": record alignment " + std::to_string(header.record_alignment) +
                    " at byte 40 is not a power of two in " + std::to_string(kMinRecordAlignment) +
                    ".." + std::to_string(kMaxRecordAlignment));
  }
  if (header.index_offset < kShardHeaderBytes || header.index_offset % 8 != 0) {
    return DataLoss(path + ": index offset " + std::to_string(header.index_offset) +
                    " at byte 24 is not a multiple of 8 past the header");
  }
  uint64_t index_end = 0;
  if (__builtin_add_overflow(header.index_offset, header.index_bytes, &index_end) ||
      index_end > file_bytes) {
    return DataLoss(path + ": truncated: the index ends at byte " +
                    std::to_string(header.index_offset) + " + " +
                    std::to_string(header.index_bytes) + ", file has " +
                    std::to_string(file_bytes) + " bytes");
  }
  if (index_end < file_bytes) {
    return DataLoss(path + ": " + std::to_string(file_bytes - index_end) +
                    " trailing bytes after the index, which ends at byte " +
                    std::to_string(index_end));
  }
  if (header.record_count > header.index_bytes / kIndexEntryBytes) {
    return DataLoss(path + ": " + std::to_string(header.record_count) +
                    " records need an index of at least " +
                    std::to_string(header.record_count) + " * " +
                    std::to_string(kIndexEntryBytes) + " bytes, it has " +
                    std::to_string(header.index_bytes));
  }
  return header;
}

void EncodeIndexEntry(const IndexEntry& entry, uint8_t* out) {
  Put64(out, entry.offset);
  Put64(out + 8, entry.size);
  Put64(out + 16, static_cast<uint64_t>(entry.label));
  Put64(out + 24, entry.path_offset);
  Put32(out + 32, entry.path_bytes);
  Put32(out + 36, entry.crc);
}

IndexEntry DecodeIndexEntry(const uint8_t* in) {
  IndexEntry entry;
  entry.offset = Get64(in);
  entry.size = Get64(in + 8);
  entry.label = static_cast<int64_t>(Get64(in + 16));
  entry.path_offset = Get64(in + 24);
  entry.path_bytes = Get32(in + 32);
  entry.crc = Get32(in + 36);
  return entry;
}

std::string EncodeManifest(const Manifest& manifest) {
  Encoder e;
  e.Bytes(kManifestMagic, 8);
  e.U32(kFormatVersion);
  e.U32(0);
  e.U64(manifest.record_count);
  e.U32(static_cast<uint32_t>(manifest.class_names.size()));
  e.U32(static_cast<uint32_t>(manifest.shards.size()));
  e.String(manifest.source_format);
  for (const std::string& name : manifest.class_names) e.String(name);
  for (const ManifestShard& shard : manifest.shards) {
    e.String(shard.file_name);
    e.U64(shard.record_count);
    e.U64(shard.file_bytes);
    e.U32(shard.header_crc);
  }
  e.U32(Crc32(e.out().data(), e.out().size()));
  return std::move(e.out());
}

Result<Manifest> DecodeManifest(const std::string& path, const std::string& bytes) {
  if (bytes.size() < 8 + 4 || std::memcmp(bytes.data(), kManifestMagic, 8) != 0) {
    return DataLoss(path + ": bad magic at byte 0: not an Ember packed-dataset manifest");
  }
  const size_t body = bytes.size() - 4;
  const uint32_t stored_crc = Get32(reinterpret_cast<const uint8_t*>(bytes.data()) + body);
  const uint32_t crc = Crc32(bytes.data(), body);
  if (stored_crc != crc) {
    return DataLoss(path + ": checksum mismatch: the last 4 bytes (at byte " +
                    std::to_string(body) + ") store " + Hex32(stored_crc) +
                    ", the preceding bytes give " + Hex32(crc) +
                    " (truncated or corrupt manifest)");
  }
  Decoder d(path, bytes, body);
  uint64_t magic = 0;
  EMBER_RETURN_IF_ERROR(d.U64("magic", &magic));
  uint32_t version = 0;
  uint32_t reserved = 0;
  EMBER_RETURN_IF_ERROR(d.U32("version", &version));
  if (version != kFormatVersion) {
    return DataLoss(path + ": manifest version " + std::to_string(version) +
                    " at byte 8 is not supported (this build reads version " +
                    std::to_string(kFormatVersion) + ")");
  }
  EMBER_RETURN_IF_ERROR(d.U32("reserved", &reserved));
  Manifest manifest;
  uint32_t class_count = 0;
  uint32_t shard_count = 0;
  EMBER_RETURN_IF_ERROR(d.U64("record count", &manifest.record_count));
  EMBER_RETURN_IF_ERROR(d.U32("class count", &class_count));
  EMBER_RETURN_IF_ERROR(d.U32("shard count", &shard_count));
  EMBER_RETURN_IF_ERROR(d.String("source format", &manifest.source_format));
  // Each class takes at least 4 bytes and each shard at least 24, so a count larger than
  // the bytes left is caught before anything is reserved.
  if (class_count > (body - d.pos()) / 4 || shard_count > (body - d.pos()) / 24) {
    return DataLoss(path + ": " + std::to_string(class_count) + " classes and " +
                    std::to_string(shard_count) + " shards cannot fit in the " +
                    std::to_string(body - d.pos()) + " bytes left at byte " +
                    std::to_string(d.pos()));
  }
  manifest.class_names.resize(class_count);
  for (uint32_t i = 0; i < class_count; ++i) {
    EMBER_RETURN_IF_ERROR(d.String("class " + std::to_string(i) + " name", &manifest.class_names[i]));
  }
  manifest.shards.resize(shard_count);
  uint64_t total = 0;
  for (uint32_t i = 0; i < shard_count; ++i) {
    ManifestShard& shard = manifest.shards[i];
    const std::string what = "shard " + std::to_string(i);
    EMBER_RETURN_IF_ERROR(d.String(what + " file name", &shard.file_name));
    EMBER_RETURN_IF_ERROR(CheckShardFileName(path, shard.file_name, i));
    EMBER_RETURN_IF_ERROR(d.U64((what + " record count").c_str(), &shard.record_count));
    EMBER_RETURN_IF_ERROR(d.U64((what + " file bytes").c_str(), &shard.file_bytes));
    EMBER_RETURN_IF_ERROR(d.U32((what + " header checksum").c_str(), &shard.header_crc));
    if (__builtin_add_overflow(total, shard.record_count, &total)) {
      return DataLoss(path + ": the shards' record counts add up past 64 bits");
    }
  }
  if (d.pos() != body) {
    return DataLoss(path + ": " + std::to_string(body - d.pos()) +
                    " unexpected bytes after the last shard entry at byte " +
                    std::to_string(d.pos()));
  }
  if (total != manifest.record_count) {
    return DataLoss(path + ": the shards hold " + std::to_string(total) +
                    " records, the manifest's record count says " +
                    std::to_string(manifest.record_count));
  }
  return manifest;
}

}  // namespace ember::pack
