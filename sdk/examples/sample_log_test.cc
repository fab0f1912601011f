#include "sdk/examples/sample_log.h"

#include <catch2/catch.hpp>

#include <vector>

#include "common/temp_dir_testing.h"

namespace ember::examples {
namespace {

TEST_CASE("a sample log has one 'epoch step rank sample_id' line per sample, appended") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("sample_log/append") + "/logs";  // created by Open
  Result<std::unique_ptr<SampleLog>> log = SampleLog::Open(*env, dir, 1, 2, {});
  REQUIRE(log.ok());
  const std::vector<int64_t> ids = {7, 3, 12};
  REQUIRE((*log)->Append(0, 0, ids.data(), 2).ok());
  REQUIRE((*log)->Append(2, 15, ids.data() + 2, 1).ok());
  REQUIRE((*log)->Sync().ok());
  CHECK((*log)->path() == dir + "/rank-1.log");
  CHECK(ReadTestFile(dir + "/rank-1.log") == "0 0 1 7\n0 0 1 3\n2 15 1 12\n");
}

TEST_CASE("opening a sample log cuts it to the steps a checkpoint covers, then appends") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("sample_log/resume");
  WriteTestFile(dir + "/rank-0.log", "0 0 0 5\n0 9 0 1\n1 0 0 2\n1 2 0 8\n1 3 0 4\n1 3 0");
  const int64_t id = 99;
  Result<std::unique_ptr<SampleLog>> log = SampleLog::Open(*env, dir, 0, 1, {1, 3});
  REQUIRE(log.ok());
  CHECK(ReadTestFile(dir + "/rank-0.log") == "0 0 0 5\n0 9 0 1\n1 0 0 2\n1 2 0 8\n");
  REQUIRE((*log)->Append(1, 3, &id, 1).ok());
  CHECK(ReadTestFile(dir + "/rank-0.log") == "0 0 0 5\n0 9 0 1\n1 0 0 2\n1 2 0 8\n1 3 0 99\n");
}

TEST_CASE("a fresh run empties the logs of every rank, rank 0 those of ranks it lacks") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("sample_log/fresh");
  for (const char* name : {"rank-0.log", "rank-1.log", "rank-2.log", "rank-10.log", "notes.txt"})
    WriteTestFile(dir + "/" + name, "0 0 0 1\n");
  REQUIRE(SampleLog::Open(*env, dir, 1, 2, {}).ok());
  CHECK(ReadTestFile(dir + "/rank-1.log").empty());
  CHECK(ReadTestFile(dir + "/rank-2.log") == "0 0 0 1\n");  // only rank 0 cuts others' logs
  REQUIRE(SampleLog::Open(*env, dir, 0, 2, {}).ok());
  CHECK(ReadTestFile(dir + "/rank-0.log").empty());
  CHECK(ReadTestFile(dir + "/rank-2.log").empty());
  CHECK(ReadTestFile(dir + "/rank-10.log").empty());
  CHECK(ReadTestFile(dir + "/notes.txt") == "0 0 0 1\n");
}

TEST_CASE("logs of ranks a resumed run lacks keep their lines up to the checkpoint") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("sample_log/shrunk");
  WriteTestFile(dir + "/rank-1.log", "0 4 1 5\n0 5 1 6\n0 6 1 7\n");
  REQUIRE(SampleLog::Open(*env, dir, 0, 1, {0, 6}).ok());
  CHECK(ReadTestFile(dir + "/rank-1.log") == "0 4 1 5\n0 5 1 6\n");
}

TEST_CASE("a malformed line before the cut is kDataLoss naming the file and line") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("sample_log/malformed");
  const std::string path = dir + "/rank-0.log";
  WriteTestFile(path, "0 0 0 5\n0 1 x 6\n0 2 0 7\n");
  const Status status = TrimSampleLog(*env, path, {0, 2});
  CHECK(status.code() == StatusCode::kDataLoss);
  CHECK_THAT(status.message(), Catch::Contains(path + ":2: '0 1 x 6'"));
  CHECK(ReadTestFile(path) == "0 0 0 5\n0 1 x 6\n0 2 0 7\n");
  CHECK(TrimSampleLog(*env, dir + "/missing.log", {0, 2}).ok());
}

}  // namespace
}  // namespace ember::examples
