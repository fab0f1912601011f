// The on-disk layout of a packed dataset: encoded samples (e.g. JPEG/PNG files' bytes)
// copied into a few large shard files with an index and checksums, so that a dataset of
// millions of small files is read through mmap with no directory walk and no open() per
// sample. Written by pack/writer.h, read by packed_dataset.h.
//
// Glossary
//   record: the bytes of one sample as they were in their source file, plus its int64
//           label and its path relative to the source directory (for error messages).
//   shard:  one file holding records, then their index.
//
// A packed dataset is a directory:
//   manifest            what the dataset holds and which shards make it (below)
//   shard-00000.emb     shards, numbered from 0
//   shard-00001.emb ...
//
// All integers are little-endian; all checksums are CRC-32 (zlib's crc32, the gzip/PNG
// polynomial). Version 1:
//
// Shard file
//   [0, 64)  header
//       0  char[8]  magic "EMBSHARD"
//       8  u32      version (1)
//      12  u32      header bytes (64)
//      16  u64      record count
//      24  u64      index offset: where the index starts; a multiple of 8
//      32  u64      index bytes: the file ends exactly at index offset + index bytes
//      40  u32      record alignment: a power of two, 8 .. 1 MiB
//      44  u32      CRC-32 of the index (all index bytes)
//      48  u32      shard number (its position in the manifest)
//      52  u32[2]   reserved, 0
//      60  u32      CRC-32 of header bytes [0, 60)
//   records: each starts at a multiple of the record alignment (the first at
//       align(64)); the gaps are zero. Records are in index order, never overlapping.
//   index, at the index offset:
//       record count entries of 40 bytes:
//          0  u64  record offset in the file
//          8  u64  record bytes
//         16  i64  label
//         24  u64  path offset, relative to the start of the path table
//         32  u32  path bytes
//         36  u32  CRC-32 of the record's bytes
//       path table: the records' relative paths (UTF-8, '/'-separated), concatenated.
//   The header is written last: a shard cut short while being written has no valid
//   header.
//
// Manifest file "manifest"
//    0  char[8]  magic "EMBPACKM"
//    8  u32      version (1)
//   12  u32      reserved, 0
//   16  u64      record count (the sum over shards)
//   24  u32      class count
//   28  u32      shard count
//   32  string   source format (e.g. "imagefolder")
//       string   class names, class count of them: label i's name is the i-th
//       shard entries, shard count of them:
//         string  file name (no '/'), e.g. "shard-00000.emb"
//         u64     record count
//         u64     file bytes
//         u32     CRC-32 of the shard's header bytes [0, 64): ties the manifest to
//                 exactly these shards (and, through the index CRC, to every record CRC)
//   last 4 bytes: u32 CRC-32 of everything before them.
//   A string is a u32 byte count, then that many bytes (no terminator, no padding).
//
// Sample ids run over the shards in manifest order: shard 0's records are ids
// 0 .. n0-1, shard 1's are n0 .. n0+n1-1, and so on.
#ifndef EMBER_PACK_FORMAT_H_
#define EMBER_PACK_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ember/status.h"

namespace ember::pack {

inline constexpr uint32_t kFormatVersion = 1;
inline constexpr char kShardMagic[8] = {'E', 'M', 'B', 'S', 'H', 'A', 'R', 'D'};
inline constexpr char kManifestMagic[8] = {'E', 'M', 'B', 'P', 'A', 'C', 'K', 'M'};
inline constexpr size_t kShardHeaderBytes = 64;
inline constexpr size_t kIndexEntryBytes = 40;
inline constexpr uint32_t kMinRecordAlignment = 8;
inline constexpr uint32_t kMaxRecordAlignment = uint32_t{1} << 20;
inline constexpr const char* kManifestName = "manifest";

// "shard-00042.emb".
std::string ShardFileName(uint32_t shard_number);

// CRC-32 (zlib) of `size` bytes, continuing from `crc` (0 to start). Any size.
uint32_t Crc32(const void* data, size_t size, uint32_t crc = 0);

// `value` rounded up to a multiple of `alignment` (a power of two).
inline uint64_t AlignUp(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) & ~(alignment - 1);
}

struct ShardHeader {
  uint64_t record_count = 0;
  uint64_t index_offset = 0;
  uint64_t index_bytes = 0;
  uint32_t record_alignment = 0;
  uint32_t index_crc = 0;
  uint32_t shard_number = 0;
};

// Writes the 64 header bytes, header CRC included, to `out`.
void EncodeShardHeader(const ShardHeader& header, uint8_t* out);

// Decodes and checks the header of a shard file of `file_bytes` bytes whose first
// min(file_bytes, 64) bytes are at `data`: magic, version, header CRC, alignment, and that
// the index lies where the file ends. kDataLoss naming `path` and the field otherwise.
// Does not check the index CRC.
Result<ShardHeader> DecodeShardHeader(const std::string& path, const uint8_t* data,
                                      uint64_t file_bytes);

struct IndexEntry {
  uint64_t offset = 0;
  uint64_t size = 0;
  int64_t label = 0;
  uint64_t path_offset = 0;
  uint32_t path_bytes = 0;
  uint32_t crc = 0;
};

// 40 bytes at `out` / from `in`, unaligned access allowed.
void EncodeIndexEntry(const IndexEntry& entry, uint8_t* out);
IndexEntry DecodeIndexEntry(const uint8_t* in);

struct ManifestShard {
  std::string file_name;
  uint64_t record_count = 0;
  uint64_t file_bytes = 0;
  uint32_t header_crc = 0;
};

struct Manifest {
  std::string source_format;
  uint64_t record_count = 0;
  std::vector<std::string> class_names;
  std::vector<ManifestShard> shards;
};

// The manifest file's bytes, trailing CRC included.
std::string EncodeManifest(const Manifest& manifest);

// Parses and checks a manifest file's bytes: its CRC first, then every length against
// the bytes left, shard file names (non-empty, no '/', not "." or ".."), and that the
// shards' record counts add up. kDataLoss naming `path`, the field and its byte offset.
Result<Manifest> DecodeManifest(const std::string& path, const std::string& bytes);

}  // namespace ember::pack

#endif  // EMBER_PACK_FORMAT_H_
