#include "daemon/metrics/metrics_server.h"

#include <kj/async-io.h>

#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <string>

namespace ember::daemon {
namespace {

struct Harness {
  explicit Harness(MetricsServerOptions options = {}) {
    auto started = MetricsServer::Start(io, "127.0.0.1:0", [this] {
      ++scrapes;
      return body;
    }, options);
    REQUIRE(started.ok());
    server = std::move(started).value();
    REQUIRE(server->port() != 0);
  }

  kj::Own<kj::AsyncIoStream> Connect() {
    return io.provider->getNetwork()
        .parseAddress("127.0.0.1", server->port())
        .wait(io.waitScope)
        ->connect()
        .wait(io.waitScope);
  }

  // Sends `request` on a new connection and returns the reply: its headers and as much
  // body as its Content-Length says, or what came before the server closed the
  // connection ("" if it reset it without a reply).
  std::string Exchange(const std::string& request) {
    kj::Own<kj::AsyncIoStream> stream = Connect();
    std::string reply;
    KJ_IF_MAYBE(e, kj::runCatchingExceptions([&] {
      stream->write(request.data(), request.size()).wait(io.waitScope);
      char buffer[4096];
      while (!Complete(reply)) {
        const size_t n = stream->tryRead(buffer, 1, sizeof(buffer)).wait(io.waitScope);
        if (n == 0) break;
        reply.append(buffer, n);
      }
    })) {
      (void)e;
    }
    return reply;
  }

  // Whether `reply` holds its headers and the whole body they announce.
  static bool Complete(const std::string& reply) {
    const size_t end = reply.find("\r\n\r\n");
    if (end == std::string::npos) return false;
    const size_t length = reply.find("Content-Length: ");
    if (length == std::string::npos || length > end) return true;
    return reply.size() - end - 4 >= std::stoul(reply.substr(length + 16));
  }

  // Runs the event loop until `done` holds (true) or 5 s have passed (false).
  template <typename Pred>
  bool RunUntil(Pred done) {
    for (int i = 0; i < 500 && !done(); ++i) Run(10);
    return done();
  }

  // Runs the event loop for `ms` milliseconds.
  void Run(uint64_t ms) { io.provider->getTimer().afterDelay(ms * kj::MILLISECONDS).wait(io.waitScope); }

  kj::AsyncIoContext io = kj::setupAsyncIo();
  std::unique_ptr<MetricsServer> server;
  std::string body = "ember_test_metric 1\n";  // what a scrape returns
  int scrapes = 0;
};

constexpr const char* kGetMetrics = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

TEST_CASE("GET /metrics answers with the rendered text as Prometheus text 0.0.4") {
  Harness h;
  const std::string reply = h.Exchange(kGetMetrics);
  CHECK(reply.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK(reply.find("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n") != std::string::npos);
  CHECK(reply.find("Content-Length: 20\r\n") != std::string::npos);
  CHECK(reply.substr(reply.size() - 20) == "ember_test_metric 1\n");
  CHECK(h.scrapes == 1);
  // With a query string too.
  CHECK(h.Exchange("GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
}

TEST_CASE("other paths are 404 and other methods 405, without rendering") {
  Harness h;
  const std::string other = h.Exchange("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  CHECK(other.rfind("HTTP/1.1 404 Not Found\r\n", 0) == 0);
  CHECK(h.Exchange("GET /metricsx HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .rfind("HTTP/1.1 404 ", 0) == 0);
  const std::string post =
      h.Exchange("POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
  CHECK(post.rfind("HTTP/1.1 405 Method Not Allowed\r\n", 0) == 0);
  CHECK(post.find("Allow: GET\r\n") != std::string::npos);
  CHECK(h.scrapes == 0);
}

TEST_CASE("a connection beyond max_connections is closed at once; the others are served") {
  MetricsServerOptions options;
  options.max_connections = 2;
  Harness h(options);
  kj::Own<kj::AsyncIoStream> a = h.Connect();
  kj::Own<kj::AsyncIoStream> b = h.Connect();
  CHECK(h.RunUntil([&] { return h.server->open_connections() == 2; }));
  CHECK(h.Exchange(kGetMetrics).empty());
  CHECK(h.server->refused() == 1);
  a = nullptr;
  CHECK(h.RunUntil([&] { return h.server->open_connections() == 1; }));
  CHECK(h.Exchange(kGetMetrics).rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
}

TEST_CASE("a request that does not arrive in time is cut off") {
  MetricsServerOptions options;
  options.request_timeout = 200 * kj::MILLISECONDS;
  Harness h(options);
  kj::Own<kj::AsyncIoStream> slow = h.Connect();
  const std::string part = "GET /metrics HTTP/1.1\r\nHost: x\r\n";  // never finished
  slow->write(part.data(), part.size()).wait(h.io.waitScope);
  auto closed = slow->readAllText().exclusiveJoin(
      h.io.provider->getTimer().afterDelay(5 * kj::SECONDS).then([] { return kj::str("TIMEOUT"); }));
  const std::string reply = closed.wait(h.io.waitScope).cStr();
  CHECK(reply != "TIMEOUT");
  CHECK(reply.find("200 OK") == std::string::npos);
  CHECK(h.RunUntil([&] { return h.server->open_connections() == 0; }));
  CHECK(h.scrapes == 0);
}

TEST_CASE("a response the client does not take in time is cut off") {
  MetricsServerOptions options;
  options.response_timeout = 500 * kj::MILLISECONDS;
  Harness h(options);
  h.body = std::string(32 << 20, 'x');  // far more than the sockets' buffers hold
  kj::Own<kj::AsyncIoStream> stalled = h.Connect();
  stalled->write(kGetMetrics, strlen(kGetMetrics)).wait(h.io.waitScope);
  REQUIRE(h.RunUntil([&] { return h.scrapes == 1; }));
  CHECK(h.server->open_connections() == 1);  // writing, blocked on the client
  CHECK(h.RunUntil([&] { return h.server->open_connections() == 0; }));
}

TEST_CASE("headers over 128 KiB are refused and the server goes on serving") {
  MetricsServerOptions options;
  options.idle_timeout = 200 * kj::MILLISECONDS;
  Harness h(options);
  const std::string huge = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " +
                           std::string(200 * 1024, 'a') + "\r\nConnection: close\r\n\r\n";
  const std::string reply = h.Exchange(huge);
  CHECK(reply.find("200 OK") == std::string::npos);
  CHECK(h.scrapes == 0);
  CHECK(h.Exchange(kGetMetrics).rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
}

TEST_CASE("a bad address is refused before listening") {
  kj::AsyncIoContext io = kj::setupAsyncIo();
  auto bad = MetricsServer::Start(io, "no-port", [] { return std::string(); });
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ember::daemon
