// CoordinatorChannel: what a node's RemoteCoordinator needs of the way to the daemon that
// coordinates a job, without saying how it is reached. daemon/rpc/peer_channel implements
// it over Cap'n Proto and TLS (schemas/peer.capnp); daemon/service/local_peer_channel over
// an in-process PeerSession, so that reconnects, rejoins and refusals are tested without
// sockets.
//
// Glossary
//   connection   one session at the coordinator, numbered by a generation that grows with
//                each one opened. A rank is a member on the connection it joined on only:
//                when that ends, the coordinator has dropped the rank and its leases.
//   membership   a rank joined on a connection; dropping its handle leaves the job.
//
// Thread-safety: the event loop's thread only (the one the channel was created on).
#ifndef EMBER_DAEMON_COORDINATOR_COORDINATOR_CHANNEL_H_
#define EMBER_DAEMON_COORDINATOR_COORDINATOR_CHANNEL_H_

#include <kj/async.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "daemon/coordinator/job_coordinator.h"
#include "ember/status.h"

namespace ember::daemon {

// A rank's join through another node's daemon (Peer.joinJob).
struct PeerJoin {
  std::string job;
  uint32_t rank = 0;
  JobParams params;
  std::string node;  // the calling daemon's node name, for messages and Summaries
  std::vector<HeldBatch> held;  // what the rank holds when it joins again
};

// What an exchange answers: leases[i] answers wants[i]; the failed commits' errors.
struct ExchangeAnswer {
  std::vector<Result<BatchLease>> leases;
  std::vector<Status> commit_errors;
};

// What a channel carried, over all its connections.
struct ChannelTraffic {
  uint64_t connections = 0;     // opened (or tried)
  uint64_t opens = 0;           // stores opened at the coordinator (Peer.openJob)
  uint64_t bytes_sent = 0;      // on the wire, before TLS; 0 where there is no wire
  uint64_t bytes_received = 0;
};

class CoordinatorChannel {
 public:
  // A rank's membership on the connection it joined on; destroying it leaves the job.
  class Membership {
   public:
    virtual ~Membership() = default;
  };

  virtual ~CoordinatorChannel() = default;

  // The live connection's generation, opening a connection first if there is none (or the
  // last one ended). Opening does not wait: calls made meanwhile go out once it is up, or
  // fail kUnavailable with why it could not be opened.
  virtual uint64_t Connect() = 0;
  // Drops the live connection, if any: its memberships end at the coordinator.
  virtual void Reset() = 0;
  // Why the last connection ended or could not be opened, for the errors of the calls that
  // were meant for it.
  virtual std::string error() const = 0;

  // Joins the rank on the live connection (Connect() first). Does not wait: a refusal
  // answers the rank's next exchange entries (the coordinator remembers it).
  virtual std::unique_ptr<Membership> Join(const PeerJoin& join) = 0;
  // One exchange for the job's ranks joined on the live connection: commits first, then
  // wants, each in order. Fails (kUnavailable and the like) as a whole when the call could
  // not be made or answered.
  virtual kj::Promise<Result<ExchangeAnswer>> Exchange(const std::string& job,
                                                       std::vector<RankBatch> commits,
                                                       std::vector<RankWant> wants) = 0;

  virtual ChannelTraffic traffic() const = 0;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_COORDINATOR_COORDINATOR_CHANNEL_H_
