#include "pack/pack_command.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "common/fault_env.h"
#include "common/temp_dir_testing.h"
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

TEST_CASE("RunPackCommand packs with the shard size and record alignment it is given") {
  const std::string parent = FreshTestDir("command_options");
  MakeImageFolder(parent + "/src", 3, 300'000);
  PackCommand command;
  command.src = parent + "/src";
  command.out = parent + "/out";
  command.shard_mib = 1;
  command.record_alignment = 512;
  command.quiet = true;
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  REQUIRE(out != nullptr);
  REQUIRE(err != nullptr);
  REQUIRE(RunPackCommand(command, out, err) == 0);
  CHECK(Contents(err).empty());
  auto env = NewPosixEnv();
  auto dataset = PackedDataset::Open(*env, parent + "/out");
  REQUIRE(dataset.ok());
  // 8 images of ~300 kB: 2.4 MB in shards of about 1 MiB.
  CHECK((*dataset)->shard_count() >= 3);
  bool off_default_alignment = false;
  for (uint64_t id = 0; id < (*dataset)->count(); ++id) {
    const PackedRecord record = (*dataset)->Get(id);
    CHECK(record.offset % 512 == 0);
    off_default_alignment |= record.offset % 4096 != 0;
  }
  CHECK(off_default_alignment);
  std::fclose(out);
  std::fclose(err);
}

TEST_CASE("RunPackCommand packs, prints a summary, and reports failures") {
  const std::string parent = FreshTestDir("command");
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
  const std::string parent = FreshTestDir("command_rename");
  MakeImageFolder(parent + "/src", 2, 500);
  auto posix = NewPosixEnv();
  FaultEnv env(posix.get());
  env.FailRename(parent + "/out", PermissionDenied("rename: Permission denied"));
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
