// PeerServer and SayHello over a real (plain TCP) PeerListener connection: hello names
// both nodes, a protocol version mismatch fails on either side naming both versions, and
// exchange serves only the ranks joined through the calling connection.
#include "daemon/rpc/peer_server.h"

#include <kj/async-io.h>

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/rpc_status.h"
#include "daemon/coordinator/job_ledger.h"
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
  PeerService service({"node-a"});
  Loopback loopback([&service](const PeerInfo& peer, kj::AsyncIoContext&) -> capnp::Capability::Client {
    return kj::heap<PeerServer>(service, peer);
  });
  Result<PeerHello> hello = loopback.Hello("node-b");
  INFO(hello.status().ToString());
  REQUIRE(hello.ok());
  CHECK(hello->node == "node-a");
  CHECK(hello->protocol == kPeerProtocol);
  CHECK(kPeerProtocol == 5);
}

TEST_CASE("a peer is the node its certificate names, or nothing") {
  PeerService service({"node-a"});
  Loopback loopback([&service](const PeerInfo& peer, kj::AsyncIoContext&) -> capnp::Capability::Client {
    PeerInfo certified = peer;
    certified.common_name = "node-b";  // what PeerListener reads from its certificate
    return kj::heap<PeerServer>(service, certified);
  });
  Result<PeerHello> evil = loopback.Hello("node-c");
  REQUIRE(evil.status().code() == StatusCode::kPermissionDenied);
  CHECK_THAT(evil.status().message(),
             Catch::EndsWith("calls itself node 'node-c', but its certificate is node 'node-b' "
                             "(a node's certificate CN must be its name, config key node)"));
  auto open = loopback.connection->Bootstrap<rpc::Peer>().openJobRequest();
  open.setJob("train");
  open.setNode("node-c");
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([&] { open.send().wait(loopback.io.waitScope); })) {
    CHECK(rpc_status::FromException(*e).code() == StatusCode::kPermissionDenied);
  } else {
    FAIL("openJob as another node succeeded");
  }
  CHECK(loopback.Hello("node-b").ok());
}

TEST_CASE("the server refuses another protocol version, naming both") {
  PeerService service({"node-a"});
  Loopback loopback([&service](const PeerInfo& peer, kj::AsyncIoContext&) -> capnp::Capability::Client {
    return kj::heap<PeerServer>(service, peer);
  });
  auto request = loopback.connection->Bootstrap<rpc::Peer>().helloRequest();
  request.setNode("node-b");
  request.setProtocol(3);
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([&] { request.send().wait(loopback.io.waitScope); })) {
    const Status status = rpc_status::FromException(*e);
    CHECK(status.code() == StatusCode::kFailedPrecondition);
    CHECK(status.message() ==
          "node 'node-b' speaks daemon-to-daemon protocol 3, this daemon speaks 5");
  } else {
    FAIL("hello with protocol 3 succeeded");
  }
}

TEST_CASE("SayHello refuses a server of another protocol version, naming both") {
  Loopback loopback(
      [](const PeerInfo&, kj::AsyncIoContext&) -> capnp::Capability::Client { return kj::heap<FuturePeer>(); });
  Result<PeerHello> hello = loopback.Hello("node-b");
  REQUIRE_FALSE(hello.ok());
  CHECK(hello.status().code() == StatusCode::kFailedPrecondition);
  CHECK(hello.status().message() ==
        "node 'future' speaks daemon-to-daemon protocol 6, this daemon speaks 5");
}

TEST_CASE("CheckPeerProtocol") {
  CHECK(CheckPeerProtocol("n", kPeerProtocol).ok());
  CHECK(CheckPeerProtocol("n", 0).code() == StatusCode::kFailedPrecondition);
}

rpc::JobParams::Builder SetParams(rpc::JobParams::Builder b) {
  b.setDataset("d");
  b.setNumSamples(64);
  b.setBatchSize(4);
  b.setWorldSize(4);
  b.setSeed(3);
  b.setShuffle(true);
  return b;
}

TEST_CASE("exchange serves only the ranks joined through the calling connection") {
  JobLedger ledger;
  PeerService service({"node-a", &ledger});
  Loopback loopback([&service](const PeerInfo& peer, kj::AsyncIoContext&) -> capnp::Capability::Client {
    return kj::heap<PeerServer>(service, peer);
  });
  auto& ws = loopback.io.waitScope;
  rpc::Peer::Client peer = loopback.connection->Bootstrap<rpc::Peer>();
  std::vector<rpc::Coordination::Client> members;
  for (uint32_t rank : {0u, 1u}) {
    auto join = peer.joinJobRequest();
    join.setJob("j");
    join.setRank(rank);
    SetParams(join.initParams());
    join.setNode("node-b");
    members.push_back(join.send().wait(ws).getCoordination());
  }
  // Rank 3 asks for another seed: refused, and its exchange entry says why.
  auto refused = peer.joinJobRequest();
  refused.setJob("j");
  refused.setRank(3);
  SetParams(refused.initParams()).setSeed(4);
  refused.setNode("node-b");
  auto refused_response = refused.send();

  auto exchange = peer.exchangeRequest();
  exchange.setJob("j");
  auto wants = exchange.initWants(4);
  for (uint32_t i = 0; i < 4; ++i) wants[i].setRank(i);  // rank 2 joined nowhere
  auto response = exchange.send().wait(ws);
  REQUIRE(response.getResults().size() == 4);
  for (uint32_t i = 0; i < 2; ++i) {
    auto entry = response.getResults()[i];
    CHECK(entry.getRank() == i);
    REQUIRE(entry.isLease());
    CHECK(entry.getLease().getBatch() == 0);
    // Positions, not ids: 64 samples, G = 16, rank i's slice of step 0.
    CHECK(entry.getLease().getSampleIds().size() == 0);
    CHECK(entry.getLease().getBegin() == 4 * i);
    CHECK(entry.getLease().getEnd() == 4 * i + 4);
  }
  REQUIRE(response.getResults()[2].isError());
  CHECK(std::string(response.getResults()[2].getError()) ==
        "not_found: job 'j': rank 2 is not joined through this connection");
  REQUIRE(response.getResults()[3].isError());
  CHECK_THAT(std::string(response.getResults()[3].getError()),
             Catch::Contains("seed: job 'j' has 3, rank 3 asked for 4") &&
                 Catch::Contains("node 'node-b'"));
  CHECK_FALSE(refused_response.then([](auto&&) { return true; }, [](kj::Exception&&) {
    return false;
  }).wait(ws));

  // Commits: rank 0's lease is consumed; rank 1 holds no lease of batch 5.
  auto commit = peer.exchangeRequest();
  commit.setJob("j");
  auto commits = commit.initCommits(2);
  commits[0].setRank(0);
  commits[1].setRank(1);
  commits[1].setBatch(5);
  auto committed = commit.send().wait(ws);
  REQUIRE(committed.getCommitErrors().size() == 1);
  CHECK(std::string(committed.getCommitErrors()[0]) ==
        "not_found: job 'j': rank 1 holds no lease of batch 5 of epoch 0");
  CHECK(ledger.Summaries().at(0).batches_committed == 1);

  // Another connection (another node) cannot act for these ranks.
  auto other = ConnectToPeer(*loopback.io.provider, nullptr,
                             "127.0.0.1:" + std::to_string(loopback.listener->port()))
                   .wait(ws);
  REQUIRE(other.ok());
  auto stranger = (*other)->Bootstrap<rpc::Peer>().exchangeRequest();
  stranger.setJob("j");
  stranger.initCommits(1)[0].setRank(0);
  stranger.initWants(1)[0].setRank(0);
  auto strange = stranger.send().wait(ws);
  CHECK(strange.getResults()[0].isError());
  CHECK(strange.getCommitErrors().size() == 1);
  CHECK(ledger.Summaries().at(0).batches_leased == 2);

  // Lists are bounded by the ranks joined through the connection.
  auto flood = peer.exchangeRequest();
  flood.setJob("j");
  flood.initWants(17);
  Status flooded = Status::Ok();
  flood.send().then([](auto&&) {}, [&](kj::Exception&& e) {
    flooded = rpc_status::FromException(e);
  }).wait(ws);
  CHECK(flooded.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(flooded.message(), Catch::Contains("17 wants for 2 ranks"));

  // Releasing a rank's Coordination leaves the job: its entries are refused from then on.
  members[1] = nullptr;
  auto after = peer.exchangeRequest();
  after.setJob("j");
  after.initWants(1)[0].setRank(1);
  auto left = after.send().wait(ws);
  CHECK(left.getResults()[0].isError());
}

}  // namespace
}  // namespace ember::daemon
