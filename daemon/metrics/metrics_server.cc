#include "daemon/metrics/metrics_server.h"

#include <kj/debug.h>
#include <spdlog/spdlog.h>

#include <utility>

#include "daemon/peer/tcp_listen.h"

namespace ember::daemon {
namespace {

// After accept() itself fails (out of descriptors), the wait before accepting again.
constexpr kj::Duration kAcceptRetryDelay = 1 * kj::SECONDS;

}  // namespace

// Serves the requests and handles the server's errors: a failed request (headers too
// large, a response not taken in time) closes its connection, logged at debug level
// only, since any client can cause it.
class MetricsServer::Service final : public kj::HttpService, public kj::HttpServerErrorHandler {
 public:
  Service(kj::Timer& timer, const kj::HttpHeaderTable& table, MetricsRenderer render,
          kj::Duration response_timeout)
      : timer_(timer), table_(table), render_(std::move(render)),
        response_timeout_(response_timeout) {}

  kj::Promise<void> request(kj::HttpMethod method, kj::StringPtr url, const kj::HttpHeaders&,
                            kj::AsyncInputStream&, Response& response) override {
    std::string path(url.cStr());
    path = path.substr(0, path.find('?'));
    if (path != "/metrics")
      return Send(response, 404, "Not Found", "text/plain; charset=utf-8",
                  "not found: emberd serves metrics at /metrics only\n");
    if (method != kj::HttpMethod::GET)
      return Send(response, 405, "Method Not Allowed", "text/plain; charset=utf-8",
                  "method not allowed: GET /metrics only\n");
    return Send(response, 200, "OK", kPrometheusTextContentType, render_());
  }

  kj::Promise<void> handleApplicationError(kj::Exception exception,
                                           kj::Maybe<Response&>) override {
    spdlog::debug("metrics request failed: {}", exception.getDescription().cStr());
    return kj::READY_NOW;
  }

 private:
  kj::Promise<void> Send(Response& response, uint status, kj::StringPtr status_text,
                         const char* content_type, std::string body) {
    kj::HttpHeaders headers(table_);
    headers.set(kj::HttpHeaderId::CONTENT_TYPE, content_type);
    if (status == 405) headers.add("Allow", "GET");
    kj::Own<kj::AsyncOutputStream> out = response.send(status, status_text, headers, body.size());
    auto owned = kj::heap<std::string>(std::move(body));
    kj::Promise<void> written = out->write(owned->data(), owned->size());
    const uint64_t timeout_ms = response_timeout_ / kj::MILLISECONDS;
    return written.attach(kj::mv(out), kj::mv(owned))
        .exclusiveJoin(timer_.afterDelay(response_timeout_).then([timeout_ms]() -> kj::Promise<void> {
          return KJ_EXCEPTION(DISCONNECTED, kj::str("response not taken within ", timeout_ms, " ms"));
        }));
  }

  kj::Timer& timer_;
  const kj::HttpHeaderTable& table_;
  const MetricsRenderer render_;
  const kj::Duration response_timeout_;
};

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(kj::AsyncIoContext& io,
                                                            const std::string& address,
                                                            MetricsRenderer render,
                                                            MetricsServerOptions options) {
  EMBER_ASSIGN_OR_RETURN(kj::Own<kj::ConnectionReceiver> receiver,
                         ListenTcp(io, address, "metrics"));
  return std::unique_ptr<MetricsServer>(new MetricsServer(
      io.provider->getTimer(), std::move(render), options, kj::mv(receiver)));
}

MetricsServer::MetricsServer(kj::Timer& timer, MetricsRenderer render,
                             MetricsServerOptions options, kj::Own<kj::ConnectionReceiver> receiver)
    : timer_(timer),
      options_(options),
      receiver_(kj::mv(receiver)),
      port_(static_cast<uint16_t>(receiver_->getPort())),
      service_(std::make_unique<Service>(timer, header_table_, std::move(render),
                                         options.response_timeout)),
      http_(timer, header_table_, *service_, Settings(options, *service_)),
      connections_(*this),
      accepting_(AcceptLoop().eagerlyEvaluate(nullptr)) {}

MetricsServer::~MetricsServer() = default;

kj::HttpServerSettings MetricsServer::Settings(const MetricsServerOptions& options,
                                               Service& service) {
  kj::HttpServerSettings settings;
  settings.headerTimeout = options.request_timeout;
  settings.pipelineTimeout = options.idle_timeout;
  settings.errorHandler = service;
  return settings;
}

kj::Promise<void> MetricsServer::AcceptLoop() {
  // evalNow: accepting may throw at once (EMFILE), not only fail its promise.
  return kj::evalNow([this] { return receiver_->accept(); })
      .then(
          [this](kj::Own<kj::AsyncIoStream>&& connection) -> kj::Promise<void> {
            if (open_ >= options_.max_connections) {
              ++refused_;
              spdlog::debug("metrics: refused a connection, {} are open", open_);
              return kj::READY_NOW;  // dropping it closes it
            }
            ++open_;
            connections_.add(http_.listenHttp(kj::mv(connection)).attach(kj::defer([this] {
              --open_;
            })));
            return kj::READY_NOW;
          },
          [this](kj::Exception&& e) -> kj::Promise<void> {
            spdlog::error("accepting metrics connections on port {} failed, retrying in 1 s: {}",
                          port_, e.getDescription().cStr());
            return timer_.afterDelay(kAcceptRetryDelay);
          })
      .then([this] { return AcceptLoop(); });
}

void MetricsServer::taskFailed(kj::Exception&& exception) {
  spdlog::debug("metrics connection ended: {}", exception.getDescription().cStr());
}

}  // namespace ember::daemon
