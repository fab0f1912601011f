#include "daemon/coordinator/job_name.h"

#include <catch2/catch.hpp>

namespace ember::daemon {
namespace {

TEST_CASE("a job's name: not empty, at most 256 bytes, no control characters") {
  CHECK(CheckJobName("demo-ember.Al6QsA").ok());
  CHECK(CheckJobName("ünïcode ok").ok());
  CHECK(CheckJobName(std::string(256, 'j')).ok());
  CHECK(CheckJobName("").message() == "job: must not be empty");
  const Status long_name = CheckJobName(std::string(1 << 20, 'j'));
  CHECK(long_name.code() == StatusCode::kInvalidArgument);
  CHECK(long_name.message() == "job: a name of 1048576 bytes is longer than 256 ('" +
                                   std::string(32, 'j') + "...')");
  CHECK(CheckJobName("a\nb").message() == "job: byte 1 of the name is control character 10");
}

TEST_CASE("messages name a job and its rank one way") {
  CHECK(JobName("j") == "job 'j'");
  CHECK(RankName("j", 3) == "job 'j': rank 3");
}

}  // namespace
}  // namespace ember::daemon
