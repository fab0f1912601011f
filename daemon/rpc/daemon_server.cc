#include "daemon/rpc/daemon_server.h"

#include <unistd.h>

#include <kj/async.h>
#include <kj/debug.h>

#include <functional>
#include <memory>
#include <utility>

#include "common/rpc_status.h"

namespace ember::daemon {
namespace {

using rpc_status::Throw;
using rpc_status::ValueOrThrow;

std::string ToStd(capnp::Text::Reader text) { return std::string(text.cStr(), text.size()); }

std::string ToStd(capnp::Data::Reader data) {
  return std::string(reinterpret_cast<const char*>(data.begin()), data.size());
}

DatasetSpec FromRpc(rpc::DatasetSpec::Reader r) {
  DatasetSpec spec;
  spec.name = ToStd(r.getName());
  spec.format = ToStd(r.getFormat());
  spec.path = ToStd(r.getPath());
  spec.split = ToStd(r.getSplit());
  spec.pipeline = ToStd(r.getPipeline());
  if (r.hasOnError() && r.getOnError().size() > 0) spec.on_error = ToStd(r.getOnError());
  spec.shared = r.getShared();
  return spec;
}

void ToRpc(const DatasetInfo& info, rpc::DatasetInfo::Builder b) {
  auto spec = b.initSpec();
  spec.setName(info.spec.name);
  spec.setFormat(info.spec.format);
  spec.setPath(info.spec.path);
  spec.setSplit(info.spec.split);
  spec.setPipeline(info.spec.pipeline);
  spec.setOnError(info.spec.on_error);
  spec.setShared(info.spec.shared);
  b.setOwnerUid(info.owner.principal.uid);
  b.setCount(info.count);
  auto tensors = b.initTensors(info.tensors.size());
  for (size_t i = 0; i < info.tensors.size(); ++i) {
    tensors[i].setName(info.tensors[i].name);
    tensors[i].setDtype(DTypeName(info.tensors[i].dtype));
    auto shape = tensors[i].initShape(info.tensors[i].shape.size());
    for (size_t k = 0; k < info.tensors[i].shape.size(); ++k) shape.set(k, info.tensors[i].shape[k]);
  }
  auto files = b.initFiles(info.files.size());
  for (size_t i = 0; i < info.files.size(); ++i) files.set(i, info.files[i]);
  b.setFingerprint(info.fingerprint);
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

// Carries the ring's memfd to the trainer: the peer calls getFd() on this capability.
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
}

void ToRpc(const JobSummary& job, rpc::JobStatus::Builder b) {
  b.setJob(job.job);
  b.setWorldSize(job.params.world_size);
  b.setDataset(job.params.dataset);
  b.setEpochsStarted(job.epochs_started);
  b.setBatchesLeased(job.batches_leased);
  b.setBatchesCommitted(job.batches_committed);
  b.setBatchSize(job.params.batch_size);
  b.setBatchesPerRank(job.batches_per_rank);
  b.setCoordinator(job.coordinator);
  b.setLeasesInFlight(job.leases_in_flight);
  auto ranks = b.initRanks(job.ranks.size());
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    const RankProgress& p = job.ranks[i];
    ranks[i].setRank(p.rank);
    ranks[i].setJoined(p.joined);
    ranks[i].setEpoch(p.epoch);
    ranks[i].setConsumed(p.consumed);
    ranks[i].setLeased(p.leased);
    ranks[i].setNode(p.node);
  }
}

void ToRpc(const StreamStats& st, rpc::StreamStatus::Builder b) {
  b.setStreamId(st.id);
  b.setJob(st.params.job);
  b.setRank(st.params.rank);
  b.setWorldSize(st.params.world_size);
  b.setDataset(st.params.dataset);
  b.setEpoch(st.epoch);
  b.setBatchesPublished(st.batches_published);
  b.setBatchesConsumed(st.batches_consumed);
  b.setSamplesPerSecond(st.samples_per_second);
  b.setRingFill(st.ring_fill);
  b.setSlotCount(st.slot_count);
  b.setSamplesSkipped(st.samples_skipped);
  b.setSamplesPublished(st.samples_published);
  b.setBytesPublished(st.bytes_published);
  b.setDecodeErrors(st.decode_errors);
  b.setDataStallSeconds(st.data_stall_seconds);
  b.setPrefetchDepth(st.prefetch_depth);
  b.setSlotsTouched(st.slots_touched);
}

void ToRpc(const PendingSegment& segment, rpc::PendingSegment::Builder b) {
  b.setJob(segment.job);
  b.setName(segment.name);
  b.setWorldSize(segment.world_size);
  b.setBytes(segment.bytes);
  auto missing = b.initMissingRanks(segment.missing_ranks.size());
  for (size_t r = 0; r < segment.missing_ranks.size(); ++r) {
    missing.set(r, segment.missing_ranks[r]);
  }
  b.setAgeSeconds(segment.age_micros / 1e6);
}

template <typename T, typename ListBuilder>
void ToRpcList(const std::vector<T>& items, ListBuilder list) {
  for (size_t i = 0; i < items.size(); ++i) ToRpc(items[i], list[i]);
}

void ToRpc(const DaemonStatus& status, rpc::DaemonStatus::Builder s) {
  s.setVersion(status.version);
  s.setPid(status.pid);
  s.setUptimeSeconds(status.uptime_seconds);
  ToRpcList(status.datasets, s.initDatasets(status.datasets.size()));
  ToRpcList(status.jobs, s.initJobs(status.jobs.size()));
  ToRpcList(status.streams, s.initStreams(status.streams.size()));
  s.setShmBytesInUse(status.shm_bytes_in_use);
  s.setShmBytesBudget(status.shm_bytes_budget);
  ToRpcList(status.pending_segments, s.initPendingSegments(status.pending_segments.size()));
  if (status.process) {
    s.setOpenFds(status.process->open_fds);
    s.setResidentBytes(status.process->resident_bytes);
  }
}

}  // namespace

kj::Promise<void> DaemonServer::addDataset(AddDatasetContext context) {
  auto added = CompletionOf<Result<DatasetInfo>>(
      kj::newPromiseAndCrossThreadFulfiller<Result<DatasetInfo>>());
  session_->AddDataset(FromRpc(context.getParams().getSpec()), kj::mv(added.done));
  return added.promise.then([context](Result<DatasetInfo> info) mutable {
    ToRpc(ValueOrThrow(std::move(info)), context.getResults().initInfo());
  });
}

kj::Promise<void> DaemonServer::listDatasets(ListDatasetsContext context) {
  std::vector<DatasetInfo> all = session_->ListDatasets();
  ToRpcList(all, context.getResults().initDatasets(all.size()));
  return kj::READY_NOW;
}

kj::Promise<void> DaemonServer::inspectDataset(InspectDatasetContext context) {
  ToRpc(ValueOrThrow(session_->InspectDataset(ToStd(context.getParams().getDataset()))),
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
    std::optional<rpc::Job::Client> remote =
        ValueOrThrow((*open_remote_)(ToStd(params.getJob()), coordinator, session_->principal()));
    if (remote) {
      context.getResults().setJob(kj::mv(*remote));
      return kj::READY_NOW;
    }
  }
  JobMembership* membership = ValueOrThrow(session_->JoinJob(ToStd(params.getJob())));
  context.getResults().setJob(kj::heap<JobServer>(session_, membership, timer_));
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
  auto arrived = CompletionOf<Status>(kj::newPromiseAndFulfiller<Status>());
  std::unique_ptr<Wait> wait = membership_.Barrier(ToStd(p.getBarrier()), p.getWorldSize(),
                                                   p.getTimeoutMs(), arrived.done);
  return WithTimeout(timer_, kj::mv(arrived.promise), std::move(wait), p.getTimeoutMs())
      .then([](Status s) {
        if (!s.ok()) Throw(s);
      });
}

kj::Promise<void> JobServer::openSharedMemory(OpenSharedMemoryContext context) {
  if (!node_local_)
    Throw(FailedPrecondition("shared memory is node-local: job '" + membership_.job() +
                             "' is coordinated by another node's daemon"));
  auto p = context.getParams();
  std::shared_ptr<SharedMemory> memory = ValueOrThrow(membership_.OpenSharedMemory(
      ToStd(p.getSegment()), p.getRank(), p.getWorldSize(), p.getBytes()));
  context.getResults().setMemory(kj::heap<SharedMemoryServer>(std::move(memory)));
  return kj::READY_NOW;
}

}  // namespace ember::daemon
