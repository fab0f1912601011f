// PeerWireClient against a real PeerListener and PeerServer (plain TCP, in this process):
// the light client's bootstrap, hello, joinJob and exchange get the answers an RpcSystem
// client gets, a failed call fails with the server's reason, and the ranks it joined stay
// joined until its connection ends.
#include "bench/peer_wire_client.h"

#include <catch2/catch.hpp>
#include <kj/async-io.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "daemon/coordinator/job_ledger.h"
#include "daemon/peer/peer_listener.h"
#include "daemon/peer/peer_wire.h"
#include "daemon/rpc/peer_protocol.h"
#include "daemon/rpc/peer_server.h"
#include "schemas/peer.capnp.h"

namespace ember::bench {
namespace {

constexpr uint16_t kHello = 0, kJoinJob = 1, kExchange = 3;  // Peer's ordinals

// Ranks of the one job joined now; 0 once the job is gone (its last rank left).
size_t RanksJoined(daemon::JobLedger& ledger) {
  const std::vector<daemon::JobSummary> jobs = ledger.Summaries();
  size_t joined = 0;
  if (!jobs.empty())
    for (const daemon::RankProgress& rank : jobs[0].ranks) joined += rank.joined ? 1 : 0;
  return joined;
}

// Connects to 127.0.0.1:`port` and reads the accepted byte.
std::unique_ptr<PeerWireClient> Connect(kj::AsyncIoContext& io, uint16_t port) {
  auto address = io.provider->getNetwork().parseAddress("127.0.0.1", port).wait(io.waitScope);
  kj::Own<kj::AsyncIoStream> stream = address->connect().wait(io.waitScope);
  uint8_t accepted = 0;
  REQUIRE(stream->tryRead(&accepted, 1, 1).wait(io.waitScope) == 1);
  REQUIRE(accepted == daemon::kPeerAcceptedByte);
  return std::make_unique<PeerWireClient>(kj::mv(stream));
}

void Join(kj::AsyncIoContext& io, PeerWireClient& client, uint32_t rank) {
  client
      .Call(kJoinJob,
            [rank](capnp::AnyPointer::Builder params) {
              auto join = params.initAs<rpc::Peer::JoinJobParams>();
              join.setJob("j");
              join.setRank(rank);
              auto p = join.initParams();
              p.setDataset("d");
              p.setNumSamples(64);
              p.setBatchSize(8);
              p.setWorldSize(2);
              p.setSeed(3);
              join.setNode("sim");
            })
      .wait(io.waitScope);
}

TEST_CASE("the light client speaks to a PeerServer as an RpcSystem client would") {
  auto io = kj::setupAsyncIo();
  daemon::JobLedger ledger;
  daemon::PeerService service({"coord", &ledger});
  daemon::PeerListenerOptions options;
  options.serve_threads = GENERATE(0u, 1u);
  auto listener = daemon::PeerListener::Start(
      io, "127.0.0.1:0", nullptr,
      [&service](const daemon::PeerInfo& peer, kj::AsyncIoContext&) {
        return capnp::Capability::Client(kj::heap<daemon::PeerServer>(service, peer));
      },
      options);
  REQUIRE(listener.ok());
  const uint16_t port = (*listener)->port();
  {
    auto client = Connect(io, port);
    client->Bootstrap().wait(io.waitScope);
    auto hello = client
                     ->Call(kHello,
                            [](capnp::AnyPointer::Builder params) {
                              auto h = params.initAs<rpc::Peer::HelloParams>();
                              h.setNode("sim");
                              h.setProtocol(daemon::kPeerProtocol);
                            })
                     .wait(io.waitScope);
    CHECK(std::string(hello.content.getAs<rpc::Peer::HelloResults>().getNode()) == "coord");

    Join(io, *client, 0);
    Join(io, *client, 1);
    auto exchange = [&](bool commit) {
      return client
          ->Call(kExchange,
                 [commit](capnp::AnyPointer::Builder params) {
                   auto e = params.initAs<rpc::Peer::ExchangeParams>();
                   e.setJob("j");
                   if (commit) {
                     auto commits = e.initCommits(2);
                     commits[0].setRank(0);
                     commits[1].setRank(1);
                   }
                   auto wants = e.initWants(2);
                   wants[0].setRank(0);
                   wants[1].setRank(1);
                 })
          .wait(io.waitScope);
    };
    auto first = exchange(false);
    auto leases = first.content.getAs<rpc::Peer::ExchangeResults>().getResults();
    REQUIRE(leases.size() == 2);
    REQUIRE(leases[0].isLease());
    CHECK(leases[0].getLease().getBatch() == 0);
    CHECK(leases[1].getLease().getBegin() == 8);  // rank 1's slice of step 0 (G = 16)
    auto second = exchange(true);  // with the Finish of the first
    auto results = second.content.getAs<rpc::Peer::ExchangeResults>();
    CHECK(results.getCommitErrors().size() == 0);
    REQUIRE(results.getResults()[1].isLease());
    CHECK(results.getResults()[1].getLease().getBatch() == 1);
    CHECK(ledger.Summaries().at(0).batches_committed == 2);  // step 0, by both ranks

    // A call the server fails: its reason, and the connection goes on.
    auto refused = client->Call(kJoinJob, [](capnp::AnyPointer::Builder params) {
      auto join = params.initAs<rpc::Peer::JoinJobParams>();
      join.setJob("j");
      join.setRank(1);
      auto p = join.initParams();
      p.setDataset("d");
      p.setNumSamples(64);
      p.setBatchSize(8);
      p.setWorldSize(2);
      p.setSeed(4);
    });
    std::string reason;
    refused.then([](PeerWireClient::Answer&&) {},
                 [&reason](kj::Exception&& e) { reason = e.getDescription().cStr(); })
        .wait(io.waitScope);
    CHECK_THAT(reason, Catch::Contains("job 'j': rank 1 is already joined"));  // before the params
    CHECK(exchange(false).content.getAs<rpc::Peer::ExchangeResults>().getResults()[0].isLease());
    CHECK(RanksJoined(ledger) == 2);
  }
  // The connection's end leaves the job: its ranks are gone.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (RanksJoined(ledger) != 0 && std::chrono::steady_clock::now() < deadline)
    io.provider->getTimer().afterDelay(5 * kj::MILLISECONDS).wait(io.waitScope);
  CHECK(RanksJoined(ledger) == 0);
  (*listener)->Stop().wait(io.waitScope);
}

}  // namespace
}  // namespace ember::bench
