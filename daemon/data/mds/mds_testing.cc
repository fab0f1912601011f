#include "daemon/data/mds/mds_testing.h"

#include <zstd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "common/temp_dir_testing.h"
#include "daemon/data/mds/mds_hash.h"

namespace ember::daemon {
namespace {

using Json = nlohmann::json;

std::string U32(uint64_t value) {
  REQUIRE(value <= UINT32_MAX);
  return MdsBytesOf(static_cast<uint32_t>(value));
}

Json Hashes(const std::vector<std::string>& algorithms, const std::string& data) {
  Json hashes = Json::object();
  for (const std::string& algorithm : algorithms) {
    auto digest = MdsHexDigest(algorithm, data.data(), data.size());
    REQUIRE(digest.ok());
    hashes[algorithm] = *digest;
  }
  return hashes;
}

}  // namespace

std::string MdsDynamicArray(uint8_t dtype_code, const std::vector<uint8_t>& shape,
                            const std::string& elements) {
  std::string out(1, static_cast<char>(dtype_code));
  out += static_cast<char>(shape.size() << 2);  // uint8 dims
  for (uint8_t dim : shape) out += static_cast<char>(dim);
  return out + elements;
}

std::string MdsShardBytes(const std::vector<MdsTestColumn>& columns,
                          const std::vector<MdsTestSample>& samples) {
  Json config;
  config["column_names"] = Json::array();
  config["column_encodings"] = Json::array();
  config["column_sizes"] = Json::array();
  for (const MdsTestColumn& column : columns) {
    config["column_names"].push_back(column.name);
    config["column_encodings"].push_back(column.encoding);
    config["column_sizes"].push_back(column.size ? Json(*column.size) : Json(nullptr));
  }
  config["format"] = "mds";
  config["version"] = 2;
  const std::string config_text = config.dump();
  std::vector<std::string> encoded;
  for (const MdsTestSample& sample : samples) {
    REQUIRE(sample.size() == columns.size());
    std::string head, body;
    for (size_t c = 0; c < columns.size(); ++c) {
      if (!columns[c].size) head += U32(sample[c].size());
      body += sample[c];
    }
    encoded.push_back(head + body);
  }
  std::string out = U32(samples.size());
  uint64_t offset = 4 + 4 * (samples.size() + 1) + config_text.size();
  out += U32(offset);
  for (const std::string& sample : encoded) out += U32(offset += sample.size());
  out += config_text;
  for (const std::string& sample : encoded) out += sample;
  return out;
}

void WriteMdsDataset(const std::string& dir, const std::vector<MdsTestColumn>& columns,
                     const std::vector<MdsTestSample>& samples, const MdsTestOptions& options) {
  Json shards = Json::array();
  for (size_t first = 0, n = 0; first < samples.size(); first += options.per_shard, ++n) {
    const std::vector<MdsTestSample> part(
        samples.begin() + first,
        samples.begin() + std::min(samples.size(), first + options.per_shard));
    const std::string raw = MdsShardBytes(columns, part);
    char basename[32];
    std::snprintf(basename, sizeof(basename), "shard.%05zu.mds", n);
    Json shard;
    shard["version"] = 2;
    shard["format"] = "mds";
    shard["samples"] = part.size();
    shard["size_limit"] = 1 << 26;
    shard["hashes"] = options.hashes;
    shard["column_names"] = Json::array();
    shard["column_encodings"] = Json::array();
    shard["column_sizes"] = Json::array();
    for (const MdsTestColumn& column : columns) {
      shard["column_names"].push_back(column.name);
      shard["column_encodings"].push_back(column.encoding);
      shard["column_sizes"].push_back(column.size ? Json(*column.size) : Json(nullptr));
    }
    shard["raw_data"] = {
        {"basename", basename}, {"bytes", raw.size()}, {"hashes", Hashes(options.hashes, raw)}};
    if (options.compression.empty()) {
      shard["compression"] = nullptr;
      shard["zip_data"] = nullptr;
      WriteTestFile(dir + "/" + basename, raw);
    } else {
      std::string zip(ZSTD_compressBound(raw.size()), '\0');
      const size_t size = ZSTD_compress(zip.data(), zip.size(), raw.data(), raw.size(), 3);
      REQUIRE(!ZSTD_isError(size));
      zip.resize(size);
      const std::string zip_name = std::string(basename) + ".zstd";
      shard["compression"] = options.compression;
      shard["zip_data"] = {
          {"basename", zip_name}, {"bytes", zip.size()}, {"hashes", Hashes(options.hashes, zip)}};
      WriteTestFile(dir + "/" + zip_name, zip);
    }
    shards.push_back(shard);
  }
  WriteTestFile(dir + "/index.json", Json{{"version", 2}, {"shards", shards}}.dump(2));
}

}  // namespace ember::daemon
