#include "common/env.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "common/fault_env.h"
#include "common/temp_dir_testing.h"

namespace ember {
namespace {

TEST_CASE("ReadFile of a missing file is kNotFound naming the path") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("read_missing");
  auto result = env->ReadFile(dir + "/nope");
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == StatusCode::kNotFound);
  CHECK_THAT(result.status().message(), Catch::Contains(dir + "/nope"));
}

TEST_CASE("ReadFile of a directory is an error naming the path") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("read_dir");
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
  std::string dir = FreshTestDir("write");
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

TEST_CASE("RestrictToOwner makes a directory 0700 and a file 0600, follows no symlink") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("restrict");
  const mode_t old_umask = ::umask(022);
  REQUIRE(env->CreateDirs(dir + "/state").ok());
  REQUIRE(env->WriteFileAtomic(dir + "/state/f", "x").ok());
  struct stat st;
  REQUIRE(stat((dir + "/state/f").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0644);  // the umask's
  REQUIRE(env->RestrictToOwner(dir + "/state").ok());
  REQUIRE(env->RestrictToOwner(dir + "/state/f").ok());
  REQUIRE(stat((dir + "/state").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
  REQUIRE(stat((dir + "/state/f").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  ::umask(old_umask);
  REQUIRE(symlink((dir + "/state/f").c_str(), (dir + "/link").c_str()) == 0);
  const Status link = env->RestrictToOwner(dir + "/link");
  CHECK(link.code() == StatusCode::kFailedPrecondition);
  CHECK(link.message() == dir + "/link: not a directory or a regular file");
  CHECK(env->RestrictToOwner(dir + "/missing").code() == StatusCode::kNotFound);
}

TEST_CASE("WriteFileAtomic into a missing directory fails and names the path") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("write_missing");
  Status s = env->WriteFileAtomic(dir + "/no/such/f", "x");
  CHECK(s.code() == StatusCode::kNotFound);
  CHECK_THAT(s.message(), Catch::Contains(dir + "/no/such/f"));
}

TEST_CASE("CreateDirs makes parents, is idempotent, and refuses a file in the way") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("mkdirs");
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
  std::string dir = FreshTestDir("list");
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

TEST_CASE("CreateWriteSealedSharedMemory: only its own mapping writes; others map read-only") {
  auto env = NewPosixEnv();
  const size_t size = 2 * 4096;
  auto shm = env->CreateWriteSealedSharedMemory("ember-test-rows", size);
  REQUIRE(shm.ok());
  CHECK((fcntl((*shm)->fd(), F_GET_SEALS) & F_SEAL_FUTURE_WRITE) != 0);
  std::memcpy((*shm)->data(), "rows", 5);
  CHECK(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, (*shm)->fd(), 0) == MAP_FAILED);
  CHECK(pwrite((*shm)->fd(), "x", 1, 0) == -1);
  void* other = mmap(nullptr, size, PROT_READ, MAP_SHARED, (*shm)->fd(), 0);
  REQUIRE(other != MAP_FAILED);
  CHECK(std::strcmp(static_cast<const char*>(other), "rows") == 0);
  CHECK(mprotect(other, size, PROT_READ | PROT_WRITE) != 0);
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

std::string PatternBytes(size_t n) {
  std::string bytes(n, '\0');
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<char>(i * 31 + i / 251);
  return bytes;
}

TEST_CASE("OpenForRead reads any range, and a file that shrank is kDataLoss") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("readable");
  const std::string path = dir + "/data";
  const std::string contents = PatternBytes(100000);
  WriteTestFile(path, contents);

  auto file = env->OpenForRead(path);
  REQUIRE(file.ok());
  CHECK((*file)->path() == path);
  REQUIRE((*file)->Size() == contents.size());
  std::string all(contents.size(), '\0');
  REQUIRE((*file)->ReadAt(0, all.size(), &all[0]).ok());
  CHECK(all == contents);
  std::string middle(1000, '\0');
  REQUIRE((*file)->ReadAt(4095, middle.size(), &middle[0]).ok());
  CHECK(middle == contents.substr(4095, 1000));
  CHECK((*file)->ReadAt(contents.size(), 0, nullptr).ok());
  auto some = (*file)->ReadSome(contents.size() - 10, 100, &middle[0]);
  REQUIRE(some.ok());
  CHECK(*some == 10);
  (*file)->WillNeed();  // a hint; nothing to check but that it returns

  // Size() stays what it was at open; reads see the file end early.
  REQUIRE(truncate(path.c_str(), 5000) == 0);
  CHECK((*file)->Size() == contents.size());
  Status s = (*file)->ReadAt(4000, 2000, &all[0]);
  CHECK(s.code() == StatusCode::kDataLoss);
  CHECK(s.message() == path + ": truncated while reading: 1000 of 2000 bytes from byte 4000");
}

TEST_CASE("OpenForRead errors name the path; out of descriptors is kResourceExhausted") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("readable_errors");
  auto missing = env->OpenForRead(dir + "/missing");
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK_THAT(missing.status().message(), Catch::Contains(dir + "/missing: cannot open: "));
  auto directory = env->OpenForRead(dir);
  CHECK(directory.status().code() == StatusCode::kInvalidArgument);
  CHECK(directory.status().message() == dir + ": not a regular file (a directory)");

  // With the descriptor limit at the lowest free descriptor, open() fails with EMFILE.
  WriteTestFile(dir + "/f", "x");
  const int lowest_free = open("/dev/null", O_RDONLY | O_CLOEXEC);
  REQUIRE(lowest_free >= 0);
  close(lowest_free);
  struct rlimit saved;
  REQUIRE(getrlimit(RLIMIT_NOFILE, &saved) == 0);
  struct rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(lowest_free);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
  auto no_fds = env->OpenForRead(dir + "/f");
  REQUIRE(setrlimit(RLIMIT_NOFILE, &saved) == 0);
  CHECK(no_fds.status().code() == StatusCode::kResourceExhausted);
  CHECK_THAT(no_fds.status().message(), Catch::Contains(dir + "/f: cannot open: "));
  CHECK(env->OpenForRead(dir + "/f").ok());
}

TEST_CASE("a FIFO or a device is refused without blocking, by every way of reading a file") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("not_regular");
  const std::string fifo = dir + "/x.png";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  // Run on a thread: a blocking open() of a FIFO without a writer would never return.
  auto refused = std::async(std::launch::async, [&] {
    std::vector<Status> errors = {env->ReadFile(fifo).status(),
                                  env->OpenForRead(fifo).status(),
                                  env->MapReadOnly(fifo).status(),
                                  env->ReadFile("/dev/zero").status()};
    return errors;
  });
  if (refused.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    // Let the stuck open() return, so the test can end.
    const int writer = open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    refused.wait();
    if (writer >= 0) close(writer);
    FAIL("reading a FIFO blocked");
  }
  const std::vector<Status> errors = refused.get();
  for (size_t i = 0; i < 3; ++i) {
    INFO(errors[i].ToString());
    CHECK(errors[i].code() == StatusCode::kInvalidArgument);
    CHECK(errors[i].message() == fifo + ": not a regular file (a FIFO)");
  }
  CHECK(errors[3].message() == "/dev/zero: not a regular file (a character device)");
}

TEST_CASE("MapReadOnly maps the whole file read-only") {
  auto env = NewPosixEnv();
  const std::string path = FreshTestDir("map") + "/data";
  const std::string contents = PatternBytes(10000);
  WriteTestFile(path, contents);

  Result<std::unique_ptr<MappedFile>> file = env->MapReadOnly(path);
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

TEST_CASE("MapReadOnly of an empty file has no data") {
  auto env = NewPosixEnv();
  const std::string path = FreshTestDir("map_empty") + "/empty";
  WriteTestFile(path, "");
  Result<std::unique_ptr<MappedFile>> file = env->MapReadOnly(path);
  REQUIRE(file.ok());
  CHECK((*file)->size() == 0);
  CHECK((*file)->data() == nullptr);
  CHECK((*file)->Advise(MappedFile::Access::kRandom).ok());
  (*file)->WillNeed(0, 100);
}

TEST_CASE("MapReadOnly errors name the path") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("map_errors");
  Result<std::unique_ptr<MappedFile>> missing = env->MapReadOnly(dir + "/missing");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK_THAT(missing.status().message(), Catch::Contains(dir + "/missing"));
  Result<std::unique_ptr<MappedFile>> directory = env->MapReadOnly(dir);
  REQUIRE_FALSE(directory.ok());
  CHECK(directory.status().code() == StatusCode::kInvalidArgument);
  CHECK(directory.status().message() == dir + ": not a regular file (a directory)");
}

TEST_CASE("CreateWritableFile writes at offsets, syncs, closes, and never replaces") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("writable");
  const std::string path = dir + "/out";
  auto file = env->CreateWritableFile(path);
  REQUIRE(file.ok());
  CHECK((*file)->path() == path);
  const std::string big = PatternBytes(3 << 20);
  REQUIRE((*file)->WriteAt(8, big.data(), big.size()).ok());
  REQUIRE((*file)->WriteAt(0, "header!!", 8).ok());  // a positioned write, as shards do
  REQUIRE((*file)->Sync().ok());
  (*file)->DontNeed();
  REQUIRE((*file)->Close().ok());
  CHECK(*env->ReadFile(path) == "header!!" + big);

  auto again = env->CreateWritableFile(path);
  CHECK(again.status().code() == StatusCode::kAlreadyExists);
  CHECK_THAT(again.status().message(), Catch::Contains(path + ": create: "));
  CHECK(*env->ReadFile(path) == "header!!" + big);
  auto no_dir = env->CreateWritableFile(dir + "/none/out");
  CHECK(no_dir.status().code() == StatusCode::kNotFound);
  CHECK_THAT(no_dir.status().message(), Catch::Contains(dir + "/none/out"));

  // Destruction without Close closes the file; what was written stays.
  {
    auto unclosed = env->CreateWritableFile(dir + "/unclosed");
    REQUIRE(unclosed.ok());
    REQUIRE((*unclosed)->WriteAt(0, "abc", 3).ok());
  }
  CHECK(*env->ReadFile(dir + "/unclosed") == "abc");
}

TEST_CASE("OpenWritableFile appends to an existing file, truncates it and syncs its data") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("reopen");
  const std::string path = dir + "/journal";
  WriteTestFile(path, "0123456789");
  {
    auto file = env->OpenWritableFile(path);
    REQUIRE(file.ok());
    CHECK((*file)->path() == path);
    REQUIRE((*file)->WriteAt(10, "abc", 3).ok());
    REQUIRE((*file)->SyncData().ok());
    CHECK(ReadTestFile(path) == "0123456789abc");
    REQUIRE((*file)->Truncate(4).ok());
    REQUIRE((*file)->Sync().ok());
    CHECK(ReadTestFile(path) == "0123");
    REQUIRE((*file)->Truncate(6).ok());  // extends with zeros
    REQUIRE((*file)->Close().ok());
  }
  CHECK(ReadTestFile(path) == std::string("0123\0\0", 6));

  auto missing = env->OpenWritableFile(dir + "/none");
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK_THAT(missing.status().message(), Catch::Contains(dir + "/none: cannot open for writing"));
  CHECK_FALSE(env->FileExists(dir + "/none"));  // never created
  auto directory = env->OpenWritableFile(dir);
  REQUIRE_FALSE(directory.ok());
  CHECK_THAT(directory.status().message(), Catch::Contains(dir));
}

TEST_CASE("Rename, RenameNoReplace, Exchange, RemoveAll and SyncDir") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("rename");
  REQUIRE(env->WriteFileAtomic(dir + "/a", "A").ok());
  REQUIRE(env->WriteFileAtomic(dir + "/b", "B").ok());

  REQUIRE(env->Rename(dir + "/a", dir + "/c").ok());
  CHECK(*env->ReadFile(dir + "/c") == "A");
  CHECK_FALSE(env->FileExists(dir + "/a"));
  REQUIRE(env->Rename(dir + "/c", dir + "/b").ok());  // replaces
  CHECK(*env->ReadFile(dir + "/b") == "A");
  Status missing = env->Rename(dir + "/a", dir + "/d");
  CHECK(missing.code() == StatusCode::kNotFound);
  CHECK(missing.message() == dir + "/d: rename from " + dir + "/a: No such file or directory");

  REQUIRE(env->WriteFileAtomic(dir + "/e", "E").ok());
  Status exists = env->RenameNoReplace(dir + "/e", dir + "/b");
  CHECK(exists.code() == StatusCode::kAlreadyExists);
  CHECK_THAT(exists.message(), Catch::Contains(dir + "/b"));
  CHECK(*env->ReadFile(dir + "/b") == "A");
  CHECK(*env->ReadFile(dir + "/e") == "E");
  REQUIRE(env->RenameNoReplace(dir + "/e", dir + "/f").ok());
  CHECK(*env->ReadFile(dir + "/f") == "E");

  // Directories too: a full one is exchanged with a file.
  REQUIRE(env->CreateDirs(dir + "/sub/deeper").ok());
  REQUIRE(env->WriteFileAtomic(dir + "/sub/deeper/g", "G").ok());
  Result<bool> exchanged = env->Exchange(dir + "/sub", dir + "/f");
  REQUIRE(exchanged.ok());
  if (*exchanged) {  // false only on filesystems without RENAME_EXCHANGE
    CHECK(*env->ReadFile(dir + "/sub") == "E");
    CHECK(*env->ReadFile(dir + "/f/deeper/g") == "G");
    REQUIRE(env->Exchange(dir + "/sub", dir + "/f").ok());
  }
  CHECK(env->Exchange(dir + "/none", dir + "/f").status().code() == StatusCode::kNotFound);

  REQUIRE(env->RemoveAll(dir + "/sub").ok());
  CHECK_FALSE(env->FileExists(dir + "/sub"));
  REQUIRE(env->RemoveAll(dir + "/sub").ok());  // already gone
  REQUIRE(env->RemoveAll(dir + "/f").ok());    // a file
  CHECK(*env->ListDir(dir) == std::vector<std::string>{"b"});

  CHECK(env->SyncDir(dir).ok());
  Status no_dir = env->SyncDir(dir + "/none");
  CHECK(no_dir.code() == StatusCode::kNotFound);
  CHECK_THAT(no_dir.message(), Catch::Contains(dir + "/none"));
}

TEST_CASE("FaultEnv fails only the chosen paths and forwards the rest") {
  auto base = NewPosixEnv();
  std::string dir = FreshTestDir("fault");
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

TEST_CASE("FaultEnv fails reads, mappings, writes and renames of the chosen paths") {
  auto base = NewPosixEnv();
  const std::string dir = FreshTestDir("fault_files");
  FaultEnv env(base.get());
  const std::string a = dir + "/a";
  const std::string b = dir + "/b";
  const std::string contents = PatternBytes(5000);
  WriteTestFile(a, contents);
  WriteTestFile(b, contents);
  std::string buffer(contents.size(), '\0');

  env.FailReadAt(a, Internal("Input/output error"));
  env.ShortenReads(b, 100);
  env.FailMapReadOnly(a, ResourceExhausted("cannot map 5000 bytes: out of memory"));
  {
    auto file = env.OpenForRead(a);  // opens; reads fail
    REQUIRE(file.ok());
    CHECK((*file)->Size() == contents.size());
    Status s = (*file)->ReadAt(0, 10, &buffer[0]);
    CHECK(s.code() == StatusCode::kInternal);
    CHECK(s.message() == a + ": Input/output error");
  }
  {
    auto file = env.OpenForRead(b);  // its real size, but reads end at byte 100
    REQUIRE(file.ok());
    CHECK((*file)->Size() == contents.size());
    REQUIRE((*file)->ReadAt(50, 50, &buffer[0]).ok());
    CHECK(buffer.substr(0, 50) == contents.substr(50, 50));
    Status s = (*file)->ReadAt(0, contents.size(), &buffer[0]);
    CHECK(s.code() == StatusCode::kDataLoss);
    CHECK(s.message() == b + ": truncated while reading: 100 of 5000 bytes from byte 0");
  }
  auto mapped = env.MapReadOnly(a);
  CHECK(mapped.status().code() == StatusCode::kResourceExhausted);
  CHECK(mapped.status().message() == a + ": cannot map 5000 bytes: out of memory");
  REQUIRE(env.MapReadOnly(b).ok());

  env.FailWriteAt(dir + "/w", ResourceExhausted("No space left on device"));
  {
    auto file = env.CreateWritableFile(dir + "/w");  // created; writes fail
    REQUIRE(file.ok());
    Status s = (*file)->WriteAt(0, "x", 1);
    CHECK(s.code() == StatusCode::kResourceExhausted);
    CHECK(s.message() == dir + "/w: No space left on device");
    CHECK((*file)->Close().ok());
  }
  CHECK(base->ReadFile(dir + "/w")->empty());

  env.FailRename(b, Internal("rename refused"));
  CHECK(env.Rename(a, b).message() == b + ": rename refused");
  CHECK(env.RenameNoReplace(b, dir + "/c").message() == b + ": rename refused");
  CHECK(env.Exchange(a, b).status().message() == b + ": rename refused");
  CHECK(*base->ReadFile(a) == contents);
  CHECK(*base->ReadFile(b) == contents);
  REQUIRE(env.Rename(a, dir + "/c").ok());  // other paths are not affected

  env.DisableExchange();
  Result<bool> exchanged = env.Exchange(dir + "/c", dir + "/w");
  REQUIRE(exchanged.ok());
  CHECK_FALSE(*exchanged);
  CHECK(*base->ReadFile(dir + "/c") == contents);

  env.ClearFaults();
  auto file = env.OpenForRead(b);
  REQUIRE(file.ok());
  REQUIRE((*file)->ReadAt(0, contents.size(), &buffer[0]).ok());
  CHECK(buffer == contents);
  CHECK(env.MapReadOnly(dir + "/c").ok());
  CHECK(env.Rename(dir + "/c", a).ok());
}

TEST_CASE("FaultEnv fails writes of reopened files and fails or holds syncs at once") {
  auto base = NewPosixEnv();
  const std::string dir = FreshTestDir("fault_syncs");
  FaultEnv env(base.get());
  const std::string a = dir + "/a";
  WriteTestFile(a, "old");

  env.FailWriteAt(a, ResourceExhausted("No space left on device"));
  {
    auto file = env.OpenWritableFile(a);
    REQUIRE(file.ok());
    CHECK((*file)->WriteAt(3, "x", 1).message() == a + ": No space left on device");
    CHECK((*file)->Truncate(0).code() == StatusCode::kResourceExhausted);
  }
  CHECK(ReadTestFile(a) == "old");
  env.ClearFaults();

  auto file = env.OpenWritableFile(a);  // open before the faults: they apply at once
  REQUIRE(file.ok());
  REQUIRE((*file)->WriteAt(3, "new", 3).ok());
  REQUIRE((*file)->SyncData().ok());
  env.FailSync(a, Internal("Input/output error"));
  env.FailSync(dir, Internal("directory gone"));
  CHECK((*file)->Sync().message() == a + ": Input/output error");
  CHECK((*file)->SyncData().message() == a + ": Input/output error");
  CHECK(env.SyncDir(dir).message() == dir + ": directory gone");
  env.ClearFaults();
  CHECK((*file)->Sync().ok());
  CHECK(env.SyncDir(dir).ok());

  env.HoldSyncs(a);
  std::atomic<bool> synced{false};
  std::thread syncer([&] {
    CHECK((*file)->SyncData().ok());
    synced = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(synced);
  CHECK(env.SyncDir(dir).ok());  // only the file's syncs are held
  env.ClearFaults();
  syncer.join();
  CHECK(synced);
  CHECK(ReadTestFile(a) == "oldnew");
}

}  // namespace
}  // namespace ember
