#include "daemon/peer/tcp_listen.h"

#include "daemon/peer/host_port.h"

namespace ember::daemon {

Result<kj::Own<kj::ConnectionReceiver>> ListenTcp(kj::AsyncIoContext& io,
                                                  const std::string& address,
                                                  const std::string& what) {
  EMBER_ASSIGN_OR_RETURN(HostPort host_port, ParseHostPort(address));
  kj::Own<kj::ConnectionReceiver> receiver;
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([&] {
    receiver = io.provider->getNetwork()
                   .parseAddress(kj::StringPtr(host_port.ToString().c_str()))
                   .wait(io.waitScope)
                   ->listen();
  })) {
    return Unavailable("cannot listen for " + what + " on " + address + ": " +
                       e->getDescription().cStr());
  }
  return receiver;
}

}  // namespace ember::daemon
