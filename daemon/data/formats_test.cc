#include "daemon/data/formats.h"

#include <catch2/catch.hpp>

#include "daemon/catalog/dataset.h"
#include "common/env.h"
#include "common/temp_dir_testing.h"
#include "daemon/data/source.h"
#include "daemon/data/source_testing.h"

namespace ember::daemon {
namespace {

// A raw IDX file of uint8 elements.
std::string IdxU8(const std::vector<uint32_t>& dims, const std::string& payload) {
  std::string out = {0, 0, 0x08, static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(d >> shift));
  }
  return out + payload;
}

TEST_CASE("an unknown format is kInvalidArgument naming it and the known ones") {
  auto env = NewPosixEnv();
  DatasetSpec spec{"d", "csv", "/nowhere", "train"};
  Result<DatasetInfo> probe = ProbeDataset(*env, spec);
  REQUIRE_FALSE(probe.ok());
  CHECK(probe.status().code() == StatusCode::kInvalidArgument);
  CHECK(probe.status().message() == "unknown format 'csv' (known: idx, imagefolder, mds, packed, parquet, tokens, webdataset)");
  Result<std::unique_ptr<Source>> load = LoadDataset(*env, spec);
  REQUIRE_FALSE(load.ok());
  CHECK(load.status().ToString() == probe.status().ToString());

  spec.format = "IDX";
  CHECK(ProbeDataset(*env, spec).status().message() == "unknown format 'IDX' (known: idx, imagefolder, mds, packed, parquet, tokens, webdataset)");
}

TEST_CASE("format parquet without its Arrow backend beside the program is refused saying so") {
  // (emberd's is built into bazel-bin/daemon/data/parquet; this test runs from
  // bazel-bin/daemon/data, where no emberd looks for it.)
  auto env = NewPosixEnv();
  DatasetSpec spec{"d", "parquet", "/nowhere/x.parquet", "train"};
  Result<DatasetInfo> probe = ProbeDataset(*env, spec);
  CHECK(probe.status().code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(probe.status().message(),
             Catch::StartsWith("format parquet needs Arrow C++: its backend, "
                               "libember_parquet_arrow.so, is not beside this program ("));
  CHECK(LoadDataset(*env, spec).status().code() == StatusCode::kFailedPrecondition);
}

TEST_CASE("format idx probes and loads through the registry") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("idx");
  REQUIRE(
      env->WriteFileAtomic(dir + "/train-images-idx3-ubyte", IdxU8({2, 2, 2}, "abcdefgh")).ok());
  REQUIRE(env->WriteFileAtomic(dir + "/train-labels-idx1-ubyte", IdxU8({2}, "\x03\x04")).ok());
  DatasetSpec spec{"d", "idx", dir, "train"};

  Result<DatasetInfo> info = ProbeDataset(*env, spec);
  INFO(info.status().ToString());
  REQUIRE(info.ok());
  CHECK(info->count == 2);
  CHECK(info->tensors.size() == 2);

  Result<std::unique_ptr<Source>> source = LoadDataset(*env, spec);
  REQUIRE(source.ok());
  char image[4];
  REQUIRE(ReadSampleTensor(**source, 1, 0, image).ok());
  CHECK(std::string(image, 4) == "efgh");
  char label = 0;
  REQUIRE(ReadSampleTensor(**source, 0, 1, &label).ok());
  CHECK(label == 3);
}

TEST_CASE("format idx passes its errors through unchanged") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("idx_missing");
  DatasetSpec spec{"d", "idx", dir, "train"};
  Result<DatasetInfo> info = ProbeDataset(*env, spec);
  REQUIRE_FALSE(info.ok());
  CHECK(info.status().code() == StatusCode::kNotFound);
  CHECK_THAT(info.status().message(), Catch::Contains(dir + "/train-images-idx3-ubyte.gz"));
  CHECK(LoadDataset(*env, spec).status().ToString() == info.status().ToString());
}

}  // namespace
}  // namespace ember::daemon

namespace ember::daemon {
namespace {

TEST_CASE("format tokens is dispatched to the token reader") {
  auto env = NewPosixEnv();
  std::string bytes;
  for (uint16_t t = 0; t < 100; ++t) bytes.append(reinterpret_cast<const char*>(&t), 2);
  const std::string path = WriteTempFile("formats_tokens.bin", bytes);
  DatasetSpec spec{"tok", "tokens", path, "train", "tokens: {seq_len: 10}", "fail"};
  auto info = ProbeDataset(*env, spec);
  INFO(info.status().ToString());
  REQUIRE(info.ok());
  CHECK(info->count == 9);
  auto source = LoadDataset(*env, spec);
  REQUIRE(source.ok());
  int64_t input[10];
  REQUIRE(ReadSampleTensor(**source, 0, 0, input).ok());
  CHECK(input[1] == input[0] + 1);
}

}  // namespace
}  // namespace ember::daemon
