// PackedDataset: a packed dataset directory (format.h) opened for reading. Shards are
// mapped read-only and shared (Env::MapReadOnly: the page cache, no copy), so a record is
// a pointer into the mapping and reading one costs no syscall.
#ifndef EMBER_PACK_PACKED_DATASET_H_
#define EMBER_PACK_PACKED_DATASET_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/env.h"
#include "pack/format.h"
#include "ember/status.h"

namespace ember::pack {

// One record, pointing into the shard's mapping: valid as long as its PackedDataset.
struct PackedRecord {
  const uint8_t* data = nullptr;
  size_t size = 0;
  int64_t label = 0;
  std::string_view path;  // relative to the source directory, e.g. "cat/0001.jpg"
  uint32_t shard = 0;     // position in the manifest
  uint64_t index = 0;     // position in its shard
  uint64_t offset = 0;    // byte offset in its shard file
  uint32_t crc = 0;       // CRC-32 of the bytes, from the index
};

// Immutable after Open: every const method is safe to call from any thread at once.
//
// Caveat (as with any mmap): a shard file truncated by another process while mapped
// raises SIGBUS on access to the lost pages. Packed datasets are written once (into a
// new directory, renamed into place) and then only read.
class PackedDataset {
 public:
  // Opens the packed dataset in `dir`: reads the manifest through `env` and checks its
  // checksum, then maps each shard through `env` and checks its size, header and header checksum
  // against the manifest, the index checksum, and every index entry's bounds (records
  // inside the shard, in order, not overlapping; paths inside the path table; labels in
  // [0, class count) when the manifest names classes). Record bytes are not read (see
  // Verify). kNotFound if `dir` or its manifest does not exist; kDataLoss naming the file
  // and what is wrong (with its byte offset) for a truncated or corrupt manifest or shard.
  static Result<std::unique_ptr<PackedDataset>> Open(Env& env, const std::string& dir);

  PackedDataset(const PackedDataset&) = delete;
  PackedDataset& operator=(const PackedDataset&) = delete;

  const std::string& dir() const { return dir_; }
  uint64_t count() const { return manifest_.record_count; }
  const std::string& source_format() const { return manifest_.source_format; }
  // Label i's name (for imagefolder: the class folder's name).
  const std::vector<std::string>& class_names() const { return manifest_.class_names; }
  size_t shard_count() const { return shards_.size(); }
  // Absolute paths: the manifest, then the shards in order.
  std::vector<std::string> Files() const;

  // Record `id`, without reading its bytes. Precondition: id < count(). O(log shards).
  PackedRecord Get(uint64_t id) const;

  // Reads the record's bytes and checks them against their CRC. kInvalidArgument for an
  // id out of range; kDataLoss
  //   "<dir>/shard-00003.emb record 17 (cat/0001.jpg): checksum mismatch: ..."
  // Also kDataLoss when the shard shrank under its mapping (CheckShard).
  Status Verify(uint64_t id) const;
  Status VerifyRecord(const PackedRecord& record) const;
  // kDataLoss (MappedFile::ShrunkError) if the record's shard was truncated since it was
  // opened: its bytes past the new end read as zeros, so what was read of it (and of its
  // index) is not the record. A reader checks after it has read.
  Status CheckShard(const PackedRecord& record) const;

  // "<shard file> record N (<path>)", for error messages about one record.
  std::string RecordName(const PackedRecord& record) const;

  // Asks the kernel to start reading the records' pages (MADV_WILLNEED) without waiting.
  // Ids out of range are ignored. A hint: never fails, does not block on I/O.
  void Prefetch(const uint64_t* ids, size_t count) const;

 private:
  struct Shard {
    std::unique_ptr<MappedFile> file;
    ShardHeader header;
    uint64_t first_id = 0;
    const uint8_t* index = nullptr;  // the index entries, in the mapping
    const char* paths = nullptr;     // the path table, in the mapping
  };

  PackedDataset() = default;
  static Status OpenShard(Env& env, const std::string& dir, const ManifestShard& entry,
                          uint32_t number, size_t class_count, Shard* shard);
  uint32_t ShardOf(uint64_t id) const;

  std::string dir_;
  Manifest manifest_;
  std::vector<Shard> shards_;
  std::vector<uint64_t> first_ids_;  // shards_[i].first_id, for the binary search
};

}  // namespace ember::pack

#endif  // EMBER_PACK_PACKED_DATASET_H_
