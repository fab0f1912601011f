// Session without RPC: what a connection owns is released with it.
#include "daemon/service/session.h"

#include <catch2/catch.hpp>

#include "daemon/service/service_testing.h"

namespace ember::daemon {
namespace {

PeerCredentials Peer() { return PeerCredentials{1234, Credentials{1000, 100, {100, 27}}}; }

TEST_CASE("a session keeps its peer's credentials") {
  ServiceFixture f("session_peer");
  Session session(f.service(), Peer(), ServiceFixture::Root());
  CHECK(session.peer().pid == 1234);
  CHECK(session.peer().creds.uid == 1000);
  CHECK(session.peer().creds.gid == 100);
  CHECK(session.peer().creds.groups == std::vector<gid_t>{100, 27});
}

TEST_CASE("a session's stream closes with CloseStream, only its own") {
  ServiceFixture f("session_close");
  REQUIRE(f.AddDataset(f.TokensSpec("toks")).ok());
  Session owner(f.service(), Peer(), ServiceFixture::Root());
  Session other(f.service(), Peer(), ServiceFixture::Root());
  Result<OpenedStream> stream = owner.OpenStream(ServiceFixture::StreamOf("job", "toks", 0));
  REQUIRE(stream.ok());
  CHECK(owner.streams() == std::set<uint64_t>{stream->id});

  other.CloseStream(stream->id);
  CHECK(f.service().GetStatus(ServiceFixture::Root()).streams.size() == 1);

  owner.CloseStream(stream->id);
  CHECK(owner.streams().empty());
  CHECK(f.service().GetStatus(ServiceFixture::Root()).streams.empty());
  owner.CloseStream(stream->id);  // twice: no-op

  Result<OpenedStream> bad = owner.OpenStream(ServiceFixture::StreamOf("job", "nothing", 0));
  CHECK_FALSE(bad.ok());
  CHECK(owner.streams().empty());
}

TEST_CASE("dropping a session closes its streams and ends its memberships") {
  ServiceFixture f("session_drop");
  REQUIRE(f.AddDataset(f.TokensSpec("toks")).ok());
  DaemonService& service = f.service();
  auto session = std::make_unique<Session>(service, Peer(), ServiceFixture::Root());
  REQUIRE(session->OpenStream(ServiceFixture::StreamOf("job", "toks", 0)).ok());
  REQUIRE(session->OpenStream(ServiceFixture::StreamOf("job", "toks", 1)).ok());
  Result<JobMembership*> job = session->JoinJob("job");
  REQUIRE(job.ok());
  REQUIRE((*job)->KvSet("addr", "x").ok());
  REQUIRE(session->JoinJob("job").ok());
  CHECK(session->num_memberships() == 2);
  CHECK(service.JobMembers("job") == 2);
  CHECK(service.GetStatus(ServiceFixture::Root()).streams.size() == 2);

  session.reset();
  DaemonStatus status = service.GetStatus(ServiceFixture::Root());
  CHECK(status.streams.empty());
  CHECK(f.RingMemoryReleased());
  CHECK(status.jobs.empty());  // every rank left the ledger's job
  CHECK(service.JobMembers("job") == 0);
  CHECK(f.kv().NumKeys("job") == 0);
}

TEST_CASE("LeaveJob ends one membership of the session") {
  ServiceFixture f("session_leave");
  Session session(f.service(), Peer(), ServiceFixture::Root());
  CHECK(session.JoinJob("").status().code() == StatusCode::kInvalidArgument);
  Result<JobMembership*> first = session.JoinJob("job");
  Result<JobMembership*> second = session.JoinJob("job");
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  REQUIRE((*first)->KvSet("k", "v").ok());
  session.LeaveJob(*first);
  CHECK(session.num_memberships() == 1);
  CHECK((*second)->KvCheck({"k"}));
  session.LeaveJob(*first);  // twice: no-op
  session.LeaveJob(*second);
  CHECK(f.service().JobMembers("job") == 0);
  CHECK(f.kv().NumKeys("job") == 0);
}

}  // namespace
}  // namespace ember::daemon
