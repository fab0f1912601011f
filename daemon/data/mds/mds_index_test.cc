#include "daemon/data/mds/mds_index.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <string>

namespace ember::daemon {
namespace {

using Json = nlohmann::json;

// One shard of index.json as MDSWriter (mosaicml-streaming 0.13.0) writes it, with
// compression="zstd:7" and hashes=["sha1", "xxh64"].
Json WriterIndex() {
  return Json::parse(R"({"shards": [{
    "column_encodings": ["ndarray:float32:4", "ndarray", "float16", "jpeg", "int", "str", "uint64"],
    "column_names": ["e2", "emb", "h", "image", "label", "txt", "u"],
    "column_sizes": [16, null, 2, null, 8, null, 8],
    "compression": "zstd:7", "format": "mds", "hashes": ["sha1", "xxh64"],
    "raw_data": {"basename": "shard.00000.mds", "bytes": 2439,
                 "hashes": {"sha1": "52229DED6CAA3F5FD6FA2D87F7AEE16B5BB83533", "xxh64": "b18c63ffcf556d2c"}},
    "samples": 3, "size_limit": 3000, "version": 2,
    "zip_data": {"basename": "shard.00000.mds.zstd", "bytes": 818,
                 "hashes": {"sha1": "ac09e28e0805195c0884242b24d2b409544ed7b3", "xxh64": "8376c1c369f420a9"}}
  }], "version": 2})");
}

Status ErrorOf(const Json& index) { return ParseMdsIndex("/d/index.json", index.dump()).status(); }

TEST_CASE("an index as MDSWriter writes it: columns, sizes, files and hashes") {
  auto index = ParseMdsIndex("/d/index.json", WriterIndex().dump());
  INFO(index.status().ToString());
  REQUIRE(index.ok());
  REQUIRE(index->shards.size() == 1);
  const MdsShardInfo& shard = index->shards[0];
  CHECK(shard.samples == 3);
  CHECK(shard.compression == "zstd:7");
  REQUIRE(shard.zip);
  CHECK(shard.file().basename == "shard.00000.mds.zstd");
  CHECK(shard.zip->bytes == 818);
  CHECK(shard.raw.basename == "shard.00000.mds");
  CHECK(shard.raw.bytes == 2439);
  REQUIRE(shard.raw.hashes.size() == 2);
  CHECK(shard.raw.hashes[0].first == "sha1");
  CHECK(shard.raw.hashes[0].second == "52229ded6caa3f5fd6fa2d87f7aee16b5bb83533");  // lowercased
  REQUIRE(shard.columns.size() == 7);
  const MdsColumn& e2 = shard.columns[0];
  CHECK(e2.kind == MdsEncoding::kNdArray);
  CHECK(e2.type == MdsType::kFloat32);
  CHECK(e2.shape == std::vector<int64_t>{4});
  CHECK(e2.size == 16u);
  const MdsColumn& emb = shard.columns[1];
  CHECK(emb.kind == MdsEncoding::kNdArray);
  CHECK_FALSE(emb.type);
  CHECK(emb.shape.empty());
  CHECK_FALSE(emb.size);
  CHECK(shard.columns[2].kind == MdsEncoding::kScalar);
  CHECK(shard.columns[2].type == MdsType::kFloat16);
  CHECK(shard.columns[3].kind == MdsEncoding::kImage);
  CHECK(shard.columns[4].type == MdsType::kInt64);
  CHECK(shard.columns[5].kind == MdsEncoding::kBytes);
  CHECK(shard.columns[6].type == MdsType::kUInt64);

  Json plain = WriterIndex();
  plain["shards"][0]["compression"] = nullptr;
  plain["shards"][0]["zip_data"] = nullptr;
  auto uncompressed = ParseMdsIndex("/d/index.json", plain.dump());
  REQUIRE(uncompressed.ok());
  CHECK_FALSE(uncompressed->shards[0].zip);
  CHECK(uncompressed->shards[0].file().basename == "shard.00000.mds");
  CHECK(SameColumns(uncompressed->shards[0].columns, index->shards[0].columns));
}

TEST_CASE("what is wrong with an index is named: the file, the field and its value") {
  const std::string name = "/d/index.json";
  CHECK_THAT(ParseMdsIndex(name, "{\"shards\": [").status().message(),
             Catch::StartsWith(name + ": not JSON: "));
  CHECK(ParseMdsIndex(name, "[]").status().message() == name + ": [], not a JSON object");
  struct Case {
    std::string pointer;  // a JSON pointer into WriterIndex()
    Json value;           // null with remove: the field is removed
    bool remove;
    std::string message;
  };
  const Case cases[] = {
      {"/version", 3, false, "version: 3, Ember reads version 2"},
      {"/shards", Json::object(), false, "shards: {}, not an array"},
      {"/shards/0/version", nullptr, true, "shards[0].version: missing"},
      {"/shards/0/format", "json", false, "shards[0].format: 'json', Ember reads 'mds' shards (not json, csv or tsv)"},
      {"/shards/0/samples", "3", false, "shards[0].samples: \"3\", not a non-negative integer"},
      {"/shards/0/samples", -1, false, "shards[0].samples: -1, not a non-negative integer"},
      {"/shards/0/samples", 5000000000, false, "shards[0].samples: 5000000000, more than 4294967295"},
      {"/shards/0/raw_data", nullptr, true, "shards[0].raw_data: missing"},
      {"/shards/0/raw_data/bytes", 1.5, false, "shards[0].raw_data.bytes: 1.5, not a non-negative integer"},
      {"/shards/0/raw_data/bytes", 5000000000, false,
       "shards[0].raw_data.bytes: 5000000000, over the 4 GiB an MDS shard's offsets reach"},
      {"/shards/0/raw_data/basename", "../etc/passwd", false,
       "shards[0].raw_data.basename: \"../etc/passwd\" is not a path below index.json's directory"},
      {"/shards/0/zip_data/basename", "/abs.zstd", false,
       "shards[0].zip_data.basename: \"/abs.zstd\" is not a path below index.json's directory"},
      {"/shards/0/raw_data/hashes/sm3", "00", false,
       "shards[0].raw_data.hashes.sm3: 'sm3' is not a hash Ember checks (known: blake2b, blake2s, "
       "md5, sha1, sha224, sha256, sha384, sha3_224, sha3_256, sha3_384, sha3_512, sha512, xxh128, "
       "xxh32, xxh3_128, xxh3_64, xxh64)"},
      {"/shards/0/raw_data/hashes/sha1", 7, false, "shards[0].raw_data.hashes.sha1: 7, not a string"},
      {"/shards/0/compression", "gz:9", false,
       "shards[0].compression: 'gz:9' (shard.00000.mds.zstd): Ember decompresses zstd only"},
      {"/shards/0/compression", 3, false, "shards[0].compression: 3, not a string or null"},
      {"/shards/0/zip_data", nullptr, false, "shards[0].zip_data: null, not an object (compression is \"zstd:7\")"},
      {"/shards/0/column_sizes/4", 4, false, "shards[0].column_sizes[4]: 4, encoding 'int' has 8 bytes"},
      {"/shards/0/column_sizes/0", nullptr, false,
       "shards[0].column_sizes[0]: null, encoding 'ndarray:float32:4' has 16 bytes"},
      {"/shards/0/column_sizes/3", 10, false, "shards[0].column_sizes[3]: 10, encoding 'jpeg' has no fixed size (null)"},
      {"/shards/0/column_sizes", Json::array({16}), false, "shards[0].column_sizes: 1 items, column_names has 7"},
      {"/shards/0/column_names/1", "e2", false, "shards[0].column_names[1]: \"e2\" is there twice"},
      {"/shards/0/column_names/1", 5, false, "shards[0].column_names[1]: 5, not a column name"},
      {"/shards/0/column_encodings/5", "pkl", false,
       "shards[0].column_encodings[5]: 'pkl' is an encoding Ember does not read (it reads bytes, str, "
       "json, jpeg, png, int, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, "
       "float32, float64, str_int, str_float, ndarray[:DTYPE[:SHAPE]])"},
      {"/shards/0/column_encodings/5", "text", false,
       "shards[0].column_encodings[5]: 'text' is not an MDS encoding (Ember reads bytes, str, json, "
       "jpeg, png, int, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, float32, "
       "float64, str_int, str_float, ndarray[:DTYPE[:SHAPE]])"},
      {"/shards/0/column_encodings/1", "ndarray:float128", false,
       "shards[0].column_encodings[1]: 'ndarray:float128': 'float128' is not an ndarray dtype "
       "(uint8, int8, uint16, int16, uint32, int32, uint64, int64, float16, float32, float64)"},
      {"/shards/0/column_encodings/0", "ndarray:float32:0", false,
       "shards[0].column_encodings[0]: 'ndarray:float32:0': the shape is not dimensions of at least "
       "1 separated by commas"},
      {"/shards/0/column_encodings/0", "ndarray:float32:1,1,1,1,1,1", false,
       "shards[0].column_encodings[0]: 'ndarray:float32:1,1,1,1,1,1': more than 5 dimensions"},
  };
  for (const Case& c : cases) {
    Json index = WriterIndex();
    const Json::json_pointer pointer(c.pointer);
    if (c.remove) {
      index[pointer.parent_pointer()].erase(pointer.back());
    } else {
      index[pointer] = c.value;
    }
    const Status status = ErrorOf(index);
    INFO(c.pointer << " = " << c.value.dump());
    CHECK(status.code() == StatusCode::kInvalidArgument);
    CHECK(status.message() == name + ": " + c.message);
  }
}

TEST_CASE("ndarray encodings fix the dtype, the shape, both or neither") {
  Json index = WriterIndex();
  auto& shard = index["shards"][0];
  shard["column_encodings"][0] = "ndarray:uint8:3,4";
  shard["column_sizes"][0] = 12;
  shard["column_encodings"][1] = "ndarray:int16";
  shard["column_encodings"][2] = "str_int";
  shard["column_sizes"][2] = nullptr;
  shard["column_encodings"][3] = "png";
  shard["column_encodings"][5] = "json";
  auto parsed = ParseMdsIndex("i", index.dump());
  INFO(parsed.status().ToString());
  REQUIRE(parsed.ok());
  const auto& columns = parsed->shards[0].columns;
  CHECK(columns[0].shape == std::vector<int64_t>{3, 4});
  CHECK(columns[0].size == 12u);
  CHECK(columns[1].type == MdsType::kInt16);
  CHECK(columns[1].shape.empty());
  CHECK_FALSE(columns[1].size);
  CHECK(columns[2].kind == MdsEncoding::kStrInt);
  CHECK(columns[3].kind == MdsEncoding::kImage);
  CHECK(columns[5].kind == MdsEncoding::kBytes);
  shard["column_encodings"][1] = "ndarray:";  // NDArray.from_str(""): neither
  REQUIRE(ParseMdsIndex("i", index.dump()).ok());
}

}  // namespace
}  // namespace ember::daemon
