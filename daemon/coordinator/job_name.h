// What a job's name may be: what ranks, emberctl and the logs all show it as.
#ifndef EMBER_DAEMON_COORDINATOR_JOB_NAME_H_
#define EMBER_DAEMON_COORDINATOR_JOB_NAME_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "ember/status.h"

namespace ember::daemon {

inline constexpr size_t kMaxJobNameBytes = 256;

// OK for 1..kMaxJobNameBytes bytes with no control characters; else kInvalidArgument
// "job: ..." saying what is wrong (a long name is not quoted in full).
Status CheckJobName(const std::string& job);

// How messages and logs name a job and one of its ranks: "job 'j'", "job 'j': rank 3".
std::string JobName(const std::string& job);
std::string RankName(const std::string& job, uint32_t rank);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_COORDINATOR_JOB_NAME_H_
