// DaemonService without RPC: datasets, key-value waits and their timeouts, barriers, job
// membership lifetime, shared-memory segments and status (decode workers included);
// registrations' progress, a dataset's details and the shard cache's calls.
#include "daemon/service/daemon_service.h"

#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>

#include <future>
#include <optional>
#include <string>
#include <thread>

#include "daemon/decode/remote_decoders.h"
#include "daemon/service/service_testing.h"

namespace ember::daemon {
namespace {

// Records what a wait's callback received (and how often).
template <typename T>
struct Outcome {
  int calls = 0;
  std::optional<T> value;
  std::function<void(T)> Callback() {
    return [this](T v) {
      ++calls;
      value.emplace(std::move(v));
    };
  }
};

std::unique_ptr<JobMembership> Join(DaemonService& service, const std::string& job) {
  auto membership = service.JoinJob(ServiceFixture::Root(), job);
  REQUIRE(membership.ok());
  return std::move(*membership);
}

TEST_CASE("datasets are added and removed on the blocking pool") {
  ServiceFixture f("datasets");
  DaemonService& service = f.service();
  const std::thread::id caller = std::this_thread::get_id();
  std::promise<std::thread::id> ran_on;
  service.AddDataset(f.TokensSpec("toks"), DatasetOwner{ServiceFixture::Root(), {}}, [&](Result<DatasetInfo> info) {
    REQUIRE(info.ok());
    ran_on.set_value(std::this_thread::get_id());
  });
  CHECK(ran_on.get_future().get() != caller);

  Result<DatasetInfo> info = service.FindDataset(ServiceFixture::Root(), "toks");
  REQUIRE(info.ok());
  CHECK(info->count == ServiceFixture::kTokensSamples);
  CHECK(info->spec.format == "tokens");
  REQUIRE(service.ListDatasets(ServiceFixture::Root()).size() == 1);
  CHECK(service.ListDatasets(ServiceFixture::Root())[0].spec.name == "toks");

  Result<DatasetInfo> again = f.AddDataset(f.TokensSpec("toks"));
  CHECK(again.status().code() == StatusCode::kAlreadyExists);
  DatasetSpec bad = f.TokensSpec("bad");
  bad.path += ".missing";
  CHECK_FALSE(f.AddDataset(bad).ok());
  CHECK(service.ListDatasets(ServiceFixture::Root()).size() == 1);

  REQUIRE(f.RemoveDataset("toks").ok());
  CHECK(service.FindDataset(ServiceFixture::Root(), "toks").status().code() == StatusCode::kNotFound);
  CHECK(f.RemoveDataset("toks").code() == StatusCode::kNotFound);
  CHECK(service.ListDatasets(ServiceFixture::Root()).empty());
}

TEST_CASE("KvGet returns a present key at once and waits for a missing one") {
  ServiceFixture f("kv_get");
  auto job = Join(f.service(), "job");
  REQUIRE(job->KvSet("a", "1").ok());
  Outcome<Result<std::string>> present;
  CHECK(job->KvGet("a", 1000, present.Callback()) == nullptr);
  REQUIRE(present.calls == 1);
  CHECK(present.value->value() == "1");

  Outcome<Result<std::string>> later;
  std::unique_ptr<Wait> wait = job->KvGet("b", 1000, later.Callback());
  REQUIRE(wait != nullptr);
  CHECK(later.calls == 0);
  REQUIRE(job->KvSet("b", "2").ok());
  REQUIRE(later.calls == 1);
  CHECK(later.value->value() == "2");
  wait->Expire();  // too late: already completed
  CHECK(later.calls == 1);
  CHECK(later.value->ok());
}

TEST_CASE("KvGet timeouts: 0 does not wait, Expire fails the wait, dropping it cancels") {
  ServiceFixture f("kv_timeout");
  auto job = Join(f.service(), "job");

  Outcome<Result<std::string>> now;
  CHECK(job->KvGet("k", 0, now.Callback()) == nullptr);
  REQUIRE(now.calls == 1);
  CHECK(now.value->status().code() == StatusCode::kDeadlineExceeded);
  CHECK(now.value->status().message() ==
        "waiting for key 'k' of job 'job': timed out after 0 ms");

  Outcome<Result<std::string>> expired;
  std::unique_ptr<Wait> wait = job->KvGet("k", 50, expired.Callback());
  REQUIRE(wait != nullptr);
  wait->Expire();
  REQUIRE(expired.calls == 1);
  CHECK(expired.value->status().code() == StatusCode::kDeadlineExceeded);
  CHECK(expired.value->status().message() ==
        "waiting for key 'k' of job 'job': timed out after 50 ms");
  REQUIRE(job->KvSet("k", "late").ok());
  CHECK(expired.calls == 1);

  Outcome<Result<std::string>> dropped;
  wait = job->KvGet("other", 50, dropped.Callback());
  wait.reset();
  REQUIRE(job->KvSet("other", "v").ok());
  CHECK(dropped.calls == 0);
}

TEST_CASE("a barrier completes every arrival once world_size have arrived") {
  ServiceFixture f("barrier");
  auto job = Join(f.service(), "job");
  Outcome<Result<uint64_t>> first, second;
  std::unique_ptr<Wait> wait = job->Barrier("b", 2, 0, 1000, first.Callback());
  REQUIRE(wait != nullptr);
  CHECK(first.calls == 0);
  CHECK(job->Barrier("b", 2, 0, 1000, second.Callback()) == nullptr);
  REQUIRE(first.calls == 1);
  REQUIRE(second.calls == 1);
  CHECK(**first.value == 1);  // the round that completed
  CHECK(**second.value == 1);

  Outcome<Result<uint64_t>> mismatched, opener;
  std::unique_ptr<Wait> open = job->Barrier("b", 2, 0, 1000, opener.Callback());
  CHECK(job->Barrier("b", 3, 0, 1000, mismatched.Callback()) == nullptr);
  REQUIRE(mismatched.calls == 1);
  CHECK(mismatched.value->status().code() == StatusCode::kInvalidArgument);
  CHECK(opener.calls == 0);
}

TEST_CASE("a barrier arrival that times out no longer counts") {
  ServiceFixture f("barrier_timeout");
  auto job = Join(f.service(), "job");
  Outcome<Result<uint64_t>> now;
  CHECK(job->Barrier("b", 2, 0, 0, now.Callback()) == nullptr);
  REQUIRE(now.calls == 1);
  CHECK(now.value->status().code() == StatusCode::kDeadlineExceeded);
  CHECK(now.value->status().message() == "barrier 'b' of job 'job' (2 ranks): timed out after 0 ms");

  Outcome<Result<uint64_t>> expired;
  std::unique_ptr<Wait> wait = job->Barrier("b", 2, 0, 30, expired.Callback());
  wait->Expire();
  REQUIRE(expired.calls == 1);
  CHECK(expired.value->status().code() == StatusCode::kDeadlineExceeded);

  // Neither earlier arrival counts: this one waits for a partner.
  Outcome<Result<uint64_t>> alone;
  std::unique_ptr<Wait> waiting = job->Barrier("b", 2, 0, 30, alone.Callback());
  CHECK(waiting != nullptr);
  CHECK(alone.calls == 0);
}

TEST_CASE("a job's keys live while it has members, then its name can be reused") {
  ServiceFixture f("membership");
  DaemonService& service = f.service();
  CHECK(service.JoinJob(ServiceFixture::Root(), "").status().code() == StatusCode::kInvalidArgument);

  auto first = Join(service, "job");
  auto second = Join(service, "job");
  auto other = Join(service, "other");
  CHECK(service.JobMembers("job") == 2);
  REQUIRE(first->KvSet("addr", "10.0.0.1").ok());
  REQUIRE(other->KvSet("addr", "10.0.0.2").ok());
  first.reset();
  CHECK(service.JobMembers("job") == 1);
  CHECK(second->KvCheck({"addr"}));

  Outcome<Result<std::string>> pending;
  std::unique_ptr<Wait> wait = second->KvGet("never", 1000, pending.Callback());
  second.reset();
  CHECK(service.JobMembers("job") == 0);
  CHECK(f.kv().NumKeys("job") == 0);
  wait.reset();  // after its job was dropped: harmless
  CHECK(pending.calls == 0);

  auto reused = Join(service, "job");
  CHECK_FALSE(reused->KvCheck({"addr"}));
  CHECK(other->KvCheck({"addr"}));
}

TEST_CASE("shared-memory segments are the job's") {
  ServiceFixture f("segments");
  auto job = Join(f.service(), "job");
  auto rank0 = job->OpenSharedMemory("grads", 0, 2, 4096);
  REQUIRE(rank0.ok());
  auto rank1 = job->OpenSharedMemory("grads", 1, 2, 4096);
  REQUIRE(rank1.ok());
  CHECK((*rank0)->fd() == (*rank1)->fd());
  auto bad = job->OpenSharedMemory("", 0, 2, 4096);
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK(bad.status().message().find("job 'job'") != std::string::npos);
}

TEST_CASE("status gathers datasets, jobs, streams, memory and pending segments") {
  ServiceFixture f("status");
  DaemonService& service = f.service();
  REQUIRE(f.AddDataset(f.TokensSpec("toks")).ok());
  Result<OpenedStream> stream = service.OpenStream(ServiceFixture::StreamOf("train", "toks", 1));
  REQUIRE(stream.ok());
  CHECK(stream->ring_fd >= 0);
  CHECK(stream->samples_per_epoch == ServiceFixture::kTokensSamples);
  CHECK(stream->batches_per_epoch == 4);  // 15 samples in steps of 2 ranks x 2: 4 steps
  auto job = Join(service, "train");
  REQUIRE(job->OpenSharedMemory("grads", 0, 2, 4096).ok());

  DaemonStatus status = service.GetStatus(ServiceFixture::Root());
  CHECK(status.version == ServiceFixture::kVersion);
  CHECK(status.pid == ServiceFixture::kPid);
  CHECK(status.uptime_seconds >= 0);
  REQUIRE(status.datasets.size() == 1);
  CHECK(status.datasets[0].spec.name == "toks");
  REQUIRE(status.jobs.size() == 1);
  CHECK(status.jobs[0].job == "train");
  CHECK(status.jobs[0].world_size == 2);
  CHECK(status.jobs[0].dataset == "toks");
  CHECK(status.jobs[0].batches_per_rank == 4);
  REQUIRE(status.streams.size() == 1);
  CHECK(status.streams[0].stream_id == stream->id);
  CHECK(status.streams[0].job == "train");
  CHECK(status.streams[0].rank == 1);
  CHECK(status.streams[0].world_size == 2);
  CHECK(status.shm_bytes_in_use == stream->ring_bytes);
  CHECK(status.shm_bytes_budget == StreamLimits{}.shm_budget_bytes);
  REQUIRE(status.pending_segments.size() == 1);
  CHECK(status.pending_segments[0].name == "grads");
  CHECK(status.pending_segments[0].missing_ranks == std::vector<uint32_t>{1});
  // This process's own: at least the stream's ring memfd is open.
  CHECK(status.open_fds >= 4);
  CHECK(status.resident_bytes > 0);

  service.CloseStream(stream->id);
  status = service.GetStatus(ServiceFixture::Root());
  CHECK(status.streams.empty());
  CHECK(f.RingMemoryReleased());
}

// A worker channel that is never called (the status reads the workers' counters only).
class IdleChannel : public DecodeChannel {
 public:
  Result<RemoteAnswer> Decode(const DecodeRequest&, const RowsDestination&,
                              std::chrono::steady_clock::time_point) override {
    return Unavailable("idle channel");
  }
  void Cancel() override {}
};

TEST_CASE("status shows the node's decode workers to every caller, none without them") {
  ServiceFixture f("decode-workers");
  DaemonService& service = f.service();
  CHECK(service.GetStatus(ServiceFixture::Root()).decode_workers.empty());

  IdleChannel one, two;
  RemoteDecoders remote({{"w1.example:7000", &one}, {"w2.example:7000", &two}}, {});
  f.streams().set_remote_decoders(&remote);
  remote.CountLocal(100);
  for (const Principal& caller : {ServiceFixture::Root(), ServiceFixture::User(1001)}) {
    DaemonStatus status = service.GetStatus(caller);
    REQUIRE(status.decode_workers.size() == 2);
    CHECK(status.decode_workers[0].address == "w1.example:7000");
    CHECK(status.decode_workers[1].address == "w2.example:7000");
    for (const DecodeWorkerStatus& worker : status.decode_workers) {
      CHECK(worker.up);
      CHECK(worker.last_error.empty());
      CHECK(worker.calls == 0);
      CHECK(worker.rows == 0);
      CHECK(worker.share == 0);  // every row so far decoded here
    }
  }
  f.streams().set_remote_decoders(nullptr);
  remote.Shutdown();
}

TEST_CASE("stream errors name the job and rank") {
  ServiceFixture f("stream_errors");
  Result<OpenedStream> missing =
      f.service().OpenStream(ServiceFixture::StreamOf("train", "nothing", 0));
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(missing.status().message().find("stream for job 'train' rank 0") == 0);
}

TEST_CASE("one uid holds at most user_limits jobs, connections and datasets") {
  UserLimits limits;
  limits.jobs = 2;
  limits.connections = 1;
  limits.datasets = 1;
  ServiceFixture f("user_limits", limits);
  DaemonService& service = f.service();
  const Principal alice = ServiceFixture::User(1001);
  auto j1 = service.JoinJob(alice, "j1");
  auto j1_again = service.JoinJob(alice, "j1");  // the same job again: not another one
  auto j2 = service.JoinJob(alice, "j2");
  REQUIRE((j1.ok() && j1_again.ok() && j2.ok()));
  auto j3 = service.JoinJob(alice, "j3");
  REQUIRE(j3.status().code() == StatusCode::kResourceExhausted);
  CHECK(j3.status().message() ==
        "job 'j3': uid 1001 already has 2 jobs, the most one user may hold (user_limits.jobs)");
  auto bobs = service.JoinJob(ServiceFixture::User(1002), "j3");
  CHECK(bobs.ok());
  CHECK(service.JoinJob(ServiceFixture::Root(), "j4").ok());
  j2->reset();
  CHECK(service.JoinJob(alice, "j3").status().code() == StatusCode::kPermissionDenied);  // bob's
  auto j5 = service.JoinJob(alice, "j5");
  CHECK(j5.ok());
  // A stream's job counts as well (it was a way around the limit: ledger jobs).
  j1->reset();
  j1_again->reset();
  DatasetSpec shared = f.TokensSpec("toks");
  shared.shared = true;
  REQUIRE(f.AddDataset(shared).ok());
  StreamParams stream = ServiceFixture::StreamOf("s1", "toks", 0);
  stream.owner = alice;
  Result<OpenedStream> s1 = service.OpenStream(stream);
  INFO(s1.status().ToString());
  REQUIRE(s1.ok());
  stream.job = "s2";
  CHECK(service.OpenStream(stream).status().message() ==
        "stream for job 's2' rank 0: job 's2': uid 1001 already has 2 jobs, the most one user "
        "may hold (user_limits.jobs)");
  CHECK(service.JoinJob(alice, "j6").status().code() == StatusCode::kResourceExhausted);
  service.CloseStream(s1->id);

  CHECK(service.AdmitConnection(alice).ok());
  CHECK(service.AdmitConnection(alice).code() == StatusCode::kResourceExhausted);
  CHECK(service.AdmitConnection(ServiceFixture::Root()).ok());
  service.ReleaseConnection(alice);
  CHECK(service.AdmitConnection(alice).ok());

  DatasetOwner owner{alice, {}};
  CHECK(f.AddDataset(f.TokensSpec("a1"), owner).ok());
  auto second = f.AddDataset(f.TokensSpec("a2"), owner);
  REQUIRE(second.status().code() == StatusCode::kResourceExhausted);
  CHECK(second.status().message() ==  // below the session, a user's dataset is its key
        "dataset '~1001/a2': uid 1001 already has 1 datasets, the most one user may register "
        "(user_limits.datasets)");
  CHECK(f.AddDataset(f.TokensSpec("r1")).ok());  // root's
}

TEST_CASE("a registration's progress is its owner's from the call to the catalog's answer") {
  ServiceFixture f("registration_progress");
  DaemonService& service = f.service();
  const Principal alice = ServiceFixture::User(1001), bob = ServiceFixture::User(1002);
  // The pool's one thread is busy: the registration waits in its queue, followed already.
  std::promise<void> gate;
  std::shared_future<void> opened = gate.get_future().share();
  boost::asio::post(f.blocking(), [opened] { opened.wait(); });
  std::promise<Result<DatasetInfo>> added;
  service.AddDataset(f.TokensSpec("toks"), DatasetOwner{alice, {}},
                     [&](Result<DatasetInfo> info) { added.set_value(std::move(info)); });
  Result<RegistrationProgress> waiting = service.RegistrationProgressOf(alice, "toks");
  REQUIRE(waiting.ok());
  CHECK(waiting->dataset == "toks");
  CHECK(waiting->shards_total == 0);  // tokens: no shards
  CHECK(service.RegistrationProgressOf(bob, "toks").status().code() == StatusCode::kNotFound);
  CHECK(service.RegistrationProgressOf(ServiceFixture::Root(), "toks").status().code() ==
        StatusCode::kNotFound);
  gate.set_value();
  REQUIRE(added.get_future().get().ok());
  CHECK(service.RegistrationProgressOf(alice, "toks").status().code() == StatusCode::kNotFound);
}

TEST_CASE("a dataset's details: its source, shards and memory; no cache, no cache calls") {
  ServiceFixture f("details");
  DaemonService& service = f.service();
  const Principal alice = ServiceFixture::User(1001), bob = ServiceFixture::User(1002);
  REQUIRE(f.AddDataset(f.TokensSpec("toks"), DatasetOwner{alice, {}}).ok());
  Result<DatasetDetails> details = service.DescribeDataset(alice, "toks");
  REQUIRE(details.ok());
  CHECK(details->source == f.TokensSpec("toks").path);
  CHECK(details->info.count == ServiceFixture::kTokensSamples);
  CHECK(details->shards == 0);
  CHECK_FALSE(details->remote);
  // Another user's unshared dataset is not there for Bob, as with inspect.
  CHECK(service.DescribeDataset(bob, "toks").status().code() == StatusCode::kNotFound);

  // The cache is the node's: a user may not clear it (this service has none at all).
  Result<ShardCacheCleared> cleared = service.ClearShardCache(alice);
  CHECK(cleared.status().code() == StatusCode::kPermissionDenied);
  CHECK(cleared.status().message().find("uid 1001") != std::string::npos);
  CHECK(service.ClearShardCache(ServiceFixture::Root()).status().code() ==
        StatusCode::kFailedPrecondition);
  CHECK(service.GetShardCache(alice).status().code() == StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ember::daemon
