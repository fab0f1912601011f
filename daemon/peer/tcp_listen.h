// Binding a TCP endpoint given as HOST:PORT on a kj event loop, for the daemon's endpoints
// (peers: key `listen`; metrics: key `metrics_listen`).
#ifndef EMBER_DAEMON_PEER_TCP_LISTEN_H_
#define EMBER_DAEMON_PEER_TCP_LISTEN_H_

#include <kj/async-io.h>

#include <string>

#include "ember/status.h"

namespace ember::daemon {

// Resolves `address` (HOST:PORT, host_port.h; port 0: any free one) and listens on it.
// Blocks on io.waitScope while HOST is resolved: call it outside any promise callback.
// kInvalidArgument for a bad address; kUnavailable "cannot listen for WHAT on ADDRESS:
// REASON" when it cannot be resolved or bound (`what`: "peers", "metrics").
Result<kj::Own<kj::ConnectionReceiver>> ListenTcp(kj::AsyncIoContext& io,
                                                  const std::string& address,
                                                  const std::string& what);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_PEER_TCP_LISTEN_H_
