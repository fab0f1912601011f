// What `emberctl top` makes of two status samples: rates over the interval, the most
// stalled stream first, "-" for a stream that opened in between.
#include "tools/emberctl/top_command.h"

#include <catch2/catch.hpp>

#include <string>

namespace ember::emberctl {
namespace {

StreamStatus Stream(uint64_t id, uint32_t rank, uint64_t samples, uint64_t bytes, double stall) {
  StreamStatus s;
  s.stream_id = id;
  s.job = "train";
  s.rank = rank;
  s.dataset = "mnist";
  s.samples_published = samples;
  s.bytes_published = bytes;
  s.data_stall_seconds = stall;
  s.ring_fill = 0.5;
  return s;
}

DaemonStatus Daemon() {
  DaemonStatus d;
  d.version = "0.1.0";
  d.pid = 42;
  d.uptime_seconds = 100;
  d.open_fds = 23;
  d.resident_bytes = 50 * 1048576;
  d.shm_bytes_in_use = 3 * 1048576;
  d.shm_bytes_budget = 256 * 1048576;
  return d;
}

TEST_CASE("a frame has the daemon's line, the streams, the most stalled first, and the jobs") {
  DaemonStatus before = Daemon(), now = Daemon();
  before.streams = {Stream(1, 0, 1000, 1048576, 0.5), Stream(2, 1, 1000, 1048576, 1.0)};
  now.streams = {Stream(1, 0, 3000, 5 * 1048576, 1.5), Stream(2, 1, 2000, 3 * 1048576, 1.1),
                 Stream(3, 2, 10, 100, 9.0)};
  now.streams[0].decode_errors = 3;
  now.streams[0].samples_skipped = 3;
  now.uptime_seconds = 102;
  JobStatus job;
  job.job = "train";
  job.world_size = 3;
  job.batches_per_rank = 10;
  job.leases_in_flight = 7;
  job.ranks = {{0, true, 1, 2, 4}, {1, true, 0, 7, 3}, {2, false, 0, 4, 0}};
  job.ranks_joined = 2;
  now.jobs = {job};
  const std::string frame = RenderTop(before, now, 2.0);
  const std::string expected =
      "emberd 0.1.0 pid 42 up 102 s: 23 fds, RSS 50.0 MiB, shm 3.0 / 256.0 MiB; 3 streams, 1 "
      "jobs (every 2.0 s)\n"
      "\n"
      "STREAM JOB                  RANK DATASET           SAMPLES/S     MB/S  FILL STALL%   STALL S ERR/SKIP\n"
      "#1     train                   0 mnist                  1000     2.00   50%    50%      1.50 3/3\n"
      "#2     train                   1 mnist                   500     1.00   50%     5%      1.10 0/0\n"
      "#3     train                   2 mnist                     -        -   50%      -      9.00 0/0\n"
      "\n"
      "JOB                  WORLD JOINED LEASED SLOWEST          BEHIND\n"
      "train                    3      2      7 r1 e0 7/10            5\n";
  CHECK(frame == expected);
}

TEST_CASE("without streams the frame says so") {
  const std::string frame = RenderTop(Daemon(), Daemon(), 1.0);
  CHECK(frame.find("no streams\n") != std::string::npos);
  CHECK(frame.rfind("emberd 0.1.0 pid 42", 0) == 0);
}

}  // namespace
}  // namespace ember::emberctl
