// Client::OpenSharedMemory through a real emberd: the ranks of a job get one memfd over
// the unix socket, each maps it and sees the others' writes; the daemon keeps nothing
// once every rank has it.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstring>

#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

int MustOpen(Client& client, const std::string& job, const std::string& name, uint32_t rank,
             uint32_t world_size, uint64_t bytes) {
  Result<int> fd = client.OpenSharedMemory(job, name, rank, world_size, bytes);
  INFO(fd.status().ToString());
  REQUIRE(fd.ok());
  REQUIRE(*fd >= 0);
  return *fd;
}

char* MapShared(int fd, size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  REQUIRE(p != MAP_FAILED);
  return static_cast<char*>(p);
}

TEST_CASE("two ranks share one segment through emberd") {
  Daemon daemon;
  daemon.Start();
  auto rank0 = daemon.Connect();
  auto rank1 = daemon.Connect();
  const size_t bytes = 3 * 4096 + 8;

  const int fd0 = MustOpen(*rank0, "job", "allreduce", 0, 2, bytes);
  // A rank that disagrees on the size is refused, and the message says both sizes.
  Result<int> bad = rank1->OpenSharedMemory("job", "allreduce", 1, 2, 2 * bytes);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(bad.status().message(),
             Catch::Contains("'allreduce'") &&
                 Catch::Contains(std::to_string(bytes) + " bytes") &&
                 Catch::Contains(std::to_string(2 * bytes) + " bytes"));
  Result<int> bad_world = rank1->OpenSharedMemory("job", "allreduce", 1, 3, bytes);
  REQUIRE_FALSE(bad_world.ok());
  CHECK_THAT(bad_world.status().message(),
             Catch::Contains("world_size 2") && Catch::Contains("world_size 3"));
  const int fd1 = MustOpen(*rank1, "job", "allreduce", 1, 2, bytes);

  // Descriptors the caller owns, closed on exec, of the requested size.
  CHECK(fd0 != fd1);
  CHECK((fcntl(fd0, F_GETFD) & FD_CLOEXEC) != 0);
  CHECK((fcntl(fd1, F_GETFD) & FD_CLOEXEC) != 0);
  CHECK(lseek(fd0, 0, SEEK_END) == static_cast<off_t>(bytes));

  char* view0 = MapShared(fd0, bytes);
  char* view1 = MapShared(fd1, bytes);
  bool zero = true;
  for (size_t i = 0; i < bytes; ++i) zero &= view1[i] == 0;
  CHECK(zero);
  std::memcpy(view0 + bytes - 6, "rank0", 6);
  CHECK(std::strcmp(view1 + bytes - 6, "rank0") == 0);
  view1[0] = 1;
  CHECK(view0[0] == 1);

  // Both ranks have it: the daemon let go of it (when the client released the capability,
  // asynchronously), and the memory lives on in the ranks.
  CHECK(Eventually([&] { return CountMemfds(daemon.pid()) == 0; }));
  close(fd0);
  close(fd1);
  view1[1] = 2;
  CHECK(view0[1] == 2);

  // The same name again is a new, zero-filled segment (a new run of the job).
  const int again = MustOpen(*rank0, "job", "allreduce", 0, 2, bytes);
  char* fresh = MapShared(again, bytes);
  CHECK(fresh[0] == 0);
  munmap(fresh, bytes);
  close(again);

  // Bad arguments come back with the daemon's message.
  Result<int> huge = rank0->OpenSharedMemory("job", "huge", 0, 2, uint64_t{2} << 30);
  REQUIRE_FALSE(huge.ok());
  CHECK(huge.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(huge.status().message(), Catch::Contains("1073741824"));

  munmap(view0, bytes);
  munmap(view1, bytes);
  daemon.Stop();
}

}  // namespace
}  // namespace ember::testing
