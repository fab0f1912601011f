#include "daemon/data/remote/http_fetch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/temp_dir_testing.h"
#include "daemon/data/remote/nginx_testing.h"

namespace ember::daemon {
namespace {

using std::chrono::milliseconds;

std::string Collect(const HttpFetcher& fetcher, const std::string& url,
                    const std::optional<ByteRange>& range, Status* status) {
  std::string body;
  *status = fetcher.Get(url, range, [&](uint64_t offset, const char* data, size_t size) {
    body.resize(offset);  // a retry starts again at 0
    body.append(data, size);
    return Status::Ok();
  });
  return body;
}

// A loopback HTTP server that answers its requests from a script: "500" (an error),
// "200" (the body), or "stall" (reads the request, never answers). Counts requests.
class ScriptedServer {
 public:
  ScriptedServer(std::vector<std::string> script, std::string body)
      : script_(std::move(script)), body_(std::move(body)) {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    socklen_t len = sizeof(addr);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    REQUIRE(listen(listener_, 16) == 0);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ScriptedServer() {
    shutdown(listener_, SHUT_RDWR);
    close(listener_);
    thread_.join();
    for (int fd : held_) close(fd);
  }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/x.tar"; }
  int requests() const { return requests_.load(); }

 private:
  void Serve() {
    for (size_t i = 0;; ++i) {
      const int fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      std::string request;
      char buffer[4096];
      while (request.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = read(fd, buffer, sizeof(buffer));
        if (n <= 0) break;
        request.append(buffer, static_cast<size_t>(n));
      }
      ++requests_;
      const std::string& step = script_[std::min(i, script_.size() - 1)];
      std::string response;
      if (step == "stall") {
        held_.push_back(fd);  // never answered, closed by the destructor
        continue;
      }
      if (step == "500") {
        response = "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      } else {
        response = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body_.size()) +
                   "\r\nConnection: close\r\n\r\n" + body_;
      }
      (void)!write(fd, response.data(), response.size());
      close(fd);
    }
  }

  std::vector<std::string> script_;
  std::string body_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<int> requests_{0};
  std::vector<int> held_;
  std::thread thread_;
};

TEST_CASE("nginx: whole objects, ranges, sizes and ETags; 404 and 416 say so; connections are reused") {
  const std::string root = FreshTestDir("www");
  std::string shard;
  for (int i = 0; i < 300000; ++i) shard += static_cast<char>('a' + i % 26);
  WriteTestFile(root + "/d/s-000.tar", shard);
  NginxServer nginx(root);
  HttpFetcher fetcher;

  auto info = fetcher.Stat(nginx.Url("/d/s-000.tar"));
  REQUIRE(info.ok());
  CHECK(info->size == shard.size());
  CHECK(!info->etag.empty());

  const uint64_t connections = HttpFetcher::connections_opened();
  Status status;
  CHECK(Collect(fetcher, nginx.Url("/d/s-000.tar"), std::nullopt, &status) == shard);
  REQUIRE(status.ok());
  for (uint64_t offset : {0, 1, 4095, 123456}) {
    CHECK(Collect(fetcher, nginx.Url("/d/s-000.tar"), ByteRange{offset, 1000}, &status) ==
          shard.substr(offset, 1000));
    REQUIRE(status.ok());
  }
  CHECK(HttpFetcher::connections_opened() - connections <= 1);  // one keep-alive connection

  Collect(fetcher, nginx.Url("/d/missing.tar"), std::nullopt, &status);
  CHECK(status.code() == StatusCode::kNotFound);
  CHECK(status.message() == "GET " + nginx.Url("/d/missing.tar") + ": HTTP 404 Not Found");
  CHECK(fetcher.Stat(nginx.Url("/d/missing.tar")).status().code() == StatusCode::kNotFound);

  Collect(fetcher, nginx.Url("/d/s-000.tar"), ByteRange{shard.size() + 10, 5}, &status);
  CHECK(status.code() == StatusCode::kInvalidArgument);
  CHECK(status.message().find("HTTP 416") != std::string::npos);

  FetchOptions quick;
  quick.attempts = 2;
  quick.first_backoff = milliseconds(10);
  Collect(HttpFetcher(quick), nginx.Url("/status-500/a.tar"), std::nullopt, &status);
  CHECK(status.code() == StatusCode::kUnavailable);
  CHECK(status.message() ==
        "GET " + nginx.Url("/status-500/a.tar") + ": HTTP 500 Internal Server Error after 2 attempts");
}

TEST_CASE("a 500 is retried with backoff until it succeeds, or names the last failure") {
  FetchOptions options;
  options.attempts = 4;
  options.first_backoff = milliseconds(10);
  ScriptedServer flaky({"500", "500", "200"}, "shard bytes");
  Status status;
  CHECK(Collect(HttpFetcher(options), flaky.Url(), std::nullopt, &status) == "shard bytes");
  CHECK(status.ok());
  CHECK(flaky.requests() == 3);

  ScriptedServer broken({"500"}, "");
  Collect(HttpFetcher(options), broken.Url(), std::nullopt, &status);
  CHECK(status.code() == StatusCode::kUnavailable);
  CHECK(broken.requests() == 4);
}

TEST_CASE("a server that stalls is given up on within the stall timeout, for every attempt") {
  FetchOptions options;
  options.attempts = 2;
  options.stall_timeout = milliseconds(1000);
  options.first_backoff = milliseconds(10);
  ScriptedServer stalls({"stall"}, "");
  const auto start = std::chrono::steady_clock::now();
  Status status;
  Collect(HttpFetcher(options), stalls.Url(), std::nullopt, &status);
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(status.code() == StatusCode::kUnavailable);
  CHECK(status.message() == "GET " + stalls.Url() + ": no data for 1 s (stalled) after 2 attempts");
  CHECK(stalls.requests() == 2);
  CHECK(took < std::chrono::seconds(8));
}

TEST_CASE("link-local addresses are refused (instance metadata); a refused address is not retried") {
  CHECK(FetchOptions().refused_addresses ==
        std::vector<std::string>{"169.254.", "fe80:", "::ffff:169.254."});
  const std::string root = FreshTestDir("refused-www");
  WriteTestFile(root + "/a.tar", "bytes");
  NginxServer nginx(root);
  FetchOptions loopback_refused;
  loopback_refused.refused_addresses = {"127.0.0."};  // this test's server is on loopback
  Status status;
  Collect(HttpFetcher(loopback_refused), nginx.Url("/a.tar"), std::nullopt, &status);
  CHECK(status.code() == StatusCode::kPermissionDenied);
  CHECK(status.message() == "GET " + nginx.Url("/a.tar") +
                                ": refused to connect to 127.0.0.1 (a refused address: link-local "
                                "ones are, where cloud instance metadata answers)");
  CHECK(HttpFetcher(loopback_refused).Stat(nginx.Url("/a.tar")).status().code() ==
        StatusCode::kPermissionDenied);
  CHECK(Collect(HttpFetcher(), nginx.Url("/a.tar"), std::nullopt, &status) == "bytes");
}

TEST_CASE("errors show no credentials: user, password and query are left out of URLs") {
  CHECK(RedactUrl("https://key:secret@s3.example:9000/bucket/a.tar?X-Amz-Signature=abc") ==
        "https://s3.example:9000/bucket/a.tar");
  CHECK(RedactUrl("http://h/p#frag") == "http://h/p");
  CHECK(RedactUrl("http://h") == "http://h");
  CHECK(RedactUrl("http://u@h?x=1") == "http://h");
}

}  // namespace
}  // namespace ember::daemon
