// DecodeChannel: a trainer node's way to a worker daemon's decode pool (Peer.decode over
// the peer connection: daemon/rpc/peer_channel). Transport-free interface, so that
// RemoteDecoders can be tested over a fake.
//
// Thread-safety: the event loop's thread only (the channel's).
#ifndef EMBER_DAEMON_DECODE_DECODE_CHANNEL_H_
#define EMBER_DAEMON_DECODE_DECODE_CHANNEL_H_

#include <kj/async.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "daemon/decode/decode_request.h"
#include "ember/status.h"

namespace ember::daemon {

// Decoded rows as they arrived (DecodedRows' layout), viewed where the transport read
// them: `hold` keeps that memory, so the rows are copied once, into the ring's slot. It
// belongs to the channel's event loop: its last reference is dropped there.
struct RemoteRows {
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::vector<std::pair<uint32_t, Status>> failed;
  std::shared_ptr<void> hold;
};

class DecodeChannel {
 public:
  virtual ~DecodeChannel() = default;
  // The worker's answer; a failed call (refused, connection lost) is its Status, naming
  // the worker.
  virtual kj::Promise<Result<RemoteRows>> Decode(const DecodeRequest& request) = 0;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DECODE_DECODE_CHANNEL_H_
