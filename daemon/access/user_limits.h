// What one uid may hold in emberd at once (config `user_limits`), so that no user can
// take what every other user needs. Privileged principals (root, the daemon's own uid)
// are bound only by the daemon-wide limits.
#ifndef EMBER_DAEMON_ACCESS_USER_LIMITS_H_
#define EMBER_DAEMON_ACCESS_USER_LIMITS_H_

#include <cstdint>

namespace ember::daemon {

struct UserLimits {
  double shm_share = 0.5;         // of shm_budget, for the uid's rings
  uint32_t streams = 256;         // open streams
  uint32_t datasets = 256;        // registered datasets
  uint32_t jobs = 64;             // jobs with live memberships (key-value stores)
  uint32_t connections = 256;     // connections to the unix socket
  uint32_t pending_segments = 64; // shared-memory segments waiting for their ranks
  uint64_t dataset_memory = uint64_t{4} << 30;  // bytes of its datasets loaded in memory (idx)
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_ACCESS_USER_LIMITS_H_
