// PeerListener and ConnectToPeer together on loopback, port 0, with per-test certificates:
// mutual TLS, refusals (logged, never stopping the listener), the handshake deadline,
// the server-name rule and tls: off.
#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <kj/compat/tls.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/temp_dir_testing.h"
#include "daemon/peer/certs_testing.h"
#include "daemon/peer/peer_connector.h"
#include "daemon/peer/peer_listener.h"
#include "daemon/peer/peer_tls.h"
#include "daemon/peer/peer_wire.h"
#include "schemas/peer.capnp.h"

namespace ember::daemon {
namespace {

// Answers hello with the common name of the certificate the listener saw.
class EchoPeer final : public rpc::Peer::Server {
 public:
  explicit EchoPeer(PeerInfo peer) : peer_(std::move(peer)) {}

 protected:
  kj::Promise<void> hello(HelloContext context) override {
    context.getResults().setNode(peer_.common_name);
    context.getResults().setProtocol(context.getParams().getProtocol());
    return kj::READY_NOW;
  }

 private:
  const PeerInfo peer_;
};

// Collects what spdlog's default logger writes while it lives.
class LogCapture {
 public:
  LogCapture() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(text_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  std::string text() const { return text_.str(); }

 private:
  std::shared_ptr<spdlog::logger> previous_;
  std::ostringstream text_;
};

// This test's PKI: a CA with a server and a client node, and an unrelated CA with nodes
// of its own; the client's PeerTls, and the event loop. Loads PeerTls for any node.
struct Pki {
  explicit Pki(const std::string& name) : dir(FreshTestDir(name)), io(kj::setupAsyncIo()) {
    ca = MakeTestCa(dir, "ca");
    other_ca = MakeTestCa(dir, "other-ca");
    server = MakeTestNodeCert(dir, ca, "server");
    client = MakeTestNodeCert(dir, ca, "client");
    stranger = MakeTestNodeCert(dir, other_ca, "stranger");
    client_tls = Load(client, ca);
  }
  std::unique_ptr<PeerTls> Load(const TestKeypair& node, const TestKeypair& trusted) {
    Result<std::unique_ptr<PeerTls>> tls =
        PeerTls::Load(*env, node.cert_path, node.key_path, trusted.cert_path);
    INFO(tls.status().ToString());
    REQUIRE(tls.ok());
    return std::move(tls).value();
  }

  std::unique_ptr<Env> env = NewPosixEnv();
  std::string dir;
  kj::AsyncIoContext io;
  TestKeypair ca, other_ca, server, client, stranger;
  std::unique_ptr<PeerTls> client_tls;
};

// A listener on 127.0.0.1:0 serving EchoPeer; remembers the peers it served.
struct Server {
  Server(kj::AsyncIoContext& io, PeerTls* tls, PeerListenerOptions options = {}) {
    Result<std::unique_ptr<PeerListener>> started = PeerListener::Start(
        io, "127.0.0.1:0", tls,
        [this](const PeerInfo& peer, kj::AsyncIoContext&) {
          std::lock_guard<std::mutex> lock(mu);  // on a peer loop with serve_threads
          peers.push_back(peer);
          return capnp::Capability::Client(kj::heap<EchoPeer>(peer));
        },
        options);
    INFO(started.status().ToString());
    REQUIRE(started.ok());
    listener = std::move(started).value();
    REQUIRE(listener->port() != 0);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(listener->port()); }
  // A raw TCP connection to the listener, with no TLS of its own.
  kj::Own<kj::AsyncIoStream> ConnectRaw(kj::AsyncIoContext& io) const {
    return io.provider->getNetwork()
        .parseAddress("127.0.0.1", listener->port())
        .wait(io.waitScope)
        ->connect()
        .wait(io.waitScope);
  }
  std::vector<PeerInfo> Peers() {
    std::lock_guard<std::mutex> lock(mu);
    return peers;
  }

  std::mutex mu;
  std::vector<PeerInfo> peers;
  std::unique_ptr<PeerListener> listener;
};

Result<std::unique_ptr<PeerConnection>> Connect(kj::AsyncIoContext& io, PeerTls* tls,
                                                const std::string& address,
                                                PeerConnectOptions options = {}) {
  options.timeout = 5 * kj::SECONDS;
  return ConnectToPeer(*io.provider, tls, address, options).wait(io.waitScope);
}

// Listener options serving on the listener's loop, then (a second run of the test case)
// on two peer loops.
PeerListenerOptions Threaded() {
  PeerListenerOptions options;
  options.serve_threads = GENERATE(0u, 2u);
  UNSCOPED_INFO("serve_threads " << options.serve_threads);
  return options;
}

// Says hello; returns the node name the server answered with (the CN it saw).
std::string Hello(kj::AsyncIoContext& io, PeerConnection& connection) {
  auto request = connection.Bootstrap<rpc::Peer>().helloRequest();
  request.setNode("client");
  request.setProtocol(2);
  auto response = request.send().wait(io.waitScope);
  CHECK(response.getProtocol() == 2);
  return response.getNode();
}

// Runs the event loop until `pred` holds or 5 s have passed; returns pred().
template <typename Pred>
bool RunUntil(kj::AsyncIoContext& io, Pred pred) {
  for (int i = 0; i < 500 && !pred(); ++i) {
    io.provider->getTimer().afterDelay(10 * kj::MILLISECONDS).wait(io.waitScope);
  }
  return pred();
}

TEST_CASE("mutual TLS connects and the server sees the client's common name") {
  Pki pki("transport_mutual");
  auto server_tls = pki.Load(pki.server, pki.ca);
  kj::AsyncIoContext& io = pki.io;
  Server server(io, server_tls.get(), Threaded());
  auto connection = Connect(io, pki.client_tls.get(), server.address());
  INFO(connection.status().ToString());
  REQUIRE(connection.ok());
  CHECK((*connection)->address() == server.address());
  CHECK(Hello(io, **connection) == "client");
  REQUIRE(server.Peers().size() == 1);
  CHECK(server.Peers()[0].common_name == "client");
  CHECK_THAT(server.Peers()[0].address, Catch::StartsWith("127.0.0.1:"));
  CHECK(server.listener->accepted() == 1);
  CHECK(server.listener->refused() == 0);
}

TEST_CASE("a connection whose first byte is a handoff's goes to it, socket and all; TLS "
          "connections beside it are served as before") {
  Pki pki("transport_handoff");
  auto server_tls = pki.Load(pki.server, pki.ca);
  kj::AsyncIoContext& io = pki.io;
  PeerListenerOptions options = Threaded();
  std::mutex mu;
  std::vector<std::pair<int, std::string>> handed;  // duplicate descriptors, addresses
  options.handoffs[kPeerDecodeRowsKind] = [&](kj::AutoCloseFd socket, const std::string& address) {
    std::lock_guard<std::mutex> lock(mu);
    handed.emplace_back(socket.release(), address);
  };
  Server server(io, server_tls.get(), options);

  // A TLS client: its first byte (0x16) goes on to kj's TLS.
  auto connection = Connect(io, pki.client_tls.get(), server.address());
  INFO(connection.status().ToString());
  REQUIRE(connection.ok());
  CHECK(Hello(io, **connection) == "client");

  // A handoff: the handler gets the socket with every byte after the first still unread.
  auto raw = server.ConnectRaw(io);
  raw->write("\x44hello", 6).wait(io.waitScope);
  REQUIRE(RunUntil(io, [&] {
    std::lock_guard<std::mutex> lock(mu);
    return !handed.empty();
  }));
  std::lock_guard<std::mutex> lock(mu);
  REQUIRE(handed.size() == 1);
  CHECK_THAT(handed[0].second, Catch::StartsWith("127.0.0.1:"));
  const int fd = handed[0].first;
  char got[8] = {};
  size_t have = 0;
  for (int i = 0; i < 500 && have < 5; ++i) {
    const ssize_t n = ::recv(fd, got + have, 5 - have, MSG_DONTWAIT);
    if (n > 0) have += static_cast<size_t>(n);
    else std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(std::string(got, have) == "hello");
  // The socket is the handler's: the listener's end of it is gone from its loop, and the
  // handler's descriptor still talks to the client.
  CHECK(::send(fd, "back", 4, MSG_NOSIGNAL) == 4);
  char back[4];
  raw->read(back, 4).wait(io.waitScope);
  CHECK(std::string(back, 4) == "back");
  ::close(fd);
  CHECK(server.listener->accepted() == 1);
  CHECK(server.listener->refused() == 0);
}

TEST_CASE("a client with a certificate from another CA is refused, logged, and others still "
          "get in") {
  Pki pki("transport_other_ca_client");
  auto server_tls = pki.Load(pki.server, pki.ca);
  // The stranger trusts the server's CA, so only the server's check of it can fail.
  auto stranger_tls = pki.Load(pki.stranger, pki.ca);
  kj::AsyncIoContext& io = pki.io;
  LogCapture log;
  Server server(io, server_tls.get(), Threaded());

  auto refused = Connect(io, stranger_tls.get(), server.address());
  REQUIRE_FALSE(refused.ok());
  INFO(refused.status().ToString());
  CHECK(refused.status().code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(refused.status().message(),
             Catch::StartsWith("peer " + server.address() + ": the server refused this node: "));
  REQUIRE(RunUntil(io, [&] { return server.listener->refused() == 1; }));
  CHECK(server.Peers().empty());
  CHECK_THAT(log.text(), Catch::Contains("refused peer 127.0.0.1:") &&
                             Catch::Contains("certificate verify failed"));

  auto connection = Connect(io, pki.client_tls.get(), server.address());
  INFO(connection.status().ToString());
  REQUIRE(connection.ok());
  CHECK(Hello(io, **connection) == "client");
  CHECK(server.listener->accepted() == 1);
  CHECK(server.listener->refused() == 1);
}

TEST_CASE("a client without a certificate is refused") {
  Pki pki("transport_no_client_cert");
  auto server_tls = pki.Load(pki.server, pki.ca);
  kj::AsyncIoContext& io = pki.io;
  LogCapture log;
  Server server(io, server_tls.get());

  // A TLS client that trusts the CA but has no keypair of its own.
  std::string ca_pem = *pki.env->ReadFile(pki.ca.cert_path);
  kj::TlsCertificate ca(ca_pem);
  kj::TlsContext::Options options;
  options.useSystemTrustStore = false;
  options.trustedCertificates = kj::arrayPtr(&ca, 1);
  kj::TlsContext anonymous(kj::mv(options));
  auto address = io.provider->getNetwork()
                     .parseAddress("127.0.0.1", server.listener->port())
                     .wait(io.waitScope);
  auto secured = address->connect()
                     .then([&](kj::Own<kj::AsyncIoStream> raw) {
                       return anonymous.wrapClient(kj::mv(raw), "127.0.0.1");
                     })
                     .then([](kj::Own<kj::AsyncIoStream> stream) {
                       // TLS 1.3: the client's side of the handshake ends before the
                       // server checks it; the refusal shows on the first read.
                       auto buffer = kj::heapArray<kj::byte>(1);
                       auto read = stream->tryRead(buffer.begin(), 1, 1);
                       return read.attach(kj::mv(stream), kj::mv(buffer));
                     });
  size_t read = 1;
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([&] { read = secured.wait(io.waitScope); })) {
    CHECK_THAT(DescribeTlsError(*e), Catch::Contains("certificate required"));
    read = 0;
  }
  CHECK(read == 0);
  REQUIRE(RunUntil(io, [&] { return server.listener->refused() == 1; }));
  CHECK(server.Peers().empty());
  CHECK_THAT(log.text(), Catch::Contains("refused peer 127.0.0.1:"));
}

TEST_CASE("a server with a certificate from another CA is refused by the client") {
  Pki pki("transport_other_ca_server");
  auto impostor_tls = pki.Load(pki.stranger, pki.ca);
  kj::AsyncIoContext& io = pki.io;
  Server server(io, impostor_tls.get());
  auto connection = Connect(io, pki.client_tls.get(), server.address());
  REQUIRE_FALSE(connection.ok());
  INFO(connection.status().ToString());
  CHECK(connection.status().code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(connection.status().message(),
             Catch::StartsWith("peer " + server.address() + ": TLS handshake failed: ") &&
                 Catch::Contains("certificate verify failed"));
  CHECK(server.Peers().empty());
}

TEST_CASE("the server's certificate must name the host the client dials") {
  Pki pki("transport_server_name");
  const TestKeypair named = MakeTestNodeCert(pki.dir, pki.ca, "named", "DNS:localhost");
  auto server_tls = pki.Load(named, pki.ca);
  kj::AsyncIoContext& io = pki.io;
  Server server(io, server_tls.get());
  const std::string port = std::to_string(server.listener->port());

  auto by_address = Connect(io, pki.client_tls.get(), server.address());
  REQUIRE_FALSE(by_address.ok());
  INFO(by_address.status().ToString());
  CHECK(by_address.status().code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(by_address.status().message(), Catch::Contains("certificate verify failed"));

  PeerConnectOptions options;
  options.server_name = "localhost";
  auto with_name = Connect(io, pki.client_tls.get(), server.address(), options);
  INFO(with_name.status().ToString());
  REQUIRE(with_name.ok());
  CHECK(Hello(io, **with_name) == "client");

  // An IP entry alone does not do (kj checks the host as a DNS name).
  const TestKeypair ip_only = MakeTestNodeCert(pki.dir, pki.ca, "ip-only", "IP:127.0.0.1");
  auto ip_only_tls = pki.Load(ip_only, pki.ca);
  Server ip_server(io, ip_only_tls.get());
  auto refused = Connect(io, pki.client_tls.get(), ip_server.address());
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.status().message(), Catch::Contains("certificate verify failed"));
}

TEST_CASE("a peer that connects and sends nothing blocks no one and is dropped at the "
          "handshake deadline") {
  Pki pki("transport_silent");
  auto server_tls = pki.Load(pki.server, pki.ca);
  kj::AsyncIoContext& io = pki.io;
  LogCapture log;
  PeerListenerOptions options;
  options.handshake_timeout = 1500 * kj::MILLISECONDS;
  options.serve_threads = GENERATE(0u, 2u);
  INFO("serve_threads " << options.serve_threads);
  Server server(io, server_tls.get(), options);
  auto address = io.provider->getNetwork()
                     .parseAddress("127.0.0.1", server.listener->port())
                     .wait(io.waitScope);
  kj::Own<kj::AsyncIoStream> silent = address->connect().wait(io.waitScope);

  const kj::TimePoint start = io.provider->getTimer().now();
  auto connection = Connect(io, pki.client_tls.get(), server.address());
  INFO(connection.status().ToString());
  REQUIRE(connection.ok());
  CHECK(Hello(io, **connection) == "client");
  CHECK(server.listener->refused() == 0);  // the silent one is still waited for
  CHECK(io.provider->getTimer().now() - start < options.handshake_timeout);

  REQUIRE(RunUntil(io, [&] { return server.listener->refused() == 1; }));
  CHECK_THAT(log.text(), Catch::Contains("refused peer 127.0.0.1:") &&
                             Catch::Contains("no TLS handshake within 1500 ms"));
  // The listener closed the silent connection.
  auto buffer = kj::heapArray<kj::byte>(1);
  CHECK(silent->tryRead(buffer.begin(), 1, 1).wait(io.waitScope) == 0);
}

TEST_CASE("handshakes in flight are bounded") {
  Pki pki("transport_bounded");
  auto server_tls = pki.Load(pki.server, pki.ca);
  kj::AsyncIoContext& io = pki.io;
  LogCapture log;
  PeerListenerOptions options;
  options.max_handshakes = 1;
  Server server(io, server_tls.get(), options);
  kj::Own<kj::AsyncIoStream> first = server.ConnectRaw(io);
  kj::Own<kj::AsyncIoStream> second = server.ConnectRaw(io);
  REQUIRE(RunUntil(io, [&] { return server.listener->refused() == 1; }));
  CHECK_THAT(log.text(), Catch::Contains("1 handshakes are in flight already"));
  auto buffer = kj::heapArray<kj::byte>(1);
  CHECK(second->tryRead(buffer.begin(), 1, 1).wait(io.waitScope) == 0);
}

TEST_CASE("one host's idle connections hold at most its share of the handshakes") {
  Pki pki("transport_per_host");
  auto server_tls = pki.Load(pki.server, pki.ca);
  kj::AsyncIoContext& io = pki.io;
  LogCapture log;
  PeerListenerOptions options;
  options.max_handshakes_per_host = 2;
  Server server(io, server_tls.get(), options);
  std::vector<kj::Own<kj::AsyncIoStream>> idle;
  for (int i = 0; i < 3; ++i) idle.push_back(server.ConnectRaw(io));
  REQUIRE(RunUntil(io, [&] { return server.listener->refused() == 1; }));
  CHECK_THAT(log.text(),
             Catch::Contains("2 handshakes from 127.0.0.1 are in flight already"));
  // Its slots come back as its connections go: a real node from there gets through.
  idle.clear();
  REQUIRE(RunUntil(io, [&] { return server.listener->refused() == 3; }));  // their ends
  auto connection = Connect(io, pki.client_tls.get(), server.address());
  INFO(connection.status().ToString());
  CHECK(connection.ok());
}

TEST_CASE("tls: off serves plain Cap'n Proto over TCP") {
  auto io = kj::setupAsyncIo();
  Server server(io, nullptr, Threaded());
  auto connection = Connect(io, nullptr, server.address());
  INFO(connection.status().ToString());
  REQUIRE(connection.ok());
  CHECK(Hello(io, **connection).empty());  // no certificate, no common name
  REQUIRE(server.Peers().size() == 1);
  CHECK(server.Peers()[0].common_name.empty());

  // A bare TCP stream: the accepted byte, then nothing but Cap'n Proto.
  auto address = io.provider->getNetwork()
                     .parseAddress("127.0.0.1", server.listener->port())
                     .wait(io.waitScope);
  kj::Own<kj::AsyncIoStream> raw = address->connect().wait(io.waitScope);
  uint8_t accepted = 0;
  REQUIRE(raw->tryRead(&accepted, 1, 1).wait(io.waitScope) == 1);
  CHECK(accepted == kPeerAcceptedByte);
  capnp::TwoPartyClient client(*raw);
  auto request = client.bootstrap().castAs<rpc::Peer>().helloRequest();
  request.setProtocol(7);
  CHECK(request.send().wait(io.waitScope).getProtocol() == 7);
  CHECK(server.listener->accepted() == 2);
}

TEST_CASE("connecting fails with the address and the reason") {
  Pki pki("transport_connect_errors");
  kj::AsyncIoContext& io = pki.io;

  uint16_t closed_port = 0;
  {
    Server gone(io, nullptr);
    closed_port = gone.listener->port();
  }
  const std::string closed = "127.0.0.1:" + std::to_string(closed_port);
  auto refused = Connect(io, pki.client_tls.get(), closed);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kUnavailable);
  CHECK_THAT(refused.status().message(),
             Catch::StartsWith("peer " + closed + ": TCP connect failed: ") &&
                 Catch::Contains("refused"));

  // A TCP server that accepts and never answers: the client's deadline.
  auto silent = io.provider->getNetwork().parseAddress("127.0.0.1", 0).wait(io.waitScope)->listen();
  kj::Own<kj::AsyncIoStream> accepted;
  auto accepting = silent->accept()
                       .then([&](kj::Own<kj::AsyncIoStream> s) { accepted = kj::mv(s); })
                       .eagerlyEvaluate(nullptr);
  const std::string mute = "127.0.0.1:" + std::to_string(silent->getPort());
  PeerConnectOptions quick;
  quick.timeout = 300 * kj::MILLISECONDS;
  auto timed_out =
      ConnectToPeer(*io.provider, pki.client_tls.get(), mute, quick).wait(io.waitScope);
  REQUIRE_FALSE(timed_out.ok());
  CHECK(timed_out.status().code() == StatusCode::kDeadlineExceeded);
  CHECK(timed_out.status().message() ==
        "peer " + mute + ": no answer within 300 ms (at the TLS handshake)");

  // Something else on the port: a TCP server that answers with other bytes.
  auto other = io.provider->getNetwork().parseAddress("127.0.0.1", 0).wait(io.waitScope)->listen();
  auto greeting = other->accept()
                      .then([](kj::Own<kj::AsyncIoStream> s) {
                        auto written = s->write("SSH-2.0\r\n", 9);
                        return written.attach(kj::mv(s)).then([] { return kj::NEVER_DONE; });
                      })
                      .eagerlyEvaluate(nullptr);
  const std::string stranger = "127.0.0.1:" + std::to_string(other->getPort());
  auto not_emberd = Connect(io, nullptr, stranger);
  REQUIRE_FALSE(not_emberd.ok());
  CHECK(not_emberd.status().code() == StatusCode::kUnavailable);
  CHECK_THAT(not_emberd.status().message(),
             Catch::StartsWith("peer " + stranger + ": the server did not accept this node: ") &&
                 Catch::Contains("first byte is 83") &&
                 Catch::Contains("not an emberd peer endpoint"));

  auto bad = Connect(io, pki.client_tls.get(), "nowhere");
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("PeerListener::Start names the address it cannot listen on") {
  auto io = kj::setupAsyncIo();
  Server first(io, nullptr);
  auto factory = [](const PeerInfo&, kj::AsyncIoContext&) -> capnp::Capability::Client {
    return kj::heap<EchoPeer>(PeerInfo{});
  };
  auto taken = PeerListener::Start(io, first.address(), nullptr, factory);
  REQUIRE_FALSE(taken.ok());
  CHECK(taken.status().code() == StatusCode::kUnavailable);
  CHECK_THAT(taken.status().message(),
             Catch::StartsWith("cannot listen for peers on " + first.address() + ": "));
  auto bad = PeerListener::Start(io, "127.0.0.1", nullptr, factory);
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ember::daemon
