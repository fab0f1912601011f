// What every communicator factory (Gloo, NCCL, shared memory) checks of its arguments
// before its rendezvous, with one wording for all (internal).
#ifndef EMBER_SDK_SYNC_COMMUNICATOR_ARGS_H_
#define EMBER_SDK_SYNC_COMMUNICATOR_ARGS_H_

#include <chrono>
#include <limits>
#include <string>

namespace ember::sdk {

// Returns "<backend> communicator '<name>' (rank R of W)", the start of the factory's
// error messages, once 1 <= world_size <= max_world_size, 0 <= rank < world_size and
// timeout > 0. Throws c10::Error otherwise: "<where>: world size must be at least 1"
// ("... must be 1 to <max_world_size>" when there is a bound), "<where>: rank is outside
// the world", "<where>: timeout must be positive, got <T> ms".
std::string CheckCommunicatorArgs(const std::string& backend, const std::string& name, int rank,
                                  int world_size, std::chrono::milliseconds timeout,
                                  int max_world_size = std::numeric_limits<int>::max());

}  // namespace ember::sdk

#endif  // EMBER_SDK_SYNC_COMMUNICATOR_ARGS_H_
