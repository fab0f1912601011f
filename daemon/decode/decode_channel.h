// DecodeChannel: a trainer node's way to a worker daemon's decode pool (decode rows streams
// to its peer endpoint: daemon/rpc/decode_rows). Transport-free interface, so that
// RemoteDecoders can be tested over a fake. Blocking: RemoteDecoders calls it from threads
// of its own, so that no event loop carries the rows.
//
// Thread-safety: all methods from any thread; calls run side by side.
#ifndef EMBER_DAEMON_DECODE_DECODE_CHANNEL_H_
#define EMBER_DAEMON_DECODE_DECODE_CHANNEL_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "daemon/decode/decode_request.h"
#include "ember/status.h"

namespace ember::daemon {

// Where a request's rows go: for each of the dataset's tensors in order, ids.size() rows of
// row_bytes[t] back to back from tensors[t] (a part of a ring slot's tensor).
struct RowsDestination {
  std::vector<uint8_t*> tensors;
  std::vector<uint64_t> row_bytes;

  uint64_t Bytes(uint64_t rows) const {
    uint64_t bytes = 0;
    for (uint64_t b : row_bytes) bytes += rows * b;
    return bytes;
  }
};

// What a worker said of the rows it wrote: the failed ones (index in ids, and why; their
// rows are zeros), and the bytes it sent.
struct RemoteAnswer {
  std::vector<std::pair<uint32_t, Status>> failed;
  uint64_t bytes = 0;
};

class DecodeChannel {
 public:
  virtual ~DecodeChannel() = default;
  // Asks the worker for `request`'s rows and reads them into `into` (the socket's read is
  // their one copy), by `deadline`. Writes only inside `into`, and only until it returns. A
  // failed call (refused, connection lost, past the deadline, cancelled) is its Status,
  // naming the worker; `into` may then hold part of the rows.
  virtual Result<RemoteAnswer> Decode(const DecodeRequest& request, const RowsDestination& into,
                                      std::chrono::steady_clock::time_point deadline) = 0;
  // Calls in progress and later ones end at once with kCancelled (the daemon is stopping).
  virtual void Cancel() = 0;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DECODE_DECODE_CHANNEL_H_
