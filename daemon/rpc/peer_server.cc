#include "daemon/rpc/peer_server.h"

#include <spdlog/spdlog.h>

#include "common/rpc_status.h"
#include "daemon/rpc/peer_protocol.h"

namespace ember::daemon {

kj::Promise<void> PeerServer::hello(HelloContext context) {
  const auto params = context.getParams();
  const std::string node = params.getNode();
  Status protocol = CheckPeerProtocol(node, params.getProtocol());
  if (!protocol.ok()) {
    spdlog::warn("peer {}: {}", peer_.address, protocol.message());
    kj::throwFatalException(rpc_status::ToException(protocol));
  }
  spdlog::info("peer {} is node '{}' (certificate CN '{}')", peer_.address, node,
               peer_.common_name);
  auto results = context.getResults();
  results.setNode(node_);
  results.setProtocol(kPeerProtocol);
  return kj::READY_NOW;
}

}  // namespace ember::daemon
