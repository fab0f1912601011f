// PeerChannel: the CoordinatorChannel to another node's daemon over its Peer endpoint
// (schemas/peer.capnp, mutual TLS through daemon/peer): a RemoteCoordinator's transport.
// Memberships are the rank's Coordination capabilities (dropping one releases it, and so
// leaves the job); an exchange is Peer.exchange. Besides the channel's calls, the store and
// barriers of a job at the coordinator (Peer.openJob), for the SDK's Job capability.
//
// Thread-safety: the event loop's thread only (the one it was created on); Reset() before
// the loop goes away.
#ifndef EMBER_DAEMON_RPC_PEER_CHANNEL_H_
#define EMBER_DAEMON_RPC_PEER_CHANNEL_H_

#include <kj/async-io.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "daemon/access/principal.h"
#include "common/rpc_status.h"
#include "daemon/coordinator/coordinator_channel.h"
#include "daemon/peer/peer_connector.h"
#include "daemon/peer/peer_tls.h"
#include "schemas/peer.capnp.h"

namespace ember::daemon {

class PeerChannel final : public CoordinatorChannel {
 public:
  // `address`: the coordinating daemon's HOST:PORT; `node`: this daemon's node name (its
  // hello and joins). `tls` null: plain TCP (tls: off). `io` and `tls` must outlive it.
  PeerChannel(kj::AsyncIoProvider& io, PeerTls* tls, std::string address, std::string node,
              PeerConnectOptions connect = {});
  ~PeerChannel() noexcept override;

  uint64_t Connect() override;
  void Reset() override;
  std::string error() const override { return error_; }
  std::unique_ptr<Membership> Join(const PeerJoin& join) override;
  kj::Promise<Result<ExchangeAnswer>> Exchange(const std::string& job,
                                               std::vector<RankBatch> commits,
                                               std::vector<RankWant> wants) override;
  ChannelTraffic traffic() const override;

  // The store and barriers of `job` at the coordinator (Peer.openJob) for a rank's trainer
  // identified as `caller`, pipelined: calls on it wait for the connection.
  rpc::Job::Client OpenJob(const std::string& job, const Principal& caller);

 private:
  // The coordinator's Peer capability on the live connection (Connect() first).
  rpc::Peer::Client Peer();
  // This channel's link, for what a lost connection says (rpc_status::FromException).
  rpc_status::Link Link() const { return {"coordinator " + address_, ""}; }

  kj::AsyncIoProvider& io_;
  PeerTls* const tls_;
  const std::string address_;
  const std::string node_;
  const PeerConnectOptions connect_;

  std::unique_ptr<rpc_status::ReportFailures> error_log_;
  kj::Own<kj::TaskSet> tasks_;
  std::unique_ptr<PeerConnection> connection_;
  kj::Maybe<rpc::Peer::Client> peer_;
  uint64_t generation_ = 0;
  std::string error_ = "the connection it joined on ended";
  // Each job's last exchange answer, released when the job's next exchange is sent: its
  // Finish message then reaches the coordinator with the next call, one read for both.
  std::map<std::string, capnp::Response<rpc::Peer::ExchangeResults>> answered_;
  ChannelTraffic traffic_;  // but its bytes, counted in bytes_
  std::shared_ptr<StreamTraffic> bytes_ = std::make_shared<StreamTraffic>();
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_RPC_PEER_CHANNEL_H_
