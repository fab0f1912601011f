#include "daemon/data/mds/mds_shard.h"

#include <catch2/catch.hpp>
#include <zstd.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "daemon/data/mds/mds_testing.h"

namespace ember::daemon {
namespace {

MdsColumn Column(const std::string& name, MdsEncoding kind, std::optional<uint32_t> size,
                 std::optional<MdsType> type = std::nullopt, std::vector<int64_t> shape = {}) {
  MdsColumn column;
  column.name = name;
  column.kind = kind;
  column.size = size;
  column.type = type;
  column.shape = std::move(shape);
  return column;
}

const std::vector<MdsTestColumn> kTestColumns = {{"label", "int", 8}, {"txt", "str", std::nullopt}};
const std::vector<MdsColumn> kColumns = {Column("label", MdsEncoding::kScalar, 8, MdsType::kInt64),
                                         Column("txt", MdsEncoding::kBytes, std::nullopt)};

std::string Zstd(const std::string& raw) {
  std::string zip(ZSTD_compressBound(raw.size()), '\0');
  const size_t size = ZSTD_compress(zip.data(), zip.size(), raw.data(), raw.size(), 3);
  REQUIRE_FALSE(ZSTD_isError(size));
  zip.resize(size);
  return zip;
}

TEST_CASE("a shard's offsets and samples: fixed columns take their size, variable ones the head's") {
  const std::string shard = MdsShardBytes(
      kTestColumns, {{MdsBytesOf<int64_t>(7), "seven"}, {MdsBytesOf<int64_t>(-1), ""}});
  auto offsets = ReadMdsOffsets("s.mds", shard.data(), shard.size(), 2);
  INFO(offsets.status().ToString());
  REQUIRE(offsets.ok());
  REQUIRE(offsets->size() == 3);
  CHECK(offsets->back() == shard.size());
  CHECK((*offsets)[1] - (*offsets)[0] == 4 + 8 + 5);
  MdsSpan spans[2];
  REQUIRE(SplitMdsSample("s", kColumns, shard.data() + (*offsets)[0], (*offsets)[1] - (*offsets)[0], spans).ok());
  CHECK(spans[0].offset == 4);
  CHECK(spans[0].size == 8);
  CHECK(spans[1].offset == 12);
  CHECK(std::string(shard.data() + (*offsets)[0] + spans[1].offset, spans[1].size) == "seven");
  REQUIRE(SplitMdsSample("s", kColumns, shard.data() + (*offsets)[1], (*offsets)[2] - (*offsets)[1], spans).ok());
  CHECK(spans[1].size == 0);

  // A head whose sizes do not add up to the sample's.
  std::string bad = std::string("\x06\0\0\0", 4) + MdsBytesOf<int64_t>(7) + "seven";
  Status status = SplitMdsSample("s.mds: sample 0", kColumns, bad.data(), bad.size(), spans);
  CHECK(status.code() == StatusCode::kDataLoss);
  CHECK(status.message() == "s.mds: sample 0: column 'txt' (6 bytes at byte 12) runs past the sample's 17 bytes");
  bad[0] = 4;
  CHECK(SplitMdsSample("x", kColumns, bad.data(), bad.size(), spans).message() ==
        "x: its columns end at byte 16 of its 17");
  CHECK(SplitMdsSample("x", kColumns, bad.data(), 3, spans).message() ==
        "x: 3 bytes, too short for its 1 column sizes");
}

TEST_CASE("a shard whose header disagrees with its index or itself is data loss") {
  const std::string shard = MdsShardBytes(kTestColumns, {{MdsBytesOf<int64_t>(7), "seven"}});
  CHECK(ReadMdsOffsets("s.mds", shard.data(), shard.size(), 2).status().code() == StatusCode::kDataLoss);
  CHECK(ReadMdsOffsets("s.mds", shard.data(), shard.size(), 3).status().message() ==
        "s.mds: holds 1 samples, its index says 3");
  CHECK(ReadMdsOffsets("s.mds", shard.data(), 6, 1).status().message() ==
        "s.mds: 6 bytes, too short for the header of 1 samples (12 bytes)");
  const std::string cut = shard.substr(0, shard.size() - 1);
  auto short_one = ReadMdsOffsets("s.mds", cut.data(), cut.size(), 1);
  CHECK(short_one.status().code() == StatusCode::kDataLoss);
  CHECK(short_one.status().message() == "s.mds: sample offset 1 is " + std::to_string(shard.size()) +
                                            ", outside [" + std::to_string(shard.size() - 17) + ", " +
                                            std::to_string(cut.size()) + "]");
  const std::string longer = shard + "x";
  CHECK(ReadMdsOffsets("s.mds", longer.data(), longer.size(), 1).status().message() ==
        "s.mds: its samples end at byte " + std::to_string(shard.size()) + ", the shard at " +
            std::to_string(longer.size()));
  std::string backwards = shard;
  backwards[4] = 0;  // offset 0 into the header
  backwards[5] = 0;
  CHECK_THAT(ReadMdsOffsets("s.mds", backwards.data(), backwards.size(), 1).status().message(),
             Catch::StartsWith("s.mds: sample offset 0 is 0, outside [12, "));
}

TEST_CASE("ndarrays carry what their encoding does not fix") {
  const MdsColumn dynamic = Column("emb", MdsEncoding::kNdArray, std::nullopt);
  int16_t values[6] = {1, -2, 3, 4, 5, 6};
  const std::string elements(reinterpret_cast<const char*>(values), sizeof(values));
  const std::string value = MdsDynamicArray(17, {2, 3}, elements);  // int16 (2, 3)
  auto array = ParseMdsArray("w", dynamic, value.data(), value.size());
  INFO(array.status().ToString());
  REQUIRE(array.ok());
  CHECK(array->type == MdsType::kInt16);
  CHECK(array->shape == std::vector<int64_t>{2, 3});
  CHECK(array->data_offset == 4);
  CHECK(array->elements == 6);

  const MdsColumn typed = Column("emb", MdsEncoding::kNdArray, std::nullopt, MdsType::kInt16);
  const std::string shaped = value.substr(1);  // no dtype byte
  auto typed_array = ParseMdsArray("w", typed, shaped.data(), shaped.size());
  REQUIRE(typed_array.ok());
  CHECK(typed_array->data_offset == 3);

  const MdsColumn fixed = Column("emb", MdsEncoding::kNdArray, 12, MdsType::kInt16, {6});
  auto fixed_array = ParseMdsArray("w", fixed, elements.data(), elements.size());
  REQUIRE(fixed_array.ok());
  CHECK(fixed_array->data_offset == 0);
  CHECK(fixed_array->shape == std::vector<int64_t>{6});

  const std::string bad_code = MdsDynamicArray(99, {6}, elements);
  CHECK(ParseMdsArray("w", dynamic, bad_code.data(), bad_code.size()).status().message() ==
        "w: dtype code 99 is not an ndarray dtype");
  const std::string short_one = value.substr(0, value.size() - 1);
  CHECK(ParseMdsArray("w", dynamic, short_one.data(), short_one.size()).status().message() ==
        "w: 11 bytes of elements, its dtype int16 and shape make 12");
  const std::string no_dims = MdsDynamicArray(17, {}, elements);
  CHECK(ParseMdsArray("w", dynamic, no_dims.data(), no_dims.size()).status().message() ==
        "w: 0 dimensions, Ember serves 1 to 5");
  const std::string zero = MdsDynamicArray(17, {0}, "");
  CHECK(ParseMdsArray("w", dynamic, zero.data(), zero.size()).status().code() == StatusCode::kDataLoss);
  CHECK(ParseMdsArray("w", dynamic, "", 0).status().message() == "w: empty");
  // Dimensions that multiply past 2^64 are refused, not wrapped.
  std::string huge(1, static_cast<char>(8));
  huge += static_cast<char>((3 << 2) | 3);  // three uint64 dims
  for (int i = 0; i < 3; ++i) huge += MdsBytesOf<uint64_t>(uint64_t{1} << 32);
  huge += "x";
  CHECK(ParseMdsArray("w", dynamic, huge.data(), huge.size()).status().code() == StatusCode::kDataLoss);
}

TEST_CASE("values the ring has no dtype for are widened: uint32 and uint64 to int64, float16 to float32") {
  CHECK(TensorDTypeOf(MdsType::kUInt32) == ring::DType::kInt64);
  CHECK(TensorDTypeOf(MdsType::kUInt64) == ring::DType::kInt64);
  CHECK(TensorDTypeOf(MdsType::kFloat16) == ring::DType::kFloat32);
  CHECK(TensorDTypeOf(MdsType::kUInt16) == ring::DType::kUInt16);
  const std::string u32 = MdsBytesOf<uint32_t>(4000000000u) + MdsBytesOf<uint32_t>(1);
  int64_t wide[2] = {};
  REQUIRE(ConvertMdsValues(MdsType::kUInt32, u32.data(), 2, wide));
  CHECK(wide[0] == 4000000000);
  CHECK(wide[1] == 1);
  const std::string u64 = MdsBytesOf<uint64_t>(uint64_t{1} << 63);
  CHECK_FALSE(ConvertMdsValues(MdsType::kUInt64, u64.data(), 1, wide));
  const std::string halves = MdsBytesOf<uint16_t>(0x3e00) + MdsBytesOf<uint16_t>(0xc000) +
                             MdsBytesOf<uint16_t>(0x0001) + MdsBytesOf<uint16_t>(0x7c00) +
                             MdsBytesOf<uint16_t>(0x8000);
  float floats[5] = {};
  REQUIRE(ConvertMdsValues(MdsType::kFloat16, halves.data(), 5, floats));
  CHECK(floats[0] == 1.5f);
  CHECK(floats[1] == -2.0f);
  CHECK(floats[2] == std::ldexp(1.0f, -24));
  CHECK(std::isinf(floats[3]));
  CHECK(std::signbit(floats[4]));
  CHECK(floats[4] == 0.0f);
}

TEST_CASE("zstd shards decompress to exactly the size their index says, or are data loss") {
  const std::string raw = MdsShardBytes(kTestColumns, {{MdsBytesOf<int64_t>(7), std::string(5000, 'x')}});
  const std::string zip = Zstd(raw);
  std::string out(raw.size(), '\0');
  REQUIRE(DecompressMdsShard("s.zstd", "zstd:7", zip.data(), zip.size(), out.data(), out.size()).ok());
  CHECK(out == raw);
  // Two frames back to back.
  const std::string twice = Zstd(raw.substr(0, 100)) + Zstd(raw.substr(100));
  REQUIRE(DecompressMdsShard("s.zstd", "zstd", twice.data(), twice.size(), out.data(), out.size()).ok());
  CHECK(out == raw);

  Status more = DecompressMdsShard("s.zstd", "zstd", zip.data(), zip.size(), out.data(), out.size() - 1);
  CHECK(more.code() == StatusCode::kDataLoss);
  CHECK(more.message() == "s.zstd: decompresses to more than the " + std::to_string(raw.size() - 1) +
                              " bytes its index says");
  std::string bigger(raw.size() + 10, '\0');
  CHECK(DecompressMdsShard("s.zstd", "zstd", zip.data(), zip.size(), bigger.data(), bigger.size()).message() ==
        "s.zstd: decompresses to " + std::to_string(raw.size()) + " bytes, its index says " +
            std::to_string(bigger.size()));
  Status cut = DecompressMdsShard("s.zstd", "zstd", zip.data(), zip.size() - 3, out.data(), out.size());
  CHECK(cut.code() == StatusCode::kDataLoss);
  CHECK(cut.message() == "s.zstd: cut short (its last zstd frame is not complete)");
  CHECK(DecompressMdsShard("s.zstd", "zstd", "", 0, out.data(), out.size()).code() == StatusCode::kDataLoss);
  const std::string garbage = "this is not zstd at all";
  Status not_zstd = DecompressMdsShard("s.zstd", "zstd", garbage.data(), garbage.size(), out.data(), out.size());
  CHECK(not_zstd.code() == StatusCode::kDataLoss);
  CHECK_THAT(not_zstd.message(), Catch::StartsWith("s.zstd: not zstd data, or damaged"));
  CHECK(DecompressMdsShard("s.gz", "gz", zip.data(), zip.size(), out.data(), out.size()).code() ==
        StatusCode::kInvalidArgument);
}

TEST_CASE("hashes are checked against the index: a mismatch names the file and the algorithm") {
  MdsFileInfo file;
  file.hashes = {{"xxh32", "32d153ff"}, {"sha1", "a9993e364706816aba3e25717850c26c9cd0d89d"}};
  CHECK(CheckMdsHashes("s.mds", "i shards[0].raw_data.hashes", file, "abc", 3).ok());
  file.hashes[1].second = "0000";
  const Status wrong = CheckMdsHashes("s.mds", "i shards[0].raw_data.hashes", file, "abc", 3);
  CHECK(wrong.code() == StatusCode::kDataLoss);
  CHECK(wrong.message() == "s.mds: its sha1 is a9993e364706816aba3e25717850c26c9cd0d89d, "
                           "i shards[0].raw_data.hashes says 0000");
}

}  // namespace
}  // namespace ember::daemon
