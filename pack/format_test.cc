#include "pack/format.h"

#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>

namespace ember::pack {
namespace {

using Catch::Contains;

ShardHeader SampleHeader() {
  ShardHeader header;
  header.record_count = 2;
  header.index_offset = 8192;
  header.index_bytes = 2 * kIndexEntryBytes + 11;
  header.record_alignment = 4096;
  header.index_crc = 0xdeadbeef;
  header.shard_number = 7;
  return header;
}

Manifest SampleManifest() {
  Manifest manifest;
  manifest.source_format = "imagefolder";
  manifest.record_count = 5;
  manifest.class_names = {"cat", "dog", "", "fish with spaces"};
  manifest.shards = {{"shard-00000.emb", 3, 12345, 0x01020304},
                     {"shard-00001.emb", 2, 999, 0xa0b0c0d0}};
  return manifest;
}

TEST_CASE("ShardFileName pads to five digits") {
  CHECK(ShardFileName(0) == "shard-00000.emb");
  CHECK(ShardFileName(42) == "shard-00042.emb");
  CHECK(ShardFileName(123456) == "shard-123456.emb");
}

TEST_CASE("Crc32 is zlib's, in one piece or continued") {
  const std::string text = "123456789";
  CHECK(Crc32(text.data(), text.size()) == 0xcbf43926u);  // the standard check value
  const uint32_t first = Crc32(text.data(), 4);
  CHECK(Crc32(text.data() + 4, 5, first) == 0xcbf43926u);
  CHECK(Crc32(nullptr, 0) == 0);
}

TEST_CASE("AlignUp rounds up to a power of two") {
  CHECK(AlignUp(0, 4096) == 0);
  CHECK(AlignUp(1, 4096) == 4096);
  CHECK(AlignUp(4096, 4096) == 4096);
  CHECK(AlignUp(65, 8) == 72);
}

TEST_CASE("A shard header round-trips, little-endian at documented offsets") {
  uint8_t bytes[kShardHeaderBytes];
  const ShardHeader header = SampleHeader();
  EncodeShardHeader(header, bytes);
  CHECK(std::memcmp(bytes, "EMBSHARD", 8) == 0);
  CHECK(bytes[8] == 1);                      // version
  CHECK(bytes[12] == 64);                    // header bytes
  CHECK(bytes[16] == 2);                     // record count, low byte first
  CHECK(bytes[24] == 0x00);                  // index offset 8192 = 0x2000
  CHECK(bytes[25] == 0x20);
  CHECK(bytes[44] == 0xef);                  // index crc
  CHECK(bytes[48] == 7);                     // shard number
  const uint64_t file_bytes = header.index_offset + header.index_bytes;
  auto decoded = DecodeShardHeader("/x/s.emb", bytes, file_bytes);
  REQUIRE(decoded.ok());
  CHECK(decoded->record_count == 2);
  CHECK(decoded->index_offset == 8192);
  CHECK(decoded->index_bytes == header.index_bytes);
  CHECK(decoded->record_alignment == 4096);
  CHECK(decoded->index_crc == 0xdeadbeef);
  CHECK(decoded->shard_number == 7);
}

// The error DecodeShardHeader gives for the header `bytes` of a file of `file_bytes`,
// checked to be a kDataLoss that names the file.
std::string DecodeError(const uint8_t* bytes, uint64_t file_bytes) {
  auto r = DecodeShardHeader("/x/s.emb", bytes, file_bytes);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kDataLoss);
  CHECK_THAT(r.status().message(), Catch::StartsWith("/x/s.emb: "));
  return r.status().message();
}

TEST_CASE("A damaged shard header is kDataLoss naming the file and the problem") {
  uint8_t bytes[kShardHeaderBytes];
  const ShardHeader header = SampleHeader();
  EncodeShardHeader(header, bytes);
  const uint64_t file_bytes = header.index_offset + header.index_bytes;

  SECTION("shorter than a header") {
    CHECK_THAT(DecodeError(bytes, 10), Contains("/x/s.emb: truncated") && Contains("10"));
  }
  SECTION("bad magic") {
    bytes[0] = 'X';
    CHECK_THAT(DecodeError(bytes, file_bytes), Contains("bad magic"));
  }
  SECTION("a flipped bit anywhere in the header") {
    bytes[20] ^= 1;
    CHECK_THAT(DecodeError(bytes, file_bytes), Contains("header checksum mismatch"));
  }
  SECTION("a file cut short before the index ends") {
    CHECK_THAT(DecodeError(bytes, file_bytes - 1), Contains("truncated") && Contains("8192"));
  }
  SECTION("trailing bytes") {
    CHECK_THAT(DecodeError(bytes, file_bytes + 3), Contains("3 trailing bytes"));
  }
  SECTION("a newer version") {
    bytes[8] = 2;
    CHECK_THAT(DecodeError(bytes, file_bytes), Contains("version 2"));
  }
  // Header fields that checksum correctly but make no sense.
  ShardHeader bad = header;
  SECTION("an alignment that is not a power of two") {
    bad.record_alignment = 3000;
    EncodeShardHeader(bad, bytes);
    CHECK_THAT(DecodeError(bytes, file_bytes), Contains("alignment 3000"));
  }
  SECTION("more records than the index can hold") {
    bad.record_count = 3;
    EncodeShardHeader(bad, bytes);
    CHECK_THAT(DecodeError(bytes, file_bytes), Contains("3 records"));
  }
}

TEST_CASE("An index entry round-trips, negative labels included") {
  IndexEntry entry;
  entry.offset = 0x0102030405060708;
  entry.size = 55555;
  entry.label = -3;
  entry.path_offset = 77;
  entry.path_bytes = 12;
  entry.crc = 0xfeedface;
  uint8_t bytes[kIndexEntryBytes + 1];  // decoded from an odd address below
  EncodeIndexEntry(entry, bytes + 1);
  CHECK(bytes[1] == 0x08);
  const IndexEntry back = DecodeIndexEntry(bytes + 1);
  CHECK(back.offset == entry.offset);
  CHECK(back.size == entry.size);
  CHECK(back.label == -3);
  CHECK(back.path_offset == 77);
  CHECK(back.path_bytes == 12);
  CHECK(back.crc == 0xfeedface);
}

TEST_CASE("A manifest round-trips") {
  const std::string bytes = EncodeManifest(SampleManifest());
  CHECK(bytes.compare(0, 8, "EMBPACKM") == 0);
  auto decoded = DecodeManifest("/x/manifest", bytes);
  REQUIRE(decoded.ok());
  CHECK(decoded->source_format == "imagefolder");
  CHECK(decoded->record_count == 5);
  CHECK(decoded->class_names == SampleManifest().class_names);
  REQUIRE(decoded->shards.size() == 2);
  CHECK(decoded->shards[1].file_name == "shard-00001.emb");
  CHECK(decoded->shards[1].record_count == 2);
  CHECK(decoded->shards[1].file_bytes == 999);
  CHECK(decoded->shards[1].header_crc == 0xa0b0c0d0);
}

// Replaces the trailing CRC so that a deliberately inconsistent body passes it.
std::string Reseal(std::string bytes) {
  bytes.resize(bytes.size() - 4);
  const uint32_t crc = Crc32(bytes.data(), bytes.size());
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>(crc >> (8 * i)));
  return bytes;
}

TEST_CASE("A damaged manifest is kDataLoss naming the file") {
  const std::string good = EncodeManifest(SampleManifest());

  SECTION("every single-byte flip is caught") {
    for (size_t i = 0; i < good.size(); ++i) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ 0x40);
      auto r = DecodeManifest("/x/manifest", bad);
      REQUIRE_FALSE(r.ok());
      CHECK(r.status().code() == StatusCode::kDataLoss);
      CHECK_THAT(r.status().message(), Contains("/x/manifest"));
    }
  }
  SECTION("every truncation is caught") {
    for (size_t n = 0; n < good.size(); ++n) {
      auto r = DecodeManifest("/x/manifest", good.substr(0, n));
      REQUIRE_FALSE(r.ok());
      CHECK(r.status().code() == StatusCode::kDataLoss);
    }
  }
  SECTION("record counts that do not add up, with a valid checksum") {
    Manifest m = SampleManifest();
    m.record_count = 6;
    auto r = DecodeManifest("/x/manifest", EncodeManifest(m));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(), Contains("hold 5 records") && Contains("says 6"));
  }
  SECTION("a shard file name that escapes the directory") {
    Manifest m = SampleManifest();
    m.shards[0].file_name = "../../etc/passwd";
    auto r = DecodeManifest("/x/manifest", EncodeManifest(m));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(), Contains("invalid file name '../../etc/passwd'"));
  }
  SECTION("a string length past the end, with a valid checksum") {
    std::string bad = good;
    bad[32] = static_cast<char>(0xff);  // the source format's length
    auto r = DecodeManifest("/x/manifest", Reseal(bad));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(), Contains("source format at byte 32"));
  }
  SECTION("a huge class count, with a valid checksum") {
    std::string bad = good;
    bad[27] = static_cast<char>(0x7f);  // class count's high byte
    auto r = DecodeManifest("/x/manifest", Reseal(bad));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(), Contains("cannot fit"));
  }
}

}  // namespace
}  // namespace ember::pack
