// PeerWireClient: a light client of the daemon-to-daemon interface (schemas/peer.capnp's
// Peer) for simulated nodes (bench/coordinator_scale): it speaks Cap'n Proto's RPC protocol
// (capnp/rpc.capnp) on the stream itself, without an RpcSystem, so that one process can
// stand in for a thousand nodes at a fraction of a real client's CPU. The server sees the
// messages a node's daemon sends (Bootstrap; Call and Finish, the Finish of each call
// travelling with the next one, as the proxy's does) and does the same work for them.
//
// One call at a time; the capabilities a call returns (a joinJob's Coordination) are kept
// for the connection's life and never called (a rank leaves when the connection ends).
// Thread-safety: the event loop's thread only, as the stream.
#ifndef EMBER_BENCH_PEER_WIRE_CLIENT_H_
#define EMBER_BENCH_PEER_WIRE_CLIENT_H_

#include <capnp/any.h>
#include <capnp/message.h>
#include <kj/async-io.h>
#include <kj/function.h>

#include <cstdint>

namespace ember::bench {

class PeerWireClient {
 public:
  // The answer to one call: `content` (the results struct) lives as long as `message`.
  struct Answer {
    kj::Own<capnp::MessageReader> message;
    capnp::AnyPointer::Reader content;
  };

  // `stream`: a connection past the listener's accepted byte (peer_wire.h).
  explicit PeerWireClient(kj::Own<kj::AsyncIoStream> stream) : stream_(kj::mv(stream)) {}

  // Asks for the bootstrap capability (the Peer); calls target it from then on.
  kj::Promise<void> Bootstrap();

  // Calls method `method` of Peer (its ordinal in peer.capnp) with the params `fill`
  // writes; fails with the server's exception (its reason) or on a malformed answer.
  kj::Promise<Answer> Call(uint16_t method,
                           kj::Function<void(capnp::AnyPointer::Builder params)> fill);

 private:
  // Writes the pending Finish, if any, and `message`; then reads the Return of `question`.
  kj::Promise<Answer> Ask(capnp::MallocMessageBuilder& message, uint32_t question);

  kj::Own<kj::AsyncIoStream> stream_;
  uint32_t peer_ = 0;          // the Peer's import id
  bool have_peer_ = false;
  bool finish_pending_ = false;  // the last question's Finish, sent with the next message
  static constexpr uint32_t kQuestion = 0;  // one call at a time: its id is free again
};

}  // namespace ember::bench

#endif  // EMBER_BENCH_PEER_WIRE_CLIENT_H_
