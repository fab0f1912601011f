#include "common/env_wrapper.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/mem_env.h"

namespace ember {
namespace {

// Overrides the clock only.
class StoppedClockEnv final : public EnvWrapper {
 public:
  explicit StoppedClockEnv(Env* target) : EnvWrapper(target) {}

  uint64_t NowMicros() override { return 42; }
};

std::string Refusal(const std::string& path) { return path + ": MemEnv is read-only"; }

TEST_CASE("an EnvWrapper uses what it overrides and forwards every other call") {
  MemEnv mem;
  mem.AddFile("/d/a", "hello");
  StoppedClockEnv env(&mem);
  CHECK(env.target() == &mem);

  // MemEnv's clock advances by one on every call: the wrapper's never reached it.
  CHECK(env.NowMicros() == 42);
  CHECK(env.NowMicros() == 42);
  CHECK(mem.NowMicros() == 1);

  // The MemEnv's file, its directory and a path it lacks, as the MemEnv sees them.
  struct Probe {
    std::string path;
    bool exists;
    bool directory;
  };
  for (const Probe& probe : {Probe{"/d/a", true, false}, Probe{"/d", true, true},
                             Probe{"/d/b", false, false}}) {
    INFO(probe.path);
    CHECK(env.FileExists(probe.path) == probe.exists);
    CHECK(env.IsDirectory(probe.path) == probe.directory);
  }
  auto names = env.ListDir("/d");
  REQUIRE(names.ok());
  CHECK(*names == std::vector<std::string>{"a"});
  auto file = env.OpenForRead("/d/a");
  REQUIRE(file.ok());
  CHECK((*file)->Size() == 5);
  auto mapped = env.MapReadOnly("/d/a");
  REQUIRE(mapped.ok());
  CHECK(std::string((*mapped)->data(), (*mapped)->size()) == "hello");
  auto read = env.ReadFile("/d/a");
  REQUIRE(read.ok());
  CHECK(*read == "hello");

  // MemEnv refuses every write, naming the path it was given.
  CHECK(env.WriteFileAtomic("/w", "x").message() == Refusal("/w"));
  CHECK(env.CreateDirs("/c").message() == Refusal("/c"));
  CHECK(env.CreateSharedMemory("shm", 8).status().message() == Refusal("shm"));
  CHECK(env.CreateWritableFile("/n").status().message() == Refusal("/n"));
  CHECK(env.OpenWritableFile("/o").status().message() == Refusal("/o"));
  CHECK(env.Rename("/d/a", "/r").message() == Refusal("/r"));
  CHECK(env.RenameNoReplace("/d/a", "/q").message() == Refusal("/q"));
  CHECK(env.Exchange("/d/a", "/x").status().message() == Refusal("/x"));
  CHECK(env.RemoveAll("/d").message() == Refusal("/d"));
  CHECK(env.SyncDir("/s").message() == Refusal("/s"));
  CHECK(env.RestrictToOwner("/d").message() == Refusal("/d"));
}

}  // namespace
}  // namespace ember
