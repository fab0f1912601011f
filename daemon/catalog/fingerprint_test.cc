#include "daemon/catalog/fingerprint.h"

#include <catch2/catch.hpp>

#include "common/temp_dir_testing.h"

namespace ember::daemon {
namespace {

DatasetInfo InfoFor(const std::string& root, const std::string& contents) {
  WriteTestFile(root + "/index.bin", contents);
  WriteTestFile(root + "/data.bin", std::string(10000, 'x'));
  DatasetInfo info;
  info.spec.path = root;
  info.count = 100;
  info.tensors.push_back(TensorSpec{"image", ring::DType::kUInt8, {28, 28}});
  info.files = {root + "/index.bin", root + "/data.bin"};
  return info;
}

uint64_t MustFingerprint(const DatasetInfo& info) {
  const std::unique_ptr<Env> env = NewPosixEnv();
  Result<uint64_t> fp = DatasetFingerprint(*env, info);
  INFO(fp.status().ToString());
  REQUIRE(fp.ok());
  CHECK(*fp != 0);
  return *fp;
}

TEST_CASE("copies under different paths have the same fingerprint; changes show") {
  const std::string dir = FreshTestDir("fingerprint");
  const uint64_t a = MustFingerprint(InfoFor(dir + "/a", "index v1"));
  const uint64_t b = MustFingerprint(InfoFor(dir + "/b", "index v1"));
  CHECK(a == b);
  CHECK(MustFingerprint(InfoFor(dir + "/c", "index v2")) != a);  // the index differs
  DatasetInfo fewer = InfoFor(dir + "/d", "index v1");
  fewer.count = 99;
  CHECK(MustFingerprint(fewer) != a);
  DatasetInfo shape = InfoFor(dir + "/e", "index v1");
  shape.tensors[0].shape = {32, 32};
  CHECK(MustFingerprint(shape) != a);
  DatasetInfo longer = InfoFor(dir + "/f", "index v1");
  WriteTestFile(dir + "/f/data.bin", std::string(10001, 'x'));
  CHECK(MustFingerprint(longer) != a);
  CHECK(FingerprintHex(0x1234) == "0000000000001234");
}

TEST_CASE("an unreadable file is an error naming it") {
  DatasetInfo info;
  info.spec.path = "/nonexistent";
  info.files = {"/nonexistent/index.bin"};
  const std::unique_ptr<Env> env = NewPosixEnv();
  Result<uint64_t> fp = DatasetFingerprint(*env, info);
  CHECK(!fp.ok());
  CHECK_THAT(fp.status().message(), Catch::Contains("/nonexistent/index.bin"));
}

}  // namespace
}  // namespace ember::daemon
