#include "daemon/rpc/peer_client.h"

#include "common/rpc_status.h"
#include "daemon/rpc/peer_protocol.h"

namespace ember::daemon {

kj::Promise<Result<PeerHello>> SayHello(rpc::Peer::Client peer, const std::string& node) {
  auto request = peer.helloRequest();
  request.setNode(node);
  request.setProtocol(kPeerProtocol);
  return request.send()
      .then([](capnp::Response<rpc::Peer::HelloResults>&& response) -> Result<PeerHello> {
        PeerHello hello{response.getNode(), response.getProtocol()};
        Status protocol = CheckPeerProtocol(hello.node, hello.protocol);
        if (!protocol.ok()) return protocol;
        return hello;
      })
      .catch_([](kj::Exception&& e) -> Result<PeerHello> {
        return rpc_status::FromException(e);
      });
}

}  // namespace ember::daemon
