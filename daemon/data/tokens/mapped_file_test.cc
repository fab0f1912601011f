#include "daemon/data/tokens/mapped_file.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <string>

namespace ember::daemon {
namespace {

std::string TestPath(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  REQUIRE(tmp != nullptr);
  return std::string(tmp) + "/mapped_file_test_" + name;
}

void Write(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  REQUIRE(out.good());
}

TEST_CASE("MappedFile maps the whole file read-only") {
  const std::string path = TestPath("data");
  std::string contents;
  for (int i = 0; i < 10000; ++i) contents.push_back(static_cast<char>(i * 31));
  Write(path, contents);

  Result<std::unique_ptr<MappedFile>> file = MappedFile::Open(path);
  REQUIRE(file.ok());
  CHECK((*file)->path() == path);
  REQUIRE((*file)->size() == contents.size());
  CHECK(std::string((*file)->data(), contents.size()) == contents);

  for (auto access : {MappedFile::Access::kSequential, MappedFile::Access::kRandom,
                      MappedFile::Access::kNormal}) {
    CHECK((*file)->Advise(access).ok());
  }
  // Hints past the end or longer than the file are clamped, not errors.
  (*file)->WillNeed(0, contents.size());
  (*file)->WillNeed(4097, 1 << 30);
  (*file)->WillNeed(contents.size(), 10);
  (*file)->WillNeed(uint64_t{1} << 62, uint64_t{1} << 62);
  CHECK(std::string((*file)->data(), contents.size()) == contents);
}

TEST_CASE("MappedFile of an empty file has no data") {
  const std::string path = TestPath("empty");
  Write(path, "");
  Result<std::unique_ptr<MappedFile>> file = MappedFile::Open(path);
  REQUIRE(file.ok());
  CHECK((*file)->size() == 0);
  CHECK((*file)->data() == nullptr);
  CHECK((*file)->Advise(MappedFile::Access::kRandom).ok());
  (*file)->WillNeed(0, 100);
}

TEST_CASE("MappedFile errors name the path") {
  SECTION("missing") {
    const std::string path = TestPath("missing");
    Result<std::unique_ptr<MappedFile>> file = MappedFile::Open(path);
    REQUIRE_FALSE(file.ok());
    CHECK(file.status().code() == StatusCode::kNotFound);
    CHECK_THAT(file.status().message(), Catch::Contains(path));
  }
  SECTION("a directory") {
    const char* tmp = std::getenv("TEST_TMPDIR");
    REQUIRE(tmp != nullptr);
    Result<std::unique_ptr<MappedFile>> file = MappedFile::Open(tmp);
    REQUIRE_FALSE(file.ok());
    CHECK(file.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(file.status().message(), Catch::Contains(tmp) && Catch::Contains("directory"));
  }
}

}  // namespace
}  // namespace ember::daemon
