#include "daemon/data/dataset_memory.h"

#include <catch2/catch.hpp>

namespace ember::daemon {
namespace {

Principal User(uid_t uid) {
  Principal p;
  p.uid = uid;
  return p;
}

TEST_CASE("a uid's charges are bounded, named in the refusal, and given back") {
  DatasetMemory memory(1000);
  auto first = memory.For(User(2001));
  REQUIRE(first->Add(600, "/d/a").ok());
  auto second = memory.For(User(2001));
  const Status refused = second->Add(500, "/d/b");
  CHECK(refused.code() == StatusCode::kResourceExhausted);
  CHECK(refused.message() ==
        "/d/b: holding its 500 bytes in memory would take uid 2001's datasets from 600 to "
        "more than its 1000 bytes (user_limits.dataset_memory)");
  CHECK(memory.of(2001) == 600);  // the refused one counts nothing
  CHECK(memory.For(User(2002))->Add(1000, "/d/c").ok());  // another uid has its own
  CHECK(second->Add(400, "/d/b").ok());
  first->Remove(100);
  CHECK(memory.of(2001) == 900);
  first.reset();
  CHECK(memory.of(2001) == 400);
  second.reset();
  CHECK(memory.of(2001) == 0);
  CHECK(memory.For(User(2001))->Add(~uint64_t{0}, "/d/huge").code() ==
        StatusCode::kResourceExhausted);
}

TEST_CASE("privileged and unknown owners are counted, not bounded") {
  DatasetMemory memory(1000);
  Principal root = User(0);
  root.privileged = true;
  auto charge = memory.For(root);
  CHECK(charge->Add(5000, "/d/a").ok());
  CHECK(memory.of(0) == 5000);
  CHECK(memory.For(Principal{})->Add(5000, "/d/b").ok());
}

}  // namespace
}  // namespace ember::daemon
