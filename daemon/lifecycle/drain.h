// Draining at SIGTERM: new streams are refused and the batches being written finish, with
// a deadline, before emberd closes its streams and exits.
#ifndef EMBER_DAEMON_LIFECYCLE_DRAIN_H_
#define EMBER_DAEMON_LIFECYCLE_DRAIN_H_

#include <kj/async.h>
#include <kj/timer.h>

#include <cstddef>

#include "daemon/stream/stream_manager.h"

namespace ember::daemon {

// Calls streams.BeginDrain(), then resolves, on the calling thread's event loop (which
// keeps serving meanwhile), once no batch is in flight or `timeout` has passed, with the
// number of batches still in flight then (0: drained). Polls every 10 ms.
kj::Promise<size_t> DrainStreams(kj::Timer& timer, StreamManager& streams, kj::Duration timeout);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_LIFECYCLE_DRAIN_H_
