// LocalPeerChannel: a CoordinatorChannel to a PeerService in the same process, with the
// faults a network has (a dropped connection, an answer lost after the coordinator applied
// the call, a coordinator that cannot be reached or does not answer), so that a
// RemoteCoordinator's reconnects, rejoins and refusals are tested without sockets or TLS.
// Each connection is a PeerSession, as each of PeerServer's is; answers come on a later
// turn of the event loop, as from a socket.
//
// Thread-safety: the event loop's thread only, like the sessions it makes.
#ifndef EMBER_DAEMON_SERVICE_LOCAL_PEER_CHANNEL_H_
#define EMBER_DAEMON_SERVICE_LOCAL_PEER_CHANNEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "daemon/coordinator/coordinator_channel.h"
#include "daemon/service/peer_service.h"

namespace ember::daemon {

class LocalPeerChannel final : public CoordinatorChannel {
 public:
  // `service` must outlive the channel and its memberships.
  explicit LocalPeerChannel(PeerService& service) : service_(service) {}

  uint64_t Connect() override;
  void Reset() override;
  std::string error() const override { return error_; }
  std::unique_ptr<Membership> Join(const PeerJoin& join) override;
  kj::Promise<Result<ExchangeAnswer>> Exchange(const std::string& job,
                                               std::vector<RankBatch> commits,
                                               std::vector<RankWant> wants) override;
  ChannelTraffic traffic() const override { return traffic_; }

  // Faults.
  // The live connection ends (the network dropped): its session and memberships end at the
  // coordinator, its exchanges in flight fail kUnavailable.
  void Drop();
  // While set, connections opened fail (an unreachable coordinator): calls on them fail
  // kUnavailable naming why.
  void set_unreachable(bool unreachable) { unreachable_ = unreachable; }
  // The next exchange is applied at the coordinator, then the connection drops before its
  // answer arrives.
  void LoseNextAnswer() { lose_next_answer_ = true; }
  // While set, exchanges are applied but never answered (a coordinator that hangs).
  void set_silent(bool silent) { silent_ = silent; }

  uint64_t exchanges() const { return exchanges_; }  // served by the coordinator

 private:
  struct Connection;
  class LocalMembership;

  PeerService& service_;
  std::shared_ptr<Connection> live_;
  uint64_t generation_ = 0;
  std::string error_ = "the connection it joined on ended";
  bool unreachable_ = false;
  bool lose_next_answer_ = false;
  bool silent_ = false;
  uint64_t exchanges_ = 0;
  ChannelTraffic traffic_;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_SERVICE_LOCAL_PEER_CHANNEL_H_
