// PeerServer and SayHello over a real (plain TCP) PeerListener connection: hello names
// both nodes, and a protocol version mismatch fails on either side naming both versions.
#include "daemon/rpc/peer_server.h"

#include <kj/async-io.h>

#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "common/rpc_status.h"
#include "daemon/peer/peer_connector.h"
#include "daemon/peer/peer_listener.h"
#include "daemon/rpc/peer_client.h"
#include "daemon/rpc/peer_protocol.h"

namespace ember::daemon {
namespace {

// A server of a future version.
class FuturePeer final : public rpc::Peer::Server {
 protected:
  kj::Promise<void> hello(HelloContext context) override {
    context.getResults().setNode("future");
    context.getResults().setProtocol(kPeerProtocol + 1);
    return kj::READY_NOW;
  }
};

// Serves `make(peer)` on 127.0.0.1:0 (tls: off) and connects to it.
struct Loopback {
  explicit Loopback(PeerBootstrapFactory make) : io(kj::setupAsyncIo()) {
    auto started = PeerListener::Start(io, "127.0.0.1:0", nullptr, std::move(make));
    INFO(started.status().ToString());
    REQUIRE(started.ok());
    listener = std::move(started).value();
    auto connected =
        ConnectToPeer(*io.provider, nullptr, "127.0.0.1:" + std::to_string(listener->port()))
            .wait(io.waitScope);
    INFO(connected.status().ToString());
    REQUIRE(connected.ok());
    connection = std::move(connected).value();
  }
  Result<PeerHello> Hello(const std::string& node) {
    return SayHello(connection->Bootstrap<rpc::Peer>(), node).wait(io.waitScope);
  }

  kj::AsyncIoContext io;
  std::unique_ptr<PeerListener> listener;
  std::unique_ptr<PeerConnection> connection;
};

TEST_CASE("hello answers with this daemon's node name and protocol") {
  Loopback loopback([](const PeerInfo& peer) -> capnp::Capability::Client {
    return kj::heap<PeerServer>("node-a", peer);
  });
  Result<PeerHello> hello = loopback.Hello("node-b");
  INFO(hello.status().ToString());
  REQUIRE(hello.ok());
  CHECK(hello->node == "node-a");
  CHECK(hello->protocol == kPeerProtocol);
  CHECK(kPeerProtocol == 1);
}

TEST_CASE("the server refuses another protocol version, naming both") {
  Loopback loopback([](const PeerInfo& peer) -> capnp::Capability::Client {
    return kj::heap<PeerServer>("node-a", peer);
  });
  auto request = loopback.connection->Bootstrap<rpc::Peer>().helloRequest();
  request.setNode("node-b");
  request.setProtocol(2);
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([&] { request.send().wait(loopback.io.waitScope); })) {
    const Status status = rpc_status::FromException(*e);
    CHECK(status.code() == StatusCode::kFailedPrecondition);
    CHECK(status.message() ==
          "node 'node-b' speaks daemon-to-daemon protocol 2, this daemon speaks 1");
  } else {
    FAIL("hello with protocol 2 succeeded");
  }
}

TEST_CASE("SayHello refuses a server of another protocol version, naming both") {
  Loopback loopback(
      [](const PeerInfo&) -> capnp::Capability::Client { return kj::heap<FuturePeer>(); });
  Result<PeerHello> hello = loopback.Hello("node-b");
  REQUIRE_FALSE(hello.ok());
  CHECK(hello.status().code() == StatusCode::kFailedPrecondition);
  CHECK(hello.status().message() ==
        "node 'future' speaks daemon-to-daemon protocol 2, this daemon speaks 1");
}

TEST_CASE("CheckPeerProtocol") {
  CHECK(CheckPeerProtocol("n", kPeerProtocol).ok());
  CHECK(CheckPeerProtocol("n", 0).code() == StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ember::daemon
