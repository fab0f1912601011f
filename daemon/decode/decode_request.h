// Remote decoding: what a trainer node's stream asks a worker daemon to decode (a decode
// rows stream: daemon/rpc/decode_rows.h, schemas/peer.capnp), and what comes back.
// Transport-free; daemon/rpc translates.
#ifndef EMBER_DAEMON_DECODE_DECODE_REQUEST_H_
#define EMBER_DAEMON_DECODE_DECODE_REQUEST_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "daemon/access/principal.h"
#include "ember/status.h"

namespace ember::daemon {

// Samples `ids` of `dataset`, decoded with SampleContext{seed, epoch} (so with the same
// augmentation as the trainer node would apply). `fingerprint`: the trainer node's copy's;
// the worker refuses another (kFailedPrecondition naming both). `caller`: the stream's
// owner, as the trainer node reports it (the worker checks it may read the dataset).
struct DecodeRequest {
  std::string dataset;
  uint64_t fingerprint = 0;
  uint64_t seed = 0;
  uint64_t epoch = 0;
  std::vector<uint64_t> ids;
  Principal caller;
};

// The decoded rows, tensor-major: for each of the dataset's tensors in order, ids.size()
// rows of its SampleBytes(), back to back. A sample that failed to read or decode has
// zeros there and an entry in `failed` (its index in ids, and why).
struct DecodedRows {
  std::vector<uint8_t> bytes;
  std::vector<std::pair<uint32_t, Status>> failed;
};

// At most this many ids per request (the trainer splits larger batches).
inline constexpr size_t kMaxDecodeIds = 1024;

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DECODE_DECODE_REQUEST_H_
