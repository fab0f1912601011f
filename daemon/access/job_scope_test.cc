#include "daemon/access/job_scope.h"

#include <catch2/catch.hpp>

namespace ember::daemon {
namespace {

Principal User(uid_t uid, bool team = false) {
  Principal p;
  p.uid = uid;
  p.team = team;
  return p;
}

TEST_CASE("each uid names jobs in its own scope; the share group shares one") {
  Principal root;
  root.uid = 0;
  root.privileged = true;
  CHECK(JobKey(User(1001), "train") == "~1001/train");
  CHECK(JobKey(User(1002), "train") == "~1002/train");
  CHECK(JobKey(User(1001, true), "train") == "~team/train");
  CHECK(JobKey(User(1002, true), "train") == "~team/train");
  CHECK(JobKey(root, "train") == "train");
  // A name that looks like another's key is the caller's own all the same.
  CHECK(JobKey(User(1002), "~1001/train") == "~1002/~1001/train");
  CHECK(JobKey(User(4294967295u - 1), "x").size() == kMaxJobScopeBytes + 1);
}

TEST_CASE("a caller sees its own names, a privileged one the keys") {
  Principal root;
  root.uid = 0;
  root.privileged = true;
  CHECK(CallerJobName(User(1001), "~1001/train") == "train");
  CHECK(CallerJobName(User(1001, true), "~team/train") == "train");
  CHECK(CallerJobName(root, "~1001/train") == "~1001/train");
  CHECK(CallerJobNames(User(1001), "job '~1001/a': rank 3 of job '~1001/b'") ==
        "job 'a': rank 3 of job 'b'");
  CHECK(CallerJobNames(User(1001), "job '~1002/a'") == "job '~1002/a'");
  CHECK(CallerJobNames(root, "job '~1001/a'") == "job '~1001/a'");
}

}  // namespace
}  // namespace ember::daemon
