// The metrics endpoint of a real emberd, scraped by a real client: Python's urllib fetches
// GET /metrics and prometheus_client (Debian's python3-prometheus-client) parses it as
// Prometheus text; a stream's counters grow as its trainer reads, with the stream's
// labels. And `emberctl top --once` against the same daemon.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

// Fetches URL (argv[1]) with urllib, checks the content type, parses the body with
// prometheus_client and prints one line per sample: NAME{k="v",...} VALUE with the labels
// sorted. An HTTP error prints "HTTP CODE" and exits 3.
constexpr const char* kScraper = R"(
import sys, urllib.error, urllib.request
from prometheus_client.parser import text_string_to_metric_families
try:
    with urllib.request.urlopen(sys.argv[1], timeout=10) as reply:
        content_type = reply.headers.get("Content-Type")
        body = reply.read().decode("utf-8")
except urllib.error.HTTPError as e:
    print("HTTP", e.code)
    sys.exit(3)
if content_type != "text/plain; version=0.0.4; charset=utf-8":
    print("bad content type:", content_type)
    sys.exit(4)
for family in text_string_to_metric_families(body):
    for s in family.samples:
        labels = ",".join('%s="%s"' % (k, v) for k, v in sorted(s.labels.items()))
        print("%s{%s} %r" % (s.name, labels, s.value))
)";

struct Scrape {
  int exit_code = -1;
  std::string out;
  std::map<std::string, double> samples;  // NAME{labels} -> value
};

Scrape ScrapeMetrics(const std::string& dir, const std::string& url) {
  const std::string script = dir + "/scrape.py";
  std::ofstream(script) << kScraper;
  ProcessOutput run = RunToExit({"/usr/bin/python3", script, url}, dir);
  INFO(run.err);
  Scrape scrape;
  scrape.exit_code = run.exit_code;
  scrape.out = run.out;
  std::istringstream lines(run.out);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t space = line.rfind(' ');
    if (space == std::string::npos || line.find('{') == std::string::npos) continue;
    scrape.samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return scrape;
}

std::string MetricsUrl(const Daemon& daemon, const std::string& path = "/metrics") {
  std::string port = ReadFileOrEmpty(daemon.dir() + "/state/metrics.port");
  while (!port.empty() && port.back() == '\n') port.pop_back();
  REQUIRE_FALSE(port.empty());
  return "http://127.0.0.1:" + port + path;
}

TEST_CASE("a stream's metrics are scraped over HTTP and parse as Prometheus text") {
  TempDir tmp;
  Daemon daemon(tmp.path(), WriteDaemonConfig(tmp.path(), "metrics_listen: 127.0.0.1:0\n"));
  auto client = StartWithSyntheticDataset(daemon, 256);
  CHECK(daemon.log().find("serving metrics on 127.0.0.1:0 (port ") != std::string::npos);
  const std::string url = MetricsUrl(daemon);

  auto reader = client->OpenStream(ReaderOptions("metrics-job", 16, 0));
  REQUIRE(reader.ok());
  for (int i = 0; i < 4; ++i) REQUIRE((*reader)->Next().ok());
  auto status = client->GetStatus();
  REQUIRE(status.ok());
  REQUIRE(status->streams.size() == 1);
  const std::string stream = std::to_string(status->streams[0].stream_id);
  const std::string labels =
      "{dataset=\"syn\",job=\"metrics-job\",rank=\"0\",stream=\"" + stream + "\"}";

  Scrape first = ScrapeMetrics(tmp.path(), url);
  INFO(first.out);
  REQUIRE(first.exit_code == 0);
  REQUIRE(first.samples.count("ember_stream_samples_total" + labels) == 1);
  const double samples_before = first.samples["ember_stream_samples_total" + labels];
  CHECK(samples_before >= 4 * 16);
  CHECK(first.samples["ember_stream_bytes_total" + labels] == samples_before * (28 * 28 + 1));
  CHECK(first.samples.count("ember_stream_data_stall_seconds_total" + labels) == 1);
  CHECK(first.samples["ember_stream_decode_errors_total" + labels] == 0);
  CHECK(first.samples["ember_stream_skipped_total" + labels] == 0);
  CHECK(first.samples.count("ember_stream_ring_fill_ratio" + labels) == 1);
  const std::string job = "{coordinator=\"local\",dataset=\"syn\",job=\"metrics-job\"}";
  CHECK(first.samples.count("ember_job_leases_in_flight" + job) == 1);
  CHECK(first.samples["ember_job_slowest_rank" + job] == 0);
  CHECK(first.samples["ember_daemon_info{version=\"0.1.0\"}"] == 1);

  // The trainer reads on: the counter grows. (Batches of the ring that it has not read
  // yet count as published already, so read past them.)
  for (int i = 0; i < 12; ++i) REQUIRE((*reader)->Next().ok());
  Scrape second = ScrapeMetrics(tmp.path(), url);
  REQUIRE(second.exit_code == 0);
  CHECK(second.samples["ember_stream_samples_total" + labels] > samples_before);
  CHECK(second.samples["ember_stream_batches_consumed_total" + labels] >= 16);

  // Other paths are 404.
  Scrape missing = ScrapeMetrics(tmp.path(), MetricsUrl(daemon, "/"));
  CHECK(missing.exit_code == 3);
  CHECK(missing.out == "HTTP 404\n");

  reader->reset();
  daemon.Stop();
  CHECK_FALSE(std::ifstream(daemon.dir() + "/state/metrics.port").good());
}

TEST_CASE("the daemon's own gauges come without lines for samples of a stream") {
  TempDir tmp;
  Daemon daemon(tmp.path(), WriteDaemonConfig(tmp.path(), "metrics_listen: 127.0.0.1:0\n"));
  daemon.Start();
  const std::string url = MetricsUrl(daemon);
  // prometheus_client prints samples without labels as NAME{} VALUE.
  Scrape scrape = ScrapeMetrics(tmp.path(), url);
  INFO(scrape.out);
  REQUIRE(scrape.exit_code == 0);
  CHECK(scrape.samples["ember_daemon_open_fds{}"] >= 4);
  CHECK(scrape.samples["ember_daemon_resident_memory_bytes{}"] > 0);
  CHECK(scrape.samples["ember_daemon_shm_bytes_budget{}"] == 256.0 * 1048576);
  CHECK(scrape.samples["ember_daemon_shm_bytes_in_use{}"] == 0);
  CHECK(scrape.out.find("ember_stream_samples_total{") == std::string::npos);
  daemon.Stop();
}

TEST_CASE("emberctl top --once shows the streams and the daemon's line") {
  Daemon daemon;
  auto client = StartWithSyntheticDataset(daemon, 256);
  auto reader = client->OpenStream(ReaderOptions("top-job", 16, 0));
  REQUIRE(reader.ok());
  for (int i = 0; i < 2; ++i) REQUIRE((*reader)->Next().ok());
  ProcessOutput top = RunToExit({Runfile("tools/emberctl/emberctl"), "--socket=" + daemon.socket(),
                                 "top", "--once", "--interval", "0.2"},
                                daemon.dir());
  INFO(top.out + top.err);
  REQUIRE(top.exit_code == 0);
  CHECK(top.out.rfind("emberd 0.1.0 pid " + std::to_string(daemon.pid()) + " up ", 0) == 0);
  CHECK(top.out.find(" fds, RSS ") != std::string::npos);
  CHECK(top.out.find("MiB; 1 streams, 1 jobs (every ") != std::string::npos);
  CHECK(top.out.find("STREAM JOB") != std::string::npos);
  CHECK(top.out.find("top-job") != std::string::npos);
  CHECK(top.out.find("\nJOB                  WORLD JOINED LEASED SLOWEST") != std::string::npos);
  CHECK(top.out.find(" syn ") != std::string::npos);
  CHECK(top.out.find("\x1b[") == std::string::npos);  // no terminal control for --once
  reader->reset();

  ProcessOutput bad = RunToExit({Runfile("tools/emberctl/emberctl"), "--socket=" + daemon.socket(),
                                 "top", "--interval", "0"},
                                daemon.dir());
  CHECK(bad.exit_code != 0);
  CHECK(bad.err.find("--interval") != std::string::npos);
  daemon.Stop();
}

}  // namespace
}  // namespace ember::testing
