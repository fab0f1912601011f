// BufferReads: a kj::AsyncIoStream that reads another one in large chunks, so that the
// RPC system's small reads (a message's first word, then its body, then the next
// message's) cost one read of the socket for all the bytes that have arrived, not one
// each. Writes pass through unbuffered.
// Thread-safety: the event loop's thread only, as the stream it wraps.
#ifndef EMBER_DAEMON_PEER_READ_BUFFER_H_
#define EMBER_DAEMON_PEER_READ_BUFFER_H_

#include <kj/async-io.h>

#include <cstddef>

namespace ember::daemon {

// Wraps `inner`, reading it `capacity` bytes at a time (reads at least that large go to
// the caller's buffer directly). `already_read` (at most `capacity` bytes): bytes read
// from `inner` before, which the first reads return first.
kj::Own<kj::AsyncIoStream> BufferReads(kj::Own<kj::AsyncIoStream> inner,
                                       size_t capacity = 16 * 1024,
                                       kj::ArrayPtr<const kj::byte> already_read = nullptr);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_PEER_READ_BUFFER_H_
