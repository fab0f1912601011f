#include "sdk/sync/same_world.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <c10/util/Exception.h>

#include "sdk/sync/error_message.h"

namespace ember::sdk {
namespace {

std::string Key(const std::string& prefix, int rank) {
  return prefix + "/world_size/" + std::to_string(rank);
}

}  // namespace

void CheckSameWorld(c10d::Store& store, const std::string& prefix, int rank, int world_size,
                    std::chrono::milliseconds timeout) {
  if (world_size <= 1) return;
  const std::string mine = std::to_string(world_size);
  store.set(Key(prefix, rank), std::vector<uint8_t>(mine.begin(), mine.end()));

  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + timeout;
  for (int peer = 0; peer < world_size; ++peer) {
    if (peer == rank) continue;
    const std::string key = Key(prefix, peer);
    // At least 1 ms: a zero timeout would mean "wait forever" to some stores.
    const auto left =
        std::max(std::chrono::milliseconds(1),
                 std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
    try {
      store.wait({key}, left);
    } catch (const std::exception& e) {
      TORCH_CHECK(false, "rank ", peer, " did not join within ", timeout.count(), " ms (",
                  ErrorMessage(e), ")");
    }
    const std::vector<uint8_t> bytes = store.get(key);
    const std::string theirs(bytes.begin(), bytes.end());
    TORCH_CHECK(theirs == mine, "rank ", peer, " was started with world size ", theirs,
                ", this rank with ", mine,
                " (every rank of the group must be given the same world size)");
  }
}

}  // namespace ember::sdk
