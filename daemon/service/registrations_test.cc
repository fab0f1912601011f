#include "daemon/service/registrations.h"

#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "common/mem_env.h"

namespace ember::daemon {
namespace {

Principal User(uid_t uid) {
  Principal p;
  p.uid = uid;
  return p;
}

TEST_CASE("a registration's progress is its registering uid's, while it runs") {
  MemEnv env;
  auto table = std::make_shared<Registrations>(&env);
  const Principal alice = User(2001), bob = User(2002);
  std::unique_ptr<Registrations::Registration> added = table->Begin(alice, "~2001/web");
  REQUIRE(added != nullptr);
  added->progress()->SetShards(4);
  added->progress()->ShardIndexed(1000);
  added->progress()->ShardIndexed(500);

  Result<RegistrationProgress> seen = table->Find(alice, "web");
  REQUIRE(seen.ok());
  CHECK(seen->dataset == "web");
  CHECK(seen->shards_done == 2);
  CHECK(seen->shards_total == 4);
  CHECK(seen->bytes_done == 1500);
  CHECK(seen->elapsed_seconds > 0);

  // Another uid, and a name Alice is not registering, see none, alike.
  Result<RegistrationProgress> other = table->Find(bob, "web");
  CHECK(other.status().code() == StatusCode::kNotFound);
  CHECK(other.status().message() == "no registration of dataset 'web' in progress");
  CHECK(table->Find(alice, "nope").status().code() == StatusCode::kNotFound);
  CHECK(table->Find(Principal{}, "web").status().code() == StatusCode::kNotFound);

  added.reset();  // the registration ended
  CHECK(table->Find(alice, "web").status().code() == StatusCode::kNotFound);
  CHECK(table->size() == 0);
}

TEST_CASE("a shared registration is found by its bare name, a privileged one too") {
  MemEnv env;
  auto table = std::make_shared<Registrations>(&env);
  Principal root = User(0);
  root.privileged = true;
  auto shared = table->Begin(User(2001), "open");
  auto roots = table->Begin(root, "rootset");
  CHECK(table->Find(User(2001), "open").ok());
  CHECK(table->Find(root, "rootset").ok());
  CHECK(!table->Find(root, "open").ok());  // not root's registration
}

TEST_CASE("registrations past the bound run unfollowed; a record outlives no table") {
  MemEnv env;
  auto table = std::make_shared<Registrations>(&env);
  std::vector<std::unique_ptr<Registrations::Registration>> running;
  for (size_t i = 0; i < Registrations::kMaxFollowed; ++i) {
    running.push_back(table->Begin(User(2001), "d" + std::to_string(i)));
    REQUIRE(running.back() != nullptr);
  }
  CHECK(table->Begin(User(2001), "one-more") == nullptr);
  CHECK(table->size() == Registrations::kMaxFollowed);
  running.pop_back();
  CHECK(table->Begin(User(2001), "one-more") != nullptr);  // ended at once: not kept

  // The table goes first (a service destroyed while its pool still registers): the
  // registration keeps it until it ends.
  std::weak_ptr<Registrations> weak = table;
  table.reset();
  CHECK(!weak.expired());
  running.clear();
  CHECK(weak.expired());
}

}  // namespace
}  // namespace ember::daemon
