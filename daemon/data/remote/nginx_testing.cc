#include "daemon/data/remote/nginx_testing.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <iterator>
#include <thread>

#include "common/net_testing.h"
#include "common/temp_dir_testing.h"

namespace ember::daemon {
namespace {

bool Answers(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

std::string Contents(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

NginxServer::NginxServer(const std::string& root, int port) {
  static int count = 0;
  dir_ = FreshTestDir("nginx-" + std::to_string(getpid()) + "-" + std::to_string(count++));
  port_ = port != 0 ? port : FreeLoopbackPort();
  const std::string conf = dir_ + "/nginx.conf";
  WriteTestFile(conf,
                // As root nginx hands its temporary directories to "nobody", which a
                // sandbox's user namespace may not map: keep them root's.
                std::string(geteuid() == 0 ? "user root root;\n" : "") +
                "daemon off;\nmaster_process off;\npid " + dir_ + "/nginx.pid;\n"
                "error_log " + dir_ + "/error.log warn;\nevents { worker_connections 256; }\n"
                "http {\n  access_log off;\n  client_body_temp_path " + dir_ + "/body;\n"
                "  proxy_temp_path " + dir_ + "/proxy;\n  fastcgi_temp_path " + dir_ + "/fastcgi;\n"
                "  uwsgi_temp_path " + dir_ + "/uwsgi;\n  scgi_temp_path " + dir_ + "/scgi;\n"
                "  server {\n    listen 127.0.0.1:" + std::to_string(port_) + ";\n"
                "    root " + root + ";\n    location /status-500/ { return 500; }\n  }\n}\n");
  pid_ = fork();
  REQUIRE(pid_ >= 0);
  if (pid_ == 0) {
    const std::string output = dir_ + "/output.log";
    const int fd = open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    const std::string error_log = dir_ + "/error.log";
    execl("/usr/sbin/nginx", "nginx", "-q", "-e", error_log.c_str(), "-p", dir_.c_str(), "-c",
          conf.c_str(), nullptr);
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!Answers(port_)) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      FAIL("nginx exited (status " << status << "): " << Contents(dir_ + "/output.log")
                                        << Contents(dir_ + "/error.log"));
    }
    if (std::chrono::steady_clock::now() > deadline)
      FAIL("nginx did not answer on port " << port_ << " in 10 s: " << dir_ << "/error.log");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

NginxServer::~NginxServer() {
  if (pid_ <= 0) return;
  kill(pid_, SIGQUIT);
  for (int i = 0; i < 500; ++i) {
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
}

std::string NginxServer::Url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + path;
}

}  // namespace ember::daemon
