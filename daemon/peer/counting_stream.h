// CountingStream: a kj::AsyncIoStream that counts the bytes passing through another one,
// for the coordination traffic a daemon reports (RemoteCoordinator, `bench/compare nodes_bench`).
// On a TLS stream it counts what the RPC system reads and writes, before encryption.
// Thread-safety: the event loop's thread only, as the stream it wraps.
#ifndef EMBER_DAEMON_PEER_COUNTING_STREAM_H_
#define EMBER_DAEMON_PEER_COUNTING_STREAM_H_

#include <kj/async-io.h>

#include <cstdint>
#include <memory>

namespace ember::daemon {

struct StreamTraffic {
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
};

// Wraps `inner`, adding what is written to and read from it to *traffic (shared, so
// that one counter can add up several connections).
kj::Own<kj::AsyncIoStream> CountTraffic(kj::Own<kj::AsyncIoStream> inner,
                                        std::shared_ptr<StreamTraffic> traffic);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_PEER_COUNTING_STREAM_H_
