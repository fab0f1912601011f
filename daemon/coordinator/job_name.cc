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

std::string JobName(const std::string& job) { return "job '" + job + "'"; }

std::string RankName(const std::string& job, uint32_t rank) {
  return JobName(job) + ": rank " + std::to_string(rank);
}

}  // namespace ember::daemon
