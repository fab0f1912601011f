#include "daemon/metrics/prometheus_text.h"

#include <catch2/catch.hpp>

#include <limits>
#include <string>

namespace ember::daemon {
namespace {

// A daemon with one stream of rank 1 of a two-rank job whose rank 0 is ahead.
DaemonStatus KnownStatus() {
  DaemonStatus status;
  status.version = "1.2.3";
  status.uptime_seconds = 12.5;
  status.open_fds = 17;
  status.resident_bytes = 1048576;
  status.shm_bytes_in_use = 4096;
  status.shm_bytes_budget = 1 << 20;
  status.datasets.resize(1);
  StreamStatus stream;
  stream.stream_id = 7;
  stream.job = "train";
  stream.rank = 1;
  stream.dataset = "mnist";
  stream.epoch = 2;
  stream.batches_published = 10;
  stream.batches_consumed = 8;
  stream.ring_fill = 0.25;
  stream.slot_count = 8;
  stream.samples_skipped = 1;
  stream.samples_published = 319;
  stream.bytes_published = 250096;
  stream.decode_errors = 1;
  stream.data_stall_seconds = 0.125;
  status.streams.push_back(stream);
  JobStatus job;
  job.job = "train";
  job.dataset = "mnist";
  job.world_size = 2;
  job.batches_per_rank = 5;
  job.batches_leased = 20;
  job.batches_committed = 16;
  job.leases_in_flight = 4;
  RankProgress ahead;
  ahead.rank = 0;
  ahead.joined = true;
  ahead.epoch = 3;
  ahead.consumed = 1;
  RankProgress behind = ahead;
  behind.rank = 1;
  behind.epoch = 2;
  behind.consumed = 4;
  job.ranks = {ahead, behind};
  job.ranks_joined = 2;
  status.jobs.push_back(job);
  return status;
}

TEST_CASE("a known state renders as this exact exposition text") {
  const std::string expected = R"(# HELP ember_daemon_info The daemon's version (value 1).
# TYPE ember_daemon_info gauge
ember_daemon_info{version="1.2.3"} 1
# HELP ember_daemon_uptime_seconds Seconds since the daemon started.
# TYPE ember_daemon_uptime_seconds gauge
ember_daemon_uptime_seconds 12.5
# HELP ember_daemon_open_fds File descriptors the daemon has open.
# TYPE ember_daemon_open_fds gauge
ember_daemon_open_fds 17
# HELP ember_daemon_resident_memory_bytes The daemon's resident memory, rings' and segments' touched pages included.
# TYPE ember_daemon_resident_memory_bytes gauge
ember_daemon_resident_memory_bytes 1048576
# HELP ember_daemon_shm_bytes_in_use Shared memory held by rings (of the budget).
# TYPE ember_daemon_shm_bytes_in_use gauge
ember_daemon_shm_bytes_in_use 4096
# HELP ember_daemon_shm_bytes_budget The shared-memory budget of all rings (shm_budget).
# TYPE ember_daemon_shm_bytes_budget gauge
ember_daemon_shm_bytes_budget 1048576
# HELP ember_daemon_datasets Datasets registered.
# TYPE ember_daemon_datasets gauge
ember_daemon_datasets 1
# HELP ember_daemon_jobs Jobs this daemon coordinates or proxies.
# TYPE ember_daemon_jobs gauge
ember_daemon_jobs 1
# HELP ember_daemon_streams Streams open.
# TYPE ember_daemon_streams gauge
ember_daemon_streams 1
# HELP ember_daemon_pending_segments Shared-memory segments waiting for their job's other ranks.
# TYPE ember_daemon_pending_segments gauge
ember_daemon_pending_segments 0
# HELP ember_stream_samples_total Samples in the batches the stream published.
# TYPE ember_stream_samples_total counter
ember_stream_samples_total{stream="7",job="train",rank="1",dataset="mnist"} 319
# HELP ember_stream_bytes_total Payload bytes (tensor data) in the batches the stream published.
# TYPE ember_stream_bytes_total counter
ember_stream_bytes_total{stream="7",job="train",rank="1",dataset="mnist"} 250096
# HELP ember_stream_batches_published_total Batches the daemon published into the stream's ring.
# TYPE ember_stream_batches_published_total counter
ember_stream_batches_published_total{stream="7",job="train",rank="1",dataset="mnist"} 10
# HELP ember_stream_batches_consumed_total Batches the trainer took from the stream's ring.
# TYPE ember_stream_batches_consumed_total counter
ember_stream_batches_consumed_total{stream="7",job="train",rank="1",dataset="mnist"} 8
# HELP ember_stream_decode_errors_total Samples that failed to read or decode (skipped, or ending the stream).
# TYPE ember_stream_decode_errors_total counter
ember_stream_decode_errors_total{stream="7",job="train",rank="1",dataset="mnist"} 1
# HELP ember_stream_skipped_total Corrupt samples left out of their batch (dataset on_error: skip).
# TYPE ember_stream_skipped_total counter
ember_stream_skipped_total{stream="7",job="train",rank="1",dataset="mnist"} 1
# HELP ember_stream_data_stall_seconds_total Seconds the trainer waited for a batch that was not ready (as its SDK reports).
# TYPE ember_stream_data_stall_seconds_total counter
ember_stream_data_stall_seconds_total{stream="7",job="train",rank="1",dataset="mnist"} 0.125
# HELP ember_stream_ring_fill_ratio Fraction of the ring's slots holding batches the trainer has not taken yet.
# TYPE ember_stream_ring_fill_ratio gauge
ember_stream_ring_fill_ratio{stream="7",job="train",rank="1",dataset="mnist"} 0.25
# HELP ember_stream_ring_slots Slots of the stream's ring.
# TYPE ember_stream_ring_slots gauge
ember_stream_ring_slots{stream="7",job="train",rank="1",dataset="mnist"} 8
# HELP ember_stream_epoch The epoch the stream is producing.
# TYPE ember_stream_epoch gauge
ember_stream_epoch{stream="7",job="train",rank="1",dataset="mnist"} 2
# HELP ember_job_world_size Ranks in the job's world.
# TYPE ember_job_world_size gauge
ember_job_world_size{job="train",dataset="mnist",coordinator="local"} 2
# HELP ember_job_ranks_joined Ranks of the job joined now (here: this node's).
# TYPE ember_job_ranks_joined gauge
ember_job_ranks_joined{job="train",dataset="mnist",coordinator="local"} 2
# HELP ember_job_leases_in_flight Batches leased to the job's ranks and not yet consumed.
# TYPE ember_job_leases_in_flight gauge
ember_job_leases_in_flight{job="train",dataset="mnist",coordinator="local"} 4
# HELP ember_job_batches_leased_total Batches leased over the job's life.
# TYPE ember_job_batches_leased_total counter
ember_job_batches_leased_total{job="train",dataset="mnist",coordinator="local"} 20
# HELP ember_job_batches_committed_total Batches committed (consumed) over the job's life.
# TYPE ember_job_batches_committed_total counter
ember_job_batches_committed_total{job="train",dataset="mnist",coordinator="local"} 16
# HELP ember_job_slowest_rank The joined rank furthest behind (lowest epoch, then fewest batches of it consumed).
# TYPE ember_job_slowest_rank gauge
ember_job_slowest_rank{job="train",dataset="mnist",coordinator="local"} 1
# HELP ember_job_slowest_rank_behind_batches Batches the slowest joined rank has consumed fewer than the fastest one.
# TYPE ember_job_slowest_rank_behind_batches gauge
ember_job_slowest_rank_behind_batches{job="train",dataset="mnist",coordinator="local"} 2
)";
  CHECK(RenderPrometheusText(KnownStatus()) == expected);
}

TEST_CASE("metrics_names: hide writes job and dataset names as keyed hashes") {
  MetricNames names;
  names.hide = true;
  names.key.fill(7);
  const std::string text = RenderPrometheusText(KnownStatus(), names);
  // No label value holds either name ("trainer" is in the HELP lines).
  CHECK(text.find("\"train\"") == std::string::npos);
  CHECK(text.find("mnist") == std::string::npos);
  const std::string job = LabelName("train", names);
  CHECK(job.size() == 17);
  CHECK(job[0] == 'h');
  CHECK(text.find("job=\"" + job + "\"") != std::string::npos);
  CHECK(text.find("dataset=\"" + LabelName("mnist", names) + "\"") != std::string::npos);
  // Stable under one key, another under another; shown names as they are.
  CHECK(LabelName("train", names) == job);
  MetricNames other = names;
  other.key.fill(8);
  CHECK(LabelName("train", other) != job);
  CHECK(LabelName("train", MetricNames{}) == "train");
}

TEST_CASE("label values are escaped") {
  CHECK(EscapeLabelValue("plain") == "plain");
  CHECK(EscapeLabelValue("a\\b\"c\nd") == "a\\\\b\\\"c\\nd");
  DaemonStatus status = KnownStatus();
  status.streams[0].job = "we\"ird\\job\n";
  const std::string text = RenderPrometheusText(status);
  CHECK(text.find("ember_stream_samples_total{stream=\"7\",job=\"we\\\"ird\\\\job\\n\",rank=\"1\","
                  "dataset=\"mnist\"} 319\n") != std::string::npos);
}

TEST_CASE("without /proc, without ranks joined and for a proxied job, what does not apply is left out") {
  DaemonStatus status = KnownStatus();
  status.open_fds = 0;  // /proc could not be read
  status.resident_bytes = 0;
  for (RankProgress& r : status.jobs[0].ranks) r.joined = false;
  status.jobs[0].ranks_joined = 0;
  status.jobs[0].coordinator = "10.0.0.1:7000";
  const std::string text = RenderPrometheusText(status);
  CHECK(text.find("ember_daemon_open_fds") == std::string::npos);
  CHECK(text.find("ember_daemon_resident_memory_bytes") == std::string::npos);
  CHECK(text.find("\nember_job_slowest_rank{") == std::string::npos);
  CHECK(text.find("\nember_job_slowest_rank_behind_batches{") == std::string::npos);
  CHECK(text.find("# TYPE ember_job_slowest_rank gauge\n") != std::string::npos);
  CHECK(text.find("ember_job_ranks_joined{job=\"train\",dataset=\"mnist\",coordinator=\"10.0.0.1:7000\"} 0\n") !=
        std::string::npos);
}

TEST_CASE("a node's decode workers: rows and up by worker, nothing without them") {
  DaemonStatus status = KnownStatus();
  CHECK(RenderPrometheusText(status).find("ember_decode_worker") == std::string::npos);
  DecodeWorkerStatus up;
  up.address = "10.0.0.2:7000";
  up.up = true;
  up.rows = 4096;
  DecodeWorkerStatus down;
  down.address = "10.0.0.3:7000";
  down.rows = 12;
  status.decode_workers = {up, down};
  const std::string text = RenderPrometheusText(status);
  const std::string expected = R"(# HELP ember_decode_worker_rows_total Rows the remote decode worker decoded for this node's streams.
# TYPE ember_decode_worker_rows_total counter
ember_decode_worker_rows_total{worker="10.0.0.2:7000"} 4096
ember_decode_worker_rows_total{worker="10.0.0.3:7000"} 12
# HELP ember_decode_worker_up 1 if the remote decode worker gets parts of batches, 0 if left out after a failed call.
# TYPE ember_decode_worker_up gauge
ember_decode_worker_up{worker="10.0.0.2:7000"} 1
ember_decode_worker_up{worker="10.0.0.3:7000"} 0
)";
  REQUIRE(text.size() > expected.size());
  CHECK(text.substr(text.size() - expected.size()) == expected);
}

TEST_CASE("special floating-point values use the format's spelling") {
  DaemonStatus status = KnownStatus();
  status.streams[0].ring_fill = std::numeric_limits<double>::quiet_NaN();
  status.uptime_seconds = std::numeric_limits<double>::infinity();
  const std::string text = RenderPrometheusText(status);
  CHECK(text.find("ember_stream_ring_fill_ratio{stream=\"7\",job=\"train\",rank=\"1\",dataset=\"mnist\"} NaN\n") !=
        std::string::npos);
  CHECK(text.find("ember_daemon_uptime_seconds +Inf\n") != std::string::npos);
}

}  // namespace
}  // namespace ember::daemon
