#include "daemon/data/idx.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <thread>

#include "daemon/catalog/dataset.h"
#include "common/env.h"
#include "common/temp_dir_testing.h"
#include "daemon/data/source.h"
#include "daemon/data/source_testing.h"
#include "ember/ring_layout.h"

namespace ember::daemon {
namespace {

using ring::DType;

constexpr uint8_t kU8 = 0x08, kI8 = 0x09, kI16 = 0x0B, kI32 = 0x0C, kF32 = 0x0D, kF64 = 0x0E;

// An IDX file: header, then `payload` (already big-endian).
std::string Idx(uint8_t type, const std::vector<uint32_t>& dims, const std::string& payload) {
  std::string out = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(d >> shift));
  }
  return out + payload;
}

// Big-endian bytes of each value.
template <typename T>
std::string BigEndian(const std::vector<T>& values) {
  std::string out;
  for (T v : values) {
    unsigned char bytes[sizeof(T)];
    std::memcpy(bytes, &v, sizeof(T));
    for (size_t i = sizeof(T); i > 0; --i) out.push_back(static_cast<char>(bytes[i - 1]));
  }
  return out;
}

std::string Gzip(const std::string& data) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  REQUIRE(deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) ==
          Z_OK);
  std::string out(deflateBound(&zs, data.size()) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// 3 images of 2x3 uint8 (image i holds 10*i .. 10*i+5) and labels 7, 8, 9.
std::string Images() {
  std::string payload;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 6; ++j) payload.push_back(static_cast<char>(10 * i + j));
  }
  return Idx(kU8, {3, 2, 3}, payload);
}
std::string Labels() { return Idx(kU8, {3}, std::string{7, 8, 9}); }

void Write(Env& env, const std::string& path, const std::string& contents) {
  REQUIRE(env.WriteFileAtomic(path, contents).ok());
}

DatasetSpec Spec(const std::string& dir, const std::string& split = "train") {
  return DatasetSpec{"d", "idx", dir, split};
}

// Both ProbeIdx and LoadIdx fail with `code`, and the message contains `text`.
void ExpectError(Env& env, const DatasetSpec& spec, StatusCode code, const std::string& text) {
  Result<DatasetInfo> probe = ProbeIdx(env, spec);
  REQUIRE_FALSE(probe.ok());
  INFO(probe.status().ToString());
  CHECK(probe.status().code() == code);
  CHECK_THAT(probe.status().message(), Catch::Contains(text));
  Result<std::unique_ptr<Source>> load = LoadIdx(env, spec);
  REQUIRE_FALSE(load.ok());
  CHECK(load.status().ToString() == probe.status().ToString());
}

void CheckStandardInfo(const DatasetInfo& info, const std::string& dir,
                       const std::vector<std::string>& files) {
  CHECK(info.spec.name == "d");
  CHECK(info.spec.format == "idx");
  CHECK(info.spec.path == dir);
  CHECK(info.count == 3);
  REQUIRE(info.tensors.size() == 2);
  CHECK(info.tensors[0].name == "image");
  CHECK(info.tensors[0].dtype == DType::kUInt8);
  CHECK(info.tensors[0].shape == std::vector<int64_t>{2, 3});
  CHECK(info.tensors[1].name == "label");
  CHECK(info.tensors[1].dtype == DType::kUInt8);
  CHECK(info.tensors[1].shape.empty());
  CHECK(info.files == files);
}

void CheckStandardSamples(const Source& source) {
  for (uint64_t id = 0; id < 3; ++id) {
    unsigned char image[6];
    REQUIRE(ReadSampleTensor(source, id, 0, image).ok());
    for (int j = 0; j < 6; ++j) CHECK(image[j] == 10 * id + j);
    unsigned char label = 0;
    REQUIRE(ReadSampleTensor(source, id, 1, &label).ok());
    CHECK(label == 7 + id);
  }
}

TEST_CASE("a raw train split probes and loads") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("raw");
  Write(*env, dir + "/train-images-idx3-ubyte", Images());
  Write(*env, dir + "/train-labels-idx1-ubyte", Labels());
  const std::vector<std::string> files = {dir + "/train-images-idx3-ubyte",
                                          dir + "/train-labels-idx1-ubyte"};

  Result<DatasetInfo> info = ProbeIdx(*env, Spec(dir + "/"));
  INFO(info.status().ToString());
  REQUIRE(info.ok());
  CheckStandardInfo(*info, dir, files);

  Result<std::unique_ptr<Source>> source = LoadIdx(*env, Spec(dir));
  REQUIRE(source.ok());
  CheckStandardInfo((*source)->info(), dir, files);
  CheckStandardSamples(**source);
}

TEST_CASE("a gzip test split probes and loads") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("gz");
  Write(*env, dir + "/t10k-images-idx3-ubyte.gz", Gzip(Images()));
  Write(*env, dir + "/t10k-labels-idx1-ubyte.gz", Gzip(Labels()));
  const std::vector<std::string> files = {dir + "/t10k-images-idx3-ubyte.gz",
                                          dir + "/t10k-labels-idx1-ubyte.gz"};

  Result<DatasetInfo> info = ProbeIdx(*env, Spec(dir, "test"));
  INFO(info.status().ToString());
  REQUIRE(info.ok());
  CheckStandardInfo(*info, dir, files);
  CHECK(info->spec.split == "test");

  Result<std::unique_ptr<Source>> source = LoadIdx(*env, Spec(dir, "test"));
  REQUIRE(source.ok());
  CheckStandardSamples(**source);

  // The train split of the same directory is not there.
  ExpectError(*env, Spec(dir, "train"), StatusCode::kNotFound, dir + "/train-images-idx3-ubyte.gz");
}

TEST_CASE("the .gz file is preferred, and raw and gzip files mix") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("prefer");
  Write(*env, dir + "/train-images-idx3-ubyte.gz", Gzip(Images()));
  Write(*env, dir + "/train-images-idx3-ubyte", "not an idx file at all");
  Write(*env, dir + "/train-labels-idx1-ubyte", Labels());
  Result<std::unique_ptr<Source>> source = LoadIdx(*env, Spec(dir));
  INFO(source.status().ToString());
  REQUIRE(source.ok());
  CheckStandardInfo((*source)->info(), dir,
                    {dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte"});
  CheckStandardSamples(**source);
}

TEST_CASE("a relative path is made absolute") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("relative");
  Write(*env, dir + "/train-images-idx3-ubyte", Images());
  Write(*env, dir + "/train-labels-idx1-ubyte", Labels());
  std::string relative;
  {
    char cwd[4096];
    REQUIRE(getcwd(cwd, sizeof(cwd)) != nullptr);
    size_t depth = std::count(cwd, cwd + std::strlen(cwd), '/');
    for (size_t i = 0; i < depth; ++i) relative += "../";
    relative += dir.substr(1) + "/./";
  }
  Result<DatasetInfo> info = ProbeIdx(*env, Spec(relative));
  INFO(info.status().ToString());
  REQUIRE(info.ok());
  CHECK(info->spec.path == dir);
  CHECK(info->files.at(0) == dir + "/train-images-idx3-ubyte");
}

TEST_CASE("multi-byte element types are converted to native order and keep their dtype") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("types");
  const std::vector<int32_t> labels = {0x01020304, -5};

  SECTION("int16 images, int32 labels") {
    const std::vector<int16_t> pixels = {1, -2, 0x1234, -32768, 32767, 0, 7, -7};
    Write(*env, dir + "/train-images-idx3-ubyte.gz", Gzip(Idx(kI16, {2, 2, 2}, BigEndian(pixels))));
    Write(*env, dir + "/train-labels-idx1-ubyte.gz", Gzip(Idx(kI32, {2}, BigEndian(labels))));
    auto source = LoadIdx(*env, Spec(dir));
    INFO(source.status().ToString());
    REQUIRE(source.ok());
    const DatasetInfo& info = (*source)->info();
    CHECK(info.tensors[0].dtype == DType::kInt16);
    CHECK(info.tensors[1].dtype == DType::kInt32);
    CHECK(info.tensors[0].SampleBytes() == 8);
    int16_t image[4];
    REQUIRE(ReadSampleTensor(**source, 1, 0, image).ok());
    CHECK(std::vector<int16_t>(image, image + 4) == std::vector<int16_t>{32767, 0, 7, -7});
    int32_t label = 0;
    REQUIRE(ReadSampleTensor(**source, 0, 1, &label).ok());
    CHECK(label == 0x01020304);
    REQUIRE(ReadSampleTensor(**source, 1, 1, &label).ok());
    CHECK(label == -5);
  }
  SECTION("float32 images with three sample dimensions") {
    const std::vector<float> pixels = {0.5f, -1.25f, 3e10f, 1e-20f, 2.0f, 4.0f, 8.0f, -0.0f};
    Write(*env, dir + "/train-images-idx3-ubyte", Idx(kF32, {2, 1, 2, 2}, BigEndian(pixels)));
    Write(*env, dir + "/train-labels-idx1-ubyte", Idx(kI32, {2}, BigEndian(labels)));
    auto source = LoadIdx(*env, Spec(dir));
    REQUIRE(source.ok());
    CHECK((*source)->info().tensors[0].shape == std::vector<int64_t>{1, 2, 2});
    float image[4];
    REQUIRE(ReadSampleTensor(**source, 0, 0, image).ok());
    CHECK(std::vector<float>(image, image + 4) == std::vector<float>{0.5f, -1.25f, 3e10f, 1e-20f});
  }
  SECTION("float64 images, int8 labels") {
    const std::vector<double> pixels = {1.0 / 3, -2.5, 1e300, 4.0};
    Write(*env, dir + "/train-images-idx3-ubyte", Idx(kF64, {2, 2}, BigEndian(pixels)));
    Write(*env, dir + "/train-labels-idx1-ubyte", Idx(kI8, {2}, std::string{-1, 5}));
    auto source = LoadIdx(*env, Spec(dir));
    REQUIRE(source.ok());
    CHECK((*source)->info().tensors[0].dtype == DType::kFloat64);
    CHECK((*source)->info().tensors[1].dtype == DType::kInt8);
    double image[2];
    REQUIRE(ReadSampleTensor(**source, 1, 0, image).ok());
    CHECK(image[0] == 1e300);
    CHECK(image[1] == 4.0);
    int8_t label = 0;
    REQUIRE(ReadSampleTensor(**source, 0, 1, &label).ok());
    CHECK(label == -1);
  }
}

TEST_CASE("gzip files of several members load like gzip(1) reads them") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("members");
  const std::string images = Images();
  Write(*env, dir + "/train-images-idx3-ubyte.gz",
        Gzip(images.substr(0, 7)) + Gzip(images.substr(7, 5)) + Gzip(images.substr(12)));
  Write(*env, dir + "/train-labels-idx1-ubyte.gz", Gzip(Labels()));
  auto source = LoadIdx(*env, Spec(dir));
  INFO(source.status().ToString());
  REQUIRE(source.ok());
  CheckStandardSamples(**source);
}

TEST_CASE("a large gzip file streams through in chunks") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("large");
  const uint32_t count = 5000;
  std::string pixels(size_t{count} * 28 * 28, '\0');
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<char>((i * 31) >> 3);
  std::string labels(count, '\0');
  for (uint32_t i = 0; i < count; ++i) labels[i] = static_cast<char>(i % 10);
  Write(*env, dir + "/train-images-idx3-ubyte.gz", Gzip(Idx(kU8, {count, 28, 28}, pixels)));
  Write(*env, dir + "/train-labels-idx1-ubyte.gz", Gzip(Idx(kU8, {count}, labels)));
  auto source = LoadIdx(*env, Spec(dir));
  REQUIRE(source.ok());
  CHECK((*source)->info().count == count);
  std::string image(28 * 28, '\0');
  for (uint64_t id : {uint64_t{0}, uint64_t{1234}, uint64_t{count - 1}}) {
    REQUIRE(ReadSampleTensor(**source, id, 0, image.data()).ok());
    CHECK(image == pixels.substr(id * 784, 784));
    char label = 0;
    REQUIRE(ReadSampleTensor(**source, id, 1, &label).ok());
    CHECK(label == static_cast<char>(id % 10));
  }
}

TEST_CASE("ReadSample refuses out-of-range ids and tensors and is safe from many threads") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("range");
  Write(*env, dir + "/train-images-idx3-ubyte", Images());
  Write(*env, dir + "/train-labels-idx1-ubyte", Labels());
  auto source = LoadIdx(*env, Spec(dir));
  REQUIRE(source.ok());
  unsigned char buffer[6];
  Status bad_id = ReadSampleTensor(**source, 3, 0, buffer);
  CHECK(bad_id.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(bad_id.message(), Catch::Contains("sample 3") && Catch::Contains("3 samples"));
  Status bad_tensor = ReadSampleTensor(**source, 0, 2, buffer);
  CHECK(bad_tensor.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(bad_tensor.message(), Catch::Contains("tensor 2"));

  const Source* shared = source->get();
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([shared, t, &bad] {
      for (int round = 0; round < 1000; ++round) {
        uint64_t id = static_cast<uint64_t>((round + t) % 3);
        unsigned char image[6];
        unsigned char label;
        if (!ReadSampleTensor(*shared, id, 0, image).ok() || !ReadSampleTensor(*shared, id, 1, &label).ok() ||
            image[5] != 10 * id + 5 || label != 7 + id) {
          ++bad[t];
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(bad == std::vector<int>(4, 0));
}

TEST_CASE("missing files and directories are kNotFound naming the path") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("missing");
  Write(*env, dir + "/train-images-idx3-ubyte.gz", Gzip(Images()));
  ExpectError(*env, Spec(dir), StatusCode::kNotFound, dir + "/train-labels-idx1-ubyte.gz");
  ExpectError(*env, Spec(dir + "/nope"), StatusCode::kNotFound, dir + "/nope");
  ExpectError(*env, Spec(dir + "/train-images-idx3-ubyte.gz"), StatusCode::kInvalidArgument,
              "not a directory");
}

TEST_CASE("a bad split or empty path is kInvalidArgument") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("split");
  ExpectError(*env, Spec(dir, "validation"), StatusCode::kInvalidArgument,
              "unknown split 'validation' (known: train, test)");
  ExpectError(*env, Spec(""), StatusCode::kInvalidArgument, "path is empty");
}

TEST_CASE("corrupt gzip streams are kDataLoss naming the file") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("bad_gzip");
  const std::string images_path = dir + "/train-images-idx3-ubyte.gz";
  Write(*env, dir + "/train-labels-idx1-ubyte.gz", Gzip(Labels()));
  const std::string good = Gzip(Images());

  SECTION("cut in half") {
    Write(*env, images_path, good.substr(0, good.size() / 2));
    ExpectError(*env, Spec(dir), StatusCode::kDataLoss, images_path + ": truncated");
  }
  SECTION("missing only the trailer") {
    Write(*env, images_path, good.substr(0, good.size() - 8));
    ExpectError(*env, Spec(dir), StatusCode::kDataLoss, images_path + ": truncated");
  }
  SECTION("empty file") {
    Write(*env, images_path, "");
    ExpectError(*env, Spec(dir), StatusCode::kDataLoss, images_path + ": truncated");
  }
  SECTION("bad CRC") {
    std::string bad = good;
    bad[bad.size() - 8] ^= 0x01;
    Write(*env, images_path, bad);
    ExpectError(*env, Spec(dir), StatusCode::kDataLoss, images_path + ": corrupt gzip data");
    CHECK_THAT(ProbeIdx(*env, Spec(dir)).status().message(), Catch::Contains("data check"));
  }
  SECTION("bad length") {
    std::string bad = good;
    bad[bad.size() - 4] ^= 0x01;
    Write(*env, images_path, bad);
    ExpectError(*env, Spec(dir), StatusCode::kDataLoss, "length check");
    CHECK_THAT(ProbeIdx(*env, Spec(dir)).status().message(), Catch::Contains(images_path));
  }
  SECTION("not gzip at all") {
    Write(*env, images_path, Images());
    ExpectError(*env, Spec(dir), StatusCode::kDataLoss, images_path + ": corrupt gzip data");
  }
  SECTION("trailing garbage") {
    Write(*env, images_path, good + "junk");
    ExpectError(*env, Spec(dir), StatusCode::kDataLoss,
                images_path + ": 4 bytes of trailing garbage");
  }
}

TEST_CASE("bad IDX content is kDataLoss naming the file, raw or gzip") {
  auto env = NewPosixEnv();
  const bool gzip = GENERATE(false, true);
  std::string dir = FreshTestDir(gzip ? "bad_idx_gz" : "bad_idx_raw");
  const std::string suffix = gzip ? ".gz" : "";
  const std::string images_path = dir + "/train-images-idx3-ubyte" + suffix;
  const std::string labels_path = dir + "/train-labels-idx1-ubyte" + suffix;
  auto write = [&](const std::string& path, const std::string& contents) {
    Write(*env, path, gzip ? Gzip(contents) : contents);
  };
  write(images_path, Images());
  write(labels_path, Labels());
  REQUIRE(ProbeIdx(*env, Spec(dir)).ok());

  SECTION("truncated payload") {
    write(images_path, Images().substr(0, 16 + 10));
    ExpectError(*env, Spec(dir), StatusCode::kDataLoss,
                images_path + ": truncated: header promises 18 payload bytes, file has 10");
  }
  SECTION("trailing bytes") {
    write(labels_path, Labels() + "xy");
    ExpectError(*env, Spec(dir), StatusCode::kDataLoss,
                labels_path + ": 2 trailing bytes after the 3 payload bytes the header promises");
  }
  SECTION("truncated header") {
    write(images_path, Images().substr(0, 10));
    ExpectError(*env, Spec(dir), StatusCode::kDataLoss,
                images_path +
                    ": truncated: the IDX header of a 3-dimensional array needs 16 "
                    "bytes, file has 10");
  }
  SECTION("shorter than a header") {
    write(labels_path, std::string(2, '\0'));
    ExpectError(*env, Spec(dir), StatusCode::kDataLoss, labels_path + ": truncated");
  }
  SECTION("bad magic") {
    std::string bad = Images();
    bad[0] = 1;
    write(images_path, bad);
    ExpectError(*env, Spec(dir), StatusCode::kDataLoss, images_path + ": bad magic");
  }
  SECTION("unknown element type") {
    std::string bad = Labels();
    bad[2] = 0x0A;
    write(labels_path, bad);
    ExpectError(*env, Spec(dir), StatusCode::kDataLoss,
                labels_path + ": unknown IDX element type 0x0a");
  }
  SECTION("labels with two dimensions") {
    write(labels_path, Idx(kU8, {3, 1}, std::string{7, 8, 9}));
    ExpectError(*env, Spec(dir), StatusCode::kDataLoss,
                labels_path + ": an IDX labels file has 1 dimensions, this one has 2");
  }
  SECTION("images with one dimension") {
    write(images_path, Idx(kU8, {3}, std::string{1, 2, 3}));
    ExpectError(*env, Spec(dir), StatusCode::kDataLoss,
                images_path + ": an IDX images file has 2..4 dimensions, this one has 1");
  }
  SECTION("too many dimensions") {
    write(images_path, Idx(kU8, {3, 1, 1, 1, 2}, std::string(6, 'x')));
    ExpectError(*env, Spec(dir), StatusCode::kDataLoss, images_path + ": dimension count 5");
  }
  SECTION("zero dimensions") {
    write(labels_path, Idx(kU8, {}, ""));
    ExpectError(*env, Spec(dir), StatusCode::kDataLoss, labels_path + ": dimension count 0");
  }
  SECTION("no samples") {
    write(images_path, Idx(kU8, {0, 2, 3}, ""));
    write(labels_path, Idx(kU8, {0}, ""));
    ExpectError(*env, Spec(dir), StatusCode::kDataLoss, images_path + ": holds no samples");
  }
  SECTION("a zero sample dimension") {
    write(images_path, Idx(kU8, {3, 2, 0}, ""));
    ExpectError(*env, Spec(dir), StatusCode::kDataLoss, images_path + ": dimension 2 is 0");
  }
  SECTION("dimensions that overflow") {
    write(images_path, Idx(kF64, {3, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}, ""));
    ExpectError(*env, Spec(dir), StatusCode::kDataLoss, images_path + ": the header's dimensions");
  }
  SECTION("a payload far shorter than a huge promise") {
    write(images_path, Idx(kU8, {3, 0xFFFF, 0xFFFF}, "abc"));
    ExpectError(*env, Spec(dir), StatusCode::kDataLoss,
                images_path + ": truncated: header promises 12884508675 payload bytes, file has 3");
  }
  SECTION("mismatched counts") {
    write(labels_path, Idx(kU8, {4}, std::string{7, 8, 9, 1}));
    ExpectError(*env, Spec(dir), StatusCode::kDataLoss,
                images_path + ": holds 3 images but " + labels_path + " holds 4 labels");
  }
}

TEST_CASE("a gzip file named without .gz gets a hint") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("hint");
  Write(*env, dir + "/train-images-idx3-ubyte", Gzip(Images()));
  Write(*env, dir + "/train-labels-idx1-ubyte", Labels());
  ExpectError(*env, Spec(dir), StatusCode::kDataLoss, "without the .gz suffix");
}


TEST_CASE("what a load would hold is charged before it is read: a sparse file is refused") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("sparse");
  // 8 KB on disk, 972 MB apparent: 60000 images of 90x180, the payload a hole.
  const std::string images = dir + "/train-images-idx3-ubyte";
  Write(*env, images, Idx(kU8, {60000, 90, 180}, ""));
  REQUIRE(truncate(images.c_str(), 16 + uint64_t{60000} * 90 * 180) == 0);
  Write(*env, dir + "/train-labels-idx1-ubyte", Idx(kU8, {60000}, std::string(60000, 1)));
  Principal bob;
  bob.uid = 2002;
  DatasetMemory memory(uint64_t{64} << 20);
  const std::string refusal = images +
      ": holding its 972000016 bytes in memory would take uid 2002's datasets from 0 to more "
      "than its 67108864 bytes (user_limits.dataset_memory)";
  {
    auto charge = memory.For(bob);
    const Status probed = ProbeIdx(*env, Spec(dir), charge.get()).status();
    CHECK(probed.code() == StatusCode::kResourceExhausted);
    CHECK(probed.message() == refusal);
    auto loaded = LoadIdx(*env, Spec(dir), charge.get());
    CHECK(loaded.status().message() == refusal);
  }
  CHECK(memory.of(2002) == 0);
  // Without a bound the probe reads the headers only (the load would read it all).
  CHECK(ProbeIdx(*env, Spec(dir)).ok());

  // In a gzip file, the header's promise is charged before the payload is inflated.
  const std::string gz = FreshTestDir("sparse-gz");
  Write(*env, gz + "/train-images-idx3-ubyte.gz",
        Gzip(Idx(kU8, {60000, 90, 180}, std::string(1 << 20, 0))));
  Write(*env, gz + "/train-labels-idx1-ubyte", Idx(kU8, {60000}, std::string(60000, 1)));
  auto charge = memory.For(bob);
  const Status inflated = LoadIdx(*env, Spec(gz), charge.get()).status();
  CHECK(inflated.code() == StatusCode::kResourceExhausted);
  CHECK_THAT(inflated.message(),
             Catch::StartsWith(gz + "/train-images-idx3-ubyte.gz: holding its 972000016 bytes"));
}

TEST_CASE("a loaded split holds its charge; what fits loads") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("charged");
  Write(*env, dir + "/train-images-idx3-ubyte.gz", Gzip(Images()));
  Write(*env, dir + "/train-labels-idx1-ubyte", Labels());
  Principal bob;
  bob.uid = 2002;
  DatasetMemory memory(1 << 20);
  auto charge = memory.For(bob);
  auto source = LoadIdx(*env, Spec(dir), charge.get());
  REQUIRE(source.ok());
  CheckStandardSamples(**source);
  CHECK(memory.of(2002) == Images().size() + Labels().size());  // the gzip bytes given back
}

}  // namespace
}  // namespace ember::daemon
