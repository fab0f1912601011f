#include "daemon/data/mds/mds.h"

#include <sys/types.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/temp_dir_testing.h"
#include "daemon/data/dataset_memory.h"
#include "daemon/data/image/image_testing.h"
#include "daemon/data/image/pipeline.h"
#include "daemon/data/mds/mds_testing.h"
#include "daemon/data/remote/nginx_testing.h"
#include "daemon/data/remote/s3_testing.h"
#include "daemon/data/remote/shard_cache.h"
#include "daemon/data/source_testing.h"

namespace ember::daemon {
namespace {

constexpr const char* kSmallPipeline = "steps: [{resize: {size: [8, 8]}}]\noutput: {layout: HWC}";

DatasetSpec Spec(const std::string& path) {
  DatasetSpec spec;
  spec.name = "mds";
  spec.format = "mds";
  spec.path = path;
  spec.split = "train";
  spec.pipeline = kSmallPipeline;
  return spec;
}

// The sets make.py wrote with Mosaic's MDSWriter (testdata/mosaic), copied to a fresh
// directory: "raw" or "zstd".
std::string MosaicSet(const std::string& name, const std::string& where) {
  const std::string dir = FreshTestDir(where);
  std::filesystem::copy("daemon/data/mds/testdata/mosaic/" + name, dir,
                        std::filesystem::copy_options::recursive);
  return dir;
}


std::unique_ptr<Source> MustLoad(Env& env, const DatasetSpec& spec, ShardCache* cache = nullptr,
                                 DatasetMemory::Charge* memory = nullptr) {
  auto source = LoadMds(env, spec, nullptr, memory, cache);
  INFO((source.ok() ? std::string() : source.status().ToString()));
  REQUIRE(source.ok());
  return std::move(source).value();
}


// What make.py wrote as sample i (see there), read back.
void CheckMosaicSample(const SampleBytes& sample, int i) {
  INFO("sample " << i << ": " << sample.status.ToString());
  REQUIRE(sample.status.ok());
  // image, label, big, e2, emb, half, txt, txt_size
  const std::string& image = sample.tensors[0];
  CHECK(std::abs(static_cast<uint8_t>(image[0]) - 40 * i) <= 4);
  CHECK(std::abs(static_cast<uint8_t>(image[1]) - 100) <= 4);
  CHECK(std::abs(static_cast<uint8_t>(image[2]) - 200) <= 4);
  CHECK(sample.Get<int64_t>(1) == i % 3);
  CHECK(sample.Get<int64_t>(2) == (int64_t{1} << 40) + i);
  CHECK(sample.Get<float>(3, 0) == static_cast<float>(i));
  CHECK(sample.Get<float>(3, 1) == 0.5f);
  CHECK(sample.Get<int16_t>(4, 0) == i + 1);
  CHECK(sample.Get<int16_t>(4, 1) == 2 * i + 1);
  CHECK(sample.Get<int16_t>(4, 2) == -i);
  CHECK(sample.Get<float>(5) == i / 4.0f);
  const std::string text = "text " + std::to_string(i) + std::string(i, 'x');
  CHECK(sample.Get<int64_t>(7) == static_cast<int64_t>(text.size()));
  CHECK(sample.tensors[6] == text + std::string(sample.tensors[6].size() - text.size(), '\0'));
}

TEST_CASE("a set Mosaic's MDSWriter wrote reads back, uncompressed and zstd-compressed with hashes") {
  auto env = NewPosixEnv();
  const std::string raw = MosaicSet("raw", "mosaic-raw");
  const std::string zstd = MosaicSet("zstd", "mosaic-zstd");
  auto info = ProbeMds(*env, Spec(raw));
  INFO(info.status().ToString());
  REQUIRE(info.ok());
  CHECK(info->count == 5);
  CHECK(info->files == std::vector<std::string>{raw + "/index.json", raw + "/shard.00000.mds",
                                                raw + "/shard.00001.mds"});
  CHECK(TensorNames(*info) == std::vector<std::string>{"image", "label", "big", "e2", "emb", "half",
                                                 "txt", "txt_size"});
  const auto& t = info->tensors;
  CHECK(t[0].shape == std::vector<int64_t>{8, 8, 3});
  CHECK(t[1].dtype == ring::DType::kInt64);
  CHECK(t[2].dtype == ring::DType::kInt64);  // uint64
  CHECK(t[3].dtype == ring::DType::kFloat32);
  CHECK(t[3].shape == std::vector<int64_t>{2});
  CHECK(t[4].dtype == ring::DType::kInt16);  // the first sample's
  CHECK(t[4].shape == std::vector<int64_t>{3});
  CHECK(t[5].dtype == ring::DType::kFloat32);  // float16
  CHECK(t[5].shape.empty());
  CHECK(t[6].shape == std::vector<int64_t>{10});  // "text 4xxxx", the longest
  CHECK(t[7].dtype == ring::DType::kInt64);

  auto plain = MustLoad(*env, Spec(raw));
  auto compressed = MustLoad(*env, Spec(zstd + "/"));
  CHECK(plain->ParallelDecode());
  CHECK(compressed->info().files ==
        std::vector<std::string>{zstd + "/index.json", zstd + "/shard.00000.mds.zstd",
                                 zstd + "/shard.00001.mds.zstd"});
  CHECK(compressed->info().tensors.size() == 8);
  for (int i = 0; i < 5; ++i) {
    const SampleBytes a = ReadSampleBytes(*plain, i);
    const SampleBytes b = ReadSampleBytes(*compressed, i);
    CheckMosaicSample(a, i);
    CheckMosaicSample(b, i);
    CHECK(a.tensors == b.tensors);
  }
  CHECK(ReadSampleBytes(*plain, 5).status.code() == StatusCode::kInvalidArgument);
  const uint64_t ids[] = {0, 4, 99};
  plain->Prefetch(ids, 3);
  compressed->Prefetch(ids, 3);
  // Shuffled by shards: the blocks are the shards (of 3 and 2 samples).
  CHECK(info->shard_starts.empty());
  DatasetSpec by_shards = Spec(raw);
  by_shards.shuffle = "shards";
  auto blocks = ProbeMds(*env, by_shards);
  REQUIRE(blocks.ok());
  CHECK(blocks->shard_starts == std::vector<uint64_t>{0, 3, 5});
  // index.json itself names the set as well.
  auto by_index = ProbeMds(*env, Spec(zstd + "/index.json"));
  REQUIRE(by_index.ok());
  CHECK(by_index->count == 5);
}

// Columns of most encodings, written by mds_testing (as MDSWriter lays them out).
const std::vector<MdsTestColumn> kColumns = {
    {"caption", "str", std::nullopt}, {"count", "uint32", 4},    {"extra", "png", std::nullopt},
    {"label", "str_int", std::nullopt}, {"photo", "jpeg", std::nullopt},
    {"score", "str_float", std::nullopt}};

MdsTestSample Varied(int i) {
  return {"caption " + std::string(i, 'c'), MdsBytesOf<uint32_t>(4000000000u + i),
          EncodePng(SolidImage(4, 4, {1, 2, 3})), " " + std::to_string(i * 7) + "\n",
          EncodeJpeg(SolidImage(16, 12, {static_cast<uint8_t>(i * 30), 40, 200})),
          std::to_string(i) + ".25"};
}

TEST_CASE("columns become tensors: the jpeg the image, str_int label, the others by name") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("varied");
  std::vector<MdsTestSample> samples;
  for (int i = 0; i < 5; ++i) samples.push_back(Varied(i));
  WriteMdsDataset(dir, kColumns, samples);
  auto source = MustLoad(*env, Spec(dir));
  const DatasetInfo& info = source->info();
  CHECK(info.count == 5);
  REQUIRE(TensorNames(info) == std::vector<std::string>{"image", "label", "caption", "caption_size",
                                                  "count", "extra", "extra_size", "score"});
  CHECK(info.tensors[4].dtype == ring::DType::kInt64);    // uint32
  CHECK(info.tensors[7].dtype == ring::DType::kFloat64);  // str_float
  auto pipeline = ImagePipeline::Parse(kSmallPipeline);
  REQUIRE(pipeline.ok());
  for (int i = 0; i < 5; ++i) {
    const SampleBytes sample = ReadSampleBytes(*source, i);
    INFO("sample " << i << ": " << sample.status.ToString());
    REQUIRE(sample.status.ok());
    // The same bytes as the pipeline makes of the jpeg itself.
    const std::string& jpeg = samples[i][4];
    std::string expected(pipeline->OutputBytes(), '\0');
    REQUIRE(pipeline->Run("x", reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), 5, 1, i,
                          expected.data()).ok());
    CHECK(sample.tensors[0] == expected);
    CHECK(sample.Get<int64_t>(1) == i * 7);
    CHECK(sample.Get<int64_t>(3) == 8 + i);
    CHECK(sample.tensors[2].substr(0, 8 + i) == "caption " + std::string(i, 'c'));
    CHECK(sample.Get<int64_t>(4) == 4000000000 + i);
    CHECK(sample.Get<int64_t>(6) == static_cast<int64_t>(samples[i][2].size()));
    CHECK(sample.Get<double>(7) == i + 0.25);
  }
}

TEST_CASE("a directory of sets, each with its index.json, is read as one, in name order") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("streams");
  std::vector<MdsTestSample> samples;
  for (int i = 0; i < 5; ++i) samples.push_back(Varied(i));
  WriteMdsDataset(dir + "/b", kColumns, {samples.begin() + 3, samples.end()});
  WriteMdsDataset(dir + "/a", kColumns, {samples.begin(), samples.begin() + 3},
                  MdsTestOptions{2, "zstd", {"md5"}});
  REQUIRE(std::filesystem::create_directories(dir + "/notes"));  // no index.json: ignored
  auto source = MustLoad(*env, Spec(dir));
  CHECK(source->info().count == 5);
  CHECK(source->info().files ==
        std::vector<std::string>{dir + "/a/index.json", dir + "/b/index.json",
                                 dir + "/a/shard.00000.mds.zstd", dir + "/a/shard.00001.mds.zstd",
                                 dir + "/b/shard.00000.mds"});
  for (int i = 0; i < 5; ++i) CHECK(ReadSampleBytes(*source, i).Get<int64_t>(1) == i * 7);

  // Sets whose columns differ are not one set.
  std::vector<MdsTestColumn> other = kColumns;
  other[0].encoding = "bytes";
  WriteMdsDataset(dir + "/c", other, {samples[0]});
  auto differ = ProbeMds(*env, Spec(dir));
  REQUIRE(differ.status().code() == StatusCode::kInvalidArgument);
  CHECK(differ.status().message() ==
        dir + "/c/index.json: shards[0]: columns (caption bytes, count uint32, extra png, label "
              "str_int, photo jpeg, score str_float) are not those of the set's first shard "
              "(caption str, count uint32, extra png, label str_int, photo jpeg, score str_float "
              "in " + dir + "/a/index.json)");

  auto none = ProbeMds(*env, Spec(dir + "/notes"));
  CHECK(none.status().code() == StatusCode::kNotFound);
  CHECK(none.status().message() == dir + "/notes: no index.json in it or in its subdirectories (an "
                                         "MDS dataset's directory holds index.json and its shards)");
  CHECK(ProbeMds(*env, Spec(dir + "/missing")).status().code() == StatusCode::kNotFound);
}

TEST_CASE("an index.json that is not JSON, lacks a field or names other compressions is refused naming it") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("bad-index");
  WriteMdsDataset(dir, kColumns, {Varied(0)}, MdsTestOptions{3, "zstd:7", {}});
  const std::string good = ReadTestFile(dir + "/index.json");

  WriteTestFile(dir + "/index.json", "{\"version\": 2, \"shards\": [");
  auto not_json = ProbeMds(*env, Spec(dir));
  CHECK(not_json.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(not_json.status().message(), Catch::StartsWith(dir + "/index.json: not JSON: "));

  std::string missing = good;
  missing.replace(missing.find("\"samples\""), 9, "\"sample\"");
  WriteTestFile(dir + "/index.json", missing);
  CHECK(ProbeMds(*env, Spec(dir)).status().message() == dir + "/index.json: shards[0].samples: missing");

  std::string gzip = good;
  gzip.replace(gzip.find("\"zstd:7\""), 8, "\"gz\"");
  WriteTestFile(dir + "/index.json", gzip);
  auto gz = ProbeMds(*env, Spec(dir));
  CHECK(gz.status().code() == StatusCode::kInvalidArgument);
  CHECK(gz.status().message() == dir + "/index.json: shards[0].compression: 'gz' "
                                       "(shard.00000.mds.zstd): Ember decompresses zstd only");
}

TEST_CASE("a shard missing, truncated, with a wrong hash or damaged compression is refused at registration") {
  auto env = NewPosixEnv();
  for (const std::string compression : {"", "zstd"}) {
    INFO("compression '" << compression << "'");
    const std::string dir = FreshTestDir("bad-shards-" + compression);
    std::vector<MdsTestSample> samples;
    for (int i = 0; i < 4; ++i) samples.push_back(Varied(i));
    WriteMdsDataset(dir, kColumns, samples, MdsTestOptions{2, compression, {"sha256", "xxh3_64"}});
    const std::string shard = dir + "/shard.00001.mds" + (compression.empty() ? "" : ".zstd");
    const std::string field = compression.empty() ? "raw_data" : "zip_data";
    const std::string bytes = ReadTestFile(shard);
    REQUIRE(ProbeMds(*env, Spec(dir)).ok());

    WriteTestFile(shard, bytes.substr(0, bytes.size() - 5));
    auto truncated = ProbeMds(*env, Spec(dir));
    CHECK(truncated.status().code() == StatusCode::kDataLoss);
    CHECK(truncated.status().message() ==
          shard + ": " + std::to_string(bytes.size() - 5) + " bytes, " + dir +
              "/index.json shards[1]." + field + ".bytes says " + std::to_string(bytes.size()));

    std::string flipped = bytes;
    flipped[flipped.size() - 3] ^= 1;
    WriteTestFile(shard, flipped);
    auto wrong = ProbeMds(*env, Spec(dir));
    CHECK(wrong.status().code() == StatusCode::kDataLoss);
    CHECK_THAT(wrong.status().message(),
               Catch::StartsWith(shard + ": its sha256 is ") &&
                   Catch::Contains(", " + dir + "/index.json shards[1]." + field + ".hashes says "));

    std::filesystem::remove(shard);
    auto missing = ProbeMds(*env, Spec(dir));
    CHECK(missing.status().code() == StatusCode::kNotFound);
    CHECK_THAT(missing.status().message(), Catch::Contains(shard));
    WriteTestFile(shard, bytes);
  }

  // Compressed data that is damaged but hashes as index.json says (no hashes).
  const std::string dir = FreshTestDir("bad-zstd");
  WriteMdsDataset(dir, kColumns, {Varied(0), Varied(1)}, MdsTestOptions{2, "zstd", {}});
  std::string zip = ReadTestFile(dir + "/shard.00000.mds.zstd");
  for (size_t i = 8; i < zip.size(); ++i) zip[i] = static_cast<char>(0xa5);
  WriteTestFile(dir + "/shard.00000.mds.zstd", zip);
  auto damaged = ProbeMds(*env, Spec(dir));
  CHECK(damaged.status().code() == StatusCode::kDataLoss);
  CHECK_THAT(damaged.status().message(), Catch::StartsWith(dir + "/shard.00000.mds.zstd: "));
}

TEST_CASE("a sample whose sizes do not add up, or whose values do not parse, loses only itself") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("bad-samples");
  const std::vector<MdsTestColumn> columns = {
      {"emb", "ndarray", std::nullopt}, {"image", "jpeg", std::nullopt},
      {"label", "str_int", std::nullopt}, {"n", "uint64", 8}, {"txt", "bytes", std::nullopt}};
  const std::string jpeg = EncodeJpeg(SolidImage(16, 12, {10, 20, 30}));
  auto emb = [](std::vector<float> values) {
    return MdsDynamicArray(34, {static_cast<uint8_t>(values.size())},
                           std::string(reinterpret_cast<const char*>(values.data()), 4 * values.size()));
  };
  WriteMdsDataset(dir, columns,
                  {{emb({1, 2}), jpeg, "1", MdsBytesOf<uint64_t>(1), "ok"},
                   {emb({1, 2}), "not a jpeg", "2", MdsBytesOf<uint64_t>(2), "bad image"},
                   {emb({1, 2}), jpeg, "three", MdsBytesOf<uint64_t>(3), "bad label"},
                   {emb({1, 2, 3}), jpeg, "4", MdsBytesOf<uint64_t>(4), "other shape"},
                   {emb({1, 2}), jpeg, "5", MdsBytesOf<uint64_t>(uint64_t{1} << 63), "too big"},
                   {emb({1, 2}), jpeg, "6", MdsBytesOf<uint64_t>(6), "sizes"}},
                  MdsTestOptions{6, "", {}});
  // SampleBytes 5's head says its txt has 6 bytes more than it has.
  std::string shard = ReadTestFile(dir + "/shard.00000.mds");
  uint32_t begin = 0;
  std::memcpy(&begin, shard.data() + 4 + 4 * 5, 4);
  uint32_t sizes[4];
  std::memcpy(sizes, shard.data() + begin, sizeof(sizes));  // emb, image, label, txt
  sizes[3] += 6;
  std::memcpy(shard.data() + begin, sizes, sizeof(sizes));
  WriteTestFile(dir + "/shard.00000.mds", shard);

  auto source = MustLoad(*env, Spec(dir));
  REQUIRE(source->info().count == 6);
  CHECK(TensorNames(source->info()) ==
        std::vector<std::string>{"image", "label", "emb", "n", "txt", "txt_size"});
  CHECK(source->info().tensors[4].shape == std::vector<int64_t>{11});  // "other shape"
  const std::string shard_path = dir + "/shard.00000.mds";
  auto where = [&](int k) {
    uint32_t offset = 0;
    std::memcpy(&offset, shard.data() + 4 + 4 * k, 4);
    return shard_path + ": sample " + std::to_string(k) + " (byte " + std::to_string(offset) + ")";
  };
  const SampleBytes ok = ReadSampleBytes(*source, 0);
  REQUIRE(ok.status.ok());
  CHECK(ok.Get<float>(2, 1) == 2.0f);
  CHECK(ok.Get<int64_t>(3) == 1);
  const Status image = ReadSampleBytes(*source, 1).status;
  CHECK(image.code() == StatusCode::kDataLoss);
  CHECK_THAT(image.message(), Catch::Contains(where(1) + " column 'image'"));
  CHECK(ReadSampleBytes(*source, 2).status.message() == where(2) + " column 'label': not an integer: 'three'");
  CHECK(ReadSampleBytes(*source, 3).status.message() ==
        where(3) + " column 'emb': an array of (3,) float32, the set's are (2,) float32");
  CHECK(ReadSampleBytes(*source, 4).status.message() ==
        where(4) + " column 'n': a uint64 over the int64 it is served as");
  const Status sizes_status = ReadSampleBytes(*source, 5).status;
  CHECK(sizes_status.code() == StatusCode::kDataLoss);
  CHECK_THAT(sizes_status.message(), Catch::StartsWith(where(5) + ": column 'txt' ("));
  CHECK(ReadSampleBytes(*source, 0).status.ok());
}

TEST_CASE("a shard truncated while the set is loaded fails its reads, not the daemon") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("shrinking");
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<MdsTestSample> samples;
  for (int i = 0; i < 8; ++i) samples.push_back({std::string(page, static_cast<char>('a' + i))});
  WriteMdsDataset(dir, {{"blob", "bytes", std::nullopt}}, samples, MdsTestOptions{8, "", {}});
  auto source = MustLoad(*env, Spec(dir));
  CHECK_FALSE(source->ParallelDecode());
  REQUIRE(ReadSampleBytes(*source, 7).status.ok());
  REQUIRE(truncate((dir + "/shard.00000.mds").c_str(), static_cast<off_t>(page)) == 0);
  const Status status = ReadSampleBytes(*source, 7).status;  // was SIGBUS
  CHECK(status.code() == StatusCode::kDataLoss);
  CHECK_THAT(status.message(), Catch::StartsWith(dir + "/shard.00000.mds: the file shrank below"));
}

TEST_CASE("a set the ring cannot carry is refused naming index.json and the columns") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("too-many");
  WriteMdsDataset(dir, {{"a", "str", std::nullopt}, {"b", "str", std::nullopt},
                        {"c", "str", std::nullopt}, {"d", "str", std::nullopt},
                        {"e", "int", 8}},
                  {{"a", "b", "c", "d", MdsBytesOf<int64_t>(1)}});
  auto many = ProbeMds(*env, Spec(dir));
  CHECK(many.status().code() == StatusCode::kInvalidArgument);
  CHECK(many.status().message() ==
        dir + "/index.json: the columns (a, b, c, d, e) make 9 tensors, at most 8 fit a batch");

  WriteMdsDataset(dir, {{"description", "str", std::nullopt}}, {{"x"}});
  CHECK(ProbeMds(*env, Spec(dir)).status().message() ==
        dir + "/index.json: column 'description' makes tensor 'description_size', longer than "
              "15 bytes");
  WriteMdsDataset(dir, {{"image", "str", std::nullopt}, {"photo", "jpeg", std::nullopt}}, {{"x", "y"}});
  CHECK(ProbeMds(*env, Spec(dir)).status().message() ==
        dir + "/index.json: columns 'photo' and 'image' both make tensor 'image'");
}

TEST_CASE("the index and the decompressed shards are charged to the owner's dataset memory") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("charged");
  std::vector<MdsTestSample> samples;
  for (int i = 0; i < 4; ++i) samples.push_back({std::string(10000, 'x')});
  WriteMdsDataset(dir, {{"blob", "bytes", std::nullopt}}, samples, MdsTestOptions{2, "zstd", {}});
  Principal user;
  user.uid = 2001;
  DatasetMemory memory(15000);
  auto charge = memory.For(user);
  auto refused = ProbeMds(*env, Spec(dir), nullptr, charge.get());
  REQUIRE(refused.status().code() == StatusCode::kResourceExhausted);
  CHECK_THAT(refused.status().message(),
             Catch::StartsWith(dir + "/shard.00000.mds.zstd (its index and decompressed bytes): "));

  DatasetMemory roomy(1 << 20);
  auto fits = roomy.For(user);
  auto source = MustLoad(*env, Spec(dir), nullptr, fits.get());
  CHECK(roomy.of(2001) > 40000);
  CHECK(ReadSampleBytes(*source, 3).Get<int64_t>(1) == 10000);
}

TEST_CASE("a set at an http:// URL is read through the shard cache, equal to the local one") {
  auto env = NewPosixEnv();
  const std::string root = FreshTestDir("remote");
  std::filesystem::copy("daemon/data/mds/testdata/mosaic", root,
                        std::filesystem::copy_options::recursive);
  NginxServer nginx(root);
  const uint64_t largest = std::filesystem::file_size(root + "/raw/shard.00000.mds");
  // Room for one shard: registration reads both, evicting the first.
  auto cache = ShardCache::Open(*env, FreshTestDir("remote-cache"), largest + 100, HttpFetcher());
  REQUIRE(cache.ok());
  auto remote = MustLoad(*env, Spec(nginx.Url("/raw")), cache->get());
  CHECK(remote->info().files ==
        std::vector<std::string>{nginx.Url("/raw/index.json"), nginx.Url("/raw/shard.00000.mds"),
                                 nginx.Url("/raw/shard.00001.mds")});
  auto local = MustLoad(*env, Spec(root + "/raw"));
  for (uint64_t id : {0, 4, 1, 3, 2}) {
    const SampleBytes got = ReadSampleBytes(*remote, id);
    INFO("sample " << id << ": " << got.status.ToString());
    REQUIRE(got.status.ok());
    CHECK(got.tensors == ReadSampleBytes(*local, id).tensors);
  }
  // Shard 1 is cached; shard 0's three samples came by range GETs (and index.json by one).
  const ShardCacheStats stats = (*cache)->stats();
  CHECK(stats.evictions > 0);
  CHECK(stats.range_reads == 1 + 3);
  CHECK((*cache)->Contains(nginx.Url("/raw/shard.00001.mds")));

  // Compressed: decompressed into memory when loaded; nothing remote is read after.
  auto zipped = MustLoad(*env, Spec(nginx.Url("/zstd/index.json")), cache->get());
  const uint64_t ranges = (*cache)->stats().range_reads;
  for (uint64_t id = 0; id < 5; ++id) CHECK(ReadSampleBytes(*zipped, id).tensors == ReadSampleBytes(*local, id).tensors);
  CHECK((*cache)->stats().range_reads == ranges);

  auto missing = ProbeMds(*env, Spec(nginx.Url("/nothing/")), nullptr, nullptr, cache->get());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK_THAT(missing.status().message(), Catch::Contains(nginx.Url("/nothing/index.json")));
  auto no_cache = ProbeMds(*env, Spec(nginx.Url("/raw")));
  CHECK(no_cache.status().code() == StatusCode::kFailedPrecondition);
}

TEST_CASE("a set at s3:// is read through the shard cache, equal to the local one") {
  auto env = NewPosixEnv();
  CephS3Server server;
  server.Put("sets", "daemon/data/mds/testdata/mosaic/raw", "photos");
  FetchOptions options;
  options.s3 = server.Config();
  auto cache = ShardCache::Open(*env, FreshTestDir("s3-cache"), 1 << 20, HttpFetcher(options));
  REQUIRE(cache.ok());
  auto local = MustLoad(*env, Spec("daemon/data/mds/testdata/mosaic/raw"));
  const std::string objects = "s3+" + server.endpoint() + "/sets/photos/";
  for (const std::string path : {"s3://sets/photos", "s3://sets/photos/index.json"}) {
    auto remote = MustLoad(*env, Spec(path), cache->get());
    CHECK(remote->info().files ==
          std::vector<std::string>{objects + "index.json", objects + "shard.00000.mds",
                                   objects + "shard.00001.mds"});
    for (uint64_t id : {0, 4, 1, 3, 2}) {
      const SampleBytes got = ReadSampleBytes(*remote, id);
      INFO(path << " sample " << id << ": " << got.status.ToString());
      REQUIRE(got.status.ok());
      CHECK(got.tensors == ReadSampleBytes(*local, id).tensors);
    }
  }
  auto missing = ProbeMds(*env, Spec("s3://sets/nothing/"), nullptr, nullptr, cache->get());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK_THAT(missing.status().message(), Catch::Contains("'nothing/index.json'"));
}

}  // namespace
}  // namespace ember::daemon
