// Shared-memory Communicator for CPU tensors of ranks on one node.
//
// All ranks map one zero-filled segment (from emberd, see MakeSharedMemoryCommunicator in
// ember/model_sync.h; tests use a file) and reduce through it: each round every rank
// copies up to kShmChunkBytes of its tensors into its own slot; after a barrier, rank r
// sums slice r of the round over all slots; after a second barrier every rank copies
// the summed slices out. Slots are double-buffered, so two barriers per round suffice.
// Every rank receives the same bits (each slice is summed by one rank).
//
// Barriers are a counter and a generation word in the segment: a rank that arrives
// early spins for a few microseconds, then sleeps on a futex. No helper threads: a
// collective runs on the thread that calls it or waits for it, so it never competes
// with the training loop for a core. AllReduceSumAsync queues the collective; it runs,
// in launch order with every earlier queued one, when it or a later one is waited or
// when the next blocking call is made.
//
// Failure: while waiting, a rank checks its peers through pidfds; a peer that exited
// before arriving fails the collective at once, naming its rank and pid. Otherwise the
// communicator's timeout bounds every wait. The first rank to fail records why in the
// segment and wakes the others, which fail too, quoting it. After an error the
// communicator is unusable.
#ifndef EMBER_SDK_SYNC_SHM_COMMUNICATOR_H_
#define EMBER_SDK_SYNC_SHM_COMMUNICATOR_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "ember/communicator.h"

namespace ember::sdk {

// Bytes of one rank's slot in one of the two buffers.
constexpr uint64_t kShmChunkBytes = uint64_t{1} << 20;
// Largest world a segment supports.
constexpr int kShmMaxRanks = 256;

// Size of the segment that `world_size` ranks share (1 <= world_size <= kShmMaxRanks).
uint64_t ShmSegmentBytes(int world_size);

// Attaches rank `rank` of `world_size` to the segment behind `fd` (which must hold
// exactly ShmSegmentBytes(world_size) bytes, zero-filled before the first rank attached;
// the communicator maps it and does not keep or close `fd`). Blocks until all ranks have
// attached, at most `timeout`, which also bounds every later collective. Throws
// c10::Error naming the group, rank and cause: bad arguments, a segment of the wrong
// size, a rank number attached twice, or ranks missing at the deadline. `name` appears
// in error messages only.
std::unique_ptr<Communicator> MakeShmCommunicator(int fd, int rank, int world_size,
                                                  std::chrono::milliseconds timeout,
                                                  const std::string& name = "default");

}  // namespace ember::sdk

#endif  // EMBER_SDK_SYNC_SHM_COMMUNICATOR_H_
