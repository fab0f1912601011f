// The daemon's state as Prometheus text exposition (format 0.0.4), for the metrics
// endpoint (metrics_server.h). Transport-free: a string from a DaemonStatus.
//
// Glossary
//   family  one metric name with its # HELP and # TYPE lines and all its samples, one
//           per label set, written together as the format requires.
//   counter only grows over the life of what it counts (a stream, a job, the daemon);
//           named *_total. Rates (samples/s, bytes/s) are the scraper's to compute.
//   gauge   a value now.
//
// What is exported (all names ember_*):
//   daemon  ember_daemon_info{version} 1, uptime, open fds and resident memory (when
//           /proc could be read), shared memory in use and its budget, counts of
//           datasets, jobs, streams and pending segments.
//   stream  labels stream (its id), job, rank, dataset: samples, payload bytes, batches
//           published and consumed, decode errors, skipped samples and the trainer's data
//           stall seconds as counters; ring fill (0..1), slots and epoch as gauges.
//   job     labels job, dataset, coordinator ("local" or HOST:PORT): world size, ranks
//           joined, leases in flight, batches leased and committed; the slowest joined
//           rank (lowest epoch, then fewest batches consumed of it) and how many batches
//           it is behind the fastest, for jobs with a rank joined.
//   worker  label worker (HOST:PORT), only on a node with remote decode workers (config
//           decode_workers): rows each decoded as a counter, whether it is up as a gauge.
#ifndef EMBER_DAEMON_METRICS_PROMETHEUS_TEXT_H_
#define EMBER_DAEMON_METRICS_PROMETHEUS_TEXT_H_

#include <array>
#include <cstdint>
#include <string>

#include "ember/daemon_status.h"

namespace ember::daemon {

// How job and dataset label values are written: as they are, or (hide) as "h" and the
// first 16 hex digits of their HMAC-SHA256 under `key`, stable while the key is (a
// daemon draws one at start), so that a scraper can tell jobs apart without learning
// their names.
struct MetricNames {
  bool hide = false;
  std::array<uint8_t, 32> key{};
};

std::string RenderPrometheusText(const DaemonStatus& status, const MetricNames& names = {});

// The label value of `name` under `names`.
std::string LabelName(const std::string& name, const MetricNames& names);

// A label value as the format quotes it: backslash, double quote and newline escaped
// (\\, \", \n); everything else as it is.
std::string EscapeLabelValue(const std::string& value);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_METRICS_PROMETHEUS_TEXT_H_
