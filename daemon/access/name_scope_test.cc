#include "daemon/access/name_scope.h"

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
  CHECK(ScopedKey(User(1001), "train") == "~1001/train");
  CHECK(ScopedKey(User(1002), "train") == "~1002/train");
  CHECK(ScopedKey(User(1001, true), "train") == "~team/train");
  CHECK(ScopedKey(User(1002, true), "train") == "~team/train");
  CHECK(ScopedKey(root, "train") == "train");
  // A name that looks like another's key is the caller's own all the same.
  CHECK(ScopedKey(User(1002), "~1001/train") == "~1002/~1001/train");
  CHECK(ScopedKey(User(4294967295u - 1), "x").size() == kMaxScopeBytes + 1);
}

TEST_CASE("an unshared dataset is keyed in its user's scope, a shared one by its name") {
  Principal root;
  root.uid = 0;
  root.privileged = true;
  CHECK(DatasetKey(User(1001), "imagenet", false) == "~1001/imagenet");
  CHECK(DatasetKey(User(1001, true), "imagenet", false) == "~team/imagenet");
  CHECK(DatasetKey(User(1001), "imagenet", true) == "imagenet");
  CHECK(DatasetKey(root, "imagenet", false) == "imagenet");
  CHECK(UnscopedName("~1001/imagenet") == "imagenet");
  CHECK(UnscopedName("~team/imagenet") == "imagenet");
  CHECK(UnscopedName("imagenet") == "imagenet");
}

TEST_CASE("a caller sees its own names, a privileged one the keys") {
  Principal root;
  root.uid = 0;
  root.privileged = true;
  CHECK(CallerName(User(1001), "~1001/train") == "train");
  CHECK(CallerName(User(1001, true), "~team/train") == "train");
  CHECK(CallerName(root, "~1001/train") == "~1001/train");
  CHECK(CallerNames(User(1001), "job '~1001/a': rank 3 of job '~1001/b'") ==
        "job 'a': rank 3 of job 'b'");
  CHECK(CallerNames(User(1001), "job '~1002/a'") == "job '~1002/a'");
  CHECK(CallerNames(root, "job '~1001/a'") == "job '~1001/a'");
}

}  // namespace
}  // namespace ember::daemon
