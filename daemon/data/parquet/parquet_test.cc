#include "daemon/data/parquet/parquet.h"

#include <sys/types.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/temp_dir_testing.h"
#include "daemon/data/dataset_memory.h"
#include "daemon/data/parquet/arrow_parquet.h"
#include "daemon/data/remote/nginx_testing.h"
#include "daemon/data/remote/s3_testing.h"
#include "daemon/data/remote/shard_cache.h"
#include "daemon/data/source_testing.h"

namespace ember::daemon {
namespace {

constexpr const char* kSmallPipeline = "steps: [{resize: {size: [8, 8]}}]\noutput: {layout: HWC}";

DatasetSpec Spec(const std::string& path) {
  DatasetSpec spec;
  spec.name = "pq";
  spec.format = "parquet";
  spec.path = path;
  spec.split = "train";
  spec.pipeline = kSmallPipeline;
  return spec;
}

// The files make.py wrote with pyarrow (testdata/), copied to a fresh directory.
std::string Testdata(const std::string& where) {
  const std::string dir = FreshTestDir(where);
  std::filesystem::copy("daemon/data/parquet/testdata", dir,
                        std::filesystem::copy_options::recursive);
  return dir;
}

const ParquetBackend& Backend() { return ArrowParquetBackend(); }

Result<DatasetInfo> Probe(Env& env, const DatasetSpec& spec,
                          DatasetMemory::Charge* memory = nullptr, ShardCache* cache = nullptr) {
  return ProbeParquet(Backend(), env, spec, nullptr, memory, cache);
}

std::unique_ptr<Source> MustLoad(Env& env, const DatasetSpec& spec, ShardCache* cache = nullptr,
                                 DatasetMemory::Charge* memory = nullptr) {
  auto source = LoadParquet(Backend(), env, spec, nullptr, memory, cache);
  INFO((source.ok() ? std::string() : source.status().ToString()));
  REQUIRE(source.ok());
  return std::move(source).value();
}



// What make.py wrote as row i of images/, read back.
void CheckImagesSample(const SampleBytes& sample, int i) {
  INFO("sample " << i << ": " << sample.status.ToString());
  REQUIRE(sample.status.ok());
  // image, label, caption, caption_size, input_ids, input_ids_size, emb, shape
  const std::string& image = sample.tensors[0];
  CHECK(std::abs(static_cast<uint8_t>(image[0]) - 20 * i) <= 4);
  CHECK(std::abs(static_cast<uint8_t>(image[1]) - 100) <= 4);
  CHECK(std::abs(static_cast<uint8_t>(image[2]) - 200) <= 4);
  CHECK(sample.Get<int64_t>(1) == i % 3);
  const std::string caption = "caption " + std::to_string(i) + std::string(i, 'x');
  CHECK(sample.Get<int64_t>(3) == static_cast<int64_t>(caption.size()));
  CHECK(sample.tensors[2] ==
        caption + std::string(sample.tensors[2].size() - caption.size(), '\0'));
  const int ids = i % 4 + 1;
  CHECK(sample.Get<int64_t>(5) == ids);
  for (int k = 0; k < 4; ++k) CHECK(sample.Get<int64_t>(4, k) == (k < ids ? i + k : 0));
  CHECK(sample.Get<float>(6, 0) == static_cast<float>(i));
  CHECK(sample.Get<float>(6, 1) == 0.5f);
  CHECK(sample.Get<int16_t>(7, 0) == i);
  CHECK(sample.Get<int16_t>(7, 1) == -i);
  CHECK(sample.Get<int16_t>(7, 2) == 7);
}

TEST_CASE("a set pyarrow wrote reads back: an Image struct, label, string, token ids, arrays") {
  auto env = NewPosixEnv();
  const std::string dir = Testdata("images") + "/images";
  auto info = Probe(*env, Spec(dir));
  INFO(info.status().ToString());
  REQUIRE(info.ok());
  CHECK(info->count == 10);
  CHECK(info->shards == 2);
  CHECK(info->files == std::vector<std::string>{dir + "/part-0.parquet", dir + "/part-1.parquet"});
  CHECK(TensorNames(*info) == std::vector<std::string>{"image", "label", "caption", "caption_size",
                                                 "input_ids", "input_ids_size", "emb", "shape"});
  const auto& t = info->tensors;
  CHECK(t[0].shape == std::vector<int64_t>{8, 8, 3});
  CHECK(t[1].dtype == ring::DType::kInt64);
  CHECK(t[2].shape == std::vector<int64_t>{18});  // "caption 9" and 9 'x's
  CHECK(t[4].dtype == ring::DType::kInt64);       // int32 token ids
  CHECK(t[4].shape == std::vector<int64_t>{4});
  CHECK(t[6].dtype == ring::DType::kFloat32);
  CHECK(t[6].shape == std::vector<int64_t>{2});
  CHECK(t[7].dtype == ring::DType::kInt16);  // a list whose rows all have 3 elements
  CHECK(t[7].shape == std::vector<int64_t>{3});
  CHECK(info->shard_starts.empty());

  auto source = MustLoad(*env, Spec(dir));
  CHECK(source->ParallelDecode());
  for (int i : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) CheckImagesSample(ReadSampleBytes(*source, i), i);
  for (int i : {9, 0, 5, 2, 7, 3}) CheckImagesSample(ReadSampleBytes(*source, i), i);  // any order
  CHECK(ReadSampleBytes(*source, 10).status.code() == StatusCode::kInvalidArgument);
  const uint64_t ids[] = {0, 9, 99};
  source->Prefetch(ids, 3);

  // Many threads at once, reading the same row groups.
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round)
        for (int i = 0; i < 10; ++i) bad[t] += !ReadSampleBytes(*source, (i * 7 + t) % 10).status.ok();
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(bad == std::vector<int>(4, 0));

  // Shuffled by shards: the files are the blocks.
  DatasetSpec by_shards = Spec(dir);
  by_shards.shuffle = "shards";
  auto blocks = Probe(*env, by_shards);
  REQUIRE(blocks.ok());
  CHECK(blocks->shard_starts == std::vector<uint64_t>{0, 6, 10});

  // One file, and a brace pattern.
  auto one = Probe(*env, Spec(dir + "/part-1.parquet"));
  REQUIRE(one.ok());
  CHECK(one->count == 4);
  auto pattern = MustLoad(*env, Spec(dir + "/part-{1,0}.parquet"));
  CHECK(pattern->info().count == 10);
  CheckImagesSample(ReadSampleBytes(*pattern, 0), 6);
  CheckImagesSample(ReadSampleBytes(*pattern, 4), 0);
}

TEST_CASE("integers and bools serve as int64, floats as float32 or float64") {
  auto env = NewPosixEnv();
  const std::string dir = Testdata("scalars");
  auto source = MustLoad(*env, Spec(dir + "/scalars.parquet"));
  CHECK(TensorNames(source->info()) == std::vector<std::string>{"flag", "small", "wide", "u32", "big",
                                                          "half", "single", "double"});
  const auto& t = source->info().tensors;
  for (int k = 0; k < 5; ++k) CHECK(t[k].dtype == ring::DType::kInt64);
  CHECK(t[5].dtype == ring::DType::kFloat32);
  CHECK(t[6].dtype == ring::DType::kFloat32);
  CHECK(t[7].dtype == ring::DType::kFloat64);
  CHECK_FALSE(Probe(*env, Spec(dir + "/scalars.parquet"))->tensors.empty());
  for (int i = 0; i < 3; ++i) {
    const SampleBytes s = ReadSampleBytes(*source, i);
    INFO("sample " << i << ": " << s.status.ToString());
    REQUIRE(s.status.ok());
    CHECK(s.Get<int64_t>(0) == i % 2);
    CHECK(s.Get<int64_t>(1) == -i);
    CHECK(s.Get<int64_t>(2) == 1000 + i);
    CHECK(s.Get<int64_t>(3) == 4000000000 + i);
    CHECK(s.Get<int64_t>(4) == (int64_t{1} << 40) + i);
    CHECK(s.Get<float>(5) == i / 4.0f);
    CHECK(s.Get<float>(6) == i + 0.5f);
    CHECK(s.Get<double>(7) == i / 3.0);
  }
  const SampleBytes over = ReadSampleBytes(*source, 3);
  CHECK(over.status.code() == StatusCode::kDataLoss);
  CHECK(over.status.message() == dir +
                                     "/scalars.parquet: row 3 (row group 0) column 'big': a "
                                     "uint64 over the int64 it is served as");
}

TEST_CASE(
    "lists of varying length are padded to the longest with their count; large binary as bytes") {
  auto env = NewPosixEnv();
  const std::string dir = Testdata("lists");
  auto source = MustLoad(*env, Spec(dir + "/lists.parquet"));
  CHECK(TensorNames(source->info()) ==
        std::vector<std::string>{"label", "var", "var_size", "blob", "blob_size"});
  const auto& t = source->info().tensors;
  CHECK(t[1].dtype == ring::DType::kFloat32);  // float16
  CHECK(t[1].shape == std::vector<int64_t>{3});
  CHECK(t[3].shape == std::vector<int64_t>{3});
  for (int i = 0; i < 4; ++i) {
    const SampleBytes s = ReadSampleBytes(*source, i);
    INFO("sample " << i << ": " << s.status.ToString());
    REQUIRE(s.status.ok());
    CHECK(s.Get<int64_t>(0) == i);
    CHECK(s.Get<int64_t>(2) == i);
    for (int k = 0; k < 3; ++k) CHECK(s.Get<float>(1, k) == (k < i ? 0.5f : 0.0f));
    CHECK(s.Get<int64_t>(4) == i);
    CHECK(s.tensors[3] == std::string(i, 'b') + std::string(3 - i, '\0'));
  }
}

TEST_CASE("a null in a column served loses its sample, naming the file, the row and the column") {
  auto env = NewPosixEnv();
  const std::string file = Testdata("nulls") + "/nulls.parquet";
  auto source = MustLoad(*env, Spec(file));
  CHECK(TensorNames(source->info()) == std::vector<std::string>{"image", "text", "text_size", "input_ids",
                                                          "input_ids_size", "value"});
  CHECK(ReadSampleBytes(*source, 0).status.ok());
  auto where = [&](int row) {
    return file + ": row " + std::to_string(row) + " (row group 0) column ";
  };
  CHECK(ReadSampleBytes(*source, 1).status.message() == where(1) + "'image': null");
  CHECK(ReadSampleBytes(*source, 2).status.message() == where(2) + "'text': null");
  CHECK(ReadSampleBytes(*source, 3).status.message() ==
        where(3) + "'input_ids': null, or a list holding a null");
  CHECK(ReadSampleBytes(*source, 4).status.message() ==
        where(4) + "'input_ids': null, or a list holding a null");
  for (int i = 1; i < 5; ++i) CHECK(ReadSampleBytes(*source, i).status.code() == StatusCode::kDataLoss);
  CHECK(ReadSampleBytes(*source, 0).status.ok());
}

TEST_CASE("a row group that does not decode loses its rows only, or the set when it is scanned") {
  auto env = NewPosixEnv();
  const std::string dir = Testdata("damaged");
  const std::string file = dir + "/damaged.parquet";  // row group 1's emb
  auto source = MustLoad(*env, Spec(file));
  for (int i : {0, 1, 4, 5}) CheckImagesSample(ReadSampleBytes(*source, i), i);
  for (int i : {2, 3, 2}) {
    const Status status = ReadSampleBytes(*source, i).status;
    CHECK(status.code() == StatusCode::kDataLoss);
    CHECK_THAT(status.message(), Catch::StartsWith(file + ": row group 1: "));
  }
  // Captions are scanned at registration (for the longest).
  const std::string caption = dir + "/damaged-caption.parquet";
  auto probe = Probe(*env, Spec(caption));
  CHECK(probe.status().code() == StatusCode::kDataLoss);
  CHECK_THAT(probe.status().message(), Catch::StartsWith(caption + ": row group 1: "));
}

TEST_CASE(
    "files that are not Parquet, damaged footers and types not read are refused naming the file") {
  auto env = NewPosixEnv();
  const std::string dir = Testdata("bad-files");
  const std::string good = ReadTestFile(dir + "/scalars.parquet");
  const std::string file = dir + "/x.parquet";

  WriteTestFile(file, "not parquet at all");
  auto garbage = Probe(*env, Spec(file));
  CHECK(garbage.status().code() == StatusCode::kDataLoss);
  CHECK_THAT(garbage.status().message(),
             Catch::StartsWith(file + ": not a Parquet file, or a damaged one: "));

  WriteTestFile(file, good.substr(0, good.size() - 100));  // its footer cut
  auto truncated = Probe(*env, Spec(file));
  CHECK(truncated.status().code() == StatusCode::kDataLoss);
  CHECK_THAT(truncated.status().message(),
             Catch::StartsWith(file + ": not a Parquet file, or a damaged one: "));

  std::string footer = good;  // the footer's bytes (not its length nor magic) overwritten
  uint32_t length = 0;
  std::memcpy(&length, footer.data() + footer.size() - 8, 4);
  for (size_t i = footer.size() - 8 - length; i < footer.size() - 8; ++i) footer[i] = '\x07';
  WriteTestFile(file, footer);
  auto damaged = Probe(*env, Spec(file));
  CHECK(damaged.status().code() == StatusCode::kDataLoss);
  CHECK_THAT(damaged.status().message(),
             Catch::StartsWith(file + ": not a Parquet file, or a damaged one: "));

  WriteTestFile(file, "");
  CHECK(Probe(*env, Spec(file)).status().code() == StatusCode::kDataLoss);

  auto other = Probe(*env, Spec(dir + "/other.parquet"));
  CHECK(other.status().code() == StatusCode::kInvalidArgument);
  CHECK(other.status().message() ==
        dir +
            "/other.parquet: column 'when': type timestamp[us] is not read (Ember reads "
            "integer, floating-point, binary and string columns, lists of numbers and image "
            "structs; pipeline 'columns' selects the others)");

  auto mixed = Probe(*env, Spec(dir + "/mixed"));
  CHECK(mixed.status().code() == StatusCode::kInvalidArgument);
  CHECK(mixed.status().message() ==
        dir +
            "/mixed/b.parquet: columns (label string) are not those of the set's first file "
            "(label int64 in " +
            dir + "/mixed/a.parquet)");

  auto missing = Probe(*env, Spec(dir + "/missing.parquet"));
  CHECK(missing.status().code() == StatusCode::kNotFound);
  std::filesystem::create_directories(dir + "/empty");
  auto empty = Probe(*env, Spec(dir + "/empty"));
  CHECK(empty.status().code() == StatusCode::kNotFound);
  CHECK(empty.status().message() == dir + "/empty: no .parquet shards in this directory");
}

TEST_CASE("a directory of Hugging Face's split files is read for the spec's split") {
  auto env = NewPosixEnv();
  const std::string dir = Testdata("hf") + "/hf";
  auto train = MustLoad(*env, Spec(dir));
  CHECK(train->info().count == 3);
  CHECK(train->info().files == std::vector<std::string>{dir + "/train-00000-of-00002.parquet",
                                                        dir + "/train-00001-of-00002.parquet"});
  for (int i = 0; i < 3; ++i) CHECK(ReadSampleBytes(*train, i).Get<int64_t>(0) == i);
  DatasetSpec test = Spec(dir + "/");
  test.split = "test";
  auto tested = MustLoad(*env, test);
  CHECK(tested->info().count == 1);
  CHECK(ReadSampleBytes(*tested, 0).Get<int64_t>(0) == 100);
  DatasetSpec validation = Spec(dir);
  validation.split = "validation";
  auto none = Probe(*env, validation);
  CHECK(none.status().code() == StatusCode::kNotFound);
  CHECK(none.status().message() ==
        dir +
            ": no files of split 'validation' (validation-NNNNN-of-NNNNN.parquet) in this "
            "directory of Hugging Face's split files (its splits: test, train)");
}

TEST_CASE("a set the ring cannot carry is refused naming the file and the columns") {
  auto env = NewPosixEnv();
  const std::string dir = Testdata("too-many");
  auto many = Probe(*env, Spec(dir + "/many.parquet"));
  CHECK(many.status().code() == StatusCode::kInvalidArgument);
  CHECK(many.status().message() ==
        dir + "/many.parquet: the columns (a, b, c, d, e) make 9 tensors, at most 8 fit a batch");
  CHECK(Probe(*env, Spec(dir + "/long.parquet")).status().message() ==
        dir +
            "/long.parquet: column 'description' makes tensor 'description_size', longer than "
            "15 bytes");
}

TEST_CASE(
    "the pipeline's `columns` selects the columns served; the rest of it is the image pipeline") {
  auto env = NewPosixEnv();
  const std::string dir = Testdata("columns");
  DatasetSpec spec = Spec(dir + "/images");
  spec.pipeline = std::string("columns: [input_ids, image]\n") + kSmallPipeline;
  auto source = MustLoad(*env, spec);
  CHECK(TensorNames(source->info()) == std::vector<std::string>{"image", "input_ids", "input_ids_size"});
  CHECK(source->info().tensors[0].shape == std::vector<int64_t>{8, 8, 3});
  const SampleBytes s = ReadSampleBytes(*source, 7);
  REQUIRE(s.status.ok());
  CHECK(std::abs(static_cast<uint8_t>(s.tensors[0][0]) - 140) <= 4);
  CHECK(s.Get<int64_t>(1, 3) == 10);
  CHECK(s.Get<int64_t>(2) == 4);

  DatasetSpec many = Spec(dir + "/many.parquet");
  many.pipeline = "columns: [e, a]";  // the default image pipeline
  auto fits = Probe(*env, many);
  REQUIRE(fits.ok());
  CHECK(TensorNames(*fits) == std::vector<std::string>{"a", "a_size", "e"});
  DatasetSpec other = Spec(dir + "/other.parquet");  // its one column is a timestamp
  other.pipeline = "columns: [image]";
  CHECK(Probe(*env, other).status().message() ==
        dir + "/other.parquet: no column 'image' (pipeline 'columns'; its columns: when)");
  many.pipeline = "columns: e";
  CHECK(Probe(*env, many).status().message() ==
        "dataset 'pq': pipeline: line 1, column 10: 'columns' must be a non-empty list of "
        "column names, got 'e'");
  many.pipeline = "columns: [e, e]";
  CHECK(Probe(*env, many).status().code() == StatusCode::kInvalidArgument);
  many.pipeline = "columns: [e]\nsteps: [{resize: {size: 0}}]";
  CHECK(Probe(*env, many).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE(
    "the index and the decoded row groups' budget are charged to the owner's dataset memory") {
  auto env = NewPosixEnv();
  const std::string dir = Testdata("charged") + "/images";
  Principal user;
  user.uid = 2001;
  DatasetMemory tiny(400);
  auto refused = Probe(*env, Spec(dir), tiny.For(user).get());
  CHECK(refused.status().code() == StatusCode::kResourceExhausted);
  CHECK_THAT(refused.status().message(),
             Catch::StartsWith(dir + "/part-0.parquet (its footer and row groups): "));

  DatasetMemory roomy(1 << 20);
  auto probed = roomy.For(user);
  REQUIRE(Probe(*env, Spec(dir), probed.get()).ok());
  const uint64_t needed = probed->bytes();
  CHECK(needed > 10000);  // the row groups' columns uncompressed, the whole set's here
  DatasetMemory almost(needed - 1);
  auto budget = Probe(*env, Spec(dir), almost.For(user).get());
  CHECK(budget.status().code() == StatusCode::kResourceExhausted);
  CHECK_THAT(budget.status().message(), Catch::StartsWith(dir + " (its decoded row groups): "));

  auto charge = roomy.For(user);
  auto source = MustLoad(*env, Spec(dir), nullptr, charge.get());
  CHECK(charge->bytes() > needed);  // and the footers, kept
  CheckImagesSample(ReadSampleBytes(*source, 7), 7);
}

TEST_CASE("a file truncated while the set is loaded fails its reads, not the daemon") {
  auto env = NewPosixEnv();
  const std::string dir = Testdata("shrinking") + "/images";
  auto source = MustLoad(*env, Spec(dir));
  CheckImagesSample(ReadSampleBytes(*source, 0), 0);
  const std::string file = dir + "/part-0.parquet";
  REQUIRE(truncate(file.c_str(), static_cast<off_t>(sysconf(_SC_PAGESIZE))) == 0);
  const Status status = ReadSampleBytes(*source, 5).status;  // row group 2, not decoded yet
  CHECK(status.code() == StatusCode::kDataLoss);
  CHECK_THAT(status.message(), Catch::StartsWith(file + ": the file shrank below"));
}

TEST_CASE("a set at http:// URLs is read through the shard cache, equal to the local one") {
  auto env = NewPosixEnv();
  const std::string root = Testdata("remote");
  NginxServer nginx(root);
  const uint64_t largest = std::filesystem::file_size(root + "/images/part-0.parquet");
  // Room for one file: registration reads both, evicting the first.
  auto cache = ShardCache::Open(*env, FreshTestDir("remote-cache"), largest + 100, HttpFetcher());
  REQUIRE(cache.ok());
  auto remote = MustLoad(*env, Spec(nginx.Url("/images/part-{0,1}.parquet")), cache->get());
  CHECK(remote->info().files == std::vector<std::string>{nginx.Url("/images/part-0.parquet"),
                                                         nginx.Url("/images/part-1.parquet")});
  auto local = MustLoad(*env, Spec(root + "/images"));
  for (uint64_t id : {0, 9, 1, 6, 2, 3, 4, 5, 7, 8}) {
    const SampleBytes got = ReadSampleBytes(*remote, id);
    INFO("sample " << id << ": " << got.status.ToString());
    REQUIRE(got.status.ok());
    CHECK(got.tensors == ReadSampleBytes(*local, id).tensors);
  }
  // part-1 is cached; part-0's row groups came by range GETs (its footer is not read again).
  const ShardCacheStats stats = (*cache)->stats();
  CHECK(stats.evictions > 0);
  CHECK(stats.range_reads > 0);
  CHECK((*cache)->Contains(nginx.Url("/images/part-1.parquet")));

  auto missing = Probe(*env, Spec(nginx.Url("/images/part-7.parquet")), nullptr, cache->get());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK_THAT(missing.status().message(), Catch::Contains(nginx.Url("/images/part-7.parquet")));
  auto no_cache = Probe(*env, Spec(nginx.Url("/images/part-0.parquet")));
  CHECK(no_cache.status().code() == StatusCode::kFailedPrecondition);
  auto listing = Probe(*env, Spec(nginx.Url("/images/")), nullptr, cache->get());
  CHECK(listing.status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE(
    "a set at s3:// (a prefix, a pattern) is read through the shard cache, equal to the local "
    "one") {
  auto env = NewPosixEnv();
  const std::string root = Testdata("s3");
  CephS3Server server;
  server.Put("data", root + "/images", "train");
  FetchOptions options;
  options.s3 = server.Config();
  auto cache = ShardCache::Open(*env, FreshTestDir("s3-cache"), 1 << 20, HttpFetcher(options));
  REQUIRE(cache.ok());
  auto local = MustLoad(*env, Spec(root + "/images"));
  const std::string objects = "s3+" + server.endpoint() + "/data/train/";
  for (const std::string path : {"s3://data/train/", "s3://data/train/part-{0..1}.parquet"}) {
    auto remote = LoadParquet(Backend(), *env, Spec(path), nullptr, nullptr, cache->get());
    INFO(path << ": " << (remote.ok() ? std::string() : remote.status().ToString()));
    REQUIRE(remote.ok());
    CHECK((*remote)->info().files ==
          std::vector<std::string>{objects + "part-0.parquet", objects + "part-1.parquet"});
    for (uint64_t id = 0; id < 10; ++id)
      CHECK(ReadSampleBytes(**remote, id).tensors == ReadSampleBytes(*local, id).tensors);
  }
  auto empty = Probe(*env, Spec("s3://data/"), nullptr, cache->get());
  CHECK(empty.status().code() == StatusCode::kNotFound);
  CHECK(empty.status().message() ==
        "s3://data/: no .parquet objects directly under this prefix (0 others; sub-prefixes "
        "train/)");
}

}  // namespace
}  // namespace ember::daemon
