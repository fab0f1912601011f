// The client side of schemas/peer.capnp: calls on another daemon's rpc::Peer capability
// (from ConnectToPeer), translated to Status / Result.
// Thread-safety: on the RPC event-loop thread, like the capability.
#ifndef EMBER_DAEMON_RPC_PEER_CLIENT_H_
#define EMBER_DAEMON_RPC_PEER_CLIENT_H_

#include <cstdint>
#include <string>

#include "ember/status.h"
#include "schemas/peer.capnp.h"

namespace ember::daemon {

// What the other daemon said in hello.
struct PeerHello {
  std::string node;
  uint32_t protocol = 0;
};

// Says hello as node `node` with kPeerProtocol. Never fails the promise: errors are the
// server's (rpc_status), kUnavailable for a dropped connection, or kFailedPrecondition
// (CheckPeerProtocol) when the server answers with another protocol version.
kj::Promise<Result<PeerHello>> SayHello(rpc::Peer::Client peer, const std::string& node);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_RPC_PEER_CLIENT_H_
