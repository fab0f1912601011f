#include "daemon/data/image/imagefolder.h"

#include <catch2/catch.hpp>

#include <atomic>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/env_wrapper.h"
#include "common/fault_env.h"
#include "common/temp_dir_testing.h"
#include "daemon/data/image/image_testing.h"
#include "daemon/data/image/pipeline.h"
#include "daemon/data/source_testing.h"
#include "ember/ring_layout.h"

namespace ember::daemon {
namespace {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

constexpr const char* kSmallPipeline = "steps: [{resize: {size: [8, 8]}}]\noutput: {layout: HWC}";

// root/
//   a/0.jpg (red), a/1.JPEG (green)
//   b/ (no images)
//   c/2.png (blue), c/notes.txt, c/sub/3.Png (white)
//   readme.txt
std::string MakeFolder(const std::string& name) {
  const std::string root = FreshTestDir(name);
  WriteTestFile(root + "/a/0.jpg", EncodeJpeg(SolidImage(24, 16, {255, 0, 0})));
  WriteTestFile(root + "/a/1.JPEG", EncodeJpeg(SolidImage(16, 24, {0, 255, 0})));
  WriteTestFile(root + "/b/readme.md", "no images here");
  WriteTestFile(root + "/c/2.png", EncodePng(SolidImage(10, 10, {0, 0, 255})));
  WriteTestFile(root + "/c/notes.txt", "not an image");
  WriteTestFile(root + "/c/sub/3.Png", EncodePng(SolidImage(9, 9, {255, 255, 255})));
  WriteTestFile(root + "/readme.txt", "ignored");
  return root;
}

DatasetSpec Spec(const std::string& path, const std::string& pipeline = kSmallPipeline) {
  DatasetSpec spec;
  spec.name = "pets";
  spec.format = "imagefolder";
  spec.path = path;
  spec.split = "train";
  spec.pipeline = pipeline;
  return spec;
}

std::unique_ptr<Source> MustLoad(Env& env, const DatasetSpec& spec) {
  auto source = LoadImageFolder(env, spec);
  INFO((source.ok() ? std::string() : source.status().ToString()));
  REQUIRE(source.ok());
  return std::move(source).value();
}

struct Sample {
  Status status;
  std::vector<uint8_t> image;
  int64_t label = -1;
};

Sample Read(const Source& source, uint64_t id, const SampleContext& context = {}) {
  Sample sample;
  sample.image.resize(source.info().tensors[0].SampleBytes());
  void* dsts[2] = {sample.image.data(), &sample.label};
  sample.status = source.ReadSample(id, context, dsts);
  return sample;
}

std::string Runfile(const std::string& path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  REQUIRE(srcdir != nullptr);
  return ReadTestFile(std::string(srcdir) + "/ember/" + path);
}

TEST_CASE("probe reports count, tensors and the folder, without reading images") {
  auto env = NewPosixEnv();
  const std::string root = MakeFolder("probe");
  auto info = ProbeImageFolder(*env, Spec(root + "/"));
  REQUIRE(info.ok());
  CHECK(info->count == 4);  // the .txt and .md files are not samples
  CHECK(info->spec.path == root);
  CHECK(info->files == std::vector<std::string>{root});
  REQUIRE(info->tensors.size() == 2);
  CHECK(info->tensors[0].name == "image");
  CHECK(info->tensors[0].dtype == ring::DType::kUInt8);
  CHECK(info->tensors[0].shape == std::vector<int64_t>{8, 8, 3});
  CHECK(info->tensors[1].name == "label");
  CHECK(info->tensors[1].dtype == ring::DType::kInt64);
  CHECK(info->tensors[1].shape.empty());

  // Default pipeline: [3, 224, 224] uint8; float32 doubles nothing but the element size.
  auto defaults = ProbeImageFolder(*env, Spec(root, ""));
  REQUIRE(defaults.ok());
  CHECK(defaults->tensors[0].shape == std::vector<int64_t>{3, 224, 224});
  auto floats = ProbeImageFolder(*env, Spec(root, "steps: [{center_crop: {size: 5}}]\n"
                                                  "output: {dtype: float32}"));
  REQUIRE(floats.ok());
  CHECK(floats->tensors[0].dtype == ring::DType::kFloat32);
  CHECK(floats->tensors[0].SampleBytes() == 3 * 5 * 5 * 4);
}

TEST_CASE("samples decode to their image; labels are sorted folders, an empty one counts") {
  auto env = NewPosixEnv();
  const std::string root = MakeFolder("samples");
  auto source = MustLoad(*env, Spec(root));
  CHECK(source->ParallelDecode());
  const std::vector<std::vector<int>> colors = {
      {255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {255, 255, 255}};
  const std::vector<int64_t> labels = {0, 0, 2, 2};
  for (uint64_t id = 0; id < 4; ++id) {
    const Sample sample = Read(*source, id);
    INFO("sample " << id << ": " << sample.status.ToString());
    REQUIRE(sample.status.ok());
    CHECK(sample.label == labels[id]);
    for (size_t i = 0; i < sample.image.size(); ++i)
      CHECK(std::abs(int(sample.image[i]) - colors[id][i % 3]) <= 3);
  }
  const Sample out_of_range = Read(*source, 4);
  CHECK(out_of_range.status.code() == StatusCode::kInvalidArgument);
  CHECK(Contains(out_of_range.status.message(), "sample 4 is out of range"));

  // source_testing's helper agrees.
  int64_t label = -1;
  REQUIRE(ReadSampleTensor(*source, 2, 1, &label).ok());
  CHECK(label == 2);

  // Prefetch is only a hint: ids out of range and missing files are ignored.
  const uint64_t ids[] = {0, 3, 99};
  source->Prefetch(ids, 3);
}

TEST_CASE("the same (seed, epoch, id) gives the same bytes on any thread") {
  auto env = NewPosixEnv();
  const std::string root = FreshTestDir("threads");
  for (int i = 0; i < 6; ++i) {
    WriteTestFile(root + "/k" + std::to_string(i % 2) + "/" + std::to_string(i) + ".jpg",
                  EncodeJpeg(GradientImage(90 + i * 7, 70 + i * 5)));
  }
  auto source = MustLoad(*env, Spec(root, "steps: [{random_resized_crop: {size: 24}}, "
                                          "{horizontal_flip: {}}]"));
  const SampleContext context{11, 4};
  std::vector<std::vector<uint8_t>> expected;
  for (uint64_t id = 0; id < 6; ++id) {
    const Sample sample = Read(*source, id, context);
    REQUIRE(sample.status.ok());
    expected.push_back(sample.image);
  }
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        for (uint64_t k = 0; k < 6; ++k) {
          const uint64_t id = (k + t) % 6;
          const Sample sample = Read(*source, id, context);
          if (!sample.status.ok() || sample.image != expected[id]) ++mismatches[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(mismatches == std::vector<int>(4, 0));
  CHECK(Read(*source, 0, SampleContext{11, 5}).image != expected[0]);
}

TEST_CASE("corrupt files fail their own sample as data loss, naming the file") {
  auto env = NewPosixEnv();
  const std::string root = FreshTestDir("corrupt");
  const std::string jpeg = EncodeJpeg(GradientImage(64, 64));
  std::string huge = EncodeJpeg(SolidImage(8, 8, {1, 2, 3}));
  const size_t sof = FindJpegMarker(huge, 0xc0);
  REQUIRE(sof != std::string::npos);
  for (size_t at : {sof + 5, sof + 7}) {
    huge[at] = static_cast<char>(0xea);
    huge[at + 1] = static_cast<char>(0x60);
  }
  std::string bad_crc = EncodePng(GradientImage(16, 16));
  bad_crc[8 + 8 + 3] ^= 0x02;
  WriteTestFile(root + "/x/0-good.jpg", jpeg);
  WriteTestFile(root + "/x/1-truncated.jpg", jpeg.substr(0, jpeg.size() / 2));
  WriteTestFile(root + "/x/2-huge.jpg", huge);
  WriteTestFile(root + "/x/3-crc.png", bad_crc);
  WriteTestFile(root + "/x/4-text.jpg", "just text");
  WriteTestFile(root + "/x/5-empty.png", "");
  WriteTestFile(root + "/x/6-good.png", EncodePng(GradientImage(16, 16)));
  auto source = MustLoad(*env, Spec(root));  // registration does not read the images
  REQUIRE(source->info().count == 7);

  auto failure = [&](uint64_t id) {
    const Sample sample = Read(*source, id);
    CHECK(sample.status.code() == StatusCode::kDataLoss);
    return sample.status.message();
  };
  CHECK(Read(*source, 0).status.ok());
  CHECK(Contains(failure(1), root + "/x/1-truncated.jpg: corrupt JPEG: "));
  CHECK(failure(2) == root + "/x/2-huge.jpg: image is 60000x60000 pixels, over the limit of "
                             "64000000 pixels");
  CHECK(failure(3) == root + "/x/3-crc.png: corrupt PNG: IHDR: CRC error");
  CHECK(Contains(failure(4), root + "/x/4-text.jpg: not a JPEG or PNG file"));
  CHECK(Contains(failure(5), root + "/x/5-empty.png: not a JPEG or PNG file"));
  CHECK(Read(*source, 6).status.ok());

  // A file removed after registration is a lost sample too.
  std::remove((root + "/x/0-good.jpg").c_str());
  CHECK(Contains(failure(0), root + "/x/0-good.jpg: cannot open: "));
}

TEST_CASE("a file that cannot be read is a lost sample naming the file, not a failed source") {
  auto posix = NewPosixEnv();
  FaultEnv env(posix.get());
  const std::string root = MakeFolder("read_faults");
  auto source = MustLoad(env, Spec(root));
  const std::string bad_sector = root + "/a/1.JPEG";
  const std::string shrunk = root + "/c/2.png";
  const uint64_t shrunk_size = EncodePng(SolidImage(10, 10, {0, 0, 255})).size();
  env.FailReadAt(bad_sector, Internal("read failed at byte 0: Input/output error"));
  env.ShortenReads(shrunk, 20);

  // What on_error decides on: kDataLoss for the bad samples, the others still decode.
  const Sample io_error = Read(*source, 1);
  CHECK(io_error.status.code() == StatusCode::kDataLoss);
  CHECK(io_error.status.message() == bad_sector + ": read failed at byte 0: Input/output error");
  const Sample truncated = Read(*source, 2);
  CHECK(truncated.status.code() == StatusCode::kDataLoss);
  CHECK(truncated.status.message() == shrunk + ": truncated while reading: 20 of " +
                                          std::to_string(shrunk_size) + " bytes from byte 0");
  CHECK(Read(*source, 0).status.ok());
  CHECK(Read(*source, 3).status.ok());
  const uint64_t ids[] = {1, 2};
  source->Prefetch(ids, 2);  // a hint: faults do not fail it; the reads report them
  CHECK(Read(*source, 1).status.message() == io_error.status.message());
  CHECK(Read(*source, 2).status.message() == truncated.status.message());

  // Out of memory or descriptors is not the file's fault: not a lost sample.
  env.FailReadAt(root + "/a/0.jpg", ResourceExhausted("read failed at byte 0: out of memory"));
  CHECK(Read(*source, 0).status.code() == StatusCode::kResourceExhausted);

  env.ClearFaults();
  for (uint64_t id = 0; id < 4; ++id) CHECK(Read(*source, id).status.ok());
}

// Counts OpenForRead calls (the rest goes to the target).
class CountingEnv : public EnvWrapper {
 public:
  using EnvWrapper::EnvWrapper;
  Result<std::unique_ptr<ReadableFile>> OpenForRead(const std::string& path) override {
    opens.fetch_add(1);
    return target()->OpenForRead(path);
  }
  std::atomic<int> opens{0};
};

TEST_CASE("a prefetched sample is read through the descriptor its prefetch opened: one open each") {
  auto posix = NewPosixEnv();
  CountingEnv env(posix.get());
  const std::string root = MakeFolder("one_open");
  auto source = MustLoad(env, Spec(root));
  const int listed = env.opens.load();
  const uint64_t ids[] = {0, 2, 3};
  source->Prefetch(ids, 3);
  CHECK(env.opens.load() == listed + 3);
  for (uint64_t id : ids) CHECK(Read(*source, id).status.ok());
  CHECK(env.opens.load() == listed + 3);  // no second open
  CHECK(Read(*source, 1).status.ok());   // not prefetched: opened when read
  CHECK(env.opens.load() == listed + 4);
  CHECK(Read(*source, 0).status.ok());   // its descriptor was used once: opened again
  CHECK(env.opens.load() == listed + 5);
  // Prefetching far more than kept: the oldest descriptors close, reads still work.
  std::vector<uint64_t> many;
  for (int i = 0; i < 300; ++i) many.push_back(i % 4);
  source->Prefetch(many.data(), many.size());
  for (uint64_t id = 0; id < 4; ++id) CHECK(Read(*source, id).status.ok());
}

TEST_CASE("a read descriptor's place in the prefetch order does not close a later one") {
  auto posix = NewPosixEnv();
  CountingEnv env(posix.get());
  auto source = MustLoad(env, Spec(MakeFolder("kept_order")));
  const uint64_t zero = 0, one = 1;
  source->Prefetch(&zero, 1);
  CHECK(Read(*source, 0).status.ok());  // read: its entry in the order stays, closing nothing
  source->Prefetch(&zero, 1);           // kept again, behind it
  // 255 more prefetches (each read): the first entry of sample 0 comes off the front of
  // the 256 kept; its second descriptor must stay.
  for (int i = 0; i < 255; ++i) {
    source->Prefetch(&one, 1);
    CHECK(Read(*source, 1).status.ok());
  }
  const int opens = env.opens.load();
  CHECK(Read(*source, 0).status.ok());
  CHECK(env.opens.load() == opens);  // read through the descriptor kept
}

TEST_CASE("folder errors") {
  auto env = NewPosixEnv();
  const std::string root = FreshTestDir("errors");

  auto missing = ProbeImageFolder(*env, Spec(root + "/nope"));
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(Contains(missing.status().message(), root + "/nope: no such directory"));

  WriteTestFile(root + "/file", "x");
  auto file = ProbeImageFolder(*env, Spec(root + "/file"));
  CHECK(file.status().code() == StatusCode::kInvalidArgument);
  CHECK(Contains(file.status().message(), "not a directory"));

  WriteTestFile(root + "/flat/0.jpg", EncodeJpeg(SolidImage(4, 4, {0, 0, 0})));
  auto flat = ProbeImageFolder(*env, Spec(root + "/flat"));
  CHECK(flat.status().code() == StatusCode::kInvalidArgument);
  CHECK(Contains(flat.status().message(), root + "/flat: no class folders"));

  WriteTestFile(root + "/empty/a/readme.txt", "x");
  WriteTestFile(root + "/empty/b/c/readme.txt", "x");
  auto empty = ProbeImageFolder(*env, Spec(root + "/empty"));
  CHECK(empty.status().code() == StatusCode::kInvalidArgument);
  CHECK(Contains(empty.status().message(),
                 root + "/empty: no .jpg, .jpeg or .png files in its 2 class folders"));

  WriteTestFile(root + "/ok/a/0.png", EncodePng(SolidImage(4, 4, {0, 0, 0})));
  auto pipeline = ProbeImageFolder(*env, Spec(root + "/ok", "steps:\n  - blur: {}\n"));
  CHECK(pipeline.status().code() == StatusCode::kInvalidArgument);
  CHECK(Contains(pipeline.status().message(),
                 "dataset 'pets': pipeline: line 2, column 5: unknown step 'blur'"));
  CHECK(!LoadImageFolder(*env, Spec(root + "/ok", "steps:\n  - blur: {}\n")).ok());
}

TEST_CASE("the shipped ImageNet pipelines parse to 3x224x224 uint8") {
  auto parsed_train = ImagePipeline::Parse(Runfile("configs/pipelines/imagenet_train.yaml"));
  REQUIRE(parsed_train.ok());
  REQUIRE(parsed_train->steps().size() == 2);
  CHECK(parsed_train->steps()[0].kind == PipelineStep::Kind::kRandomResizedCrop);
  CHECK(parsed_train->steps()[1].kind == PipelineStep::Kind::kHorizontalFlip);
  CHECK(parsed_train->shape() == std::vector<int64_t>{3, 224, 224});
  CHECK(parsed_train->dtype() == ring::DType::kUInt8);

  auto parsed_eval = ImagePipeline::Parse(Runfile("configs/pipelines/imagenet_eval.yaml"));
  REQUIRE(parsed_eval.ok());
  REQUIRE(parsed_eval->steps().size() == 2);
  CHECK(parsed_eval->steps()[0].shorter_side == 256);
  CHECK(parsed_eval->steps()[1].kind == PipelineStep::Kind::kCenterCrop);
  CHECK(parsed_eval->shape() == std::vector<int64_t>{3, 224, 224});
}

}  // namespace
}  // namespace ember::daemon
