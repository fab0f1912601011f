// The metrics endpoint (config key `metrics_listen`): HTTP/1.1 on a TCP address (kj-http),
// answering GET /metrics with Prometheus text (prometheus_text.h) and 404 for any other
// path, 405 for another method on /metrics.
//
// Bounded: at most max_connections connections at once (one more is closed at once, and
// counted), a request (line and headers) must arrive whole within request_timeout and be
// under 128 KiB (kj-http's header buffer; past it the connection is closed without a
// reply), a response must be written within response_timeout, and a
// kept-alive connection is closed after idle_timeout without a request.
#ifndef EMBER_DAEMON_METRICS_METRICS_SERVER_H_
#define EMBER_DAEMON_METRICS_METRICS_SERVER_H_

#include <kj/async-io.h>
#include <kj/compat/http.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "ember/status.h"

namespace ember::daemon {

// The content type of the text a scrape returns (Prometheus text exposition 0.0.4).
inline constexpr const char* kPrometheusTextContentType =
    "text/plain; version=0.0.4; charset=utf-8";

struct MetricsServerOptions {
  uint32_t max_connections = 16;
  kj::Duration request_timeout = 5 * kj::SECONDS;
  kj::Duration response_timeout = 10 * kj::SECONDS;
  kj::Duration idle_timeout = 5 * kj::SECONDS;
};

// What a scrape returns: the exposition text, made on the event loop's thread.
using MetricsRenderer = std::function<std::string()>;

// Lives on the thread of the kj event loop it was started on; not thread-safe. Destroying
// it stops accepting and closes its connections.
class MetricsServer final : private kj::TaskSet::ErrorHandler {
 public:
  // Binds `address` (HOST:PORT, daemon/peer/host_port.h; port 0: any free port) and serves
  // on `io`'s event loop, which must outlive the server. Blocks on io.waitScope while HOST
  // is resolved: call it outside any promise callback. Errors: kInvalidArgument for a bad
  // address, kUnavailable "cannot listen for metrics on ADDRESS: REASON".
  static Result<std::unique_ptr<MetricsServer>> Start(kj::AsyncIoContext& io,
                                                      const std::string& address,
                                                      MetricsRenderer render,
                                                      MetricsServerOptions options = {});
  ~MetricsServer();

  // The bound port (the one chosen when the address asked for port 0).
  uint16_t port() const { return port_; }
  // Connections open now, and those closed at once because max_connections were open.
  uint32_t open_connections() const { return open_; }
  uint64_t refused() const { return refused_; }

 private:
  class Service;

  MetricsServer(kj::Timer& timer, MetricsRenderer render, MetricsServerOptions options,
                kj::Own<kj::ConnectionReceiver> receiver);
  static kj::HttpServerSettings Settings(const MetricsServerOptions& options, Service& service);
  kj::Promise<void> AcceptLoop();
  void taskFailed(kj::Exception&& exception) override;

  kj::Timer& timer_;
  const MetricsServerOptions options_;
  kj::Own<kj::ConnectionReceiver> receiver_;
  const uint16_t port_;
  uint32_t open_ = 0;
  uint64_t refused_ = 0;
  kj::HttpHeaderTable header_table_;
  std::unique_ptr<Service> service_;
  kj::HttpServer http_;
  kj::TaskSet connections_;  // destroyed first: its tasks use http_ and count in open_
  kj::Promise<void> accepting_;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_METRICS_METRICS_SERVER_H_
