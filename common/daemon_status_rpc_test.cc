#include "common/daemon_status_rpc.h"

#include <capnp/dynamic.h>
#include <capnp/message.h>

#include <string>
#include <tuple>
#include <utility>

#include <catch2/catch.hpp>

#include "common/wire_testing.h"

namespace ember {

// Every field of each struct, in declaration order. The structured binding names all of
// them, so a field added to a struct stops this test from compiling until it is listed
// here, filled below and so compared after the round trip.
auto Fields(const DatasetSpec& s) {
  const auto& [name, format, path, split, pipeline, on_error, shuffle, shuffle_window, endpoint,
               shared] = s;
  return std::tie(name, format, path, split, pipeline, on_error, shuffle, shuffle_window, endpoint,
                  shared);
}
auto Fields(const TensorInfo& t) {
  const auto& [name, dtype, shape] = t;
  return std::tie(name, dtype, shape);
}
auto Fields(const DatasetInfo& d) {
  const auto& [spec, count, tensors, files, fingerprint, owner_uid] = d;
  return std::tie(spec, count, tensors, files, fingerprint, owner_uid);
}
auto Fields(const StreamStatus& s) {
  const auto& [stream_id, job, rank, world_size, dataset, epoch, batches_published,
               batches_consumed, samples_per_second, ring_fill, slot_count, prefetch_depth,
               slots_touched, samples_skipped, samples_published, bytes_published,
               decode_errors, data_stall_seconds, share, shared_batches, remote_rows] = s;
  return std::tie(stream_id, job, rank, world_size, dataset, epoch, batches_published,
                  batches_consumed, samples_per_second, ring_fill, slot_count, prefetch_depth,
                  slots_touched, samples_skipped, samples_published, bytes_published,
                  decode_errors, data_stall_seconds, share, shared_batches, remote_rows);
}
auto Fields(const DecodeWorkerStatus& w) {
  const auto& [address, up, last_error, calls, rows, bytes, failed_calls, rows_per_second,
               share] = w;
  return std::tie(address, up, last_error, calls, rows, bytes, failed_calls, rows_per_second,
                  share);
}
auto Fields(const RankProgress& r) {
  const auto& [rank, joined, epoch, consumed, leased, node] = r;
  return std::tie(rank, joined, epoch, consumed, leased, node);
}
auto Fields(const JobStatus& j) {
  const auto& [job, world_size, dataset, epochs_started, batches_leased, batches_committed,
               batch_size, batches_per_rank, ranks, ranks_unlisted, ranks_joined, coordinator,
               leases_in_flight] = j;
  return std::tie(job, world_size, dataset, epochs_started, batches_leased, batches_committed,
                  batch_size, batches_per_rank, ranks, ranks_unlisted, ranks_joined, coordinator,
                  leases_in_flight);
}
auto Fields(const PendingSegmentStatus& p) {
  const auto& [job, name, world_size, bytes, missing_ranks, missing_unlisted, age_seconds] = p;
  return std::tie(job, name, world_size, bytes, missing_ranks, missing_unlisted, age_seconds);
}
auto Fields(const DaemonStatus& d) {
  const auto& [version, pid, uptime_seconds, datasets, jobs, streams, shm_bytes_in_use,
               shm_bytes_budget, pending_segments, open_fds, resident_bytes, decode_workers] = d;
  return std::tie(version, pid, uptime_seconds, datasets, jobs, streams, shm_bytes_in_use,
                  shm_bytes_budget, pending_segments, open_fds, resident_bytes, decode_workers);
}
auto Fields(const RegistrationProgress& p) {
  const auto& [dataset, shards_done, shards_total, bytes_done, elapsed_seconds] = p;
  return std::tie(dataset, shards_done, shards_total, bytes_done, elapsed_seconds);
}
auto Fields(const DatasetDetails& d) {
  const auto& [info, source, shards, index_bytes, remote, shards_cached, bytes_cached] = d;
  return std::tie(info, source, shards, index_bytes, remote, shards_cached, bytes_cached);
}
auto Fields(const ShardCacheEntry& e) {
  const auto& [url, dataset, bytes, in_use] = e;
  return std::tie(url, dataset, bytes, in_use);
}
auto Fields(const ShardCacheStatus& c) {
  const auto& [limit_bytes, bytes, entries, hits, misses, fetched_bytes, evictions, damaged,
               range_reads, range_bytes, listed, entries_unlisted, bytes_unlisted] = c;
  return std::tie(limit_bytes, bytes, entries, hits, misses, fetched_bytes, evictions, damaged,
                  range_reads, range_bytes, listed, entries_unlisted, bytes_unlisted);
}
auto Fields(const ShardCacheCleared& c) {
  const auto& [entries, bytes, in_use] = c;
  return std::tie(entries, bytes, in_use);
}

// Field by field (also inside the vectors' elements), for CHECK.
template <typename T, typename = decltype(Fields(std::declval<const T&>()))>
bool operator==(const T& a, const T& b) {
  return Fields(a) == Fields(b);
}

namespace {

using daemon_status_rpc::FromRpc;
using daemon_status_rpc::ToRpc;

// Each struct with every field set to a value unlike its default and unlike the other
// fields' (so a converter that swaps two fields fails too).
DatasetSpec FilledSpec() {
  DatasetSpec s;
  s.name = "spec-name";
  s.format = "spec-format";
  s.path = "/spec/path";
  s.split = "spec-split";
  s.pipeline = "spec: pipeline";
  s.on_error = "skip";
  s.shared = true;
  s.shuffle = "shards";
  s.shuffle_window = 3;
  s.endpoint = "http://127.0.0.1:7480";
  return s;
}

TensorInfo FilledTensor(int64_t k) {
  TensorInfo t;
  t.name = "tensor-" + std::to_string(k);
  t.dtype = "float" + std::to_string(k);
  t.shape = {k, k + 1, -(k + 2)};
  return t;
}

DatasetInfo FilledDataset() {
  DatasetInfo d;
  d.spec = FilledSpec();
  d.count = 101;
  d.tensors = {FilledTensor(3), FilledTensor(7)};
  d.files = {"/files/a", "/files/b"};
  d.fingerprint = 0xfeedfacecafebeef;
  d.owner_uid = 1234;
  return d;
}

StreamStatus FilledStream() {
  StreamStatus s;
  s.stream_id = 201;
  s.job = "stream-job";
  s.rank = 202;
  s.world_size = 203;
  s.dataset = "stream-dataset";
  s.epoch = 204;
  s.batches_published = 205;
  s.batches_consumed = 206;
  s.samples_per_second = 207.5;
  s.ring_fill = 0.25;
  s.slot_count = 208;
  s.prefetch_depth = 209;
  s.slots_touched = 210;
  s.samples_skipped = 211;
  s.samples_published = 212;
  s.bytes_published = 213;
  s.decode_errors = 214;
  s.data_stall_seconds = 215.75;
  s.share = "stream-share";
  s.shared_batches = 216;
  s.remote_rows = 217;
  return s;
}

DecodeWorkerStatus FilledWorker(uint64_t k) {
  DecodeWorkerStatus w;
  w.address = "worker-" + std::to_string(k) + ":7000";
  w.up = true;
  w.last_error = "worker-error-" + std::to_string(k);
  w.calls = k + 1201;
  w.rows = k + 1202;
  w.bytes = k + 1203;
  w.failed_calls = k + 1204;
  w.rows_per_second = k + 1205.5;
  w.share = 0.375;
  return w;
}

RankProgress FilledRank(uint32_t k) {
  RankProgress r;
  r.rank = k;
  r.joined = true;
  r.epoch = k + 301;
  r.consumed = k + 302;
  r.leased = k + 303;
  r.node = "node-" + std::to_string(k);
  return r;
}

JobStatus FilledJob() {
  JobStatus j;
  j.job = "job-name";
  j.world_size = 401;
  j.dataset = "job-dataset";
  j.epochs_started = 402;
  j.batches_leased = 403;
  j.batches_committed = 404;
  j.batch_size = 405;
  j.batches_per_rank = 406;
  j.ranks = {FilledRank(1), FilledRank(2)};
  j.coordinator = "coordinator:7000";
  j.leases_in_flight = 407;
  j.ranks_unlisted = 408;
  j.ranks_joined = 409;
  return j;
}

PendingSegmentStatus FilledSegment() {
  PendingSegmentStatus p;
  p.job = "segment-job";
  p.name = "segment-name";
  p.world_size = 501;
  p.bytes = 502;
  p.missing_ranks = {503, 504};
  p.age_seconds = 505.5;
  p.missing_unlisted = 506;
  return p;
}

DaemonStatus FilledStatus() {
  DaemonStatus d;
  d.version = "9.8.7";
  d.pid = 601;
  d.uptime_seconds = 602.5;
  d.datasets = {FilledDataset(), FilledDataset()};
  d.datasets[1].spec.name = "second";
  d.jobs = {FilledJob()};
  d.streams = {FilledStream(), FilledStream()};
  d.streams[1].stream_id = 603;
  d.shm_bytes_in_use = 604;
  d.shm_bytes_budget = 605;
  d.pending_segments = {FilledSegment()};
  d.open_fds = 606;
  d.resident_bytes = 607;
  d.decode_workers = {FilledWorker(1), FilledWorker(2)};
  return d;
}

RegistrationProgress FilledProgress() {
  RegistrationProgress p;
  p.dataset = "progress-dataset";
  p.shards_done = 701;
  p.shards_total = 702;
  p.bytes_done = 703;
  p.elapsed_seconds = 704.5;
  return p;
}

DatasetDetails FilledDetails() {
  DatasetDetails d;
  d.info = FilledDataset();
  d.source = "http://host/shard-{000..009}.tar";
  d.shards = 801;
  d.index_bytes = 802;
  d.remote = true;
  d.shards_cached = 803;
  d.bytes_cached = 804;
  return d;
}

ShardCacheEntry FilledEntry(uint64_t k) {
  ShardCacheEntry e;
  e.url = "http://host/shard-" + std::to_string(k) + ".tar";
  e.dataset = "entry-dataset";
  e.bytes = 900 + k;
  e.in_use = true;
  return e;
}

ShardCacheStatus FilledCache() {
  ShardCacheStatus c;
  c.limit_bytes = 1001;
  c.bytes = 1002;
  c.entries = 1003;
  c.hits = 1004;
  c.misses = 1005;
  c.fetched_bytes = 1006;
  c.evictions = 1007;
  c.damaged = 1008;
  c.range_reads = 1009;
  c.range_bytes = 1010;
  c.listed = {FilledEntry(1), FilledEntry(2)};
  c.entries_unlisted = 1011;
  c.bytes_unlisted = 1012;
  return c;
}

ShardCacheCleared FilledCleared() {
  ShardCacheCleared c;
  c.entries = 1101;
  c.bytes = 1102;
  c.in_use = 1103;
  return c;
}

// The converters under test, for wire_testing.
struct StatusWire {
  template <typename T, typename Builder>
  static void To(const T& value, Builder builder) {
    ToRpc(value, builder);
  }
  template <typename Reader>
  static auto From(Reader reader) {
    return FromRpc(reader);
  }
};

template <typename Rpc, typename T>
void CheckConverter(const T& filled) {
  wire_testing::CheckConverter<Rpc, StatusWire>(filled);
}

TEST_CASE("DatasetSpec round-trips every field") { CheckConverter<rpc::DatasetSpec>(FilledSpec()); }

TEST_CASE("TensorInfo round-trips every field") { CheckConverter<rpc::TensorSpec>(FilledTensor(5)); }

TEST_CASE("DatasetInfo round-trips every field") {
  CheckConverter<rpc::DatasetInfo>(FilledDataset());
}

TEST_CASE("StreamStatus round-trips every field") {
  CheckConverter<rpc::StreamStatus>(FilledStream());
}

TEST_CASE("DecodeWorkerStatus round-trips every field") {
  CheckConverter<rpc::DecodeWorkerStatus>(FilledWorker(3));
}

TEST_CASE("RankProgress round-trips every field") {
  CheckConverter<rpc::RankProgress>(FilledRank(9));
}

TEST_CASE("JobStatus round-trips every field") { CheckConverter<rpc::JobStatus>(FilledJob()); }

TEST_CASE("PendingSegmentStatus round-trips every field") {
  CheckConverter<rpc::PendingSegment>(FilledSegment());
}

TEST_CASE("DaemonStatus round-trips every field, its lists' elements included") {
  CheckConverter<rpc::DaemonStatus>(FilledStatus());
}

TEST_CASE("RegistrationProgress round-trips every field") {
  CheckConverter<rpc::RegistrationProgress>(FilledProgress());
}

TEST_CASE("DatasetDetails round-trips every field") {
  CheckConverter<rpc::DatasetDetails>(FilledDetails());
}

TEST_CASE("ShardCacheEntry round-trips every field") {
  CheckConverter<rpc::ShardCacheEntry>(FilledEntry(3));
}

TEST_CASE("ShardCacheStatus round-trips every field, its entries included") {
  CheckConverter<rpc::ShardCacheStatus>(FilledCache());
}

TEST_CASE("ShardCacheCleared round-trips every field") {
  CheckConverter<rpc::ShardCacheCleared>(FilledCleared());
}

TEST_CASE("a DatasetSpec sent with no onError reads as \"fail\"") {
  capnp::MallocMessageBuilder message;
  auto spec = message.initRoot<rpc::DatasetSpec>();
  spec.setName("n");
  CHECK(FromRpc(spec.asReader()).on_error == "fail");
}

TEST_CASE("the schema check catches a field left unset") {
  // What a converter that forgot a field would leave: the check must see it.
  capnp::MallocMessageBuilder message;
  auto builder = message.initRoot<rpc::RankProgress>();
  ToRpc(FilledRank(4), builder);
  builder.setLeased(0);
  auto reader = capnp::toDynamic(builder.asReader());
  CHECK_FALSE(reader.has("leased", capnp::HasMode::NON_DEFAULT));
  CHECK(reader.has("consumed", capnp::HasMode::NON_DEFAULT));
}

}  // namespace
}  // namespace ember
