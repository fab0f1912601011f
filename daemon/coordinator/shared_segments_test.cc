#include "daemon/coordinator/shared_segments.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "common/fault_env.h"

namespace ember::daemon {
namespace {

// Owns the real Env that TestEnv forwards to (a base, so that it is built first).
struct PosixEnvHolder {
  std::unique_ptr<Env> posix = NewPosixEnv();
};

// The real Env with a clock the test moves, and shared memory that can be made to fail.
class TestEnv final : private PosixEnvHolder, public FaultEnv {
 public:
  TestEnv() : FaultEnv(posix.get()) {}

  uint64_t NowMicros() override { return now_micros; }
  Result<std::unique_ptr<SharedMemory>> CreateSharedMemory(const std::string& name,
                                                           size_t size) override {
    ++created;
    if (!shm_error.ok()) return shm_error;
    return FaultEnv::CreateSharedMemory(name, size);
  }

  uint64_t now_micros = 1000;
  int created = 0;
  Status shm_error;
};

std::shared_ptr<SharedMemory> MustOpen(SharedSegments& segments, const std::string& job,
                                       const std::string& name, uint32_t rank,
                                       uint32_t world_size, uint64_t bytes) {
  auto r = segments.Open(job, name, rank, world_size, bytes);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  REQUIRE(*r != nullptr);
  return *r;
}

Status OpenError(SharedSegments& segments, const std::string& job, const std::string& name,
                 uint32_t rank, uint32_t world_size, uint64_t bytes) {
  auto r = segments.Open(job, name, rank, world_size, bytes);
  REQUIRE_FALSE(r.ok());
  return r.status();
}

std::string FdTarget(int fd) {
  char link[PATH_MAX] = {};
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = readlink(path.c_str(), link, sizeof(link) - 1);
  return n > 0 ? std::string(link, static_cast<size_t>(n)) : std::string();
}

TEST_CASE("the ranks of one (job, name) get the same zero-filled segment") {
  TestEnv env;
  SharedSegments segments(&env);
  auto a = MustOpen(segments, "j", "grad", 0, 3, 10000);
  auto b = MustOpen(segments, "j", "grad", 2, 3, 10000);
  CHECK(a == b);
  CHECK(env.created == 1);
  CHECK(a->size() == 10000);
  const auto* bytes = static_cast<const unsigned char*>(a->data());
  bool zero = true;
  for (size_t i = 0; i < a->size(); ++i) zero &= bytes[i] == 0;
  CHECK(zero);
  CHECK_THAT(FdTarget(a->fd()), Catch::Contains("memfd:ember-shm-j-grad"));
  // Sealed against resizing only: ranks may write.
  const int seals = fcntl(a->fd(), F_GET_SEALS);
  CHECK((seals & F_SEAL_GROW) != 0);
  CHECK((seals & F_SEAL_SHRINK) != 0);
  CHECK((seals & F_SEAL_WRITE) == 0);
  CHECK((seals & F_SEAL_FUTURE_WRITE) == 0);
  CHECK(segments.NumPending() == 1);
}

TEST_CASE("segments are distinct per name and per job") {
  TestEnv env;
  SharedSegments segments(&env);
  auto a = MustOpen(segments, "j", "grad", 0, 2, 4096);
  auto b = MustOpen(segments, "j", "params", 0, 2, 4096);
  auto c = MustOpen(segments, "k", "grad", 0, 2, 4096);
  CHECK(a != b);
  CHECK(a != c);
  CHECK(b != c);
  CHECK(a->fd() != b->fd());
  CHECK(a->fd() != c->fd());
  CHECK(segments.NumPending() == 3);
  CHECK(MustOpen(segments, "k", "grad", 1, 2, 4096) == c);
}

TEST_CASE("world_size or bytes unlike the first call's is kInvalidArgument naming both") {
  TestEnv env;
  SharedSegments segments(&env);
  auto first = MustOpen(segments, "j", "grad", 0, 4, 8192);

  Status bytes = OpenError(segments, "j", "grad", 1, 4, 4096);
  CHECK(bytes.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(bytes.message(), Catch::Contains("job 'j'") && Catch::Contains("'grad'") &&
                                  Catch::Contains("8192 bytes") && Catch::Contains("4096 bytes"));

  Status world = OpenError(segments, "j", "grad", 1, 2, 8192);
  CHECK(world.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(world.message(),
             Catch::Contains("world_size 4") && Catch::Contains("world_size 2"));

  // Refused calls do not count as ranks: the three others still get the segment.
  for (uint32_t rank = 1; rank < 4; ++rank) {
    CHECK(MustOpen(segments, "j", "grad", rank, 4, 8192) == first);
  }
  CHECK(segments.NumPending() == 0);
}

TEST_CASE("a world larger than max_world_size is refused before a segment is made") {
  TestEnv env;
  SharedSegmentLimits limits;
  limits.max_world_size = 1024;
  SharedSegments segments(&env, limits);
  Status huge = OpenError(segments, "j", "grad", 0, 16777216, 4096);
  CHECK(huge.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(huge.message(),
             Catch::EndsWith("world_size: 16777216 is more than 1024 ranks (max_world_size)"));
  CHECK(env.created == 0);
  CHECK(segments.NumPending() == 0);
}

TEST_CASE("a segment is forgotten once every rank has it; the next call makes a new one") {
  TestEnv env;
  SharedSegments segments(&env);
  auto a = MustOpen(segments, "j", "grad", 1, 2, 4096);
  static_cast<char*>(a->data())[0] = 7;
  auto b = MustOpen(segments, "j", "grad", 0, 2, 4096);
  CHECK(a == b);
  CHECK(segments.NumPending() == 0);

  // A new run of the job (even with another size) starts from a fresh, zeroed segment.
  auto c = MustOpen(segments, "j", "grad", 0, 2, 8192);
  CHECK(c != a);
  CHECK(c->size() == 8192);
  CHECK(static_cast<char*>(c->data())[0] == 0);
  CHECK(static_cast<char*>(a->data())[0] == 7);  // the old one lives on with its holders
  CHECK(env.created == 2);

  // world_size 1: never pending.
  auto solo = MustOpen(segments, "j", "solo", 0, 1, 4096);
  CHECK(MustOpen(segments, "j", "solo", 0, 1, 4096) != solo);
  CHECK(segments.NumPending() == 1);  // "grad" of the new run
}

TEST_CASE("Pending lists at most kMaxRanksListed missing ranks, of the jobs asked for") {
  TestEnv env;
  SharedSegments segments(&env);
  MustOpen(segments, "wide", "grad", 1, 5000, 4096);
  MustOpen(segments, "narrow", "grad", 0, 2, 4096);
  const std::vector<PendingSegment> wide =
      segments.Pending([](const std::string& job) { return job == "wide"; });
  REQUIRE(wide.size() == 1);
  REQUIRE(wide[0].missing_ranks.size() == kMaxRanksListed);
  CHECK(wide[0].missing_ranks[0] == 0);
  CHECK(wide[0].missing_ranks[1] == 2);  // rank 1 opened it
  CHECK(wide[0].missing_unlisted == 4999 - kMaxRanksListed);
  CHECK(segments.Pending().size() == 2);
}

TEST_CASE("a rank that asks again gets the same segment without taking another's place") {
  TestEnv env;
  SharedSegments segments(&env);
  auto a = MustOpen(segments, "j", "grad", 0, 3, 4096);
  CHECK(MustOpen(segments, "j", "grad", 0, 3, 4096) == a);  // a retry by rank 0
  CHECK(MustOpen(segments, "j", "grad", 2, 3, 4096) == a);
  CHECK(MustOpen(segments, "j", "grad", 2, 3, 4096) == a);  // and by rank 2
  CHECK(segments.NumPending() == 1);  // rank 1 has not asked yet
  env.now_micros += 2500000;
  const std::vector<PendingSegment> pending = segments.Pending();
  REQUIRE(pending.size() == 1);
  CHECK(pending[0].job == "j");
  CHECK(pending[0].name == "grad");
  CHECK(pending[0].world_size == 3);
  CHECK(pending[0].bytes == 4096);
  CHECK(pending[0].missing_ranks == std::vector<uint32_t>{1});
  CHECK(pending[0].age_micros == 2500000);
  CHECK(MustOpen(segments, "j", "grad", 1, 3, 4096) == a);
  CHECK(segments.Pending().empty());
  CHECK(segments.NumPending() == 0);
  CHECK(env.created == 1);
  // After every rank has it, a call is a new run: a new segment.
  CHECK(MustOpen(segments, "j", "grad", 0, 3, 4096) != a);
}

TEST_CASE("a pending segment is dropped after its time to live") {
  TestEnv env;
  SharedSegmentLimits limits;
  limits.ttl_micros = 1000000;
  SharedSegments segments(&env, limits);
  auto a = MustOpen(segments, "j", "grad", 0, 2, 4096);
  MustOpen(segments, "j", "other", 0, 3, 4096);

  env.now_micros += limits.ttl_micros - 1;
  CHECK(segments.NumPending() == 2);
  MustOpen(segments, "j", "late", 0, 2, 4096);  // any Open sweeps; nothing has expired yet
  CHECK(segments.NumPending() == 3);

  env.now_micros += 1;  // "grad" and "other" are now ttl old
  auto b = MustOpen(segments, "j", "grad", 1, 2, 4096);
  CHECK(b != a);
  CHECK(segments.NumPending() == 2);  // "late" and the new "grad"
  // The expired one's mismatch no longer matters: a new segment with new values.
  MustOpen(segments, "j", "other", 0, 2, 100);
  CHECK(segments.NumPending() == 3);
}

TEST_CASE("at most max_pending segments are pending") {
  TestEnv env;
  SharedSegmentLimits limits;
  limits.max_pending = 2;
  limits.ttl_micros = 1000;
  SharedSegments segments(&env, limits);
  MustOpen(segments, "j", "a", 0, 2, 4096);
  MustOpen(segments, "j", "b", 0, 2, 4096);
  Status full = OpenError(segments, "j", "c", 0, 2, 4096);
  CHECK(full.code() == StatusCode::kResourceExhausted);
  CHECK_THAT(full.message(), Catch::Contains("'c'") && Catch::Contains("2 segments"));
  // Pending ones can still be joined, and one that completes frees a place.
  MustOpen(segments, "j", "a", 1, 2, 4096);
  MustOpen(segments, "j", "c", 0, 2, 4096);
  // Expiry frees places too.
  env.now_micros += limits.ttl_micros;
  MustOpen(segments, "j", "d", 0, 2, 4096);
  MustOpen(segments, "j", "e", 0, 2, 4096);
  CHECK(segments.NumPending() == 2);
}

TEST_CASE("bad arguments are kInvalidArgument") {
  TestEnv env;
  SharedSegmentLimits limits;
  SharedSegments segments(&env, limits);
  CHECK(OpenError(segments, "", "grad", 0, 2, 4096).code() == StatusCode::kInvalidArgument);
  CHECK(OpenError(segments, "j", "", 0, 2, 4096).code() == StatusCode::kInvalidArgument);
  Status world = OpenError(segments, "j", "grad", 0, 0, 4096);
  CHECK(world.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(world.message(), Catch::Contains("world_size"));
  Status rank = OpenError(segments, "j", "grad", 2, 2, 4096);
  CHECK(rank.code() == StatusCode::kInvalidArgument);
  CHECK(rank.message() == "job 'j': shared memory 'grad': rank 2 is not below world_size 2");
  Status zero = OpenError(segments, "j", "grad", 0, 2, 0);
  CHECK(zero.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(zero.message(), Catch::Contains("bytes"));
  Status big = OpenError(segments, "j", "grad", 0, 2, limits.max_bytes + 1);
  CHECK(big.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(big.message(), Catch::Contains(std::to_string(limits.max_bytes + 1)) &&
                                Catch::Contains("1073741824 bytes (1 GiB)"));
  CHECK(env.created == 0);
  CHECK(segments.NumPending() == 0);
}

TEST_CASE("a failure to create the memfd names the job and segment and keeps nothing") {
  TestEnv env;
  SharedSegments segments(&env);
  env.shm_error = ResourceExhausted("memfd_create: Too many open files");
  Status s = OpenError(segments, "j", "grad", 0, 2, 4096);
  CHECK(s.code() == StatusCode::kResourceExhausted);
  CHECK_THAT(s.message(), Catch::StartsWith("job 'j': shared memory 'grad': memfd_create"));
  CHECK(segments.NumPending() == 0);
  env.shm_error = Status::Ok();
  MustOpen(segments, "j", "grad", 0, 2, 4096);
}

TEST_CASE("a long job and name still make a valid memfd name") {
  TestEnv env;
  SharedSegments segments(&env);
  auto a = MustOpen(segments, std::string(300, 'j'), std::string(300, 'n'), 0, 1, 4096);
  CHECK_THAT(FdTarget(a->fd()), Catch::Contains("memfd:ember-shm-jjj"));
}

TEST_CASE("writes through one mapping of the fd are seen through another") {
  TestEnv env;
  SharedSegments segments(&env);
  const size_t size = 2 * 4096 + 24;
  auto a = MustOpen(segments, "j", "grad", 0, 2, size);
  auto b = MustOpen(segments, "j", "grad", 1, 2, size);
  REQUIRE(a == b);
  // As two ranks would: each maps the descriptor it was given, read-write and shared.
  void* one = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd(), 0);
  REQUIRE(one != MAP_FAILED);
  void* two = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd(), 0);
  REQUIRE(two != MAP_FAILED);
  std::memcpy(static_cast<char*>(one) + size - 6, "hello", 6);
  CHECK(std::strcmp(static_cast<const char*>(two) + size - 6, "hello") == 0);
  static_cast<char*>(two)[0] = 42;
  CHECK(static_cast<const char*>(one)[0] == 42);
  munmap(one, size);
  munmap(two, size);
}

TEST_CASE("concurrent ranks all get the same segment") {
  TestEnv env;
  SharedSegments segments(&env);
  constexpr uint32_t kRanks = 8;
  std::vector<std::shared_ptr<SharedMemory>> got(kRanks);
  std::vector<Status> errors(kRanks);
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      auto s = segments.Open("j", "grad", r, kRanks, 4096);
      if (s.ok()) got[r] = *s; else errors[r] = s.status();
    });
  }
  for (std::thread& t : threads) t.join();
  for (uint32_t r = 0; r < kRanks; ++r) {
    INFO("rank " << r << ": " << errors[r].ToString());
    REQUIRE(got[r] != nullptr);
    CHECK(got[r] == got[0]);
  }
  CHECK(env.created == 1);
  CHECK(segments.NumPending() == 0);
}

TEST_CASE("one uid's jobs have at most max_pending_per_owner segments pending") {
  TestEnv env;
  SharedSegmentLimits limits;
  limits.max_pending_per_owner = 2;
  SharedSegments segments(&env, limits);
  Principal alice;
  alice.uid = 1001;
  Principal bob;
  bob.uid = 1002;
  Principal root;
  root.uid = 0;
  root.privileged = true;
  REQUIRE(segments.Open("a1", "s", 0, 2, 64, alice).ok());
  REQUIRE(segments.Open("a2", "s", 0, 2, 64, alice).ok());
  auto third = segments.Open("a3", "s", 0, 2, 64, alice);
  REQUIRE(third.status().code() == StatusCode::kResourceExhausted);
  CHECK(third.status().message().find("2 segments of uid 1001's jobs are already waiting") !=
        std::string::npos);
  CHECK(segments.Open("b1", "s", 0, 2, 64, bob).ok());
  CHECK(segments.Open("r1", "s", 0, 2, 64, root).ok());
  CHECK(segments.Open("r2", "s", 0, 2, 64, root).ok());
  CHECK(segments.Open("r3", "s", 0, 2, 64, root).ok());
  // A rank joining a pending segment is not a new one; once complete, it frees a place.
  REQUIRE(segments.Open("a1", "s", 1, 2, 64, alice).ok());
  CHECK(segments.Open("a3", "s", 0, 2, 64, alice).ok());
}
}  // namespace
}  // namespace ember::daemon
