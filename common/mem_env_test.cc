#include "common/mem_env.h"

#include <catch2/catch.hpp>

namespace ember {
namespace {

TEST_CASE("MemEnv serves the files added, their directories and nothing else") {
  MemEnv env;
  env.AddFile("/d/sub/a", "hello");
  env.AddFile("/d/b", "");

  CHECK(env.IsDirectory("/d"));
  CHECK(env.IsDirectory("/d/sub"));
  CHECK_FALSE(env.IsDirectory("/d/sub/a"));
  CHECK(env.FileExists("/d/sub/a"));
  CHECK_FALSE(env.FileExists("/d/c"));
  auto names = env.ListDir("/d");
  REQUIRE(names.ok());
  CHECK(*names == std::vector<std::string>{"b", "sub"});

  auto read = env.ReadFile("/d/sub/a");
  REQUIRE(read.ok());
  CHECK(*read == "hello");
  CHECK(env.ReadFile("/d/c").status().code() == StatusCode::kNotFound);
  CHECK(env.ReadFile("/d").status().code() == StatusCode::kInvalidArgument);

  auto file = env.OpenForRead("/d/sub/a");
  REQUIRE(file.ok());
  CHECK((*file)->Size() == 5);
  char buffer[8] = {};
  REQUIRE((*file)->ReadAt(1, 3, buffer).ok());
  CHECK(std::string(buffer) == "ell");
  CHECK((*file)->ReadAt(3, 3, buffer).code() == StatusCode::kDataLoss);

  auto mapped = env.MapReadOnly("/d/sub/a");
  REQUIRE(mapped.ok());
  CHECK(std::string((*mapped)->data(), (*mapped)->size()) == "hello");
  auto empty = env.MapReadOnly("/d/b");
  REQUIRE(empty.ok());
  CHECK((*empty)->data() == nullptr);
  CHECK((*empty)->size() == 0);
}

TEST_CASE("MemEnv refuses every write, naming the path") {
  MemEnv env;
  Status s = env.WriteFileAtomic("/x", "y");
  CHECK(s.code() == StatusCode::kFailedPrecondition);
  CHECK(s.message() == "/x: MemEnv is read-only");
  CHECK(env.CreateWritableFile("/x").status().code() == StatusCode::kFailedPrecondition);
  CHECK(env.RemoveAll("/").code() == StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ember
