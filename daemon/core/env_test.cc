#include "daemon/core/env.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "daemon/core/fault_env.h"

namespace ember::daemon {
namespace {

// A fresh, empty directory under $TEST_TMPDIR for one test case.
std::string TestDir(Env& env, const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  REQUIRE(tmp != nullptr);
  std::string dir = std::string(tmp) + "/env_test/" + name;
  REQUIRE(std::system(("rm -rf '" + dir + "'").c_str()) == 0);
  REQUIRE(env.CreateDirs(dir).ok());
  return dir;
}

TEST_CASE("ReadFile of a missing file is kNotFound naming the path") {
  auto env = NewPosixEnv();
  std::string dir = TestDir(*env, "read_missing");
  auto result = env->ReadFile(dir + "/nope");
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == StatusCode::kNotFound);
  CHECK_THAT(result.status().message(), Catch::Contains(dir + "/nope"));
}

TEST_CASE("ReadFile of a directory is an error naming the path") {
  auto env = NewPosixEnv();
  std::string dir = TestDir(*env, "read_dir");
  auto result = env->ReadFile(dir);
  REQUIRE_FALSE(result.ok());
  CHECK_THAT(result.status().message(), Catch::Contains(dir));
}

TEST_CASE("ReadFile reads files whose size stat does not report") {
  auto env = NewPosixEnv();
  auto result = env->ReadFile("/proc/self/status");
  REQUIRE(result.ok());
  CHECK_THAT(*result, Catch::Contains("Pid:"));
}

TEST_CASE("WriteFileAtomic creates, replaces and leaves no temporary files") {
  auto env = NewPosixEnv();
  std::string dir = TestDir(*env, "write");
  std::string path = dir + "/f.txt";

  REQUIRE(env->WriteFileAtomic(path, "first").ok());
  CHECK(*env->ReadFile(path) == "first");

  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + i / 4096);
  REQUIRE(env->WriteFileAtomic(path, big).ok());
  CHECK(*env->ReadFile(path) == big);

  REQUIRE(env->WriteFileAtomic(path, "").ok());
  CHECK(env->ReadFile(path)->empty());

  auto names = env->ListDir(dir);
  REQUIRE(names.ok());
  CHECK(*names == std::vector<std::string>{"f.txt"});
}

TEST_CASE("WriteFileAtomic into a missing directory fails and names the path") {
  auto env = NewPosixEnv();
  std::string dir = TestDir(*env, "write_missing");
  Status s = env->WriteFileAtomic(dir + "/no/such/f", "x");
  CHECK(s.code() == StatusCode::kNotFound);
  CHECK_THAT(s.message(), Catch::Contains(dir + "/no/such/f"));
}

TEST_CASE("CreateDirs makes parents, is idempotent, and refuses a file in the way") {
  auto env = NewPosixEnv();
  std::string dir = TestDir(*env, "mkdirs");
  REQUIRE(env->CreateDirs(dir + "/a/b/c/").ok());
  CHECK(env->IsDirectory(dir + "/a/b/c"));
  REQUIRE(env->CreateDirs(dir + "/a/b/c").ok());

  REQUIRE(env->WriteFileAtomic(dir + "/file", "x").ok());
  CHECK(env->FileExists(dir + "/file"));
  CHECK_FALSE(env->IsDirectory(dir + "/file"));
  Status s = env->CreateDirs(dir + "/file/sub");
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.message(), Catch::Contains(dir + "/file"));
  CHECK_FALSE(env->FileExists(dir + "/missing"));
  CHECK_FALSE(env->IsDirectory(dir + "/missing"));
}

TEST_CASE("ListDir returns sorted names without dot entries") {
  auto env = NewPosixEnv();
  std::string dir = TestDir(*env, "list");
  for (const char* name : {"zeta", "alpha", "Mid", "beta"}) {
    REQUIRE(env->WriteFileAtomic(dir + "/" + name, name).ok());
  }
  REQUIRE(env->CreateDirs(dir + "/dir").ok());
  auto names = env->ListDir(dir);
  REQUIRE(names.ok());
  CHECK(*names == std::vector<std::string>{"Mid", "alpha", "beta", "dir", "zeta"});

  auto missing = env->ListDir(dir + "/none");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK_THAT(missing.status().message(), Catch::Contains(dir + "/none"));
}

TEST_CASE("CreateSharedMemory gives a sealed, zeroed, shared, named memfd") {
  auto env = NewPosixEnv();
  const size_t size = 3 * 4096 + 100;
  auto shm_or = env->CreateSharedMemory("ember-test-ring", size);
  REQUIRE(shm_or.ok());
  std::unique_ptr<SharedMemory> shm = std::move(shm_or).value();
  REQUIRE(shm->data() != nullptr);
  CHECK(shm->size() == size);

  const auto* bytes = static_cast<const unsigned char*>(shm->data());
  bool all_zero = true;
  for (size_t i = 0; i < size; ++i) all_zero &= bytes[i] == 0;
  CHECK(all_zero);

  char link[PATH_MAX] = {};
  std::string fd_path = "/proc/self/fd/" + std::to_string(shm->fd());
  ssize_t n = readlink(fd_path.c_str(), link, sizeof(link) - 1);
  REQUIRE(n > 0);
  // The kernel shows "/memfd:NAME (deleted)".
  CHECK_THAT(std::string(link, static_cast<size_t>(n)), Catch::Contains("memfd:ember-test-ring"));

  int seals = fcntl(shm->fd(), F_GET_SEALS);
  CHECK((seals & F_SEAL_SHRINK) != 0);
  CHECK((seals & F_SEAL_GROW) != 0);
  CHECK((seals & F_SEAL_SEAL) != 0);
  CHECK((seals & F_SEAL_WRITE) == 0);
  CHECK(ftruncate(shm->fd(), 1) != 0);
  CHECK(ftruncate(shm->fd(), static_cast<off_t>(size * 2)) != 0);
  CHECK((fcntl(shm->fd(), F_GETFD) & FD_CLOEXEC) != 0);

  // A second mapping of the descriptor (as a trainer would make) sees the writes.
  void* other = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, shm->fd(), 0);
  REQUIRE(other != MAP_FAILED);
  std::memcpy(static_cast<char*>(shm->data()) + size - 5, "ring", 5);
  CHECK(std::strcmp(static_cast<const char*>(other) + size - 5, "ring") == 0);
  munmap(other, size);
}

TEST_CASE("SharedMemory closes its descriptor on destruction") {
  auto env = NewPosixEnv();
  auto shm = env->CreateSharedMemory("ember-test-close", 4096);
  REQUIRE(shm.ok());
  int fd = (*shm)->fd();
  CHECK(fcntl(fd, F_GETFD) != -1);
  shm->reset();
  CHECK(fcntl(fd, F_GETFD) == -1);
}

TEST_CASE("CreateSharedMemory rejects size 0") {
  auto env = NewPosixEnv();
  auto shm = env->CreateSharedMemory("ember-test-empty", 0);
  REQUIRE_FALSE(shm.ok());
  CHECK(shm.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(shm.status().message(), Catch::Contains("ember-test-empty"));
}

TEST_CASE("NowMicros is monotonic and advances") {
  auto env = NewPosixEnv();
  uint64_t a = env->NowMicros();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  uint64_t b = env->NowMicros();
  CHECK(b >= a + 4000);
  CHECK(b < a + 5000000);
}

TEST_CASE("FaultEnv fails only the chosen paths and forwards the rest") {
  auto base = NewPosixEnv();
  std::string dir = TestDir(*base, "fault");
  FaultEnv env(base.get());
  const std::string a = dir + "/a";
  const std::string b = dir + "/b";
  REQUIRE(env.WriteFileAtomic(a, "old").ok());

  env.FailWriteFileAtomic(a, ResourceExhausted("disk full"));
  env.FailReadFile(b, DataLoss("bad sector"));
  Status w = env.WriteFileAtomic(a, "new");
  CHECK(w.code() == StatusCode::kResourceExhausted);
  CHECK(*base->ReadFile(a) == "old");
  CHECK(env.WriteCount(a) == 2);
  REQUIRE(env.WriteFileAtomic(b, "b").ok());
  CHECK(env.ReadFile(b).status().code() == StatusCode::kDataLoss);
  CHECK(*env.ReadFile(a) == "old");

  env.FailReadFile(a, Status::Ok());
  CHECK(env.ReadFile(a).status().code() == StatusCode::kInternal);

  env.ClearFaults();
  REQUIRE(env.WriteFileAtomic(a, "new").ok());
  CHECK(*env.ReadFile(a) == "new");
  CHECK(*env.ReadFile(b) == "b");
  CHECK(env.IsDirectory(dir));
  CHECK(env.ListDir(dir)->size() == 2);
}

}  // namespace
}  // namespace ember::daemon
