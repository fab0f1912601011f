#include "common/daemon_status_rpc.h"

#include <string>
#include <utility>

namespace ember::daemon_status_rpc {
namespace {

std::string ToStd(capnp::Text::Reader text) { return std::string(text.cStr(), text.size()); }

// A List(Text) or a List of a primitive, element by element.
template <typename T, typename ListBuilder>
void SetList(const std::vector<T>& items, ListBuilder out) {
  for (size_t i = 0; i < items.size(); ++i) out.set(i, items[i]);
}

template <typename T, typename ListReader>
std::vector<T> GetList(ListReader in) {
  std::vector<T> out;
  out.reserve(in.size());
  for (auto item : in) out.push_back(T(item));
  return out;
}

std::vector<std::string> GetTextList(capnp::List<capnp::Text>::Reader in) {
  std::vector<std::string> out;
  out.reserve(in.size());
  for (capnp::Text::Reader item : in) out.push_back(ToStd(item));
  return out;
}

}  // namespace

void ToRpc(const DatasetSpec& spec, rpc::DatasetSpec::Builder out) {
  out.setName(spec.name);
  out.setFormat(spec.format);
  out.setPath(spec.path);
  out.setSplit(spec.split);
  out.setPipeline(spec.pipeline);
  out.setOnError(spec.on_error);
  out.setShared(spec.shared);
  out.setShuffle(spec.shuffle);
  out.setShuffleWindow(spec.shuffle_window);
  out.setEndpoint(spec.endpoint);
}

DatasetSpec FromRpc(rpc::DatasetSpec::Reader in) {
  DatasetSpec spec;
  spec.name = ToStd(in.getName());
  spec.format = ToStd(in.getFormat());
  spec.path = ToStd(in.getPath());
  spec.split = ToStd(in.getSplit());
  spec.pipeline = ToStd(in.getPipeline());
  if (in.getOnError().size() > 0) spec.on_error = ToStd(in.getOnError());
  spec.shared = in.getShared();
  if (in.getShuffle().size() > 0) spec.shuffle = ToStd(in.getShuffle());
  spec.shuffle_window = in.getShuffleWindow();
  spec.endpoint = ToStd(in.getEndpoint());
  return spec;
}

void ToRpc(const TensorInfo& tensor, rpc::TensorSpec::Builder out) {
  out.setName(tensor.name);
  out.setDtype(tensor.dtype);
  SetList(tensor.shape, out.initShape(tensor.shape.size()));
}

TensorInfo FromRpc(rpc::TensorSpec::Reader in) {
  TensorInfo tensor;
  tensor.name = ToStd(in.getName());
  tensor.dtype = ToStd(in.getDtype());
  tensor.shape = GetList<int64_t>(in.getShape());
  return tensor;
}

void ToRpc(const DatasetInfo& info, rpc::DatasetInfo::Builder out) {
  ToRpc(info.spec, out.initSpec());
  out.setCount(info.count);
  ToRpcList(info.tensors, out.initTensors(info.tensors.size()));
  SetList(info.files, out.initFiles(info.files.size()));
  out.setFingerprint(info.fingerprint);
  out.setOwnerUid(info.owner_uid);
}

DatasetInfo FromRpc(rpc::DatasetInfo::Reader in) {
  DatasetInfo info;
  info.spec = FromRpc(in.getSpec());
  info.count = in.getCount();
  info.tensors = FromRpcList(in.getTensors());
  info.files = GetTextList(in.getFiles());
  info.fingerprint = in.getFingerprint();
  info.owner_uid = in.getOwnerUid();
  return info;
}

void ToRpc(const StreamStatus& stream, rpc::StreamStatus::Builder out) {
  out.setStreamId(stream.stream_id);
  out.setJob(stream.job);
  out.setRank(stream.rank);
  out.setWorldSize(stream.world_size);
  out.setDataset(stream.dataset);
  out.setEpoch(stream.epoch);
  out.setBatchesPublished(stream.batches_published);
  out.setBatchesConsumed(stream.batches_consumed);
  out.setSamplesPerSecond(stream.samples_per_second);
  out.setRingFill(stream.ring_fill);
  out.setSlotCount(stream.slot_count);
  out.setPrefetchDepth(stream.prefetch_depth);
  out.setSlotsTouched(stream.slots_touched);
  out.setSamplesSkipped(stream.samples_skipped);
  out.setSamplesPublished(stream.samples_published);
  out.setBytesPublished(stream.bytes_published);
  out.setDecodeErrors(stream.decode_errors);
  out.setDataStallSeconds(stream.data_stall_seconds);
  out.setShare(stream.share);
  out.setSharedBatches(stream.shared_batches);
  out.setRemoteRows(stream.remote_rows);
}

StreamStatus FromRpc(rpc::StreamStatus::Reader in) {
  StreamStatus stream;
  stream.stream_id = in.getStreamId();
  stream.job = ToStd(in.getJob());
  stream.rank = in.getRank();
  stream.world_size = in.getWorldSize();
  stream.dataset = ToStd(in.getDataset());
  stream.epoch = in.getEpoch();
  stream.batches_published = in.getBatchesPublished();
  stream.batches_consumed = in.getBatchesConsumed();
  stream.samples_per_second = in.getSamplesPerSecond();
  stream.ring_fill = in.getRingFill();
  stream.slot_count = in.getSlotCount();
  stream.prefetch_depth = in.getPrefetchDepth();
  stream.slots_touched = in.getSlotsTouched();
  stream.samples_skipped = in.getSamplesSkipped();
  stream.samples_published = in.getSamplesPublished();
  stream.bytes_published = in.getBytesPublished();
  stream.decode_errors = in.getDecodeErrors();
  stream.data_stall_seconds = in.getDataStallSeconds();
  stream.share = ToStd(in.getShare());
  stream.shared_batches = in.getSharedBatches();
  stream.remote_rows = in.getRemoteRows();
  return stream;
}

void ToRpc(const DecodeWorkerStatus& worker, rpc::DecodeWorkerStatus::Builder out) {
  out.setAddress(worker.address);
  out.setUp(worker.up);
  out.setLastError(worker.last_error);
  out.setCalls(worker.calls);
  out.setRows(worker.rows);
  out.setBytes(worker.bytes);
  out.setFailedCalls(worker.failed_calls);
  out.setRowsPerSecond(worker.rows_per_second);
  out.setShare(worker.share);
}

DecodeWorkerStatus FromRpc(rpc::DecodeWorkerStatus::Reader in) {
  DecodeWorkerStatus worker;
  worker.address = ToStd(in.getAddress());
  worker.up = in.getUp();
  worker.last_error = ToStd(in.getLastError());
  worker.calls = in.getCalls();
  worker.rows = in.getRows();
  worker.bytes = in.getBytes();
  worker.failed_calls = in.getFailedCalls();
  worker.rows_per_second = in.getRowsPerSecond();
  worker.share = in.getShare();
  return worker;
}

void ToRpc(const RankProgress& rank, rpc::RankProgress::Builder out) {
  out.setRank(rank.rank);
  out.setJoined(rank.joined);
  out.setEpoch(rank.epoch);
  out.setConsumed(rank.consumed);
  out.setLeased(rank.leased);
  out.setNode(rank.node);
}

RankProgress FromRpc(rpc::RankProgress::Reader in) {
  RankProgress rank;
  rank.rank = in.getRank();
  rank.joined = in.getJoined();
  rank.epoch = in.getEpoch();
  rank.consumed = in.getConsumed();
  rank.leased = in.getLeased();
  rank.node = ToStd(in.getNode());
  return rank;
}

void ToRpc(const JobStatus& job, rpc::JobStatus::Builder out) {
  out.setJob(job.job);
  out.setWorldSize(job.world_size);
  out.setDataset(job.dataset);
  out.setEpochsStarted(job.epochs_started);
  out.setBatchesLeased(job.batches_leased);
  out.setBatchesCommitted(job.batches_committed);
  out.setBatchSize(job.batch_size);
  out.setBatchesPerRank(job.batches_per_rank);
  ToRpcList(job.ranks, out.initRanks(job.ranks.size()));
  out.setCoordinator(job.coordinator);
  out.setLeasesInFlight(job.leases_in_flight);
  out.setRanksUnlisted(job.ranks_unlisted);
  out.setRanksJoined(job.ranks_joined);
}

JobStatus FromRpc(rpc::JobStatus::Reader in) {
  JobStatus job;
  job.job = ToStd(in.getJob());
  job.world_size = in.getWorldSize();
  job.dataset = ToStd(in.getDataset());
  job.epochs_started = in.getEpochsStarted();
  job.batches_leased = in.getBatchesLeased();
  job.batches_committed = in.getBatchesCommitted();
  job.batch_size = in.getBatchSize();
  job.batches_per_rank = in.getBatchesPerRank();
  job.ranks = FromRpcList(in.getRanks());
  job.coordinator = ToStd(in.getCoordinator());
  job.leases_in_flight = in.getLeasesInFlight();
  job.ranks_unlisted = in.getRanksUnlisted();
  job.ranks_joined = in.getRanksJoined();
  return job;
}

void ToRpc(const PendingSegmentStatus& segment, rpc::PendingSegment::Builder out) {
  out.setJob(segment.job);
  out.setName(segment.name);
  out.setWorldSize(segment.world_size);
  out.setBytes(segment.bytes);
  SetList(segment.missing_ranks, out.initMissingRanks(segment.missing_ranks.size()));
  out.setAgeSeconds(segment.age_seconds);
  out.setMissingUnlisted(segment.missing_unlisted);
}

PendingSegmentStatus FromRpc(rpc::PendingSegment::Reader in) {
  PendingSegmentStatus segment;
  segment.job = ToStd(in.getJob());
  segment.name = ToStd(in.getName());
  segment.world_size = in.getWorldSize();
  segment.bytes = in.getBytes();
  segment.missing_ranks = GetList<uint32_t>(in.getMissingRanks());
  segment.age_seconds = in.getAgeSeconds();
  segment.missing_unlisted = in.getMissingUnlisted();
  return segment;
}

void ToRpc(const DaemonStatus& status, rpc::DaemonStatus::Builder out) {
  out.setVersion(status.version);
  out.setPid(status.pid);
  out.setUptimeSeconds(status.uptime_seconds);
  ToRpcList(status.datasets, out.initDatasets(status.datasets.size()));
  ToRpcList(status.jobs, out.initJobs(status.jobs.size()));
  ToRpcList(status.streams, out.initStreams(status.streams.size()));
  out.setShmBytesInUse(status.shm_bytes_in_use);
  out.setShmBytesBudget(status.shm_bytes_budget);
  ToRpcList(status.pending_segments, out.initPendingSegments(status.pending_segments.size()));
  out.setOpenFds(status.open_fds);
  out.setResidentBytes(status.resident_bytes);
  ToRpcList(status.decode_workers, out.initDecodeWorkers(status.decode_workers.size()));
}

DaemonStatus FromRpc(rpc::DaemonStatus::Reader in) {
  DaemonStatus status;
  status.version = ToStd(in.getVersion());
  status.pid = in.getPid();
  status.uptime_seconds = in.getUptimeSeconds();
  status.datasets = FromRpcList(in.getDatasets());
  status.jobs = FromRpcList(in.getJobs());
  status.streams = FromRpcList(in.getStreams());
  status.shm_bytes_in_use = in.getShmBytesInUse();
  status.shm_bytes_budget = in.getShmBytesBudget();
  status.pending_segments = FromRpcList(in.getPendingSegments());
  status.open_fds = in.getOpenFds();
  status.resident_bytes = in.getResidentBytes();
  status.decode_workers = FromRpcList(in.getDecodeWorkers());
  return status;
}

void ToRpc(const RegistrationProgress& progress, rpc::RegistrationProgress::Builder out) {
  out.setDataset(progress.dataset);
  out.setShardsDone(progress.shards_done);
  out.setShardsTotal(progress.shards_total);
  out.setBytesDone(progress.bytes_done);
  out.setElapsedSeconds(progress.elapsed_seconds);
}

RegistrationProgress FromRpc(rpc::RegistrationProgress::Reader in) {
  RegistrationProgress progress;
  progress.dataset = ToStd(in.getDataset());
  progress.shards_done = in.getShardsDone();
  progress.shards_total = in.getShardsTotal();
  progress.bytes_done = in.getBytesDone();
  progress.elapsed_seconds = in.getElapsedSeconds();
  return progress;
}

void ToRpc(const DatasetDetails& details, rpc::DatasetDetails::Builder out) {
  ToRpc(details.info, out.initInfo());
  out.setSource(details.source);
  out.setShards(details.shards);
  out.setIndexBytes(details.index_bytes);
  out.setRemote(details.remote);
  out.setShardsCached(details.shards_cached);
  out.setBytesCached(details.bytes_cached);
}

DatasetDetails FromRpc(rpc::DatasetDetails::Reader in) {
  DatasetDetails details;
  details.info = FromRpc(in.getInfo());
  details.source = ToStd(in.getSource());
  details.shards = in.getShards();
  details.index_bytes = in.getIndexBytes();
  details.remote = in.getRemote();
  details.shards_cached = in.getShardsCached();
  details.bytes_cached = in.getBytesCached();
  return details;
}

void ToRpc(const ShardCacheEntry& entry, rpc::ShardCacheEntry::Builder out) {
  out.setUrl(entry.url);
  out.setDataset(entry.dataset);
  out.setBytes(entry.bytes);
  out.setInUse(entry.in_use);
}

ShardCacheEntry FromRpc(rpc::ShardCacheEntry::Reader in) {
  ShardCacheEntry entry;
  entry.url = ToStd(in.getUrl());
  entry.dataset = ToStd(in.getDataset());
  entry.bytes = in.getBytes();
  entry.in_use = in.getInUse();
  return entry;
}

void ToRpc(const ShardCacheStatus& cache, rpc::ShardCacheStatus::Builder out) {
  out.setLimitBytes(cache.limit_bytes);
  out.setBytes(cache.bytes);
  out.setEntries(cache.entries);
  out.setHits(cache.hits);
  out.setMisses(cache.misses);
  out.setFetchedBytes(cache.fetched_bytes);
  out.setEvictions(cache.evictions);
  out.setDamaged(cache.damaged);
  out.setRangeReads(cache.range_reads);
  out.setRangeBytes(cache.range_bytes);
  ToRpcList(cache.listed, out.initListed(cache.listed.size()));
  out.setEntriesUnlisted(cache.entries_unlisted);
  out.setBytesUnlisted(cache.bytes_unlisted);
}

ShardCacheStatus FromRpc(rpc::ShardCacheStatus::Reader in) {
  ShardCacheStatus cache;
  cache.limit_bytes = in.getLimitBytes();
  cache.bytes = in.getBytes();
  cache.entries = in.getEntries();
  cache.hits = in.getHits();
  cache.misses = in.getMisses();
  cache.fetched_bytes = in.getFetchedBytes();
  cache.evictions = in.getEvictions();
  cache.damaged = in.getDamaged();
  cache.range_reads = in.getRangeReads();
  cache.range_bytes = in.getRangeBytes();
  cache.listed = FromRpcList(in.getListed());
  cache.entries_unlisted = in.getEntriesUnlisted();
  cache.bytes_unlisted = in.getBytesUnlisted();
  return cache;
}

void ToRpc(const ShardCacheCleared& cleared, rpc::ShardCacheCleared::Builder out) {
  out.setEntries(cleared.entries);
  out.setBytes(cleared.bytes);
  out.setInUse(cleared.in_use);
}

ShardCacheCleared FromRpc(rpc::ShardCacheCleared::Reader in) {
  ShardCacheCleared cleared;
  cleared.entries = in.getEntries();
  cleared.bytes = in.getBytes();
  cleared.in_use = in.getInUse();
  return cleared;
}

}  // namespace ember::daemon_status_rpc
