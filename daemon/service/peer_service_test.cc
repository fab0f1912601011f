#include "daemon/service/peer_service.h"

#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "daemon/coordinator/job_ledger.h"
#include "daemon/service/service_testing.h"

namespace ember::daemon {
namespace {

JobParams Params(uint32_t world_size, uint64_t num_samples = 16, uint32_t batch_size = 2) {
  JobParams p;
  p.dataset = "tokens";
  p.num_samples = num_samples;
  p.batch_size = batch_size;
  p.world_size = world_size;
  p.seed = 7;
  return p;
}

PeerJoin JoinOf(const std::string& job, uint32_t rank, const JobParams& params,
                const std::string& node = "node-b") {
  PeerJoin join;
  join.job = job;
  join.rank = rank;
  join.params = params;
  join.node = node;
  return join;
}

std::unique_ptr<PeerRank> MustJoin(PeerSession& session, const PeerJoin& join) {
  Result<std::unique_ptr<PeerRank>> rank = session.Join(join);
  INFO(rank.status().ToString());
  REQUIRE(rank.ok());
  return std::move(rank).value();
}

ExchangeAnswer MustExchange(PeerSession& session, const std::string& job,
                            const std::vector<RankBatch>& commits,
                            const std::vector<RankWant>& wants) {
  Result<ExchangeAnswer> answer = session.Exchange(job, commits, wants);
  INFO(answer.status().ToString());
  REQUIRE(answer.ok());
  return std::move(answer).value();
}

TEST_CASE("a peer session joins ranks, serves their exchanges, and they leave when dropped") {
  JobLedger ledger;
  PeerService service({"node-a", &ledger, nullptr});
  PeerSession session(service, "10.0.0.2:4000");
  std::unique_ptr<PeerRank> r0 = MustJoin(session, JoinOf("job", 0, Params(2)));
  std::unique_ptr<PeerRank> r1 = MustJoin(session, JoinOf("job", 1, Params(2)));
  CHECK(session.num_ranks() == 2);

  ExchangeAnswer first = MustExchange(session, "job", {}, {{0, 0}, {1, 0}});
  REQUIRE(first.leases.size() == 2);
  REQUIRE(first.leases[0].ok());
  REQUIRE(first.leases[1].ok());
  CHECK(first.leases[0]->batch == 0);
  CHECK(first.leases[1]->batch == 0);
  // Positions only: the node looks up the sample ids itself.
  CHECK(first.leases[0]->sample_ids.empty());
  CHECK(first.leases[0]->positions.end > first.leases[0]->positions.begin);

  // Commits go first: the same call commits step 0 and leases step 1.
  ExchangeAnswer second = MustExchange(session, "job", {{0, 0, 0}, {1, 0, 0}}, {{0, 0}});
  CHECK(second.commit_errors.empty());
  REQUIRE(second.leases[0].ok());
  CHECK(second.leases[0]->batch == 1);

  // A commit of a batch never leased fails, and only that commit.
  ExchangeAnswer bad = MustExchange(session, "job", {{1, 0, 5}}, {});
  CHECK(bad.commit_errors.size() == 1);

  r1.reset();  // the node released rank 1: it left the job
  CHECK(session.num_ranks() == 1);
  ExchangeAnswer after = MustExchange(session, "job", {}, {{1, 0}});
  CHECK(after.leases[0].status().code() == StatusCode::kNotFound);
  // The ledger has it free again: another session may join it.
  PeerSession other(service, "10.0.0.3:4000");
  std::unique_ptr<PeerRank> again = MustJoin(other, JoinOf("job", 1, Params(2), "node-c"));
  CHECK(other.num_ranks() == 1);
}

TEST_CASE("a node speaks for root only where trust_root_from names it") {
  JobLedger ledger;
  PeerServiceDeps deps{"node-a", &ledger, nullptr};
  deps.trusted_for_root = {"node-t"};
  PeerService service(deps);
  Principal alice;
  alice.uid = 1001;
  JobParams alices = Params(2);
  alices.owner = alice;
  PeerSession session(service, "127.0.0.1:1");
  std::unique_ptr<PeerRank> a0 = MustJoin(session, JoinOf("~1001/train", 0, alices));
  // node-b says its rank is root: here it is uid 0, who may not join Alice's job.
  JobParams claimed = Params(2);
  claimed.owner.uid = 0;
  claimed.owner.privileged = true;
  Result<std::unique_ptr<PeerRank>> refused = session.Join(JoinOf("~1001/train", 1, claimed));
  CHECK(refused.status().code() == StatusCode::kPermissionDenied);
  REQUIRE(session.Join(JoinOf("mine", 0, claimed)).ok());
  CHECK_FALSE(ledger.OwnerOf("mine")->privileged);
  // node-t is trusted for root: its root is root here.
  CHECK(MustJoin(session, JoinOf("~1001/train", 1, claimed, "node-t")) != nullptr);
  CHECK(service.Claimed("node-t", claimed.owner).privileged);
  CHECK_FALSE(service.Claimed("node-b", claimed.owner).privileged);
}

TEST_CASE("a refused join is remembered: the rank's exchange entries get the refusal") {
  JobLedger ledger;
  PeerService service({"node-a", &ledger, nullptr});
  PeerSession session(service, "peer");
  std::unique_ptr<PeerRank> r0 = MustJoin(session, JoinOf("job", 0, Params(2)));

  JobParams other_seed = Params(2);
  other_seed.seed = 8;
  Result<std::unique_ptr<PeerRank>> refused = session.Join(JoinOf("job", 1, other_seed, "node-x"));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("node 'node-x'") != std::string::npos);

  ExchangeAnswer answer = MustExchange(session, "job", {{1, 0, 0}}, {{1, 0}, {0, 0}, {2, 0}});
  REQUIRE(answer.commit_errors.size() == 1);
  CHECK(answer.commit_errors[0].code() == refused.status().code());
  CHECK(answer.commit_errors[0].message() == refused.status().message());
  CHECK(answer.leases[0].status().message() == refused.status().message());
  CHECK(answer.leases[1].ok());  // rank 0 is served beside the refusals
  // A stranger that never asked to join: not_found, naming the rank.
  CHECK(answer.leases[2].status().code() == StatusCode::kNotFound);
  CHECK(answer.leases[2].status().message().find("job 'job': rank 2") != std::string::npos);

  // Joining right clears the refusal.
  std::unique_ptr<PeerRank> r1 = MustJoin(session, JoinOf("job", 1, Params(2)));
  CHECK(MustExchange(session, "job", {}, {{1, 0}}).leases[0].ok());
}

TEST_CASE("a session remembers a bounded number of refusals") {
  JobLedger ledger;
  PeerService service({"node-a", &ledger, nullptr});
  PeerSession session(service, "peer");
  JobParams bad = Params(1);
  bad.batch_size = 0;  // refused by every join
  const size_t n = PeerService::kMaxRefusals + 5;
  for (uint32_t rank = 0; rank < n; ++rank)
    REQUIRE_FALSE(session.Join(JoinOf("job-" + std::to_string(rank), 0, bad)).ok());
  // The oldest refusals are forgotten: rank 0 of job-0 is a stranger again.
  ExchangeAnswer oldest = MustExchange(session, "job-0", {}, {{0, 0}});
  CHECK(oldest.leases[0].status().code() == StatusCode::kNotFound);
  ExchangeAnswer newest = MustExchange(session, "job-" + std::to_string(n - 1), {}, {{0, 0}});
  CHECK(newest.leases[0].status().code() != StatusCode::kNotFound);
}

TEST_CASE("an exchange asks for at most kExchangeEntriesPerRank entries per joined rank") {
  JobLedger ledger;
  PeerService service({"node-a", &ledger, nullptr});
  PeerSession session(service, "peer");
  std::unique_ptr<PeerRank> r0 = MustJoin(session, JoinOf("job", 0, Params(2)));
  std::unique_ptr<PeerRank> r1 = MustJoin(session, JoinOf("job", 1, Params(2)));
  const size_t limit = 2 * PeerService::kExchangeEntriesPerRank;
  std::vector<RankWant> wants(limit + 1, RankWant{0, 0});
  Result<ExchangeAnswer> too_many = session.Exchange("job", {}, wants);
  REQUIRE(too_many.status().code() == StatusCode::kInvalidArgument);
  CHECK(too_many.status().message().find(std::to_string(limit + 1) + " wants") !=
        std::string::npos);
  std::vector<RankBatch> commits(limit + 1, RankBatch{0, 0, 0});
  CHECK(session.Exchange("job", commits, {}).status().code() == StatusCode::kInvalidArgument);
  // A session with no ranks of the job may still ask kExchangeEntriesPerRank (and learn why).
  PeerSession empty(service, "peer-2");
  std::vector<RankWant> few(PeerService::kExchangeEntriesPerRank, RankWant{0, 0});
  ExchangeAnswer answer = MustExchange(empty, "job", {}, few);
  CHECK(answer.leases.size() == few.size());
  for (const Result<BatchLease>& lease : answer.leases)
    CHECK(lease.status().code() == StatusCode::kNotFound);
}

TEST_CASE("a rank joining again with what it holds is not served those batches again") {
  JobLedger ledger;
  PeerService service({"node-a", &ledger, nullptr});
  auto session = std::make_unique<PeerSession>(service, "peer");
  std::unique_ptr<PeerRank> r0 = MustJoin(*session, JoinOf("job", 0, Params(1, 8, 2)));
  ExchangeAnswer got = MustExchange(*session, "job", {}, {{0, 0}});
  REQUIRE(got.leases[0].ok());
  const uint64_t consumed = got.leases[0]->batch;
  // The connection drops before the commit arrives: the rank leaves, the session ends.
  r0.reset();
  session.reset();

  PeerSession again(service, "peer");
  PeerJoin rejoin = JoinOf("job", 0, Params(1, 8, 2));
  rejoin.held = {HeldBatch{0, consumed, true}};
  std::unique_ptr<PeerRank> back = MustJoin(again, rejoin);
  ExchangeAnswer next = MustExchange(again, "job", {}, {{0, 0}});
  REQUIRE(next.leases[0].ok());
  CHECK(next.leases[0]->batch == consumed + 1);
}

TEST_CASE("a daemon that coordinates no jobs says so; OpenJob needs the stores") {
  PeerService service({"node-a", nullptr, nullptr});
  PeerSession session(service, "peer");
  Result<std::unique_ptr<PeerRank>> join = session.Join(JoinOf("job", 0, Params(1)));
  CHECK(join.status().code() == StatusCode::kFailedPrecondition);
  CHECK(join.status().message().find("node 'node-a'") != std::string::npos);
  CHECK(session.Exchange("job", {}, {}).status().code() == StatusCode::kFailedPrecondition);
  CHECK(session.OpenJob("job", "node-b", ServiceFixture::Root()).status().code() ==
        StatusCode::kFailedPrecondition);
  CHECK(session.StoreSession() == nullptr);
}

TEST_CASE("OpenJob makes store memberships that end with the session") {
  ServiceFixture f("peer_service_open_job");
  PeerService service({"node-a", nullptr, &f.service()});
  {
    PeerSession session(service, "peer");
    Result<JobMembership*> a = session.OpenJob("job", "node-b", ServiceFixture::Root());
    Result<JobMembership*> b = session.OpenJob("job", "node-b", ServiceFixture::Root());
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    CHECK((*a)->KvSet("k", "v").ok());
    CHECK((*b)->KvCheck({"k"}));
    REQUIRE(session.StoreSession() != nullptr);
    CHECK(session.StoreSession()->num_memberships() == 2);
    CHECK(f.service().JobMembers("job") == 2);
  }
  CHECK(f.service().JobMembers("job") == 0);
  CHECK(f.kv().NumKeys("job") == 0);
}

}  // namespace
}  // namespace ember::daemon
