#include "daemon/rpc/peer_channel.h"

#include <spdlog/spdlog.h>

#include "common/rpc_status.h"
#include "daemon/rpc/peer_client.h"
#include "daemon/rpc/peer_convert.h"

namespace ember::daemon {
namespace {

using peer_wire::FromRpc;
using peer_wire::ToRpc;

// A rank's Coordination capability: releasing it leaves the job at the coordinator.
class CoordinationMembership final : public CoordinatorChannel::Membership {
 public:
  explicit CoordinationMembership(rpc::Coordination::Client coordination)
      : coordination_(kj::mv(coordination)) {}
  ~CoordinationMembership() noexcept override {}  // kj's destructors may throw; not here

 private:
  rpc::Coordination::Client coordination_;
};

}  // namespace

PeerChannel::PeerChannel(kj::AsyncIoProvider& io, PeerTls* tls, std::string address,
                         std::string node, PeerConnectOptions connect)
    : io_(io),
      tls_(tls),
      address_(std::move(address)),
      node_(std::move(node)),
      connect_(std::move(connect)),
      error_log_(std::make_unique<rpc_status::ReportFailures>(
          [address = address_](const Status& s) {
            spdlog::warn("peer {}: {}", address, s.ToString());
          })),
      tasks_(kj::heap<kj::TaskSet>(*error_log_)) {}

PeerChannel::~PeerChannel() noexcept {
  tasks_ = nullptr;  // its continuations use the members below
  Reset();
}

ChannelTraffic PeerChannel::traffic() const {
  ChannelTraffic t = traffic_;
  t.bytes_sent = bytes_->bytes_sent;
  t.bytes_received = bytes_->bytes_received;
  return t;
}

void PeerChannel::Reset() {
  answered_.clear();
  peer_ = nullptr;
  connection_.reset();
}

uint64_t PeerChannel::Connect() {
  if (peer_ != nullptr) return generation_;
  const uint64_t generation = ++generation_;
  // The same connection serves job coordination and remote decoding: "peer".
  spdlog::info("connecting to peer {}", address_);
  ++traffic_.connections;
  PeerConnectOptions connect = connect_;
  connect.traffic = bytes_;
  auto connected =
      ConnectToPeer(io_, tls_, address_, connect)
          .then([this, generation](Result<std::unique_ptr<PeerConnection>> connection)
                    -> kj::Promise<rpc::Peer::Client> {
            if (!connection.ok())
              kj::throwFatalException(rpc_status::ToException(connection.status()));
            connection_ = std::move(connection).value();
            // Forget the connection when it ends, so the next Connect opens another.
            tasks_->add(connection_->OnDisconnect().then([this, generation] {
              if (generation != generation_) return;
              spdlog::warn("connection to peer {} ended", address_);
              error_ = "the connection ended";
              peer_ = nullptr;
            }));
            rpc::Peer::Client peer = connection_->Bootstrap<rpc::Peer>();
            return SayHello(peer, node_).then(
                [this, peer](Result<PeerHello> hello) mutable -> rpc::Peer::Client {
                  if (!hello.ok()) kj::throwFatalException(rpc_status::ToException(hello.status()));
                  spdlog::info("peer {} is node '{}'", address_, hello->node);
                  error_ = "the connection it joined on ended";
                  return peer;
                });
          })
          .catch_([this, generation](kj::Exception&& e) -> rpc::Peer::Client {
            error_ = rpc_status::FromException(e, Link()).message();
            // Not here: peer_ may be the last reference to the client this promise
            // resolves, and dropping it now would free the promise while it runs.
            tasks_->add(kj::evalLater([this, generation] {
              if (generation == generation_) peer_ = nullptr;
            }));
            kj::throwFatalException(kj::mv(e));
          });
  peer_ = rpc::Peer::Client(kj::mv(connected));
  return generation;
}

rpc::Peer::Client PeerChannel::Peer() {
  Connect();
  KJ_IF_MAYBE(peer, peer_) { return *peer; }
  KJ_UNREACHABLE;
}

std::unique_ptr<CoordinatorChannel::Membership> PeerChannel::Join(const PeerJoin& join) {
  auto request = Peer().joinJobRequest();
  request.setJob(join.job);
  request.setRank(join.rank);
  ToRpc(join.params, request.initParams());
  request.setNode(join.node);
  ToRpc(join.held, request.initHeld(join.held.size()));
  auto response = request.send();
  auto membership = std::make_unique<CoordinationMembership>(response.getCoordination());
  // A refusal comes back as the answer to the rank's next exchange entry.
  tasks_->add(response.ignoreResult().catch_([](kj::Exception&&) {}));
  return membership;
}

kj::Promise<Result<ExchangeAnswer>> PeerChannel::Exchange(const std::string& job,
                                                          std::vector<RankBatch> commits,
                                                          std::vector<RankWant> wants) {
  auto request = Peer().exchangeRequest();
  request.setJob(job);
  ToRpc(commits, request.initCommits(commits.size()));
  ToRpc(wants, request.initWants(wants.size()));
  answered_.erase(job);
  return request.send().then(
      [this, job](capnp::Response<rpc::Peer::ExchangeResults>&& response)
          -> Result<ExchangeAnswer> {
        ExchangeAnswer answer;
        for (auto entry : response.getResults()) {
          if (entry.isLease())
            answer.leases.push_back(FromRpc(entry.getLease()));
          else
            answer.leases.push_back(rpc_status::FromDescription(std::string(entry.getError())));
        }
        for (auto error : response.getCommitErrors())
          answer.commit_errors.push_back(rpc_status::FromDescription(std::string(error)));
        answered_.erase(job);
        answered_.emplace(job, kj::mv(response));
        return answer;
      },
      [this](kj::Exception&& e) -> Result<ExchangeAnswer> {
        return rpc_status::FromException(e, Link());
      });
}

rpc::Job::Client PeerChannel::OpenJob(const std::string& job, const Principal& caller) {
  ++traffic_.opens;
  auto request = Peer().openJobRequest();
  request.setJob(job);
  request.setNode(node_);
  ToRpc(caller, request.initCaller());
  return request.send().getJob();
}

}  // namespace ember::daemon
