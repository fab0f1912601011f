// Fuzzes the packed dataset reader: a shard's header and index (PackedDataset::Open,
// then every record through Get, VerifyRecord and RecordName), or a manifest
// (DecodeManifest). Input: a flags byte, a class-count byte, then the file's bytes.
//   flags bit 1 clear: the bytes are shard-00000.emb of a one-shard pack whose manifest
//     (written here) names (class count % 8) classes and matches the shard's size,
//     record count and header CRC;
//   flags bit 1 set: the bytes are a manifest.
//   flags bit 0 clear: the checksums are fixed up first (a shard's index CRC and header
//     CRC, a manifest's trailing CRC), so that mutations reach the checks behind them;
//     set: the bytes are used as they are.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/fuzz_input.h"
#include "common/mem_env.h"
#include "pack/format.h"
#include "pack/packed_dataset.h"

namespace ember::pack {
namespace {

uint64_t Little64(const std::string& bytes, size_t at) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<uint8_t>(bytes[at + i]);
  return value;
}

void PutLittle32(std::string& bytes, size_t at, uint32_t value) {
  for (int i = 0; i < 4; ++i) bytes[at + i] = static_cast<char>(value >> (8 * i));
}

void FixShardChecksums(std::string& shard) {
  if (shard.size() < kShardHeaderBytes) return;
  const uint64_t index_offset = Little64(shard, 24);
  const uint64_t index_bytes = Little64(shard, 32);
  if (index_offset <= shard.size() && index_bytes <= shard.size() - index_offset) {
    PutLittle32(shard, 44, Crc32(shard.data() + index_offset, index_bytes));
  }
  PutLittle32(shard, 60, Crc32(shard.data(), 60));
}

void OpenPack(MemEnv& env, std::string shard, size_t class_count) {
  Manifest manifest;
  manifest.source_format = "imagefolder";
  for (size_t i = 0; i < class_count; ++i) manifest.class_names.push_back("c" + std::to_string(i));
  ManifestShard entry;
  entry.file_name = ShardFileName(0);
  entry.file_bytes = shard.size();
  if (shard.size() >= kShardHeaderBytes) {
    entry.record_count = Little64(shard, 16);
    entry.header_crc = Crc32(shard.data(), kShardHeaderBytes);
  }
  manifest.record_count = entry.record_count;
  manifest.shards.push_back(entry);
  env.AddFile(std::string("/p/") + kManifestName, EncodeManifest(manifest));
  env.AddFile("/p/" + entry.file_name, shard);

  Result<std::unique_ptr<PackedDataset>> dataset = PackedDataset::Open(env, "/p");
  if (!dataset.ok()) return;
  const uint64_t count = std::min<uint64_t>((*dataset)->count(), 4096);
  std::vector<uint64_t> ids;
  for (uint64_t id = 0; id < count; ++id) {
    const PackedRecord record = (*dataset)->Get(id);
    (void)(*dataset)->VerifyRecord(record);
    (void)(*dataset)->RecordName(record);
    ids.push_back(id);
  }
  (*dataset)->Prefetch(ids.data(), ids.size());
  (void)(*dataset)->Verify(count);
}

}  // namespace
}  // namespace ember::pack

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  using namespace ember::pack;
  FuzzInput input(data, size);
  const uint8_t flags = input.Byte();
  const size_t class_count = input.Byte() % 8;
  std::string bytes = input.Rest();
  const bool fix = (flags & 1) == 0;
  if ((flags & 2) != 0) {
    if (fix && bytes.size() >= 4) {
      PutLittle32(bytes, bytes.size() - 4, Crc32(bytes.data(), bytes.size() - 4));
    }
    (void)DecodeManifest("/p/manifest", bytes);
    return 0;
  }
  if (fix) FixShardChecksums(bytes);
  MemEnv env;
  OpenPack(env, std::move(bytes), class_count);
  return 0;
}
