// journal_bench: the coordinator's write-ahead journal (daemon/coordinator/journal.h) under
// load. Appends --records records of --bytes bytes at --rate appends per second (0: as
// fast as it can) from one thread, with the journal's background group sync, waits until
// the last one is durable, and prints one JSON line (also appended to --json FILE):
//
//   appends_per_s          records / seconds from the first append until all are durable
//   fsyncs_per_s           group syncs (fdatasyncs) / the same seconds
//   disk_bytes_per_record  (file size - header) / records: payload plus the 8-byte frame
//   append_p50_us, append_p99_us   the latency of Append itself (the caller's cost)
//
//   journal_bench [--records 100000] [--bytes 64] [--rate 0] [--group-interval-us 20000]
//                 [--dir DIR] [--json FILE]
// The journal file is written in DIR (default $TMPDIR, else /tmp) and removed at the end.
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "bench/json_lines.h"
#include "bench/stats.h"
#include "common/env.h"
#include "daemon/coordinator/journal.h"

namespace ember::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  uint64_t records = 100000;
  uint32_t bytes = 64;
  double rate = 0;
  uint64_t group_interval_us = 20000;
  std::string dir;
  std::string json;
};

int Fail(const Status& status) {
  std::cerr << "journal_bench: " << status.message() << "\n";
  return 1;
}

int Run(const Flags& flags) {
  std::unique_ptr<Env> env = NewPosixEnv();
  const std::string path =
      flags.dir + "/journal_bench." + std::to_string(getpid()) + ".journal";
  daemon::JournalOptions options;
  options.group_interval_micros = flags.group_interval_us;
  options.max_record_bytes = std::max<uint32_t>(flags.bytes, 1);
  Result<daemon::JournalReplay> opened = daemon::Journal::Open(*env, path, options);
  if (!opened.ok()) return Fail(opened.status());
  daemon::Journal& journal = *opened->journal;

  const std::string record(flags.bytes, 'r');
  std::vector<double> latency_us;
  latency_us.reserve(flags.records);
  const Clock::time_point start = Clock::now();
  uint64_t last = 0;
  for (uint64_t i = 0; i < flags.records; ++i) {
    if (flags.rate > 0) {
      std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                                std::chrono::duration<double>(i / flags.rate)));
    }
    const Clock::time_point before = Clock::now();
    Result<uint64_t> sequence = journal.Append(record);
    latency_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - before).count());
    if (!sequence.ok()) return Fail(sequence.status());
    last = *sequence;
  }
  const Status durable = journal.WaitDurable(last, 60000);
  if (!durable.ok()) return Fail(durable);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const double disk_bytes_per_record =
      flags.records == 0 ? 0
                         : static_cast<double>(journal.file_bytes() - daemon::Journal::kHeaderBytes) /
                               static_cast<double>(flags.records);
  const std::string fields = StringPrintf(
      "\"records\": %llu, \"bytes\": %u, \"rate\": %g, \"group_interval_us\": %llu, "
      "\"appends_per_s\": %.1f, \"fsyncs_per_s\": %.1f, \"disk_bytes_per_record\": %.2f, "
      "\"append_p50_us\": %.3f, \"append_p99_us\": %.3f",
      static_cast<unsigned long long>(flags.records), flags.bytes, flags.rate,
      static_cast<unsigned long long>(flags.group_interval_us),
      static_cast<double>(flags.records) / seconds,
      static_cast<double>(journal.sync_count()) / seconds, disk_bytes_per_record,
      Quantile(latency_us, 0.5), Quantile(latency_us, 0.99));
  opened->journal.reset();
  (void)env->RemoveAll(path);
  std::printf("{\"tool\": \"journal_bench\", %s}\n", fields.c_str());
  JsonLines(flags.json, "journal_bench").Append(fields);
  return 0;
}

}  // namespace
}  // namespace ember::bench

int main(int argc, char** argv) {
  CLI::App app{"journal_bench: appends to the coordinator's journal with group sync"};
  ember::bench::Flags flags;
  const char* tmpdir = std::getenv("TMPDIR");
  flags.dir = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
  app.add_option("--records", flags.records, "records to append")->capture_default_str();
  app.add_option("--bytes", flags.bytes, "bytes per record")
      ->check(CLI::Range(0u, 1u << 30))
      ->capture_default_str();
  app.add_option("--rate", flags.rate, "appends per second (0: as fast as possible)")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  app.add_option("--group-interval-us", flags.group_interval_us,
                 "at most one group sync per this many microseconds")
      ->check(CLI::Range(uint64_t{1}, uint64_t{10000000}))
      ->capture_default_str();
  app.add_option("--dir", flags.dir, "directory for the journal file")->capture_default_str();
  app.add_option("--json", flags.json, "append the result as a JSON line to this file");
  try {
    app.parse(argc, argv);
    return ember::bench::Run(flags);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::cerr << "journal_bench: " << e.what() << "\n";
    return 1;
  }
}
