// The version of the daemon-to-daemon protocol (schemas/peer.capnp) this build speaks;
// both ends of a connection check it in hello.
#ifndef EMBER_DAEMON_RPC_PEER_PROTOCOL_H_
#define EMBER_DAEMON_RPC_PEER_PROTOCOL_H_

#include <cstdint>
#include <string>

#include "ember/status.h"

namespace ember::daemon {

// 2: Peer.exchange, which a node's daemon uses for its ranks' leases and commits.
// 3: the owner of a rank (JobParams) and of a store's caller (openJob).
// 4: a lease carries its positions of the epoch's order (begin, end), not sample ids.
// 5: remote decode workers' rows leave Peer (no Peer.decode) for decode rows streams.
inline constexpr uint32_t kPeerProtocol = 5;

// OK when `theirs` is kPeerProtocol; else kFailedPrecondition naming both versions:
// "node 'gpu-07' speaks daemon-to-daemon protocol 3, this daemon speaks 2".
Status CheckPeerProtocol(const std::string& node, uint32_t theirs);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_RPC_PEER_PROTOCOL_H_
