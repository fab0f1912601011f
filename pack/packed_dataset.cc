#include "pack/packed_dataset.h"

#include "common/paths.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <utility>

namespace ember::pack {

namespace {

std::string Hex32(uint32_t v) {
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "0x%08x", v);
  return buffer;
}

Result<std::string> AbsoluteDir(const std::string& path) {
  return AbsolutePath(path, "the packed dataset path");
}

}  // namespace

Result<std::unique_ptr<PackedDataset>> PackedDataset::Open(Env& env, const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(std::string dir, AbsoluteDir(path));
  if (!env.IsDirectory(dir)) {
    if (!env.FileExists(dir)) return NotFound(dir + ": no such directory");
    return InvalidArgument(dir + ": not a directory (a packed dataset is a directory)");
  }
  const std::string manifest_path = dir + "/" + kManifestName;
  Result<std::string> bytes = env.ReadFile(manifest_path);
  if (!bytes.ok()) {
    if (bytes.status().code() == StatusCode::kNotFound) {
      return NotFound(manifest_path + ": no such file (is " + dir +
                      " a packed dataset written by `emberctl pack`?)");
    }
    return bytes.status();
  }
  std::unique_ptr<PackedDataset> dataset(new PackedDataset());
  dataset->dir_ = dir;
  EMBER_ASSIGN_OR_RETURN(dataset->manifest_, DecodeManifest(manifest_path, *bytes));

  const Manifest& manifest = dataset->manifest_;
  dataset->shards_.resize(manifest.shards.size());
  uint64_t first_id = 0;
  for (size_t i = 0; i < manifest.shards.size(); ++i) {
    Shard& shard = dataset->shards_[i];
    EMBER_RETURN_IF_ERROR(OpenShard(env, dir, manifest.shards[i], static_cast<uint32_t>(i),
                                    manifest.class_names.size(), &shard));
    shard.first_id = first_id;
    dataset->first_ids_.push_back(first_id);
    first_id += shard.header.record_count;
  }
  return dataset;
}

Status PackedDataset::OpenShard(Env& env, const std::string& dir,
                                const ManifestShard& entry, uint32_t number,
                                size_t class_count, Shard* shard) {
  const std::string path = dir + "/" + entry.file_name;
  EMBER_ASSIGN_OR_RETURN(shard->file, env.MapReadOnly(path));
  const MappedFile& file = *shard->file;
  if (file.size() != entry.file_bytes) {
    return DataLoss(path + ": " + (file.size() < entry.file_bytes ? "truncated: " : "") +
                    "file has " + std::to_string(file.size()) + " bytes, the manifest says " +
                    std::to_string(entry.file_bytes));
  }
  const auto* data = reinterpret_cast<const uint8_t*>(file.data());
  EMBER_ASSIGN_OR_RETURN(shard->header, DecodeShardHeader(path, data, file.size()));
  const ShardHeader& header = shard->header;
  const uint32_t header_crc = Crc32(data, kShardHeaderBytes);
  if (header_crc != entry.header_crc) {
    return DataLoss(path + ": header checksum " + Hex32(header_crc) + " differs from the " +
                    Hex32(entry.header_crc) +
                    " the manifest records (a shard from another pack?)");
  }
  if (header.shard_number != number) {
    return DataLoss(path + ": header says shard number " + std::to_string(header.shard_number) +
                    ", the manifest lists it as shard " + std::to_string(number));
  }
  if (header.record_count != entry.record_count) {
    return DataLoss(path + ": header says " + std::to_string(header.record_count) +
                    " records, the manifest says " + std::to_string(entry.record_count));
  }

  // The index is read once, front to back: ask for it before checking it, and only then
  // switch the mapping to random access (no readahead) for the records.
  file.WillNeed(header.index_offset, header.index_bytes);
  const uint8_t* index = data + header.index_offset;
  const uint32_t index_crc = Crc32(index, header.index_bytes);
  if (index_crc != header.index_crc) {
    return DataLoss(path + ": index checksum mismatch (bytes " +
                    std::to_string(header.index_offset) + ".." +
                    std::to_string(header.index_offset + header.index_bytes) + "): stored " +
                    Hex32(header.index_crc) + ", computed " + Hex32(index_crc));
  }
  const uint64_t entries_bytes = header.record_count * kIndexEntryBytes;
  const uint64_t path_table_bytes = header.index_bytes - entries_bytes;
  uint64_t records_end = kShardHeaderBytes;
  for (uint64_t i = 0; i < header.record_count; ++i) {
    const IndexEntry e = DecodeIndexEntry(index + i * kIndexEntryBytes);
    // Only errors need it: building it for every entry took half of opening 1M records.
    auto where = [&] {
      return path + ": index entry " + std::to_string(i) + " (at byte " +
             std::to_string(header.index_offset + i * kIndexEntryBytes) + "): ";
    };
    if (e.offset < records_end || e.offset % header.record_alignment != 0) {
      return DataLoss(where() + "record offset " + std::to_string(e.offset) +
                      " is not an aligned offset past the previous record's end " +
                      std::to_string(records_end));
    }
    if (e.offset > header.index_offset) {
      return DataLoss(where() + "record offset " + std::to_string(e.offset) +
                      " is past the index at byte " + std::to_string(header.index_offset));
    }
    if (e.size > header.index_offset - e.offset) {
      return DataLoss(where() + "record at byte " + std::to_string(e.offset) + " of " +
                      std::to_string(e.size) + " bytes runs past the index at byte " +
                      std::to_string(header.index_offset));
    }
    if (e.path_offset > path_table_bytes || e.path_bytes > path_table_bytes - e.path_offset) {
      return DataLoss(where() + "path bytes " + std::to_string(e.path_offset) + "+" +
                      std::to_string(e.path_bytes) + " run past the path table of " +
                      std::to_string(path_table_bytes) + " bytes");
    }
    if (class_count > 0 && (e.label < 0 || static_cast<uint64_t>(e.label) >= class_count)) {
      return DataLoss(where() + "label " + std::to_string(e.label) + " is out of range: the "
                      "manifest names " + std::to_string(class_count) + " classes");
    }
    records_end = e.offset + e.size;
  }
  shard->index = index;
  shard->paths = reinterpret_cast<const char*>(index + entries_bytes);
  EMBER_RETURN_IF_ERROR(file.Advise(MappedFile::Access::kRandom));
  return Status::Ok();
}

std::vector<std::string> PackedDataset::Files() const {
  std::vector<std::string> files;
  files.push_back(dir_ + "/" + kManifestName);
  for (const Shard& shard : shards_) files.push_back(shard.file->path());
  return files;
}

uint32_t PackedDataset::ShardOf(uint64_t id) const {
  // The last shard whose first id is <= id; empty shards share their successor's first
  // id and are skipped by upper_bound.
  auto it = std::upper_bound(first_ids_.begin(), first_ids_.end(), id);
  return static_cast<uint32_t>(it - first_ids_.begin() - 1);
}

PackedRecord PackedDataset::Get(uint64_t id) const {
  const uint32_t s = ShardOf(id);
  const Shard& shard = shards_[s];
  const uint64_t local = id - shard.first_id;
  const IndexEntry e =
      DecodeIndexEntry(shard.index + local * kIndexEntryBytes);
  PackedRecord record;
  record.data = reinterpret_cast<const uint8_t*>(shard.file->data()) + e.offset;
  record.size = static_cast<size_t>(e.size);
  record.label = e.label;
  record.path = std::string_view(shard.paths + e.path_offset, e.path_bytes);
  record.shard = s;
  record.index = local;
  record.offset = e.offset;
  record.crc = e.crc;
  return record;
}

std::string PackedDataset::RecordName(const PackedRecord& record) const {
  return shards_[record.shard].file->path() + " record " + std::to_string(record.index) + " (" +
         std::string(record.path) + ")";
}

Status PackedDataset::CheckShard(const PackedRecord& record) const {
  const MappedFile& file = *shards_[record.shard].file;
  return file.shrunk() ? file.ShrunkError() : Status::Ok();
}

Status PackedDataset::VerifyRecord(const PackedRecord& record) const {
  const uint32_t crc = Crc32(record.data, record.size);
  EMBER_RETURN_IF_ERROR(CheckShard(record));
  if (crc == record.crc) return Status::Ok();
  return DataLoss(RecordName(record) + ": checksum mismatch: bytes " +
                  std::to_string(record.offset) + ".." +
                  std::to_string(record.offset + record.size) + " give " + Hex32(crc) +
                  ", the index stores " + Hex32(record.crc));
}

Status PackedDataset::Verify(uint64_t id) const {
  if (id >= count()) {
    return InvalidArgument("record " + std::to_string(id) + " is out of range: " + dir_ +
                           " holds " + std::to_string(count()) + " records");
  }
  return VerifyRecord(Get(id));
}

void PackedDataset::Prefetch(const uint64_t* ids, size_t n) const {
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] >= count()) continue;
    const uint32_t s = ShardOf(ids[i]);
    const Shard& shard = shards_[s];
    const IndexEntry e = DecodeIndexEntry(
        shard.index + (ids[i] - shard.first_id) * kIndexEntryBytes);
    shard.file->WillNeed(e.offset, e.size);
  }
}

}  // namespace ember::pack
