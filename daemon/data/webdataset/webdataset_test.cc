#include "daemon/data/webdataset/webdataset.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <chrono>
#include <thread>

#include "common/temp_dir_testing.h"
#include "daemon/data/dataset_memory.h"
#include "daemon/data/image/image_testing.h"
#include "daemon/data/image/pipeline.h"
#include "daemon/data/remote/nginx_testing.h"
#include "daemon/data/remote/s3_config.h"
#include "daemon/data/remote/s3_testing.h"
#include "daemon/data/remote/shard_cache.h"
#include "daemon/data/source_testing.h"
#include "daemon/data/webdataset/tar_testing.h"

namespace ember::daemon {
namespace {

constexpr const char* kSmallPipeline = "steps: [{resize: {size: [8, 8]}}]\noutput: {layout: HWC}";

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

DatasetSpec Spec(const std::string& path) {
  DatasetSpec spec;
  spec.name = "shards";
  spec.format = "webdataset";
  spec.path = path;
  spec.split = "train";
  spec.pipeline = kSmallPipeline;
  return spec;
}

std::string Jpeg(uint8_t red) { return EncodeJpeg(SolidImage(16, 12, {red, 40, 200})); }

// Two shards as webdataset's ShardWriter lays them out: KEY.jpg, KEY.cls, KEY.txt per
// sample, consecutive; sample i is red i * 20, class i % 3, text "caption i" (i + 1 'x's
// after it, so that lengths differ).
std::string WriteShards(const std::string& name) {
  const std::string dir = FreshTestDir(name);
  for (int shard = 0; shard < 2; ++shard) {
    TarMembers members;
    for (int k = 0; k < 3; ++k) {
      const int i = shard * 3 + k;
      const std::string key = "sample" + std::to_string(i);
      members.push_back({key + ".jpg", Jpeg(static_cast<uint8_t>(i * 20))});
      members.push_back({key + ".cls", std::to_string(i % 3) + "\n"});
      members.push_back({key + ".txt", "caption " + std::to_string(i) + std::string(i + 1, 'x')});
    }
    WriteTestFile(dir + "/shard-00000" + std::to_string(shard) + ".tar", TarBytes(members));
  }
  return dir;
}

struct Sample {
  Status status;
  std::vector<uint8_t> image;
  int64_t label = -1;
  std::string text;
  int64_t text_size = -1;
};

Sample Read(const Source& source, uint64_t id) {
  Sample sample;
  sample.image.resize(source.info().tensors[0].SampleBytes());
  sample.text.resize(source.info().tensors[2].SampleBytes());
  void* dsts[4] = {sample.image.data(), &sample.label, sample.text.data(), &sample.text_size};
  sample.status = source.ReadSample(id, SampleContext{5, 1}, dsts);
  return sample;
}

// The 6 samples of `remote` equal `local`'s, read out of order (across shards).
void CheckSameSamples(const Source& remote, const Source& local) {
  REQUIRE(remote.info().count == 6);
  for (uint64_t id : {0, 4, 1, 5, 2, 3}) {
    const Sample got = Read(remote, id);
    const Sample want = Read(local, id);
    INFO("sample " << id << ": " << got.status.ToString());
    REQUIRE(got.status.ok());
    CHECK(got.image == want.image);
    CHECK(got.label == want.label);
    CHECK(got.text == want.text);
    CHECK(got.text_size == want.text_size);
  }
}

std::unique_ptr<Source> MustLoad(Env& env, const DatasetSpec& spec) {
  auto source = LoadWebDataset(env, spec);
  INFO((source.ok() ? std::string() : source.status().ToString()));
  REQUIRE(source.ok());
  return std::move(source).value();
}

TEST_CASE("samples are the members sharing a key: image by the pipeline, cls as label, text as bytes") {
  auto env = NewPosixEnv();
  const std::string dir = WriteShards("samples");
  auto info = ProbeWebDataset(*env, Spec(dir));
  REQUIRE(info.ok());
  CHECK(info->count == 6);
  CHECK(info->files == std::vector<std::string>{dir + "/shard-000000.tar", dir + "/shard-000001.tar"});
  REQUIRE(info->tensors.size() == 4);
  CHECK(info->tensors[0].name == "image");
  CHECK(info->tensors[0].shape == std::vector<int64_t>{8, 8, 3});
  CHECK(info->tensors[1].name == "label");
  CHECK(info->tensors[1].dtype == ring::DType::kInt64);
  CHECK(info->tensors[2].name == "txt");
  CHECK(info->tensors[2].dtype == ring::DType::kUInt8);
  CHECK(info->tensors[2].shape ==
        std::vector<int64_t>{static_cast<int64_t>(std::string("caption 5xxxxxx").size())});
  CHECK(info->tensors[3].name == "txt_size");

  auto source = MustLoad(*env, Spec(dir));
  CHECK(source->ParallelDecode());
  auto pipeline = ImagePipeline::Parse(kSmallPipeline);
  REQUIRE(pipeline.ok());
  for (uint64_t id = 0; id < 6; ++id) {
    const Sample sample = Read(*source, id);
    INFO("sample " << id << ": " << sample.status.ToString());
    REQUIRE(sample.status.ok());
    CHECK(sample.label == static_cast<int64_t>(id % 3));
    const std::string text = "caption " + std::to_string(id) + std::string(id + 1, 'x');
    CHECK(sample.text_size == static_cast<int64_t>(text.size()));
    CHECK(sample.text.substr(0, text.size()) == text);
    CHECK(sample.text.find_first_not_of('\0', text.size()) == std::string::npos);
    // The same bytes as the pipeline makes of the member itself.
    const std::string jpeg = Jpeg(static_cast<uint8_t>(id * 20));
    std::vector<uint8_t> expected(pipeline->OutputBytes());
    REQUIRE(pipeline->Run("x", reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), 5, 1,
                          id, expected.data()).ok());
    CHECK(sample.image == expected);
  }
  CHECK(Read(*source, 6).status.code() == StatusCode::kInvalidArgument);

  // A brace pattern names the same shards.
  auto pattern = ProbeWebDataset(*env, Spec(dir + "/shard-{000000..000001}.tar"));
  REQUIRE(pattern.ok());
  CHECK(pattern->count == 6);
}

TEST_CASE("shards at http:// URLs are read through the shard cache, equal to the local ones") {
  auto env = NewPosixEnv();
  const std::string dir = WriteShards("remote");
  NginxServer nginx(dir);
  uint64_t largest = 0;
  for (const char* name : {"/shard-000000.tar", "/shard-000001.tar"})
    largest = std::max<uint64_t>(largest, ReadTestFile(dir + name).size());
  // Room for one shard: reading both evicts and fetches again.
  auto cache = ShardCache::Open(*env, FreshTestDir("remote-cache"), largest + 100, HttpFetcher());
  REQUIRE(cache.ok());
  auto remote = LoadWebDataset(*env, Spec(nginx.Url("/shard-{000000..000001}.tar")), nullptr,
                               nullptr, cache->get());
  INFO((remote.ok() ? std::string() : remote.status().ToString()));
  REQUIRE(remote.ok());
  CHECK((*remote)->info().files ==
        std::vector<std::string>{nginx.Url("/shard-000000.tar"), nginx.Url("/shard-000001.tar")});
  auto local = MustLoad(*env, Spec(dir));
  CheckSameSamples(**remote, *local);
  // Registration indexed shard 0, then shard 1 (evicting shard 0): shard 1's samples
  // come from the cache, shard 0's by range GETs (jpg, cls and txt of each).
  const ShardCacheStats stats = (*cache)->stats();
  CHECK(stats.bytes <= largest + 100);
  CHECK(stats.evictions > 0);
  CHECK(stats.range_reads == 3 * 3);
  CHECK((*cache)->Contains(nginx.Url("/shard-000001.tar")));
  CHECK_FALSE((*cache)->Contains(nginx.Url("/shard-000000.tar")));
  // A prefetch evicts nothing: shard 0 stays out while shard 1 fills the room.
  const uint64_t prefetch_ids[] = {0};
  (*remote)->Prefetch(prefetch_ids, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK_FALSE((*cache)->Contains(nginx.Url("/shard-000000.tar")));

  auto missing = ProbeWebDataset(*env, Spec(nginx.Url("/shard-{000000..000003}.tar")), nullptr,
                                 nullptr, cache->get());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(Contains(missing.status().message(), nginx.Url("/shard-000002.tar") + ": HTTP 404"));
  CHECK(ProbeWebDataset(*env, Spec(nginx.Url("/shard-000000.tar"))).status().code() ==
        StatusCode::kFailedPrecondition);  // no shard cache
  auto s3 = ProbeWebDataset(*env, Spec("s3://bucket/shards/"), nullptr, nullptr, cache->get());
  CHECK(s3.status().code() == StatusCode::kFailedPrecondition);
  CHECK(s3.status().message() == "s3://bucket/shards/: this emberd has no S3 configuration");
  auto gs = ProbeWebDataset(*env, Spec("gs://bucket/shards/"), nullptr, nullptr, cache->get());
  CHECK(gs.status().message() == "gs:// paths are not read (local paths, http(s):// and s3:// URLs are)");
}

TEST_CASE("shards at s3:// URLs (a prefix, a pattern) are read through the shard cache, equal to the local ones") {
  auto env = NewPosixEnv();
  const std::string dir = WriteShards("s3");
  CephS3Server server;
  server.Put("data", dir, "train");
  const std::string objects = "s3+" + server.endpoint() + "/data/train/";
  FetchOptions options;
  options.s3 = server.Config();
  uint64_t largest = 0;
  for (const char* name : {"/shard-000000.tar", "/shard-000001.tar"})
    largest = std::max<uint64_t>(largest, ReadTestFile(dir + name).size());
  // Room for one shard, as in the HTTP case: some members come by (signed) range GETs.
  auto cache = ShardCache::Open(*env, FreshTestDir("s3-cache"), largest + 100, HttpFetcher(options));
  REQUIRE(cache.ok());
  auto local = MustLoad(*env, Spec(dir));
  for (const std::string path : {"s3://data/train/", "s3://data/train/shard-{000000..000001}.tar"}) {
    auto remote = LoadWebDataset(*env, Spec(path), nullptr, nullptr, cache->get());
    INFO(path << ": " << (remote.ok() ? std::string() : remote.status().ToString()));
    REQUIRE(remote.ok());
    CHECK((*remote)->info().files ==
          std::vector<std::string>{objects + "shard-000000.tar", objects + "shard-000001.tar"});
    CheckSameSamples(**remote, *local);
  }
  CHECK((*cache)->stats().range_reads > 0);

  auto missing = ProbeWebDataset(*env, Spec("s3://data/train/shard-{000000..000002}.tar"), nullptr,
                                 nullptr, cache->get());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(Contains(missing.status().message(), "HEAD " + objects + "shard-000002.tar: HTTP 404 "
                                             "(NoSuchKey): bucket 'data' has no key "
                                             "'train/shard-000002.tar'"));
  auto empty = ProbeWebDataset(*env, Spec("s3://data/"), nullptr, nullptr, cache->get());
  CHECK(empty.status().code() == StatusCode::kNotFound);
  CHECK(empty.status().message() ==
        "s3://data/: no .tar objects directly under this prefix (0 others; sub-prefixes train/)");
  auto internal = ProbeWebDataset(*env, Spec(objects + "shard-000000.tar"), nullptr, nullptr,
                                  cache->get());
  CHECK(internal.status().code() == StatusCode::kInvalidArgument);
  CHECK(Contains(internal.status().message(), "s3+http(s):// is emberd's own form of S3 objects"));

  options.s3 = server.Config(/*with_keys=*/false);
  auto keyless = ShardCache::Open(*env, FreshTestDir("s3-keyless"), 1 << 20, HttpFetcher(options));
  REQUIRE(keyless.ok());
  auto refused = ProbeWebDataset(*env, Spec("s3://data/train/"), nullptr, nullptr, keyless->get());
  CHECK(refused.status().code() == StatusCode::kFailedPrecondition);
  CHECK(Contains(refused.status().message(),
                 "s3://data/train/: emberd has no S3 credentials: it looked at AWS_ACCESS_KEY_ID "
                 "and AWS_SECRET_ACCESS_KEY (unset), and for profile 'default' (AWS_PROFILE unset) "
                 "at /nonexistent/.aws/credentials (absent)"));
}

TEST_CASE("an s3:// dataset's own endpoint is where its objects are listed and read") {
  auto env = NewPosixEnv();
  const std::string dir = WriteShards("s3-endpoint");
  CephS3Server server;
  server.Put("data", dir, "train");
  const std::string objects = "s3+" + server.endpoint() + "/data/train/";
  // emberd's configuration names another endpoint, where nothing listens; its region and
  // keys are the server's, and sign the requests to the dataset's endpoint.
  auto elsewhere = std::make_shared<S3Config>(*server.Config());
  elsewhere->endpoint = "http://127.0.0.1:1";
  FetchOptions options;
  options.s3 = elsewhere;
  options.attempts = 1;
  uint64_t largest = 0;
  for (const char* name : {"/shard-000000.tar", "/shard-000001.tar"})
    largest = std::max<uint64_t>(largest, ReadTestFile(dir + name).size());
  auto cache = ShardCache::Open(*env, FreshTestDir("s3-endpoint-cache"), largest + 100,
                                HttpFetcher(options));
  REQUIRE(cache.ok());
  auto local = MustLoad(*env, Spec(dir));
  for (const std::string path : {"s3://data/train/", "s3://data/train/shard-{000000..000001}.tar"}) {
    for (const std::string& endpoint : {server.endpoint(), server.endpoint() + "/"}) {
      DatasetSpec spec = Spec(path);
      spec.endpoint = endpoint;
      auto remote = LoadWebDataset(*env, spec, nullptr, nullptr, cache->get());
      INFO(path << " at " << endpoint << ": "
                << (remote.ok() ? std::string() : remote.status().ToString()));
      REQUIRE(remote.ok());
      CHECK((*remote)->info().files ==
            std::vector<std::string>{objects + "shard-000000.tar", objects + "shard-000001.tar"});
      CheckSameSamples(**remote, *local);
    }
  }
  CHECK((*cache)->stats().range_reads > 0);

  // Without it, the same paths go to emberd's endpoint.
  for (const std::string path : {"s3://data/train/", "s3://data/train/shard-{000000..000001}.tar"}) {
    auto unreachable = ProbeWebDataset(*env, Spec(path), nullptr, nullptr, cache->get());
    INFO(unreachable.status().ToString());
    CHECK(unreachable.status().code() == StatusCode::kUnavailable);
    CHECK(Contains(unreachable.status().message(), "s3+http://127.0.0.1:1/data"));
  }
  // A bucket the dataset's endpoint lacks is named with that endpoint.
  DatasetSpec nobucket = Spec("s3://nobucket/train/");
  nobucket.endpoint = server.endpoint();
  auto missing = ProbeWebDataset(*env, nobucket, nullptr, nullptr, cache->get());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(Contains(missing.status().message(), "no bucket 'nobucket' at " + server.endpoint()));
  // Only s3:// paths have one.
  DatasetSpec local_spec = Spec(dir);
  local_spec.endpoint = server.endpoint();
  auto refused = ProbeWebDataset(*env, local_spec, nullptr, nullptr, cache->get());
  CHECK(refused.status().code() == StatusCode::kInvalidArgument);
  CHECK(Contains(refused.status().message(), "endpoint is for s3:// paths"));
}

TEST_CASE("a remote shard's index is noted: registering it again fetches nothing, even once evicted") {
  auto env = NewPosixEnv();
  const std::string dir = WriteShards("noted");
  NginxServer nginx(dir);
  const std::string cache_dir = FreshTestDir("noted-cache");
  const std::string pattern = nginx.Url("/shard-{000000..000001}.tar");
  {
    auto cache = ShardCache::Open(*env, cache_dir, 1 << 20, HttpFetcher());
    REQUIRE(cache.ok());
    REQUIRE(ProbeWebDataset(*env, Spec(pattern), nullptr, nullptr, cache->get()).ok());
    CHECK((*cache)->stats().misses == 2);
  }
  // The shards leave the cache (as an eviction would); their notes stay.
  auto names = env->ListDir(cache_dir);
  REQUIRE(names.ok());
  for (const std::string& name : *names)
    if (name != "notes") REQUIRE(env->RemoveAll(cache_dir + "/" + name).ok());
  auto cache = ShardCache::Open(*env, cache_dir, 1 << 20, HttpFetcher());
  REQUIRE(cache.ok());
  auto source = LoadWebDataset(*env, Spec(pattern), nullptr, nullptr, cache->get());
  INFO((source.ok() ? std::string() : source.status().ToString()));
  REQUIRE(source.ok());
  CHECK((*source)->info().count == 6);
  CHECK((*cache)->stats().misses == 0);  // indexed from the notes: nothing downloaded
  CHECK((*cache)->stats().notes_used == 2);
  auto local = MustLoad(*env, Spec(dir));
  const Sample got = Read(**source, 4);  // by range: its shard is not cached
  REQUIRE(got.status.ok());
  CHECK(got.image == Read(*local, 4).image);
  CHECK((*cache)->stats().range_reads == 3);

  // Another version of a shard (another ETag: nginx's is its mtime and size, so the new
  // version gets a later mtime): its note no longer holds.
  WriteTestFile(dir + "/shard-000000.tar", ReadTestFile(dir + "/shard-000001.tar"));
  std::filesystem::last_write_time(dir + "/shard-000000.tar",
                                   std::filesystem::file_time_type::clock::now() + std::chrono::seconds(10));
  REQUIRE(ProbeWebDataset(*env, Spec(pattern), nullptr, nullptr, cache->get()).ok());
  CHECK((*cache)->stats().misses == 1);
}

TEST_CASE("a sample lacking a member, with one twice, or with a bad cls loses only itself") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("bad-samples");
  WriteTestFile(dir + "/s.tar", TarBytes({{"a.jpg", Jpeg(10)},
                                          {"a.cls", "1"},
                                          {"b.jpg", Jpeg(20)},  // no cls
                                          {"c.jpg", Jpeg(30)},
                                          {"c.cls", "two"},
                                          {"d.jpg", Jpeg(40)},
                                          {"d.cls", "3"},
                                          {"d.cls", "4"},
                                          {"README", "no dot: not a member of any sample"},
                                          {"e.jpg", "not a jpeg"},
                                          {"e.cls", "5"},
                                          {"f.jpg", Jpeg(60)},
                                          {"f.cls", " 6 "}}));
  DatasetSpec spec = Spec(dir);
  auto source = MustLoad(*env, spec);
  REQUIRE(source->info().count == 6);
  REQUIRE(source->info().tensors.size() == 2);
  auto read = [&](uint64_t id) {
    std::vector<uint8_t> image(source->info().tensors[0].SampleBytes());
    int64_t label = -1;
    void* dsts[2] = {image.data(), &label};
    Status status = source->ReadSample(id, {}, dsts);
    return std::make_pair(status, label);
  };
  CHECK(read(0).first.ok());
  CHECK(read(0).second == 1);
  CHECK(read(1).first.code() == StatusCode::kDataLoss);
  CHECK(read(1).first.message() == dir + "/s.tar: sample 'b' has no .cls (the set's samples have jpg, cls)");
  CHECK(read(2).first.message() == dir + "/s.tar: sample 'c'.cls: not an integer: 'two'");
  CHECK(read(3).first.message() == dir + "/s.tar: sample 'd' has .cls twice");
  CHECK(read(4).first.code() == StatusCode::kDataLoss);
  CHECK(Contains(read(4).first.message(), dir + "/s.tar: sample 'e'.jpg"));
  CHECK(read(5).first.ok());
  CHECK(read(5).second == 6);
}

// An .npy of float32 `values` (numpy.save's format 1.0).
std::string NpyFloats(const std::vector<float>& values) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(values.size()) + ",), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return out;
}

TEST_CASE(".npy members are arrays of the first sample's dtype and shape; another shape loses its sample") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("arrays");
  WriteTestFile(dir + "/s.tar", TarBytes({{"a.emb.npy", NpyFloats({1, 2, 3})},
                                          {"a.cls", "1"},
                                          {"b.emb.npy", NpyFloats({4, 5, 6})},
                                          {"b.cls", "2"},
                                          {"c.emb.npy", NpyFloats({7, 8})},
                                          {"c.cls", "3"}}));
  auto source = MustLoad(*env, Spec(dir));
  REQUIRE(source->info().tensors.size() == 2);
  CHECK(source->info().tensors[0].name == "label");
  CHECK(source->info().tensors[1].name == "emb");
  CHECK(source->info().tensors[1].dtype == ring::DType::kFloat32);
  CHECK(source->info().tensors[1].shape == std::vector<int64_t>{3});
  CHECK_FALSE(source->ParallelDecode());
  float emb[3] = {};
  REQUIRE(ReadSampleTensor(*source, 1, 1, emb).ok());
  CHECK(emb[0] == 4.0f);
  CHECK(emb[2] == 6.0f);
  const Status other = ReadSampleTensor(*source, 2, 1, emb);
  CHECK(other.code() == StatusCode::kDataLoss);
  CHECK(other.message() ==
        dir + "/s.tar: sample 'c'.emb.npy: an array of (2,) float32, the set's are (3,) float32");
}

TEST_CASE("shards that are not plain tar, missing shards and empty sets are refused at registration") {
  auto env = NewPosixEnv();
  const std::string dir = WriteShards("refused");
  WriteTestFile(dir + "/shard-000002.tar", std::string("\x1f\x8b\x08\x00", 4) + "gzip");
  auto compressed = ProbeWebDataset(*env, Spec(dir));
  REQUIRE(compressed.status().code() == StatusCode::kDataLoss);
  CHECK(Contains(compressed.status().message(), dir + "/shard-000002.tar: a gzip-compressed"));

  auto missing = ProbeWebDataset(*env, Spec(dir + "/shard-{000000..000009}.tar"));
  CHECK(missing.status().code() == StatusCode::kNotFound);

  const std::string empty = FreshTestDir("no-samples");
  WriteTestFile(empty + "/s.tar", TarBytes({{"README", "x"}}));
  auto none = ProbeWebDataset(*env, Spec(empty));
  REQUIRE(none.status().code() == StatusCode::kInvalidArgument);
  CHECK(Contains(none.status().message(), ": no samples in its 1 shard(s)"));

  const std::string wide = FreshTestDir("too-many-tensors");
  WriteTestFile(wide + "/s.tar", TarBytes({{"a.jpg", Jpeg(1)}, {"a.cls", "1"}, {"a.t1", "x"},
                                           {"a.t2", "x"}, {"a.t3", "x"}, {"a.t4", "x"}}));
  auto too_many = ProbeWebDataset(*env, Spec(wide));
  REQUIRE(too_many.status().code() == StatusCode::kInvalidArgument);
  CHECK(too_many.status().message() ==
        wide + "/s.tar: the first sample's extensions (.jpg, .cls, .t1, .t2, .t3, .t4) make 10 "
               "tensors, at most 8 fit a batch");
  const std::string long_ext = FreshTestDir("long-extension");
  WriteTestFile(long_ext + "/s.tar", TarBytes({{"a.description", "x"}}));
  auto too_long = ProbeWebDataset(*env, Spec(long_ext));
  REQUIRE(too_long.status().code() == StatusCode::kInvalidArgument);
  CHECK(too_long.status().message() ==
        long_ext + "/s.tar: extension '.description' makes tensor 'description_size', longer "
                   "than 15 bytes");

  DatasetSpec bad_pipeline = Spec(dir);
  bad_pipeline.pipeline = "steps: [{resize: {sise: 3}}]";
  CHECK(ProbeWebDataset(*env, bad_pipeline).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("the index is charged to the owner's dataset memory before it grows") {
  auto env = NewPosixEnv();
  const std::string dir = WriteShards("charged");
  Principal user;
  user.uid = 2001;
  DatasetMemory memory(100);
  auto charge = memory.For(user);
  auto refused = ProbeWebDataset(*env, Spec(dir), nullptr, charge.get());
  REQUIRE(refused.status().code() == StatusCode::kResourceExhausted);
  CHECK(Contains(refused.status().message(), dir + "/shard-000000.tar (its index)"));

  DatasetMemory roomy(1 << 20);
  auto fits = roomy.For(user);
  auto source = LoadWebDataset(*env, Spec(dir), nullptr, fits.get());
  REQUIRE(source.ok());
  CHECK(roomy.of(2001) > 6 * 3 * 16);
}

TEST_CASE("a probe reports its shards to the registration's progress as it indexes them") {
  auto env = NewPosixEnv();
  const std::string dir = WriteShards("progress");
  IndexingProgress progress;
  Result<DatasetInfo> info = ProbeWebDataset(*env, Spec(dir), nullptr, nullptr, nullptr, &progress);
  REQUIRE(info.ok());
  CHECK(info->shards == 2);
  CHECK(progress.shards_total() == 2);
  CHECK(progress.shards_done() == 2);
  CHECK(progress.bytes_done() == std::filesystem::file_size(dir + "/shard-000000.tar") +
                                     std::filesystem::file_size(dir + "/shard-000001.tar"));
}

}  // namespace
}  // namespace ember::daemon
