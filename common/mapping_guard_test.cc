#include "common/mapping_guard.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <string>

#include "common/env.h"
#include "common/temp_dir_testing.h"

namespace ember {
namespace {

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

TEST_CASE("a mapped file truncated under its reader reads zeros and says it shrank") {
  const std::string path = WriteTempFile("mapping_guard_shrink", std::string(3 * kPage, 'x'));
  auto env = NewPosixEnv();
  auto mapped = env->MapReadOnly(path);
  REQUIRE(mapped.ok());
  const MappedFile& file = **mapped;
  CHECK(file.data()[2 * kPage] == 'x');
  CHECK_FALSE(file.shrunk());

  REQUIRE(truncate(path.c_str(), static_cast<off_t>(kPage)) == 0);
  CHECK(file.data()[0] == 'x');           // still in the file
  CHECK(file.data()[2 * kPage + 7] == 0);  // past its new end: was SIGBUS, now zeros
  CHECK(file.shrunk());
  CHECK(file.ShrunkError().code() == StatusCode::kDataLoss);
  CHECK_THAT(file.ShrunkError().message(),
             Catch::StartsWith(path + ": the file shrank below the " +
                               std::to_string(3 * kPage) + " bytes"));
}

TEST_CASE("a fault outside every guarded mapping still ends the process") {
  const std::string path = WriteTempFile("mapping_guard_other", std::string(2 * kPage, 'y'));
  auto env = NewPosixEnv();
  auto guarded = env->MapReadOnly(path);  // installs the handler
  REQUIRE(guarded.ok());
  const int fd = open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  void* raw = mmap(nullptr, 2 * kPage, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  REQUIRE(raw != MAP_FAILED);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (truncate(path.c_str(), 0) != 0) _exit(3);
    volatile char c = static_cast<const char*>(raw)[kPage];  // not guarded: SIGBUS
    (void)c;
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGBUS);
  munmap(raw, 2 * kPage);
}

TEST_CASE("the table holds kMaxGuardedMappings; an unguarded one frees its slot") {
  std::atomic<bool> shrunk{false};
  auto fake = [](size_t i) { return reinterpret_cast<const void*>((i + 1) * 65536); };
  size_t guarded = 0;
  while (guarded <= kMaxGuardedMappings && GuardMapping(fake(guarded), 4096, &shrunk)) ++guarded;
  CHECK(guarded == kMaxGuardedMappings);  // no mapping of the cases before is left
  UnguardMapping(fake(7));
  UnguardMapping(fake(7));  // twice is fine
  CHECK(GuardMapping(fake(kMaxGuardedMappings + 1), 4096, &shrunk));
  CHECK_FALSE(GuardMapping(fake(kMaxGuardedMappings + 2), 4096, &shrunk));
  for (size_t i = 0; i <= kMaxGuardedMappings + 1; ++i) UnguardMapping(fake(i));
  CHECK(GuardMapping(fake(0), 4096, &shrunk));
  UnguardMapping(fake(0));
}

}  // namespace
}  // namespace ember
