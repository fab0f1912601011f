#include "daemon/rpc/daemon_server.h"

#include <unistd.h>

#include <boost/asio/post.hpp>
#include <kj/async.h>
#include <kj/debug.h>

#include <memory>

#include "common/rpc_status.h"

namespace ember::daemon {
namespace {

[[noreturn]] void Throw(const Status& status) {
  kj::throwFatalException(rpc_status::ToException(status));
}

template <typename T>
T ValueOrThrow(Result<T> result) {
  if (!result.ok()) Throw(result.status());
  return std::move(result).value();
}

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
}

// Runs `fn` on the blocking pool and resumes on the event loop with its result, so file
// reads never stall RPC.
template <typename T>
kj::Promise<T> OffLoop(boost::asio::thread_pool& pool, std::function<T()> fn) {
  auto paf = kj::newPromiseAndCrossThreadFulfiller<T>();
  boost::asio::post(pool, [fn = std::move(fn), fulfiller = kj::mv(paf.fulfiller)]() mutable {
    fulfiller->fulfill(fn());
  });
  return kj::mv(paf.promise);
}

kj::Promise<void> Timeout(kj::Timer& timer, uint32_t timeout_ms, const std::string& what) {
  return timer.afterDelay(timeout_ms * kj::MILLISECONDS).then([what, timeout_ms]() -> void {
    Throw(DeadlineExceeded(what + ": timed out after " + std::to_string(timeout_ms) + " ms"));
  });
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
  StreamServer(StreamManager& streams, uint64_t id) : streams_(streams), id_(id) {}
  ~StreamServer() { streams_.Close(id_); }

 protected:
  kj::Promise<void> close(CloseContext) override {
    streams_.Close(id_);
    return kj::READY_NOW;
  }

 private:
  StreamManager& streams_;
  uint64_t id_;
};

}  // namespace

DaemonServer::~DaemonServer() {
  for (const std::string& job : kv_jobs_) {
    auto it = ctx_.kv_job_refs.find(job);
    if (it == ctx_.kv_job_refs.end()) continue;
    if (--it->second <= 0) {
      ctx_.kv->DropJob(job);
      ctx_.kv_job_refs.erase(it);
    }
  }
}

void DaemonServer::UseJob(const std::string& job) {
  if (kv_jobs_.insert(job).second) ++ctx_.kv_job_refs[job];
}

kj::Promise<void> DaemonServer::addDataset(AddDatasetContext context) {
  DatasetSpec spec = FromRpc(context.getParams().getSpec());
  Catalog* catalog = ctx_.catalog;
  return OffLoop<Result<DatasetInfo>>(*ctx_.blocking, [catalog, spec] { return catalog->Add(spec); })
      .then([context](Result<DatasetInfo> info) mutable {
        ToRpc(ValueOrThrow(std::move(info)), context.getResults().initInfo());
      });
}

kj::Promise<void> DaemonServer::listDatasets(ListDatasetsContext context) {
  std::vector<DatasetInfo> all = ctx_.catalog->List();
  auto list = context.getResults().initDatasets(all.size());
  for (size_t i = 0; i < all.size(); ++i) ToRpc(all[i], list[i]);
  return kj::READY_NOW;
}

kj::Promise<void> DaemonServer::inspectDataset(InspectDatasetContext context) {
  ToRpc(ValueOrThrow(ctx_.catalog->Get(ToStd(context.getParams().getName()))),
        context.getResults().initInfo());
  return kj::READY_NOW;
}

kj::Promise<void> DaemonServer::removeDataset(RemoveDatasetContext context) {
  std::string name = ToStd(context.getParams().getName());
  Catalog* catalog = ctx_.catalog;
  return OffLoop<Status>(*ctx_.blocking, [catalog, name] { return catalog->Remove(name); })
      .then([](Status s) {
        if (!s.ok()) Throw(s);
      });
}

kj::Promise<void> DaemonServer::openStream(OpenStreamContext context) {
  auto r = context.getParams().getRequest();
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
  auto stream = ctx_.streams->Open(params);
  if (!stream.ok())
    Throw(stream.status().WithContext("stream for job '" + params.job + "' rank " +
                                      std::to_string(params.rank)));
  auto results = context.getResults();
  const std::shared_ptr<Stream>& s = *stream;
  results.setStream(kj::heap<StreamServer>(*ctx_.streams, s->id()));
  results.setRing(kj::heap<RingServer>(s->ring_fd()));
  auto info = results.initInfo();
  info.setStreamId(s->id());
  info.setSlotCount(s->slot_count());
  info.setSlotSize(s->slot_size());
  info.setRingBytes(s->ring_bytes());
  info.setBatchesPerEpoch(s->batches_per_epoch());
  info.setSamplesPerEpoch(s->samples_per_epoch());
  return kj::READY_NOW;
}

kj::Promise<void> DaemonServer::kvSet(KvSetContext context) {
  auto p = context.getParams();
  std::string job = ToStd(p.getJob());
  UseJob(job);
  ctx_.kv->Set(job, ToStd(p.getKey()), ToStd(p.getValue()));
  return kj::READY_NOW;
}

kj::Promise<void> DaemonServer::kvGet(KvGetContext context) {
  auto p = context.getParams();
  std::string job = ToStd(p.getJob());
  std::string key = ToStd(p.getKey());
  UseJob(job);
  auto paf = kj::newPromiseAndFulfiller<std::string>();
  auto fulfiller =
      std::make_shared<kj::Own<kj::PromiseFulfiller<std::string>>>(kj::mv(paf.fulfiller));
  auto waiter = ctx_.kv->Get(job, key, [fulfiller](const std::string& value) {
    (*fulfiller)->fulfill(std::string(value));
  });
  KvStore* kv = ctx_.kv;
  kj::Promise<std::string> value = kj::mv(paf.promise);
  if (waiter) {
    value = value
                .exclusiveJoin(Timeout(*ctx_.timer, p.getTimeoutMs(),
                                       "waiting for key '" + key + "' of job '" + job + "'")
                                   .then([]() -> std::string { return {}; }))
                .attach(kj::defer([kv, id = *waiter] { kv->CancelWaiter(id); }));
  }
  return value.then([context](std::string v) mutable {
    context.getResults().setValue(
        capnp::Data::Reader(reinterpret_cast<const kj::byte*>(v.data()), v.size()));
  });
}

kj::Promise<void> DaemonServer::kvAdd(KvAddContext context) {
  auto p = context.getParams();
  std::string job = ToStd(p.getJob());
  UseJob(job);
  context.getResults().setValue(ValueOrThrow(ctx_.kv->Add(job, ToStd(p.getKey()), p.getDelta())));
  return kj::READY_NOW;
}

kj::Promise<void> DaemonServer::kvCheck(KvCheckContext context) {
  auto p = context.getParams();
  std::string job = ToStd(p.getJob());
  UseJob(job);
  std::vector<std::string> keys;
  for (auto k : p.getKeys()) keys.push_back(ToStd(k));
  context.getResults().setPresent(ctx_.kv->Check(job, keys));
  return kj::READY_NOW;
}

kj::Promise<void> DaemonServer::kvDelete(KvDeleteContext context) {
  auto p = context.getParams();
  std::string job = ToStd(p.getJob());
  UseJob(job);
  context.getResults().setDeleted(ctx_.kv->Delete(job, ToStd(p.getKey())));
  return kj::READY_NOW;
}

kj::Promise<void> DaemonServer::barrier(BarrierContext context) {
  auto p = context.getParams();
  std::string job = ToStd(p.getJob());
  std::string name = ToStd(p.getName());
  UseJob(job);
  auto paf = kj::newPromiseAndFulfiller<void>();
  auto fulfiller = std::make_shared<kj::Own<kj::PromiseFulfiller<void>>>(kj::mv(paf.fulfiller));
  auto waiter = ValueOrThrow(
      ctx_.kv->Arrive(job, name, p.getWorldSize(), [fulfiller] { (*fulfiller)->fulfill(); }));
  kj::Promise<void> done = kj::mv(paf.promise);
  if (waiter) {
    KvStore* kv = ctx_.kv;
    done = done
               .exclusiveJoin(Timeout(*ctx_.timer, p.getTimeoutMs(),
                                      "barrier '" + name + "' of job '" + job + "' (" +
                                          std::to_string(p.getWorldSize()) + " ranks)"))
               .attach(kj::defer([kv, id = *waiter] { kv->CancelWaiter(id); }));
  }
  return done;
}

kj::Promise<void> DaemonServer::openSharedMemory(OpenSharedMemoryContext context) {
  auto p = context.getParams();
  std::shared_ptr<SharedMemory> memory = ValueOrThrow(ctx_.segments->Open(
      ToStd(p.getJob()), ToStd(p.getName()), p.getRank(), p.getWorldSize(), p.getBytes()));
  context.getResults().setMemory(kj::heap<SharedMemoryServer>(std::move(memory)));
  return kj::READY_NOW;
}

kj::Promise<void> DaemonServer::status(StatusContext context) {
  auto s = context.getResults().initStatus();
  s.setVersion(ctx_.version);
  s.setPid(static_cast<uint32_t>(getpid()));
  s.setUptimeSeconds((ctx_.env->NowMicros() - ctx_.start_micros) / 1e6);
  std::vector<DatasetInfo> datasets = ctx_.catalog->List();
  auto ds = s.initDatasets(datasets.size());
  for (size_t i = 0; i < datasets.size(); ++i) ToRpc(datasets[i], ds[i]);
  std::vector<JobSummary> jobs = ctx_.ledger->Summaries();
  auto js = s.initJobs(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    js[i].setJob(jobs[i].job);
    js[i].setWorldSize(jobs[i].params.world_size);
    js[i].setDataset(jobs[i].params.dataset);
    js[i].setEpochsStarted(jobs[i].epochs_started);
    js[i].setBatchesLeased(jobs[i].batches_leased);
    js[i].setBatchesCommitted(jobs[i].batches_committed);
  }
  std::vector<StreamStats> streams = ctx_.streams->Stats();
  auto ss = s.initStreams(streams.size());
  for (size_t i = 0; i < streams.size(); ++i) {
    const StreamStats& st = streams[i];
    ss[i].setStreamId(st.id);
    ss[i].setJob(st.params.job);
    ss[i].setRank(st.params.rank);
    ss[i].setWorldSize(st.params.world_size);
    ss[i].setDataset(st.params.dataset);
    ss[i].setEpoch(st.epoch);
    ss[i].setBatchesPublished(st.batches_published);
    ss[i].setBatchesConsumed(st.batches_consumed);
    ss[i].setSamplesPerSecond(st.samples_per_second);
    ss[i].setRingFill(st.ring_fill);
    ss[i].setSlotCount(st.slot_count);
    ss[i].setSamplesSkipped(st.samples_skipped);
  }
  s.setShmBytesInUse(ctx_.streams->shm_bytes_in_use());
  s.setShmBytesBudget(ctx_.streams->shm_bytes_budget());
  std::vector<PendingSegment> pending = ctx_.segments->Pending();
  auto ps = s.initPendingSegments(pending.size());
  for (size_t i = 0; i < pending.size(); ++i) {
    ps[i].setJob(pending[i].job);
    ps[i].setName(pending[i].name);
    ps[i].setWorldSize(pending[i].world_size);
    ps[i].setBytes(pending[i].bytes);
    auto missing = ps[i].initMissingRanks(pending[i].missing_ranks.size());
    for (size_t r = 0; r < pending[i].missing_ranks.size(); ++r) {
      missing.set(r, pending[i].missing_ranks[r]);
    }
    ps[i].setAgeSeconds(pending[i].age_micros / 1e6);
  }
  return kj::READY_NOW;
}

}  // namespace ember::daemon
