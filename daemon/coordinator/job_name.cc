#include "daemon/coordinator/job_name.h"

namespace ember::daemon {

Status CheckJobName(const std::string& job, size_t max_bytes) {
  if (job.empty()) return InvalidArgument("job: must not be empty");
  if (job.size() > max_bytes)
    return InvalidArgument("job: a name of " + std::to_string(job.size()) +
                           " bytes is longer than " + std::to_string(max_bytes) + " ('" +
                           job.substr(0, 32) + "...')");
  for (size_t i = 0; i < job.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(job[i]);
    if (c < 0x20 || c == 0x7f)
      return InvalidArgument("job: byte " + std::to_string(i) +
                             " of the name is control character " + std::to_string(c));
  }
  return Status::Ok();
}

Status CheckWorldSize(uint64_t world_size, uint32_t max_world_size) {
  if (world_size == 0) return InvalidArgument("world_size: must be at least 1");
  if (world_size > max_world_size)
    return InvalidArgument("world_size: " + std::to_string(world_size) + " is more than " +
                           std::to_string(max_world_size) + " ranks (max_world_size)");
  return Status::Ok();
}

std::string JobName(const std::string& job) { return "job '" + job + "'"; }

std::string RankName(const std::string& job, uint32_t rank) {
  return JobName(job) + ": rank " + std::to_string(rank);
}

}  // namespace ember::daemon
