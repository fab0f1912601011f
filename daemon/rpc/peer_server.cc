#include "daemon/rpc/peer_server.h"

#include <spdlog/spdlog.h>

#include <cstring>
#include <memory>
#include <utility>

#include "common/rpc_status.h"
#include "daemon/rpc/daemon_server.h"
#include "daemon/rpc/peer_convert.h"
#include "daemon/rpc/peer_protocol.h"

namespace ember::daemon {
namespace {

using peer_wire::FromRpc;
using peer_wire::FromRpcList;
using peer_wire::ToRpc;
using rpc_status::Throw;
using rpc_status::ValueOrThrow;

// One rank of another node in a job this daemon coordinates: its PeerRank, which leaves
// the job when this capability is released.
class CoordinationServer final : public rpc::Coordination::Server {
 public:
  explicit CoordinationServer(std::unique_ptr<PeerRank> rank) : rank_(std::move(rank)) {}

 protected:
  kj::Promise<void> next(NextContext context) override {
    ToRpc(ValueOrThrow(rank_->Next(context.getParams().getEpoch())),
          context.getResults().initLease());
    return kj::READY_NOW;
  }
  kj::Promise<void> commit(CommitContext context) override {
    const auto p = context.getParams();
    Status committed = rank_->Commit(p.getEpoch(), p.getBatch());
    if (!committed.ok()) Throw(committed);
    return kj::READY_NOW;
  }

 private:
  const std::unique_ptr<PeerRank> rank_;
};

}  // namespace

Status PeerServer::CheckNode(const std::string& claimed) const {
  if (peer_.common_name.empty() || claimed == peer_.common_name) return Status::Ok();
  return PermissionDenied("peer " + peer_.address + " calls itself node '" + claimed +
                          "', but its certificate is node '" + peer_.common_name +
                          "' (a node's certificate CN must be its name, config key node)");
}

kj::Promise<void> PeerServer::hello(HelloContext context) {
  const auto params = context.getParams();
  const std::string node = params.getNode();
  if (Status named = CheckNode(node); !named.ok()) {
    spdlog::warn("{}", named.message());
    Throw(named);
  }
  Status protocol = CheckPeerProtocol(node, params.getProtocol());
  if (!protocol.ok()) {
    spdlog::warn("peer {}: {}", peer_.address, protocol.message());
    Throw(protocol);
  }
  spdlog::info("peer {} is node '{}' (certificate CN '{}')", peer_.address, node,
               peer_.common_name);
  hello_node_ = node;
  auto results = context.getResults();
  results.setNode(service_.node());
  results.setProtocol(kPeerProtocol);
  return kj::READY_NOW;
}

kj::Promise<void> PeerServer::joinJob(JoinJobContext context) {
  const auto p = context.getParams();
  PeerJoin join;
  join.job = p.getJob();
  join.rank = p.getRank();
  join.params = FromRpc(p.getParams());
  join.node = p.getNode();
  if (Status named = CheckNode(join.node); !named.ok()) Throw(named);
  join.held = FromRpcList(p.getHeld());
  context.getResults().setCoordination(
      kj::heap<CoordinationServer>(ValueOrThrow(session_.Join(join))));
  return kj::READY_NOW;
}

kj::Promise<void> PeerServer::openJob(OpenJobContext context) {
  const auto p = context.getParams();
  if (Status named = CheckNode(p.getNode()); !named.ok()) Throw(named);
  if (job_home_) {
    if (home_ == nullptr) home_ = job_home_();
    auto forwarded = home_->capability().castAs<rpc::Peer>().openJobRequest();
    forwarded.setJob(p.getJob());
    forwarded.setNode(p.getNode());
    if (p.hasCaller()) forwarded.setCaller(p.getCaller());
    return context.tailCall(kj::mv(forwarded));
  }
  if (timer_ == nullptr)
    Throw(session_.NoJobs());
  // No caller (an older peer): unknown, owning nothing.
  const Principal caller = p.hasCaller() ? FromRpc(p.getCaller()) : Principal{};
  JobMembership* membership = ValueOrThrow(session_.OpenJob(p.getJob(), p.getNode(), caller));
  context.getResults().setJob(kj::heap<JobServer>(session_.StoreSession(), membership, *timer_,
                                                  /*node_local=*/false));
  return kj::READY_NOW;
}

kj::Promise<void> PeerServer::exchange(ExchangeContext context) {
  const auto p = context.getParams();
  const std::string job = p.getJob();
  ExchangeAnswer answer =
      ValueOrThrow(session_.Exchange(job, FromRpcList(p.getCommits()), FromRpcList(p.getWants())));
  auto results = context.getResults().initResults(answer.leases.size());
  for (size_t i = 0; i < answer.leases.size(); ++i) {
    results[i].setRank(p.getWants()[i].getRank());
    const Result<BatchLease>& lease = answer.leases[i];
    if (lease.ok())
      ToRpc(*lease, results[i].initLease());
    else
      results[i].setError(lease.status().ToString());
  }
  auto errors = context.getResults().initCommitErrors(answer.commit_errors.size());
  for (size_t i = 0; i < answer.commit_errors.size(); ++i)
    errors.set(i, answer.commit_errors[i].ToString());
  return kj::READY_NOW;
}

}  // namespace ember::daemon
