// CheckSameWorld: the first step of a store-based rendezvous (Gloo, NCCL). Every rank
// publishes the world size it was started with and compares it with each peer's, so that
// ranks started with different world sizes fail at once with both sizes named, instead
// of waiting out the timeout inside the backend's own rendezvous (Gloo) or in an
// initialization that cannot complete (NCCL).
#ifndef EMBER_SDK_SYNC_SAME_WORLD_H_
#define EMBER_SDK_SYNC_SAME_WORLD_H_

#include <chrono>
#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace ember::sdk {

// Sets "<prefix>/world_size/<rank>" to `world_size` in `store`, then reads every peer's
// (ranks 0 .. world_size-1), waiting for each up to `timeout` in all. Throws c10::Error:
//   "rank 1 was started with world size 3, this rank with 2 (every rank of the group
//    must be given the same world size)"
//   "rank 1 did not join within 300 ms"
// and errors of the store itself. A world of one returns at once, touching nothing.
// Blocks; thread-safe as the store is.
void CheckSameWorld(c10d::Store& store, const std::string& prefix, int rank, int world_size,
                    std::chrono::milliseconds timeout);

}  // namespace ember::sdk

#endif  // EMBER_SDK_SYNC_SAME_WORLD_H_
