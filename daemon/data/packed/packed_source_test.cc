#include "daemon/data/packed/packed_source.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/temp_dir_testing.h"
#include "pack/pack_testing.h"
#include "pack/writer.h"
#include "daemon/data/source_testing.h"
#include "ember/ring_layout.h"

namespace ember::daemon {
namespace {

using Catch::Contains;

constexpr uint64_t kMaxBytes = 2048;

struct Packed {
  std::string dir;
  std::vector<std::string> bytes;  // by sample id
  std::vector<std::string> paths;
};

// 50 records of up to 2000 random bytes (labels i % 3) packed into several shards.
Packed MakePacked(Env& env, const std::string& name) {
  Packed packed;
  packed.dir = FreshTestDir(name) + "/out";
  pack::PackOptions options;
  options.shard_bytes = 16 * 1024;
  auto writer = pack::PackWriter::Create(env, packed.dir, options, "imagefolder", {"a", "b", "c"});
  REQUIRE(writer.ok());
  std::mt19937_64 rng(11);
  for (int i = 0; i < 50; ++i) {
    packed.bytes.push_back(pack::RandomBytes(rng, rng() % 2000));
    packed.paths.push_back(std::string(1, static_cast<char>('a' + i % 3)) + "/" +
                           std::to_string(i) + ".jpg");
    REQUIRE((*writer)->Add(reinterpret_cast<const uint8_t*>(packed.bytes.back().data()),
                           packed.bytes.back().size(), i % 3, packed.paths.back())
                .ok());
  }
  REQUIRE((*writer)->Commit().ok());
  return packed;
}

RecordCodecFactory RawFactory(uint64_t max_bytes = kMaxBytes) {
  return [max_bytes](const pack::PackedDataset& dataset, const DatasetSpec&) -> Result<RecordCodec> {
    if (dataset.source_format() != "imagefolder") return InvalidArgument("not images");
    return RawRecordCodec(max_bytes);
  };
}

DatasetSpec Spec(const std::string& dir) {
  DatasetSpec spec;
  spec.name = "p";
  spec.format = "packed";
  spec.path = dir;
  spec.split = "train";
  return spec;
}

struct Sample {
  int64_t size = 0;
  std::string bytes = std::string(kMaxBytes, '\0');
  int64_t label = 0;
};

Status Read(const Source& source, uint64_t id, Sample* sample) {
  void* dsts[3] = {&sample->size, sample->bytes.data(), &sample->label};
  return source.ReadSample(id, {}, dsts);
}

TEST_CASE("ProbePacked reports the count, the codec's tensors and the files") {
  auto env = NewPosixEnv();
  const Packed packed = MakePacked(*env, "probe");
  auto info = ProbePacked(*env, Spec(packed.dir), RawFactory());
  REQUIRE(info.ok());
  CHECK(info->count == 50);
  CHECK(info->spec.path == packed.dir);
  CHECK(info->spec.name == "p");
  REQUIRE(info->tensors.size() == 3);
  CHECK(info->tensors[0].name == "size");
  CHECK(info->tensors[1].name == "bytes");
  CHECK(info->tensors[1].dtype == ring::DType::kUInt8);
  CHECK(info->tensors[1].shape == std::vector<int64_t>{static_cast<int64_t>(kMaxBytes)});
  CHECK(info->tensors[2].name == "label");
  CHECK(info->tensors[2].dtype == ring::DType::kInt64);
  REQUIRE(info->files.size() >= 3);
  CHECK(info->files[0] == packed.dir + "/manifest");
}

TEST_CASE("ProbePacked passes on the factory's errors and rejects an empty codec") {
  auto env = NewPosixEnv();
  const Packed packed = MakePacked(*env, "probe_errors");
  RecordCodecFactory refusing = [](const pack::PackedDataset&, const DatasetSpec&) -> Result<RecordCodec> {
    return InvalidArgument("pipeline: unknown step 'blur'");
  };
  auto refused = ProbePacked(*env, Spec(packed.dir), refusing);
  CHECK(refused.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(refused.status().message(),
             Contains(packed.dir + " (packed from imagefolder): pipeline: unknown step 'blur'"));
  RecordCodecFactory empty = [](const pack::PackedDataset&, const DatasetSpec&) -> Result<RecordCodec> {
    return RecordCodec{};
  };
  CHECK(ProbePacked(*env, Spec(packed.dir), empty).status().code() ==
        StatusCode::kInvalidArgument);
  CHECK(ProbePacked(*env, Spec(packed.dir), nullptr).status().code() ==
        StatusCode::kInvalidArgument);
  CHECK(ProbePacked(*env, Spec(packed.dir + "-missing"), RawFactory()).status().code() ==
        StatusCode::kNotFound);
}

TEST_CASE("LoadPacked serves every record through the codec") {
  auto env = NewPosixEnv();
  const Packed packed = MakePacked(*env, "load");
  auto source = LoadPacked(*env, Spec(packed.dir), RawFactory());
  REQUIRE(source.ok());
  CHECK_FALSE((*source)->ParallelDecode());
  for (uint64_t id = 0; id < 50; ++id) {
    Sample sample;
    REQUIRE(Read(**source, id, &sample).ok());
    CHECK(sample.size == static_cast<int64_t>(packed.bytes[id].size()));
    CHECK(sample.bytes.substr(0, packed.bytes[id].size()) == packed.bytes[id]);
    CHECK(sample.bytes.find_first_not_of('\0', packed.bytes[id].size()) == std::string::npos);
    CHECK(sample.label == static_cast<int64_t>(id % 3));
  }
  int64_t label = -1;
  REQUIRE(ReadSampleTensor(**source, 7, 2, &label).ok());
  CHECK(label == 1);
  Sample sample;
  Status out_of_range = Read(**source, 50, &sample);
  CHECK(out_of_range.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(out_of_range.message(), Contains("sample 50 is out of range"));
}

TEST_CASE("A corrupt record is kDataLoss naming the shard, the record and its original path") {
  auto env = NewPosixEnv();
  const Packed packed = MakePacked(*env, "corrupt");
  auto source = LoadPacked(*env, Spec(packed.dir), RawFactory());
  REQUIRE(source.ok());
  // Find a non-empty record in the second shard, then damage it on disk: the mapping is
  // shared, so the source sees the change.
  auto dataset = pack::PackedDataset::Open(*env, packed.dir);
  REQUIRE(dataset.ok());
  uint64_t victim = 0;
  while ((*dataset)->Get(victim).shard == 0 || (*dataset)->Get(victim).size == 0) ++victim;
  const pack::PackedRecord record = (*dataset)->Get(victim);
  const std::string shard = packed.dir + "/shard-00001.emb";
  REQUIRE(record.shard == 1);
  pack::FlipByte(shard, record.offset + record.size - 1);

  Sample sample;
  Status s = Read(**source, victim, &sample);
  CHECK(s.code() == StatusCode::kDataLoss);
  CHECK_THAT(s.message(), Contains(shard + " record " + std::to_string(record.index) + " (" +
                                   packed.paths[victim] + "): checksum mismatch"));
  CHECK(Read(**source, victim + 1, &sample).ok());
}

TEST_CASE("Codec errors get the record's name as context") {
  auto env = NewPosixEnv();
  const Packed packed = MakePacked(*env, "codec_error");
  auto source = LoadPacked(*env, Spec(packed.dir), RawFactory(/*max_bytes=*/16));
  REQUIRE(source.ok());
  uint64_t big = 0;
  while (packed.bytes[big].size() <= 16) ++big;
  int64_t size = 0;
  std::string bytes(16, '\0');
  int64_t label = 0;
  void* dsts[3] = {&size, bytes.data(), &label};
  Status s = (*source)->ReadSample(big, {}, dsts);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Contains("record") && Contains("(" + packed.paths[big] + "): the record has"));
}

TEST_CASE("The decoder sees the sample id and context; Prefetch and concurrent reads work") {
  auto env = NewPosixEnv();
  const Packed packed = MakePacked(*env, "context");
  RecordCodecFactory factory = [](const pack::PackedDataset&, const DatasetSpec&) -> Result<RecordCodec> {
    RecordCodec codec;
    codec.tensors = {TensorSpec{"mix", ring::DType::kInt64, {3}}};
    codec.decode = [](const pack::PackedRecord& record, uint64_t id, const SampleContext& context,
                      void* const* dsts) -> Status {
      const int64_t mix[3] = {static_cast<int64_t>(id), static_cast<int64_t>(context.epoch),
                              static_cast<int64_t>(record.size)};
      std::memcpy(dsts[0], mix, sizeof(mix));
      return Status::Ok();
    };
    return codec;
  };
  auto source = LoadPacked(*env, Spec(packed.dir), factory);
  REQUIRE(source.ok());
  CHECK((*source)->ParallelDecode());
  const std::vector<uint64_t> ids = {3, 1, 49, 1000};
  (*source)->Prefetch(ids.data(), ids.size());
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = 0; i < 500; ++i) {
        const uint64_t id = (i * 7 + t) % 50;
        int64_t mix[3] = {};
        void* dsts[1] = {mix};
        SampleContext context;
        context.epoch = static_cast<uint64_t>(t);
        (*source)->Prefetch(&id, 1);
        if (!(*source)->ReadSample(id, context, dsts).ok() ||
            mix[0] != static_cast<int64_t>(id) || mix[1] != t ||
            mix[2] != static_cast<int64_t>(packed.bytes[id].size())) {
          ++failures;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(failures == 0);
}

}  // namespace
}  // namespace ember::daemon
