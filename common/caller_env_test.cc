#include "common/caller_env.h"

#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/temp_dir_testing.h"

namespace ember {
namespace {

constexpr uid_t kUser = 4242;
constexpr gid_t kUserGroup = 4242;
constexpr gid_t kTeam = 5005;

Credentials User() { return Credentials{kUser, kUserGroup, {kUserGroup}}; }

bool CanMakeOtherUsersFiles() {
  if (geteuid() == 0) return true;
  WARN("skipped: needs root to make files other users own");
  return false;
}

// A fresh directory under /tmp (mode 0755): $TEST_TMPDIR lies under a home directory
// other uids cannot search, which would hide every other check.
class SearchableDir {
 public:
  SearchableDir() {
    char name[] = "/tmp/caller_env_test.XXXXXX";
    REQUIRE(mkdtemp(name) != nullptr);
    path_ = name;
    chmod(path_.c_str(), 0755);
  }
  ~SearchableDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

  std::string File(const std::string& name, mode_t mode, uid_t uid = 0, gid_t gid = 0) const {
    const std::string p = path_ + "/" + name;
    WriteTestFile(p, "contents of " + name);
    REQUIRE(chmod(p.c_str(), mode) == 0);
    REQUIRE(chown(p.c_str(), uid, gid) == 0);
    return p;
  }
  std::string Dir(const std::string& name, mode_t mode, uid_t uid = 0, gid_t gid = 0) const {
    const std::string p = path_ + "/" + name;
    REQUIRE(mkdir(p.c_str(), mode) == 0);
    REQUIRE(chmod(p.c_str(), mode) == 0);
    REQUIRE(chown(p.c_str(), uid, gid) == 0);
    return p;
  }

 private:
  std::string path_;
};

// What most cases start from: a searchable directory, the daemon's Env, and the
// user's view of it.
struct CallerEnvFixture {
  SearchableDir dir;
  std::unique_ptr<Env> base = NewPosixEnv();
  std::unique_ptr<Env> env = NewCallerEnv(base.get(), User());
};

TEST_CASE("ModeAllows reads the owner, group and other bits") {
  struct stat st {};
  st.st_mode = S_IFREG | 0640;
  st.st_uid = 1;
  st.st_gid = kTeam;
  CHECK_FALSE(ModeAllows(User(), st, R_OK));
  Credentials team = User();
  team.groups.push_back(kTeam);
  CHECK(ModeAllows(team, st, R_OK));
  CHECK_FALSE(ModeAllows(team, st, W_OK));
  st.st_uid = kUser;
  CHECK(ModeAllows(User(), st, R_OK | W_OK));
  CHECK_FALSE(ModeAllows(User(), st, X_OK));
  CHECK(ModeAllows(Credentials{0, 0, {}}, st, R_OK | W_OK));
  CHECK_FALSE(ModeAllows(Credentials{0, 0, {}}, st, X_OK));
}

TEST_CASE_METHOD(CallerEnvFixture,
                 "CallerEnv reads what the user may read and names what it refuses") {
  if (!CanMakeOtherUsersFiles()) return;

  const std::string open = dir.File("open", 0644);
  const std::string secret = dir.File("secret", 0600);
  auto read = env->ReadFile(open);
  REQUIRE(read.ok());
  CHECK(*read == "contents of open");

  auto denied = env->ReadFile(secret);
  REQUIRE(denied.status().code() == StatusCode::kPermissionDenied);
  CHECK(denied.status().message() == secret + ": permission denied for uid 4242 (read)");
  CHECK(env->OpenForRead(secret).status().code() == StatusCode::kPermissionDenied);
  CHECK(env->MapReadOnly(secret).status().code() == StatusCode::kPermissionDenied);
  CHECK(base->ReadFile(secret).ok());  // the daemon itself still can

  auto mapped = env->MapReadOnly(open);
  REQUIRE(mapped.ok());
  CHECK((*mapped)->path() == open);  // errors from the file name it, not a /proc path

  SECTION("a group the user is in counts") {
    const std::string team_file = dir.File("team", 0640, 0, kTeam);
    CHECK(env->ReadFile(team_file).status().code() == StatusCode::kPermissionDenied);
    Credentials team = User();
    team.groups.push_back(kTeam);
    CHECK(NewCallerEnv(base.get(), team)->ReadFile(team_file).ok());
  }
}

TEST_CASE_METHOD(CallerEnvFixture,
                 "CallerEnv needs every directory on the way to be searchable") {
  if (!CanMakeOtherUsersFiles()) return;
  const std::string closed = dir.Dir("closed", 0700);
  const std::string inside = closed + "/file";
  WriteTestFile(inside, "x");
  chmod(inside.c_str(), 0644);

  auto denied = env->ReadFile(inside);
  REQUIRE(denied.status().code() == StatusCode::kPermissionDenied);
  CHECK(denied.status().message() == inside + ": permission denied for uid 4242 (search " + closed + ")");
  CHECK_FALSE(env->FileExists(inside));
  CHECK(base->FileExists(inside));
  REQUIRE(mkdir((closed + "/sub").c_str(), 0755) == 0);
  CHECK_FALSE(env->IsDirectory(closed + "/sub"));
  CHECK(env->IsDirectory(closed));  // stat needs only the directories above

  const std::string listed = dir.Dir("unlisted", 0711);
  CHECK(env->IsDirectory(listed));
  auto list = env->ListDir(listed);
  REQUIRE(list.status().code() == StatusCode::kPermissionDenied);
  CHECK(list.status().message() == listed + ": permission denied for uid 4242 (list)");
  CHECK(env->ListDir(dir.path()).ok());
}

TEST_CASE_METHOD(CallerEnvFixture,
                 "CallerEnv tells of a closed directory only that it is closed") {
  if (!CanMakeOtherUsersFiles()) return;
  // realpath() with the daemon's rights said "no such file" for a missing name inside
  // and "permission denied" for one there: which names exist, told to whoever asked.
  const std::string closed = dir.Dir("closed", 0700);
  WriteTestFile(closed + "/there", "x");
  REQUIRE(mkdir((closed + "/sub").c_str(), 0755) == 0);
  WriteTestFile(closed + "/sub/there", "x");
  for (const std::string name : {"there", "sub/there", "../closed/there", "sub/../there"}) {
    const std::string there = closed + "/" + name;
    std::string missing = there;
    missing.replace(missing.rfind("there"), 5, "nothing");
    const Status seen = env->ReadFile(there).status();
    INFO(name);
    CHECK(seen.message() == there + ": permission denied for uid 4242 (search " + closed + ")");
    CHECK(env->ReadFile(missing).status().message() ==
          missing + ": permission denied for uid 4242 (search " + closed + ")");
    CHECK(env->FileExists(there) == env->FileExists(missing));
  }
  // Through a symlink of the user's into the closed directory, the same.
  const std::string mine = dir.Dir("mine", 0755, kUser, kUserGroup);
  REQUIRE(symlink(closed.c_str(), (mine + "/in").c_str()) == 0);
  CHECK(env->ReadFile(mine + "/in/there").status().message() ==
        mine + "/in/there: permission denied for uid 4242 (search " + closed + ")");
  CHECK(env->ReadFile(mine + "/in/nothing").status().message() ==
        mine + "/in/nothing: permission denied for uid 4242 (search " + closed + ")");
  // Where the caller may look, a missing name is not_found, and a symlink loop is named.
  CHECK(env->ReadFile(mine + "/nothing").status().code() == StatusCode::kNotFound);
  REQUIRE(symlink((mine + "/loop").c_str(), (mine + "/loop").c_str()) == 0);
  CHECK_THAT(env->ReadFile(mine + "/loop").status().message(),
             Catch::StartsWith(mine + "/loop: cannot resolve"));
}

TEST_CASE_METHOD(CallerEnvFixture,
                 "CallerEnv resolves symlinks and checks where they lead") {
  if (!CanMakeOtherUsersFiles()) return;
  const std::string secret = dir.File("secret", 0600);
  const std::string mine = dir.Dir("mine", 0755, kUser, kUserGroup);
  const std::string link = mine + "/x.png";
  REQUIRE(symlink(secret.c_str(), link.c_str()) == 0);
  auto denied = env->ReadFile(link);
  REQUIRE(denied.status().code() == StatusCode::kPermissionDenied);
  CHECK(denied.status().message() == link + ": permission denied for uid 4242 (read)");

  const std::string closed = dir.Dir("closed", 0700);
  const std::string hidden = closed + "/open";
  WriteTestFile(hidden, "x");
  chmod(hidden.c_str(), 0644);
  const std::string link2 = mine + "/y.png";
  REQUIRE(symlink(hidden.c_str(), link2.c_str()) == 0);
  CHECK(env->ReadFile(link2).status().code() == StatusCode::kPermissionDenied);
  CHECK(base->ReadFile(link2).ok());

  const std::string fine = dir.File("fine", 0644);
  const std::string link3 = mine + "/z.png";
  REQUIRE(symlink(fine.c_str(), link3.c_str()) == 0);
  CHECK(env->ReadFile(link3).ok());
}

TEST_CASE_METHOD(CallerEnvFixture,
                 "CallerEnv checks the real path when a directory on the way is a symlink") {
  if (!CanMakeOtherUsersFiles()) return;
  // closed/ (0700) holds open/ (0755) and open/file (0644): the way to the file is shut.
  const std::string closed = dir.Dir("closed", 0700);
  REQUIRE(mkdir((closed + "/open").c_str(), 0755) == 0);
  WriteTestFile(closed + "/open/file", "x");
  chmod((closed + "/open/file").c_str(), 0644);
  // mine/link -> closed/open: every directory the path names, link included (stat follows
  // it to open/, 0755), is searchable, but the real way goes through closed/.
  const std::string mine = dir.Dir("mine", 0755, kUser, kUserGroup);
  REQUIRE(symlink((closed + "/open").c_str(), (mine + "/link").c_str()) == 0);
  auto denied = env->ReadFile(mine + "/link/file");
  REQUIRE(denied.status().code() == StatusCode::kPermissionDenied);
  CHECK(denied.status().message() ==
        mine + "/link/file: permission denied for uid 4242 (search " + closed + ")");
  CHECK(base->ReadFile(mine + "/link/file").ok());

  // A path with "." or ".." is resolved before it is checked, and read when it may be.
  const std::string fine = dir.File("fine", 0644);
  CHECK(*env->ReadFile(mine + "/../fine") == "contents of fine");
  CHECK(*env->ReadFile(dir.path() + "/./fine") == "contents of fine");
  CHECK(env->ReadFile(mine + "/../closed/open/file").status().code() ==
        StatusCode::kPermissionDenied);
}

TEST_CASE_METHOD(CallerEnvFixture,
                 "CallerEnv refuses a FIFO without opening it") {
  const std::string fifo = dir.path() + "/x.png";
  REQUIRE(mkfifo(fifo.c_str(), 0666) == 0);
  auto refused = env->ReadFile(fifo);  // would block forever if it opened the FIFO
  REQUIRE(refused.status().code() == StatusCode::kInvalidArgument);
  CHECK(refused.status().message() == fifo + ": not a regular file (a FIFO)");
  CHECK(env->ReadFile(dir.path() + "/missing").status().code() == StatusCode::kNotFound);
}

TEST_CASE_METHOD(CallerEnvFixture,
                 "CallerEnv never opens a file the caller may not read, even behind a symlink") {
  if (!CanMakeOtherUsersFiles()) return;
  const std::string secret = dir.File("secret", 0600);
  const std::string mine = dir.Dir("mine", 0755, kUser, kUserGroup);
  REQUIRE(symlink(secret.c_str(), (mine + "/x.png").c_str()) == 0);
  // Every open of the target shows as IN_OPEN.
  const int watch = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  REQUIRE(watch >= 0);
  REQUIRE(inotify_add_watch(watch, secret.c_str(), IN_OPEN) >= 0);
  auto denied = env->ReadFile(mine + "/x.png");
  CHECK(denied.status().code() == StatusCode::kPermissionDenied);
  auto mapped = env->MapReadOnly(secret);
  CHECK(mapped.status().code() == StatusCode::kPermissionDenied);
  char events[4096];
  const ssize_t n = read(watch, events, sizeof(events));
  CHECK(n < 0);  // nothing opened it
  CHECK(errno == EAGAIN);
  // A file it may read is opened, and seen.
  const std::string fine = dir.File("fine", 0644);
  REQUIRE(inotify_add_watch(watch, fine.c_str(), IN_OPEN) >= 0);
  CHECK(*env->ReadFile(fine) == "contents of fine");
  CHECK(read(watch, events, sizeof(events)) > 0);
  close(watch);
}

TEST_CASE("CallerEnv refuses /proc paths: they name emberd's own descriptors") {
  auto base = NewPosixEnv();
  auto env = NewCallerEnv(base.get(), User());
  const Status fd = env->ReadFile("/proc/self/fd/3").status();
  CHECK(fd.code() == StatusCode::kPermissionDenied);
  CHECK(fd.message() ==
        "/proc/self/fd/3: /proc is not data (its entries name emberd's own descriptors and "
        "files)");
  CHECK(env->ListDir("/proc/self/fd").status().code() == StatusCode::kPermissionDenied);
  CHECK(env->ReadFile("/proc/" + std::to_string(getpid()) + "/environ").status().code() ==
        StatusCode::kPermissionDenied);
  CHECK_FALSE(env->FileExists("/proc/self/status"));
}

}  // namespace
}  // namespace ember
