#include "common/temp_dir_testing.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

namespace ember {

std::string TestTmpDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  INFO("TEST_TMPDIR is not set: run the test with `bazel test`");
  REQUIRE(tmp != nullptr);
  return tmp;
}

std::string FreshTestDir(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(TestTmpDir()) / name;
  std::error_code error;
  std::filesystem::remove_all(dir, error);
  INFO("removing " << dir << ": " << error.message());
  REQUIRE(!error);
  std::filesystem::create_directories(dir, error);
  INFO("creating " << dir << ": " << error.message());
  REQUIRE(!error);
  return dir.string();
}

void WriteTestFile(const std::string& path, const std::string& contents) {
  std::error_code error;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), error);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  out.close();
  INFO("writing " << path);
  REQUIRE(out.good());
}

std::string WriteTempFile(const std::string& name, const std::string& contents) {
  const std::string path = TestTmpDir() + "/" + name;
  WriteTestFile(path, contents);
  return path;
}

std::string ReadTestFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  INFO("reading " << path);
  REQUIRE(in.good());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace ember
