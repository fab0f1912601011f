#include "daemon/rpc/daemon_server.h"

#include <unistd.h>

#include <kj/async.h>
#include <kj/debug.h>

#include <functional>
#include <memory>
#include <utility>

#include "common/daemon_status_rpc.h"
#include "common/rpc_status.h"

namespace ember::daemon {
namespace {

using daemon_status_rpc::FromRpc;
using daemon_status_rpc::ToRpc;
using rpc_status::Throw;
using rpc_status::ValueOrThrow;

std::string ToStd(capnp::Text::Reader text) { return std::string(text.cStr(), text.size()); }

std::string ToStd(capnp::Data::Reader data) {
  return std::string(reinterpret_cast<const char*>(data.begin()), data.size());
}

// A promise and the callback that resolves it, for the service's completion callbacks.
// `Paf` is kj's PromiseFulfillerPair or its cross-thread kind (for callbacks that run on
// the blocking pool).
template <typename T>
struct Completion {
  kj::Promise<T> promise;
  std::function<void(T)> done;
};

template <typename T, typename Paf>
Completion<T> CompletionOf(Paf paf) {
  auto fulfiller = std::make_shared<decltype(paf.fulfiller)>(kj::mv(paf.fulfiller));
  return {kj::mv(paf.promise), [fulfiller](T value) { (*fulfiller)->fulfill(kj::mv(value)); }};
}

// `result` of a call that may wait: expires `wait` (if any) after timeout_ms and cancels it
// when the caller goes away.
template <typename T>
kj::Promise<T> WithTimeout(kj::Timer& timer, kj::Promise<T> result, std::unique_ptr<Wait> wait,
                           uint32_t timeout_ms) {
  if (!wait) return result;
  Wait* pending = wait.get();
  kj::Promise<void> expire = timer.afterDelay(timeout_ms * kj::MILLISECONDS)
                                 .then([pending] { pending->Expire(); })
                                 .eagerlyEvaluate(nullptr);
  return result.attach(kj::mv(expire), kj::mv(wait));
}

// Carries the ring's memfd (or a share group's) to the trainer: the peer calls getFd() on
// this capability.
class RingServer final : public rpc::Ring::Server {
 public:
  explicit RingServer(int fd) : fd_(dup(fd)) {}
  ~RingServer() {
    if (fd_ >= 0) close(fd_);
  }
  kj::Maybe<int> getFd() override {
    if (fd_ < 0) return nullptr;
    return fd_;
  }

 private:
  int fd_;
};

// Carries a shared-memory segment's memfd to a rank; holds the daemon's reference to the
// segment until the peer drops the capability.
class SharedMemoryServer final : public rpc::SharedMemory::Server {
 public:
  explicit SharedMemoryServer(std::shared_ptr<SharedMemory> memory) : memory_(std::move(memory)) {}
  kj::Maybe<int> getFd() override { return memory_->fd(); }

 private:
  std::shared_ptr<SharedMemory> memory_;
};

// The trainer's handle on its stream: dropping it (or the connection) closes the stream.
class StreamServer final : public rpc::Stream::Server {
 public:
  StreamServer(std::shared_ptr<Session> session, uint64_t id)
      : session_(std::move(session)), id_(id) {}
  ~StreamServer() { session_->CloseStream(id_); }

 protected:
  kj::Promise<void> close(CloseContext) override {
    session_->CloseStream(id_);
    return kj::READY_NOW;
  }

 private:
  std::shared_ptr<Session> session_;
  uint64_t id_;
};

StreamParams FromRpc(rpc::StreamRequest::Reader r) {
  StreamParams params;
  params.job = ToStd(r.getJob());
  params.dataset = ToStd(r.getDataset());
  params.batch_size = r.getBatchSize();
  params.seed = r.getSeed();
  params.rank = r.getRank();
  params.world_size = r.getWorldSize();
  params.epochs = r.getEpochs();
  params.shuffle = r.getShuffle();
  params.slots = r.getSlots();
  params.start_epoch = r.getStartEpoch();
  params.start_position = r.getStartPosition();
  params.expect_fingerprint = r.getFingerprint();
  params.sample_ids = r.getSampleIds();
  params.coordinator = ToStd(r.getCoordinator());
  params.rejoin = r.getRejoin();
  params.rejoin_epoch = r.getRejoinEpoch();
  params.rejoin_received = r.getRejoinReceived();
  params.share = ToStd(r.getShare());
  return params;
}

void ToRpc(const OpenedStream& s, rpc::StreamInfo::Builder info) {
  info.setStreamId(s.id);
  info.setSlotCount(s.slot_count);
  info.setSlotSize(s.slot_size);
  info.setRingBytes(s.ring_bytes);
  info.setBatchesPerEpoch(s.batches_per_epoch);
  info.setSamplesPerEpoch(s.samples_per_epoch);
  info.setFingerprint(s.fingerprint);
  info.setShare(s.share);
  info.setStartEpoch(s.start_epoch);
  info.setEpochs(s.epochs);
}

}  // namespace

kj::Promise<void> DaemonServer::addDataset(AddDatasetContext context) {
  auto added = CompletionOf<Result<DatasetInfo>>(
      kj::newPromiseAndCrossThreadFulfiller<Result<DatasetInfo>>());
  session_->AddDataset(FromRpc(context.getParams().getSpec()), kj::mv(added.done));
  return added.promise.then([context](Result<DatasetInfo> info) mutable {
    ToRpc(PublicInfo(ValueOrThrow(std::move(info))), context.getResults().initInfo());
  });
}

kj::Promise<void> DaemonServer::listDatasets(ListDatasetsContext context) {
  const std::vector<DatasetInfo> all = session_->ListDatasets();
  auto out = context.getResults().initDatasets(all.size());
  for (size_t i = 0; i < all.size(); ++i) ToRpc(PublicInfo(all[i]), out[i]);
  return kj::READY_NOW;
}

kj::Promise<void> DaemonServer::inspectDataset(InspectDatasetContext context) {
  ToRpc(PublicInfo(ValueOrThrow(session_->InspectDataset(ToStd(context.getParams().getDataset())))),
        context.getResults().initInfo());
  return kj::READY_NOW;
}

kj::Promise<void> DaemonServer::removeDataset(RemoveDatasetContext context) {
  auto removed = CompletionOf<Status>(kj::newPromiseAndCrossThreadFulfiller<Status>());
  session_->RemoveDataset(ToStd(context.getParams().getDataset()), kj::mv(removed.done));
  return removed.promise.then([](Status s) {
    if (!s.ok()) Throw(s);
  });
}

kj::Promise<void> DaemonServer::openStream(OpenStreamContext context) {
  OpenedStream opened = ValueOrThrow(session_->OpenStream(FromRpc(context.getParams().getRequest())));
  auto results = context.getResults();
  results.setStream(kj::heap<StreamServer>(session_, opened.id));
  results.setRing(kj::heap<RingServer>(opened.ring_fd));
  if (opened.shared_fd >= 0) results.setShared(kj::heap<RingServer>(opened.shared_fd));
  ToRpc(opened, results.initInfo());
  return kj::READY_NOW;
}

kj::Promise<void> DaemonServer::status(StatusContext context) {
  ToRpc(session_->GetStatus(), context.getResults().initStatus());
  return kj::READY_NOW;
}

kj::Promise<void> DaemonServer::joinJob(JoinJobContext context) {
  const auto params = context.getParams();
  const std::string coordinator = ToStd(params.getCoordinator());
  if (!coordinator.empty() && open_remote_ != nullptr) {
    kj::Maybe<rpc::Job::Client> remote =
        ValueOrThrow((*open_remote_)(ValueOrThrow(session_->JobKey(ToStd(params.getJob()))),
                                     coordinator, session_->principal()));
    KJ_IF_MAYBE(job, remote) {
      context.getResults().setJob(kj::mv(*job));
      return kj::READY_NOW;
    }
  }
  JobMembership* membership = ValueOrThrow(session_->JoinJob(ToStd(params.getJob())));
  context.getResults().setJob(kj::heap<JobServer>(session_, membership, timer_));
  return kj::READY_NOW;
}

kj::Promise<void> DaemonServer::registrationProgress(RegistrationProgressContext context) {
  ToRpc(ValueOrThrow(session_->GetRegistrationProgress(ToStd(context.getParams().getDataset()))),
        context.getResults().initProgress());
  return kj::READY_NOW;
}

kj::Promise<void> DaemonServer::datasetDetails(DatasetDetailsContext context) {
  ToRpc(ValueOrThrow(session_->DescribeDataset(ToStd(context.getParams().getDataset()))),
        context.getResults().initDetails());
  return kj::READY_NOW;
}

kj::Promise<void> DaemonServer::shardCache(ShardCacheContext context) {
  ToRpc(ValueOrThrow(session_->GetShardCache()), context.getResults().initCache());
  return kj::READY_NOW;
}

kj::Promise<void> DaemonServer::clearShardCache(ClearShardCacheContext context) {
  ToRpc(ValueOrThrow(session_->ClearShardCache()), context.getResults().initCleared());
  return kj::READY_NOW;
}

JobServer::~JobServer() { session_->LeaveJob(&membership_); }

kj::Promise<void> JobServer::kvSet(KvSetContext context) {
  auto p = context.getParams();
  Status set = membership_.KvSet(ToStd(p.getKey()), ToStd(p.getValue()));
  if (!set.ok()) Throw(set);
  return kj::READY_NOW;
}

kj::Promise<void> JobServer::kvGet(KvGetContext context) {
  auto p = context.getParams();
  auto got = CompletionOf<Result<std::string>>(kj::newPromiseAndFulfiller<Result<std::string>>());
  std::unique_ptr<Wait> wait = membership_.KvGet(ToStd(p.getKey()), p.getTimeoutMs(), got.done);
  return WithTimeout(timer_, kj::mv(got.promise), std::move(wait), p.getTimeoutMs())
      .then([context](Result<std::string> value) mutable {
        std::string v = ValueOrThrow(std::move(value));
        context.getResults().setValue(
            capnp::Data::Reader(reinterpret_cast<const kj::byte*>(v.data()), v.size()));
      });
}

kj::Promise<void> JobServer::kvAdd(KvAddContext context) {
  auto p = context.getParams();
  context.getResults().setValue(ValueOrThrow(membership_.KvAdd(ToStd(p.getKey()), p.getDelta())));
  return kj::READY_NOW;
}

kj::Promise<void> JobServer::kvCheck(KvCheckContext context) {
  std::vector<std::string> keys;
  for (auto k : context.getParams().getKeys()) keys.push_back(ToStd(k));
  context.getResults().setPresent(membership_.KvCheck(keys));
  return kj::READY_NOW;
}

kj::Promise<void> JobServer::kvDelete(KvDeleteContext context) {
  context.getResults().setDeleted(membership_.KvDelete(ToStd(context.getParams().getKey())));
  return kj::READY_NOW;
}

kj::Promise<void> JobServer::barrier(BarrierContext context) {
  auto p = context.getParams();
  auto arrived = CompletionOf<Result<uint64_t>>(kj::newPromiseAndFulfiller<Result<uint64_t>>());
  std::unique_ptr<Wait> wait = membership_.Barrier(ToStd(p.getBarrier()), p.getWorldSize(),
                                                   p.getRound(), p.getTimeoutMs(), arrived.done,
                                                   p.getMember());
  return WithTimeout(timer_, kj::mv(arrived.promise), std::move(wait), p.getTimeoutMs())
      .then([context](Result<uint64_t> round) mutable {
        context.getResults().setRound(ValueOrThrow(std::move(round)));
      });
}

kj::Promise<void> JobServer::incarnation(IncarnationContext context) {
  context.getResults().setId(membership_.incarnation());
  return kj::READY_NOW;
}

kj::Promise<void> JobServer::openSharedMemory(OpenSharedMemoryContext context) {
  if (!node_local_)
    Throw(FailedPrecondition("shared memory is node-local: job '" + membership_.name() +
                             "' is coordinated by another node's daemon"));
  auto p = context.getParams();
  std::shared_ptr<SharedMemory> memory = ValueOrThrow(membership_.OpenSharedMemory(
      ToStd(p.getSegment()), p.getRank(), p.getWorldSize(), p.getBytes()));
  context.getResults().setMemory(kj::heap<SharedMemoryServer>(std::move(memory)));
  return kj::READY_NOW;
}

}  // namespace ember::daemon
