#include "pack/pack_command.h"

#include <CLI/CLI.hpp>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "common/fault_env.h"
#include "pack/pack_testing.h"
#include "pack/packed_dataset.h"

namespace ember::pack {
namespace {

using Catch::Contains;

// Everything written to a temporary FILE*.
std::string Contents(std::FILE* file) {
  std::rewind(file);
  std::string text;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) text.append(buffer, n);
  return text;
}

void Parse(CLI::App& app, std::vector<std::string> args) {
  std::vector<char*> argv;
  std::string program = "emberctl";
  argv.push_back(program.data());
  for (std::string& arg : args) argv.push_back(arg.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
}

TEST_CASE("emberctl pack parses its arguments") {
  CLI::App app;
  PackCommand command;
  CLI::App* pack = AddPackCommand(app, &command);
  Parse(app, {"pack", "/a", "/b", "--format", "imagefolder", "--shard-mib", "64", "--align",
              "512", "--overwrite", "--quiet"});
  CHECK(*pack);
  CHECK(command.src == "/a");
  CHECK(command.out == "/b");
  CHECK(command.shard_mib == 64);
  CHECK(command.record_alignment == 512);
  CHECK(command.overwrite);
  CHECK(command.quiet);

  CLI::App strict;
  PackCommand other;
  AddPackCommand(strict, &other);
  CHECK_THROWS_AS(Parse(strict, {"pack", "/a", "/b", "--format", "tar"}), CLI::ValidationError);
  CHECK_THROWS_AS(Parse(strict, {"pack", "/a"}), CLI::RequiredError);
}

TEST_CASE("RunPackCommand packs, prints a summary, and reports failures") {
  const std::string parent = PackTestDir("command");
  MakeImageFolder(parent + "/src", 1, 500);
  PackCommand command;
  command.src = parent + "/src";
  command.out = parent + "/out";
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  REQUIRE(out != nullptr);
  REQUIRE(err != nullptr);
  CHECK(RunPackCommand(command, out, err) == 0);
  CHECK_THAT(Contents(out), Contains("packed 9 records of 4 classes") &&
                                Contains("into 1 shards in " + parent + "/out") &&
                                Contains("3 non-image files ignored"));
  CHECK_THAT(Contents(err), Contains("pack: wrote 9 / 9 records") &&
                                Contains("pack: verified 9 / 9 records"));
  auto env = NewPosixEnv();
  auto dataset = PackedDataset::Open(*env, parent + "/out");
  REQUIRE(dataset.ok());
  CHECK((*dataset)->count() == 9);

  // Again: OUT exists.
  CHECK(RunPackCommand(command, out, err) == 1);
  CHECK_THAT(Contents(err), Contains("emberctl: pack " + parent + "/src -> " + parent +
                                     "/out: " + parent + "/out: already exists"));
  command.overwrite = true;
  command.quiet = true;
  CHECK(RunPackCommand(command, out, err) == 0);
  command.format = "tar";
  CHECK(RunPackCommand(command, out, err) == 2);
  std::fclose(out);
  std::fclose(err);
}

TEST_CASE("RunPackCommand reports a failed final rename and leaves nothing behind") {
  const std::string parent = PackTestDir("command_rename");
  MakeImageFolder(parent + "/src", 2, 500);
  auto posix = NewPosixEnv();
  FaultEnv env(posix.get());
  env.FailRename(parent + "/out", FailedPrecondition("rename: Permission denied"));
  PackCommand command;
  command.src = parent + "/src";
  command.out = parent + "/out";
  command.quiet = true;
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  REQUIRE(out != nullptr);
  REQUIRE(err != nullptr);
  CHECK(RunPackCommand(env, command, out, err) == 1);
  CHECK(Contents(out).empty());
  CHECK(Contents(err) == "emberctl: pack " + parent + "/src -> " + parent + "/out: " + parent +
                             "/out: rename: Permission denied\n");
  CHECK(DirEntries(parent) == std::vector<std::string>{"src"});
  std::fclose(out);
  std::fclose(err);
}

}  // namespace
}  // namespace ember::pack
