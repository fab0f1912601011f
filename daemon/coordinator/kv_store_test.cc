#include "daemon/coordinator/kv_store.h"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace ember::daemon {
namespace {

// Records what a Get callback received.
struct Got {
  int calls = 0;
  std::string value;
  KvStore::ValueCallback Callback() {
    return [this](const std::string& v) {
      ++calls;
      value = v;
    };
  }
};

std::optional<KvStore::WaiterId> MustArrive(KvStore& kv, const std::string& job,
                                            const std::string& name, uint32_t world, int* fired) {
  Result<std::optional<KvStore::WaiterId>> r =
      kv.Arrive(job, name, world, 0, [fired](uint64_t) { ++*fired; });
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  return *r;
}

TEST_CASE("Get of an existing key answers at once") {
  KvStore kv;
  REQUIRE(kv.Set("j", "addr", "10.0.0.1:29500").ok());
  Got got;
  CHECK_FALSE(kv.Get("j", "addr", got.Callback())->has_value());
  CHECK(got.calls == 1);
  CHECK(got.value == "10.0.0.1:29500");
  // Overwrite: the answered Get is not run again.
  REQUIRE(kv.Set("j", "addr", "10.0.0.2:29500").ok());
  CHECK(got.calls == 1);
  Got again;
  CHECK_FALSE(kv.Get("j", "addr", again.Callback())->has_value());
  CHECK(again.value == "10.0.0.2:29500");
}

TEST_CASE("Get of a missing key waits for the Set, and runs exactly once") {
  KvStore kv;
  Got a, b, other;
  std::optional<KvStore::WaiterId> ida = *kv.Get("j", "nccl_id", a.Callback());
  std::optional<KvStore::WaiterId> idb = *kv.Get("j", "nccl_id", b.Callback());
  std::optional<KvStore::WaiterId> ido = *kv.Get("j", "other", other.Callback());
  REQUIRE(ida.has_value());
  REQUIRE(idb.has_value());
  CHECK(ido.has_value());
  CHECK(*ida != *idb);
  CHECK(a.calls == 0);

  REQUIRE(kv.Set("j", "nccl_id", "abc").ok());
  CHECK(a.calls == 1);
  CHECK(a.value == "abc");
  CHECK(b.calls == 1);
  CHECK(b.value == "abc");
  CHECK(other.calls == 0);

  REQUIRE(kv.Set("j", "nccl_id", "def").ok());
  CHECK(a.calls == 1);
  CHECK(b.calls == 1);
  kv.CancelWaiter(*ida);  // already answered: a no-op
  REQUIRE(kv.Set("j", "other", "x").ok());
  CHECK(other.calls == 1);
}

TEST_CASE("a Get callback may use the store") {
  KvStore kv;
  std::vector<std::string> seen;
  std::optional<KvStore::WaiterId> id = *kv.Get("j", "k", [&](const std::string& v) {
    seen.push_back(v);
    // Must not re-run this (already removed) waiter.
    REQUIRE(kv.Set("j", "k", v + "!").ok());
  });
  REQUIRE(id.has_value());
  REQUIRE(kv.Set("j", "k", "v").ok());
  CHECK(seen == std::vector<std::string>{"v"});
  Got got;
  REQUIRE(kv.Get("j", "k", got.Callback()).ok());
  CHECK(got.value == "v!");
}

TEST_CASE("Add counts from zero, stores decimals and refuses non-integers") {
  KvStore kv;
  Result<int64_t> r = kv.Add("j", "n", 5);
  REQUIRE(r.ok());
  CHECK(*r == 5);
  r = kv.Add("j", "n", -7);
  REQUIRE(r.ok());
  CHECK(*r == -2);
  Got got;
  REQUIRE(kv.Get("j", "n", got.Callback()).ok());
  CHECK(got.value == "-2");

  REQUIRE(kv.Set("j", "m", "41").ok());
  r = kv.Add("j", "m", 1);
  REQUIRE(r.ok());
  CHECK(*r == 42);

  for (const char* bad : {"abc", "12x", "", " 3", "1.5", "99999999999999999999"}) {
    INFO("value '" << bad << "'");
    REQUIRE(kv.Set("j", "s", bad).ok());
    Result<int64_t> bad_add = kv.Add("j", "s", 1);
    CHECK(bad_add.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(bad_add.status().message(), Catch::Contains("key 's'"));
    Got unchanged;
    REQUIRE(kv.Get("j", "s", unchanged.Callback()).ok());
    CHECK(unchanged.value == bad);
  }

  REQUIRE(kv.Set("j", "max", std::to_string(INT64_MAX)).ok());
  CHECK(kv.Add("j", "max", 1).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("Add wakes a waiting Get") {
  KvStore kv;
  Got got;
  REQUIRE(kv.Get("j", "count", got.Callback())->has_value());
  REQUIRE(kv.Add("j", "count", 3).ok());
  CHECK(got.calls == 1);
  CHECK(got.value == "3");
}

TEST_CASE("Check and Delete") {
  KvStore kv;
  CHECK(kv.Check("j", {}));
  CHECK_FALSE(kv.Check("j", {"a"}));
  REQUIRE(kv.Set("j", "a", "1").ok());
  REQUIRE(kv.Set("j", "b", "2").ok());
  CHECK(kv.Check("j", {"a", "b"}));
  CHECK_FALSE(kv.Check("j", {"a", "c"}));
  CHECK(kv.NumKeys("j") == 2);

  CHECK(kv.Delete("j", "a"));
  CHECK_FALSE(kv.Delete("j", "a"));
  CHECK_FALSE(kv.Delete("nope", "a"));
  CHECK_FALSE(kv.Check("j", {"a"}));
  CHECK(kv.NumKeys("j") == 1);

  // A Get after the Delete waits again.
  Got got;
  CHECK(kv.Get("j", "a", got.Callback())->has_value());
  REQUIRE(kv.Set("j", "a", "back").ok());
  CHECK(got.value == "back");
}

TEST_CASE("a barrier of 3 releases everyone on the third arrival, and is reusable") {
  KvStore kv;
  int f0 = 0, f1 = 0, f2 = 0;
  for (int round = 1; round <= 2; ++round) {
    INFO("round " << round);
    std::optional<KvStore::WaiterId> w0 = MustArrive(kv, "j", "init", 3, &f0);
    CHECK(w0.has_value());
    CHECK(f0 == round - 1);
    std::optional<KvStore::WaiterId> w1 = MustArrive(kv, "j", "init", 3, &f1);
    CHECK(w1.has_value());
    CHECK(f0 == round - 1);
    CHECK(f1 == round - 1);
    std::optional<KvStore::WaiterId> w2 = MustArrive(kv, "j", "init", 3, &f2);
    CHECK_FALSE(w2.has_value());
    CHECK(f0 == round);
    CHECK(f1 == round);
    CHECK(f2 == round);
  }
}

TEST_CASE("a barrier of 1 completes at once") {
  KvStore kv;
  int fired = 0;
  CHECK_FALSE(MustArrive(kv, "j", "solo", 1, &fired).has_value());
  CHECK(fired == 1);
}

TEST_CASE("barrier world_size must be positive and agree within a round") {
  KvStore kv;
  int fired = 0;
  CHECK(kv.Arrive("j", "b", 0, 0, [](uint64_t) {}).status().code() ==
        StatusCode::kInvalidArgument);
  MustArrive(kv, "j", "b", 3, &fired);
  Result<std::optional<KvStore::WaiterId>> wrong =
      kv.Arrive("j", "b", 2, 0, [&](uint64_t) { ++fired; });
  CHECK(wrong.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(wrong.status().message(), Catch::Contains("world_size 3"));
  CHECK_THAT(wrong.status().message(), Catch::Contains("barrier 'b'"));
  // The refused arrival did not count.
  MustArrive(kv, "j", "b", 3, &fired);
  CHECK(fired == 0);
  MustArrive(kv, "j", "b", 3, &fired);
  CHECK(fired == 3);
  // A new round may use another size.
  CHECK_FALSE(MustArrive(kv, "j", "b", 1, &fired).has_value());
  CHECK(fired == 4);
}

TEST_CASE("CancelWaiter drops a pending Get") {
  KvStore kv;
  Got got;
  std::optional<KvStore::WaiterId> id = *kv.Get("j", "k", got.Callback());
  REQUIRE(id.has_value());
  kv.CancelWaiter(*id);
  kv.CancelWaiter(*id);
  kv.CancelWaiter(123456);
  REQUIRE(kv.Set("j", "k", "v").ok());
  CHECK(got.calls == 0);
}

TEST_CASE("a cancelled barrier participant no longer counts") {
  KvStore kv;
  int f0 = 0, f1 = 0, f2 = 0, f3 = 0;
  std::optional<KvStore::WaiterId> w0 = MustArrive(kv, "j", "b", 3, &f0);
  REQUIRE(w0.has_value());
  MustArrive(kv, "j", "b", 3, &f1);
  kv.CancelWaiter(*w0);
  // Two arrived, one cancelled: a third arrival does not complete the barrier.
  CHECK(MustArrive(kv, "j", "b", 3, &f2).has_value());
  CHECK(f1 == 0);
  CHECK(f2 == 0);
  CHECK_FALSE(MustArrive(kv, "j", "b", 3, &f3).has_value());
  CHECK(f0 == 0);
  CHECK(f1 == 1);
  CHECK(f2 == 1);
  CHECK(f3 == 1);
}

TEST_CASE("cancelling every participant closes the round") {
  KvStore kv;
  int fired = 0;
  std::optional<KvStore::WaiterId> w = MustArrive(kv, "j", "b", 3, &fired);
  REQUIRE(w.has_value());
  kv.CancelWaiter(*w);
  CHECK_FALSE(MustArrive(kv, "j", "b", 1, &fired).has_value());
  CHECK(fired == 1);
}

TEST_CASE("jobs are isolated") {
  KvStore kv;
  REQUIRE(kv.Set("a", "k", "from a").ok());
  Got got;
  REQUIRE(kv.Get("b", "k", got.Callback())->has_value());
  CHECK(got.calls == 0);
  CHECK_FALSE(kv.Check("b", {"k"}));
  CHECK(kv.NumKeys("b") == 0);
  REQUIRE(kv.Add("b", "n", 1).ok());
  REQUIRE(kv.Add("a", "n", 10).ok());
  CHECK(*kv.Add("b", "n", 0) == 1);

  int fa = 0, fb = 0;
  MustArrive(kv, "a", "bar", 2, &fa);
  MustArrive(kv, "b", "bar", 2, &fb);
  CHECK(fa == 0);
  CHECK(fb == 0);
  // Same barrier name, other job, other size: no clash.
  CHECK(kv.Arrive("c", "bar", 5, 0, [](uint64_t) {}).ok());

  REQUIRE(kv.Set("b", "k", "from b").ok());
  CHECK(got.value == "from b");
}

TEST_CASE("DropJob forgets keys, waiters and barriers of that job only") {
  KvStore kv;
  REQUIRE(kv.Set("a", "k", "1").ok());
  REQUIRE(kv.Set("b", "k", "2").ok());
  Got waiting_a, waiting_b;
  REQUIRE(kv.Get("a", "later", waiting_a.Callback()).ok());
  REQUIRE(kv.Get("b", "later", waiting_b.Callback()).ok());
  int fa = 0, fb = 0;
  MustArrive(kv, "a", "bar", 2, &fa);
  MustArrive(kv, "b", "bar", 2, &fb);

  kv.DropJob("a");
  CHECK(kv.NumKeys("a") == 0);
  CHECK(kv.NumKeys("b") == 1);

  REQUIRE(kv.Set("a", "later", "x").ok());
  CHECK(waiting_a.calls == 0);
  // The barrier of "a" starts over: one new arrival does not complete it, and its old
  // participant is not run.
  CHECK(MustArrive(kv, "a", "bar", 2, &fa).has_value());
  CHECK(fa == 0);
  // A dropped barrier can be reopened with another size.
  kv.DropJob("a");
  CHECK_FALSE(MustArrive(kv, "a", "bar", 1, &fa).has_value());
  CHECK(fa == 1);

  REQUIRE(kv.Set("b", "later", "y").ok());
  CHECK(waiting_b.value == "y");
  CHECK_FALSE(MustArrive(kv, "b", "bar", 2, &fb).has_value());
  CHECK(fb == 2);
}

TEST_CASE("a job's keys, values and waits are bounded, and nothing changes past a bound") {
  KvLimits limits;
  limits.max_key_bytes = 8;
  limits.max_value_bytes = 16;
  limits.max_job_bytes = 40;
  limits.max_job_keys = 3;
  limits.max_job_waiters = 2;
  KvStore kv(limits);
  CHECK(kv.Set("j", "123456789", "v").code() == StatusCode::kResourceExhausted);
  const Status big = kv.Set("j", "k", std::string(17, 'x'));
  CHECK(big.code() == StatusCode::kResourceExhausted);
  CHECK(big.message() == "job 'j': key 'k': a value of 17 bytes is over the limit of 16");
  REQUIRE(kv.Set("j", "a", std::string(15, 'x')).ok());  // 16 bytes
  REQUIRE(kv.Set("j", "b", std::string(15, 'x')).ok());  // 32
  const Status full = kv.Set("j", "c", std::string(15, 'x'));  // would be 48
  CHECK(full.code() == StatusCode::kResourceExhausted);
  CHECK_THAT(full.message(), Catch::Contains("would take 48 bytes, over the limit of 40"));
  CHECK_FALSE(kv.Check("j", {"c"}));
  REQUIRE(kv.Set("j", "a", "x").ok());  // replacing frees what the old value took: 18
  REQUIRE(kv.Set("j", "c", "x").ok());  // 20, 3 keys
  CHECK(kv.Set("j", "d", "x").message() == "job 'j' holds 3 keys, the limit");
  CHECK(kv.Add("j", "e", 1).status().code() == StatusCode::kResourceExhausted);
  REQUIRE(kv.Delete("j", "c"));
  CHECK(kv.Add("j", "e", 1).ok());
  // Waits: two pending at most, Gets and barrier arrivals together; a completed one frees
  // its place. Another job has its own.
  Got got;
  REQUIRE(kv.Get("j", "later", got.Callback())->has_value());
  REQUIRE(kv.Arrive("j", "bar", 3, 0, [](uint64_t) {}).ok());
  CHECK(kv.Get("j", "other", got.Callback()).status().code() == StatusCode::kResourceExhausted);
  CHECK(kv.Arrive("j", "bar", 3, 0, [](uint64_t) {}).status().code() ==
        StatusCode::kResourceExhausted);
  CHECK(kv.Get("k", "other", got.Callback()).ok());
  REQUIRE(kv.Delete("j", "b"));  // room for a third key
  REQUIRE(kv.Set("j", "later", "1").ok());
  CHECK(got.value == "1");
  CHECK(kv.Get("j", "other", got.Callback()).ok());
  kv.DropJob("j");
  CHECK(kv.Set("j", "a", std::string(15, 'x')).ok());
}

// Arrives at (job, name) asking for `round`; the round it completed with lands in *done
// (0 while waiting).
std::optional<KvStore::WaiterId> ArriveAt(KvStore& kv, const std::string& name, uint32_t world,
                                          uint64_t round, uint64_t* done) {
  Result<std::optional<KvStore::WaiterId>> r =
      kv.Arrive("j", name, world, round, [done](uint64_t completed) { *done = completed; });
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  return *r;
}

TEST_CASE("barrier rounds are numbered; a round asked for again after it completed returns") {
  KvStore kv;
  uint64_t a = 0, b = 0;
  ArriveAt(kv, "b", 2, 0, &a);
  CHECK_FALSE(ArriveAt(kv, "b", 2, 0, &b).has_value());
  CHECK(a == 1);
  CHECK(b == 1);
  // Round 2 by both, asked for by number.
  ArriveAt(kv, "b", 2, 2, &a);
  ArriveAt(kv, "b", 2, 2, &b);
  CHECK(a == 2);
  CHECK(b == 2);
  // A member whose answer to round 2 was lost asks again: it completed, so at once.
  uint64_t again = 0;
  CHECK_FALSE(ArriveAt(kv, "b", 2, 2, &again).has_value());
  CHECK(again == 2);
  // Round 3 still needs both.
  uint64_t c = 0;
  CHECK(ArriveAt(kv, "b", 2, 3, &c).has_value());
  CHECK(c == 0);
}

TEST_CASE("a store that lost its rounds (a restarted coordinator) lets re-sent arrivals meet") {
  // Before the restart both members passed rounds 1..4 of "final"; A also passed round 5,
  // whose answer B never got. The new store knows nothing.
  KvStore kv;
  uint64_t b = 0;
  // B re-sends round 5: the store learns rounds 1..4 completed, B waits in round 5.
  REQUIRE(ArriveAt(kv, "final", 2, 5, &b).has_value());
  CHECK(b == 0);
  // A's next arrival is round 6: round 5 completed, so B is released, and A waits.
  uint64_t a = 0;
  REQUIRE(ArriveAt(kv, "final", 2, 6, &a).has_value());
  CHECK(b == 5);
  CHECK(a == 0);
  // B's round 6 completes it for both.
  CHECK_FALSE(ArriveAt(kv, "final", 2, 6, &b).has_value());
  CHECK(a == 6);
  CHECK(b == 6);
}

TEST_CASE("members re-sending the same round after a restart complete it; round 0 joins it") {
  KvStore kv;
  uint64_t a = 0, b = 0, fresh = 0;
  REQUIRE(ArriveAt(kv, "sync", 3, 7, &a).has_value());
  // A resumed rank (a new client: round 0) joins the open round, 7.
  REQUIRE(ArriveAt(kv, "sync", 3, 0, &fresh).has_value());
  CHECK_FALSE(ArriveAt(kv, "sync", 3, 7, &b).has_value());
  CHECK(a == 7);
  CHECK(b == 7);
  CHECK(fresh == 7);
}

TEST_CASE("a member's second arrival in a round replaces its first") {
  KvStore kv;
  int stale = 0, fresh = 0, other = 0;
  REQUIRE(kv.Arrive("j", "b", 2, 0, [&](uint64_t) { ++stale; }, 41).ok());
  // Member 41 again (over a new connection): still one arrival of two.
  REQUIRE(kv.Arrive("j", "b", 2, 0, [&](uint64_t) { ++fresh; }, 41).ok());
  CHECK(fresh == 0);
  REQUIRE(kv.Arrive("j", "b", 2, 0, [&](uint64_t) { ++other; }, 42).ok());
  CHECK(stale == 0);  // dropped unrun
  CHECK(fresh == 1);
  CHECK(other == 1);
}

TEST_CASE("a cancelled arrival leaves the barrier's rounds; names per job are bounded") {
  KvLimits limits;
  limits.max_job_barriers = 2;
  KvStore kv(limits);
  uint64_t a = 0, b = 0;
  ArriveAt(kv, "x", 2, 0, &a);
  CHECK_FALSE(ArriveAt(kv, "x", 2, 0, &b).has_value());
  std::optional<KvStore::WaiterId> w = ArriveAt(kv, "x", 3, 2, &a);
  REQUIRE(w.has_value());
  kv.CancelWaiter(*w);
  // Round 2 is open again with no one waiting; asking for round 1 again returns at once.
  uint64_t late = 0;
  CHECK_FALSE(ArriveAt(kv, "x", 2, 1, &late).has_value());
  CHECK(late == 1);
  ArriveAt(kv, "y", 2, 0, &a);
  Result<std::optional<KvStore::WaiterId>> third =
      kv.Arrive("j", "z", 2, 0, [](uint64_t) {});
  CHECK(third.status().code() == StatusCode::kResourceExhausted);
  CHECK(third.status().message() == "job 'j': barrier 'z': the job has 2 barriers, the limit");
  // DropJob forgets them.
  kv.DropJob("j");
  CHECK(kv.Arrive("j", "z", 2, 0, [](uint64_t) {}).ok());
}

}  // namespace
}  // namespace ember::daemon
