#include "daemon/access/principal.h"

#include <catch2/catch.hpp>

namespace ember::daemon {
namespace {

Credentials User(uid_t uid, std::vector<gid_t> groups = {}) {
  return Credentials{uid, static_cast<gid_t>(uid), std::move(groups)};
}

TEST_CASE("a principal reaches what it owns, and no other user's") {
  AccessPolicy policy(/*daemon_uid=*/999, std::nullopt);
  const Principal alice = policy.Identify(User(1001));
  const Principal bob = policy.Identify(User(1002));
  CHECK(MayAccess(alice, alice));
  CHECK_FALSE(MayAccess(bob, alice));
  CHECK_FALSE(MayAccess(alice, bob));
  CHECK(MayAccess(policy.Identify(User(0)), alice));    // root
  CHECK(MayAccess(policy.Identify(User(999)), alice));  // the daemon's own uid
  CHECK_FALSE(MayAccess(alice, policy.Identify(User(0))));
  CHECK(MayAccess(AccessPolicy::Peer(), alice));
  CHECK(Describe(alice) == "uid 1001");
}

TEST_CASE("members of the share group reach each other's things") {
  AccessPolicy policy(999, gid_t{5000});
  const Principal alice = policy.Identify(User(1001, {5000}));
  const Principal bob = policy.Identify(User(1002, {7, 5000}));
  const Principal carol = policy.Identify(User(1003, {7}));
  CHECK(alice.team);
  CHECK(MayAccess(bob, alice));
  CHECK_FALSE(MayAccess(carol, alice));
  CHECK_FALSE(MayAccess(alice, carol));
  CHECK(Describe(alice) == "uid 1001, share group");
  // The primary group counts as well.
  CHECK(policy.Identify(Credentials{1004, 5000, {}}).team);
}

TEST_CASE("an unknown caller owns nothing and reaches only what nobody owns") {
  AccessPolicy policy(999, std::nullopt);
  const Principal unknown = policy.Identify(Credentials{});
  CHECK_FALSE(unknown.known());
  CHECK_FALSE(unknown.privileged);
  CHECK_FALSE(MayAccess(unknown, policy.Identify(User(1001))));
  CHECK(MayAccess(unknown, Principal{}));
  CHECK(MayAccess(policy.Identify(User(1001)), Principal{}));
}

}  // namespace
}  // namespace ember::daemon
