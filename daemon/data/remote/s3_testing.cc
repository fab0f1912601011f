#include "daemon/data/remote/s3_testing.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/env.h"
#include "common/temp_dir_testing.h"

extern char** environ;

namespace ember::daemon {
namespace {

using Clock = std::chrono::steady_clock;

// The whole file, or "" if it cannot be read.
std::string Contents(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// tools/ceph-s3 in this test's runfiles (a data dependency of :s3_testing).
std::string ScriptPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return std::string(srcdir ? srcdir : ".") + "/" + (workspace ? workspace : "ember") +
         "/tools/ceph-s3";
}

// Starts `argv` (posix_spawn: the test may have threads) with its stdin, stdout and
// stderr on the given descriptors (-1: /dev/null for stdin, inherited for the others).
// Returns its pid, or -1 with errno set.
pid_t Spawn(const std::vector<std::string>& argv, int in_fd, int out_fd, int err_fd) {
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (in_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, in_fd, 0);
  } else {
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  }
  if (out_fd >= 0) posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
  if (err_fd >= 0) posix_spawn_file_actions_adddup2(&actions, err_fd, 2);
  pid_t pid = -1;
  const int error = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    errno = error;
    return -1;
  }
  return pid;
}

// Reads `fd` until end of file or `deadline`; returns whether it reached end of file.
bool ReadToEnd(int fd, Clock::time_point deadline, std::string* out) {
  char buffer[4096];
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n == 0;
    out->append(buffer, static_cast<size_t>(n));
  }
}

// Waits for `pid` up to `timeout`, then SIGKILLs it; returns its wait status.
int WaitOrKill(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  int status = 0;
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) return status;
    if (Clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// KEY=VALUE lines (values need no unquoting: the script prints only [\w:/.=-]).
std::map<std::string, std::string> ParseLines(const std::string& text) {
  std::map<std::string, std::string> values;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) values[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return values;
}

// The output of a finished ceph-s3 command.
struct Result {
  bool ok = false;
  std::string out;
  std::string error;  // what went wrong: its exit status and stderr
};

// Runs `script` with `args` to completion (2 minutes at most), its stderr in `err_path`.
Result RunScript(const std::string& script, const std::vector<std::string>& args,
                 const std::string& err_path) {
  Result result;
  int out_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    result.error = std::string("pipe: ") + std::strerror(errno);
    return result;
  }
  const int err_fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  std::vector<std::string> argv = {script};
  argv.insert(argv.end(), args.begin(), args.end());
  const pid_t pid = Spawn(argv, -1, out_pipe[1], err_fd);
  const int spawn_errno = errno;
  close(out_pipe[1]);
  if (err_fd >= 0) close(err_fd);
  if (pid < 0) {
    close(out_pipe[0]);
    result.error = "cannot run " + script + ": " + std::strerror(spawn_errno);
    return result;
  }
  const bool eof = ReadToEnd(out_pipe[0], Clock::now() + std::chrono::minutes(2), &result.out);
  close(out_pipe[0]);
  const int status = WaitOrKill(pid, eof ? std::chrono::minutes(1) : std::chrono::milliseconds(0));
  result.ok = eof && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!result.ok) {
    result.error =
        "ceph-s3 " + args[0] + " ended with " + DescribeStatus(status) + ": " + Contents(err_path);
  }
  return result;
}

}  // namespace

CephS3Server::CephS3Server(int port) {
  static int count = 0;
  script_ = ScriptPath();
  base_ = FreshTestDir("ceph-s3-" + std::to_string(getpid()) + "-" + std::to_string(count++));
  dir_ = base_ + "/cluster";
  std::vector<std::string> argv = {script_, "start", dir_, "--foreground"};
  if (port != 0) {
    argv.push_back("--port");
    argv.push_back(std::to_string(port));
  }
  // The script stops the cluster when its stdin ends: when this object, or the test
  // process, goes. Its stdout ends once the server answers (or start failed).
  int in_pipe[2];
  int out_pipe[2];
  REQUIRE(pipe2(in_pipe, O_CLOEXEC) == 0);
  REQUIRE(pipe2(out_pipe, O_CLOEXEC) == 0);
  const auto started = Clock::now();
  supervisor_ = Spawn(argv, in_pipe[0], out_pipe[1], -1);
  const int spawn_errno = errno;
  close(in_pipe[0]);
  close(out_pipe[1]);
  supervisor_stdin_ = in_pipe[1];
  if (supervisor_ < 0) {
    close(out_pipe[0]);
    close(supervisor_stdin_);
    FAIL("cannot run " << script_ << ": " << std::strerror(spawn_errno));
  }
  std::string out;
  const bool eof = ReadToEnd(out_pipe[0], started + std::chrono::seconds(90), &out);
  close(out_pipe[0]);
  const std::map<std::string, std::string> values = ParseLines(out);
  const auto value = [&values](const std::string& key) {
    const auto it = values.find(key);
    return it == values.end() ? std::string() : it->second;
  };
  endpoint_ = value("EMBER_S3_ENDPOINT");
  keys_ = {value("AWS_ACCESS_KEY_ID"), value("AWS_SECRET_ACCESS_KEY")};
  region_ = value("AWS_REGION");
  if (!eof || endpoint_.empty() || keys_.access_key.empty() || keys_.secret_key.empty() ||
      region_.empty()) {
    // Whatever it started, it stops when its stdin ends.
    close(supervisor_stdin_);
    if (!eof) kill(supervisor_, SIGTERM);
    const int status = WaitOrKill(supervisor_, std::chrono::seconds(30));
    supervisor_ = -1;
    RunScript(script_, {"stop", dir_}, base_ + "/stop.err");
    FAIL("the Ceph S3 server did not start (ceph-s3 start: "
         << (eof ? DescribeStatus(status) : "no answer in 90 s") << "); see " << dir_
         << "/log/ceph-s3.log:\n"
         << Contents(dir_ + "/log/ceph-s3.log"));
  }
}

CephS3Server::~CephS3Server() {
  if (supervisor_ < 0) return;
  const Result stopped = RunScript(script_, {"stop", dir_}, base_ + "/stop.err");
  if (!stopped.ok) WARN(stopped.error);
  close(supervisor_stdin_);
  const int status = WaitOrKill(supervisor_, std::chrono::seconds(30));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    WARN("ceph-s3 start ended with " << DescribeStatus(status) << "; see " << dir_
                                     << "/log/ceph-s3.log");
}

void CephS3Server::Put(const std::string& bucket, const std::string& local_path,
                       const std::string& prefix) {
  const Result result =
      RunScript(script_, {"put", dir_, bucket, local_path, prefix}, base_ + "/put.err");
  INFO(result.error);
  REQUIRE(result.ok);
}

S3Keys CephS3Server::NewUser(const std::string& name) {
  const Result result = RunScript(script_, {"mkuser", dir_, name}, base_ + "/mkuser.err");
  INFO(result.error);
  REQUIRE(result.ok);
  std::map<std::string, std::string> values = ParseLines(result.out);
  const S3Keys keys{values["AWS_ACCESS_KEY_ID"], values["AWS_SECRET_ACCESS_KEY"]};
  INFO("ceph-s3 mkuser printed: " << result.out);
  REQUIRE(!keys.access_key.empty());
  REQUIRE(!keys.secret_key.empty());
  return keys;
}

std::shared_ptr<const S3Config> CephS3Server::Config(bool with_keys) const {
  std::map<std::string, std::string> vars = {{"AWS_ENDPOINT_URL_S3", endpoint_},
                                             {"AWS_REGION", region_},
                                             {"HOME", "/nonexistent"}};
  if (with_keys) {
    vars["AWS_ACCESS_KEY_ID"] = keys_.access_key;
    vars["AWS_SECRET_ACCESS_KEY"] = keys_.secret_key;
  }
  auto env = NewPosixEnv();
  auto config = LoadS3Config(*env, [&](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  });
  REQUIRE(config.ok());
  return std::make_shared<const S3Config>(*config);
}

}  // namespace ember::daemon
