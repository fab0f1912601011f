// What a job's name may be: what ranks, emberctl and the logs all show it as.
#ifndef EMBER_DAEMON_COORDINATOR_JOB_NAME_H_
#define EMBER_DAEMON_COORDINATOR_JOB_NAME_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "daemon/access/name_scope.h"
#include "ember/status.h"

namespace ember::daemon {

inline constexpr size_t kMaxJobNameBytes = 256;
// A job's key: its name in its owner's scope (daemon/access/name_scope.h), what the
// coordinator, the stores and the journal hold.
inline constexpr size_t kMaxJobKeyBytes = kMaxJobNameBytes + kMaxScopeBytes;
// The default of config max_world_size.
inline constexpr uint32_t kDefaultMaxWorldSize = 65536;

// OK for 1..max_bytes bytes with no control characters; else kInvalidArgument "job: ..."
// saying what is wrong (a long name is not quoted in full). A session checks the name
// its caller gives; the layers below it, the key (kMaxJobKeyBytes).
Status CheckJobName(const std::string& job, size_t max_bytes = kMaxJobNameBytes);

// OK for 1..max_world_size ranks (config max_world_size); else kInvalidArgument
// "world_size: ...". What a job's world costs (its ranks' state, status lines) grows
// with it, so a request may not ask for any size it likes.
Status CheckWorldSize(uint64_t world_size, uint32_t max_world_size);

// How messages and logs name a job and one of its ranks: "job 'j'", "job 'j': rank 3".
std::string JobName(const std::string& job);
std::string RankName(const std::string& job, uint32_t rank);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_COORDINATOR_JOB_NAME_H_
