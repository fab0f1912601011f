// What a job's name may be: what ranks, emberctl and the logs all show it as.
#ifndef EMBER_DAEMON_COORDINATOR_JOB_NAME_H_
#define EMBER_DAEMON_COORDINATOR_JOB_NAME_H_

#include <cstddef>
#include <string>

#include "ember/status.h"

namespace ember::daemon {

inline constexpr size_t kMaxJobNameBytes = 256;

// OK for 1..kMaxJobNameBytes bytes with no control characters; else kInvalidArgument
// "job: ..." saying what is wrong (a long name is not quoted in full).
Status CheckJobName(const std::string& job);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_COORDINATOR_JOB_NAME_H_
