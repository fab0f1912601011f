#include "sdk/sync/communicator_args.h"

#include <c10/util/Exception.h>

namespace ember::sdk {

std::string CheckCommunicatorArgs(const std::string& backend, const std::string& name, int rank,
                                  int world_size, std::chrono::milliseconds timeout,
                                  int max_world_size) {
  const std::string where = backend + " communicator '" + name + "' (rank " +
                            std::to_string(rank) + " of " + std::to_string(world_size) + ")";
  if (max_world_size == std::numeric_limits<int>::max()) {
    TORCH_CHECK(world_size >= 1, where, ": world size must be at least 1");
  } else {
    TORCH_CHECK(world_size >= 1 && world_size <= max_world_size, where,
                ": world size must be 1 to ", max_world_size);
  }
  TORCH_CHECK(rank >= 0 && rank < world_size, where, ": rank is outside the world");
  TORCH_CHECK(timeout.count() > 0, where, ": timeout must be positive, got ", timeout.count(),
              " ms");
  return where;
}

}  // namespace ember::sdk
