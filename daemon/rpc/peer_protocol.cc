#include "daemon/rpc/peer_protocol.h"

namespace ember::daemon {

Status CheckPeerProtocol(const std::string& node, uint32_t theirs) {
  if (theirs == kPeerProtocol) return Status::Ok();
  return FailedPrecondition("node '" + node + "' speaks daemon-to-daemon protocol " +
                            std::to_string(theirs) + ", this daemon speaks " +
                            std::to_string(kPeerProtocol));
}

}  // namespace ember::daemon
