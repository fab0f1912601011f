#include "pack/packed_dataset.h"

#include <unistd.h>

#include <atomic>

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/fault_env.h"
#include "common/mem_env.h"
#include "common/temp_dir_testing.h"
#include "pack/format.h"
#include "pack/pack_testing.h"
#include "pack/writer.h"

namespace ember::pack {
namespace {

using Catch::Contains;

struct TestRecord {
  std::string bytes;
  int64_t label;
  std::string path;
};

// `n` records of random sizes (some empty) over 3 classes.
std::vector<TestRecord> MakeRecords(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<TestRecord> records;
  for (size_t i = 0; i < n; ++i) {
    const size_t size = i % 7 == 3 ? 0 : 1 + rng() % 5000;
    records.push_back({RandomBytes(rng, size), static_cast<int64_t>(i % 3),
                       "class" + std::to_string(i % 3) + "/file" + std::to_string(i) + ".jpg"});
  }
  return records;
}

PackSummary Pack(Env& env, const std::string& out, const std::vector<TestRecord>& records,
                 PackOptions options = {}) {
  auto writer = PackWriter::Create(env, out, options, "test", {"class0", "class1", "class2"});
  REQUIRE(writer.ok());
  for (const TestRecord& r : records) {
    REQUIRE((*writer)->Add(reinterpret_cast<const uint8_t*>(r.bytes.data()), r.bytes.size(),
                           r.label, r.path)
                .ok());
  }
  auto summary = (*writer)->Commit();
  REQUIRE(summary.ok());
  return *summary;
}

std::string Bytes(const PackedRecord& record) {
  return std::string(reinterpret_cast<const char*>(record.data), record.size);
}

TEST_CASE("Every record comes back with its bytes, label and path, over several shards") {
  auto env = NewPosixEnv();
  const std::string out = FreshTestDir("roundtrip") + "/out";
  const auto records = MakeRecords(200, 1);
  PackOptions options;
  options.shard_bytes = 64 * 1024;
  options.record_alignment = 512;
  const PackSummary summary = Pack(*env, out, records, options);
  CHECK(summary.records == 200);
  CHECK(summary.shards > 3);

  auto dataset = PackedDataset::Open(*env, out);
  REQUIRE(dataset.ok());
  const PackedDataset& d = **dataset;
  CHECK(d.count() == 200);
  CHECK(d.shard_count() == summary.shards);
  CHECK(d.source_format() == "test");
  CHECK(d.class_names() == std::vector<std::string>{"class0", "class1", "class2"});
  REQUIRE(d.Files().size() == d.shard_count() + 1);
  CHECK(d.Files()[0] == out + "/manifest");
  CHECK(d.Files()[1] == out + "/shard-00000.emb");
  uint32_t last_shard = 0;
  for (uint64_t id = 0; id < records.size(); ++id) {
    const PackedRecord r = d.Get(id);
    CHECK(Bytes(r) == records[id].bytes);
    CHECK(r.label == records[id].label);
    CHECK(r.path == records[id].path);
    CHECK(r.offset % 512 == 0);
    CHECK(r.shard >= last_shard);
    last_shard = r.shard;
    CHECK(d.Verify(id).ok());
  }
  CHECK(last_shard == d.shard_count() - 1);
}

TEST_CASE("Shards stay near the target size; an oversized record gets a shard of its own") {
  auto env = NewPosixEnv();
  const std::string out = FreshTestDir("sizes") + "/out";
  std::mt19937_64 rng(2);
  std::vector<TestRecord> records;
  for (int i = 0; i < 20; ++i) records.push_back({RandomBytes(rng, 1000), 0, "a/" + std::to_string(i)});
  records.insert(records.begin() + 10, {RandomBytes(rng, 50000), 1, "big"});
  PackOptions options;
  options.shard_bytes = 8192;
  options.record_alignment = 8;
  Pack(*env, out, records, options);
  auto dataset = PackedDataset::Open(*env, out);
  REQUIRE(dataset.ok());
  const PackedDataset& d = **dataset;
  const PackedRecord big = d.Get(10);
  CHECK(big.size == 50000);
  CHECK(big.index == 0);
  CHECK(d.Get(11).shard == big.shard + 1);
  for (uint64_t id = 0; id < d.count(); ++id) {
    const PackedRecord r = d.Get(id);
    if (id != 10) CHECK(r.offset + r.size <= options.shard_bytes);
  }
}

TEST_CASE("Open of a missing directory or manifest is kNotFound") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("missing");
  auto r = PackedDataset::Open(*env, dir + "/nope");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kNotFound);
  auto m = PackedDataset::Open(*env, dir);
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().code() == StatusCode::kNotFound);
  CHECK_THAT(m.status().message(), Contains(dir + "/manifest"));
}

TEST_CASE("A shard truncated while it is read: Verify says it shrank, nothing crashes") {
  auto env = NewPosixEnv();
  const std::string out = FreshTestDir("shrinking") + "/out";
  const auto records = MakeRecords(30, 5);
  Pack(*env, out, records);
  auto d = PackedDataset::Open(*env, out);
  REQUIRE(d.ok());
  const uint64_t last = (*d)->count() - 1;
  REQUIRE((*d)->Verify(last).ok());
  const std::string shard = out + "/shard-00000.emb";
  REQUIRE(truncate(shard.c_str(), 4096) == 0);
  Status status = (*d)->Verify(last);  // reads past the new end: was SIGBUS
  CHECK(status.code() == StatusCode::kDataLoss);
  CHECK_THAT(status.message(), Catch::StartsWith(shard + ": the file shrank below the "));
  CHECK((*d)->Verify(0).code() == StatusCode::kDataLoss);  // the whole shard is suspect now
}

TEST_CASE("Corruption is detected and named") {
  auto env = NewPosixEnv();
  const std::string out = FreshTestDir("corrupt") + "/out";
  const auto records = MakeRecords(30, 3);
  PackOptions options;
  options.shard_bytes = 32 * 1024;
  Pack(*env, out, records, options);
  const std::string shard0 = out + "/shard-00000.emb";
  const std::string shard1 = out + "/shard-00001.emb";
  REQUIRE(env->FileExists(shard1));

  SECTION("a flipped byte in a record: Verify names the shard, record and path") {
    uint64_t offset = 0;
    uint64_t victim = 0;
    {
      auto d = PackedDataset::Open(*env, out);
      REQUIRE(d.ok());
      victim = 4;  // MakeRecords: a non-empty record
      REQUIRE((*d)->Get(victim).size > 10);
      offset = (*d)->Get(victim).offset + 7;
    }
    FlipByte(shard0, offset);
    auto d = PackedDataset::Open(*env, out);
    REQUIRE(d.ok());  // records are not read at open
    Status s = (*d)->Verify(victim);
    CHECK(s.code() == StatusCode::kDataLoss);
    CHECK_THAT(s.message(), Contains(shard0 + " record 4 (" + records[victim].path +
                                     "): checksum mismatch"));
    CHECK((*d)->Verify(victim - 1).ok());
    CHECK((*d)->Verify(victim + 1).ok());
  }
  SECTION("a truncated shard fails Open, naming it") {
    TruncateTestFile(shard1, 5000);
    auto d = PackedDataset::Open(*env, out);
    REQUIRE_FALSE(d.ok());
    CHECK(d.status().code() == StatusCode::kDataLoss);
    CHECK_THAT(d.status().message(), Contains(shard1 + ": truncated: file has 5000 bytes"));
  }
  SECTION("a flipped byte in an index fails Open") {
    const std::string bytes = ReadTestFile(shard1);
    FlipByte(shard1, bytes.size() - 3);  // in the path table, the index's last bytes
    auto d = PackedDataset::Open(*env, out);
    REQUIRE_FALSE(d.ok());
    CHECK(d.status().code() == StatusCode::kDataLoss);
    CHECK_THAT(d.status().message(), Contains(shard1 + ": index checksum mismatch"));
  }
  SECTION("a flipped byte in a shard header fails Open") {
    FlipByte(shard0, 17);
    auto d = PackedDataset::Open(*env, out);
    REQUIRE_FALSE(d.ok());
    CHECK_THAT(d.status().message(), Contains(shard0 + ": header checksum mismatch"));
  }
  SECTION("a shard swapped for one from another pack fails Open") {
    const std::string other = FreshTestDir("corrupt_other") + "/out";
    Pack(*env, other, MakeRecords(30, 4), options);
    std::filesystem::copy_file(other + "/shard-00000.emb", shard0,
                               std::filesystem::copy_options::overwrite_existing);
    auto d = PackedDataset::Open(*env, out);
    REQUIRE_FALSE(d.ok());
    CHECK(d.status().code() == StatusCode::kDataLoss);
    CHECK_THAT(d.status().message(), Contains(shard0));
  }
  SECTION("a missing shard fails Open, naming it") {
    std::filesystem::remove(shard1);
    auto d = PackedDataset::Open(*env, out);
    REQUIRE_FALSE(d.ok());
    CHECK(d.status().code() == StatusCode::kNotFound);
    CHECK_THAT(d.status().message(), Contains(shard1));
  }
  SECTION("a shard that cannot be mapped fails Open, naming it") {
    FaultEnv faulty(env.get());
    faulty.FailMapReadOnly(shard1, ResourceExhausted("cannot map: Cannot allocate memory"));
    auto d = PackedDataset::Open(faulty, out);
    REQUIRE_FALSE(d.ok());
    CHECK(d.status().code() == StatusCode::kResourceExhausted);
    CHECK(d.status().message() == shard1 + ": cannot map: Cannot allocate memory");
  }
  SECTION("a corrupt manifest fails Open") {
    FlipByte(out + "/manifest", 20);
    auto d = PackedDataset::Open(*env, out);
    REQUIRE_FALSE(d.ok());
    CHECK(d.status().code() == StatusCode::kDataLoss);
    CHECK_THAT(d.status().message(), Contains(out + "/manifest: checksum mismatch"));
  }
  SECTION("a truncated manifest fails Open") {
    TruncateTestFile(out + "/manifest", 40);
    auto d = PackedDataset::Open(*env, out);
    REQUIRE_FALSE(d.ok());
    CHECK(d.status().code() == StatusCode::kDataLoss);
  }
}

// A one-shard pack in `env` at /p whose only index entry is `entry` (path table "a").
void PutOneEntryPack(MemEnv& env, const IndexEntry& entry) {
  std::string index(kIndexEntryBytes, '\0');
  EncodeIndexEntry(entry, reinterpret_cast<uint8_t*>(index.data()));
  index += "a";
  ShardHeader header;
  header.record_count = 1;
  header.index_offset = kShardHeaderBytes + 8;
  header.index_bytes = index.size();
  header.record_alignment = kMinRecordAlignment;
  header.index_crc = Crc32(index.data(), index.size());
  std::string shard(header.index_offset, '\0');
  EncodeShardHeader(header, reinterpret_cast<uint8_t*>(shard.data()));
  shard += index;
  Manifest manifest;
  manifest.source_format = "test";
  manifest.record_count = 1;
  manifest.shards.push_back({ShardFileName(0), 1, shard.size(), Crc32(shard.data(), 64)});
  env.AddFile("/p/manifest", EncodeManifest(manifest));
  env.AddFile("/p/" + ShardFileName(0), shard);
}

// Found by //pack:packed_dataset_fuzz (pack/testdata/fuzz/packed_dataset_fuzz/
// crash-record-offset-past-index): such an entry passed the size check, which
// underflowed.
TEST_CASE("An index entry whose record starts past the index fails Open, naming it") {
  MemEnv env;
  IndexEntry entry;
  entry.offset = uint64_t{1} << 40;
  entry.size = 8;
  entry.path_bytes = 1;
  PutOneEntryPack(env, entry);
  auto d = PackedDataset::Open(env, "/p");
  REQUIRE_FALSE(d.ok());
  CHECK(d.status().code() == StatusCode::kDataLoss);
  CHECK(d.status().message() ==
        "/p/shard-00000.emb: index entry 0 (at byte 72): record offset 1099511627776 is past "
        "the index at byte 72");

  entry.offset = kShardHeaderBytes;  // the same entry, in place, opens
  MemEnv good;
  PutOneEntryPack(good, entry);
  auto ok = PackedDataset::Open(good, "/p");
  REQUIRE(ok.ok());
  CHECK((*ok)->Get(0).path == "a");
}

TEST_CASE("Verify rejects an id out of range") {
  auto env = NewPosixEnv();
  const std::string out = FreshTestDir("range") + "/out";
  Pack(*env, out, MakeRecords(5, 5));
  auto d = PackedDataset::Open(*env, out);
  REQUIRE(d.ok());
  Status s = (*d)->Verify(5);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Contains("record 5 is out of range"));
}

TEST_CASE("Prefetch accepts any ids, also out of range") {
  auto env = NewPosixEnv();
  const std::string out = FreshTestDir("prefetch") + "/out";
  PackOptions options;
  options.shard_bytes = 16 * 1024;
  Pack(*env, out, MakeRecords(40, 6), options);
  auto d = PackedDataset::Open(*env, out);
  REQUIRE(d.ok());
  const std::vector<uint64_t> ids = {39, 0, 3, 3, 17, 40, ~uint64_t{0}};
  (*d)->Prefetch(ids.data(), ids.size());
  (*d)->Prefetch(nullptr, 0);
  CHECK((*d)->Verify(39).ok());
}

TEST_CASE("Many threads read and verify at once") {
  auto env = NewPosixEnv();
  const std::string out = FreshTestDir("threads") + "/out";
  const auto records = MakeRecords(300, 7);
  PackOptions options;
  options.shard_bytes = 100 * 1024;
  Pack(*env, out, records, options);
  auto d = PackedDataset::Open(*env, out);
  REQUIRE(d.ok());
  const PackedDataset& dataset = **d;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int i = 0; i < 2000; ++i) {
        const uint64_t id = rng() % records.size();
        dataset.Prefetch(&id, 1);
        const PackedRecord r = dataset.Get(id);
        if (Bytes(r) != records[id].bytes || r.label != records[id].label ||
            r.path != records[id].path || !dataset.Verify(id).ok()) {
          ++failures;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(failures == 0);
}

}  // namespace
}  // namespace ember::pack
