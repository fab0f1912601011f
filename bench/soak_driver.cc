// soak_driver: issue 13's soak. Against a running emberd it keeps `--jobs` jobs of
// `--ranks` reader processes busy for `--seconds`, with churn: most jobs read their epochs
// to the end, some are stopped early (SIGTERM to every rank: each closes its stream and
// exits), and in some one rank is SIGKILLed mid-run (its partners read on to their end).
// Stops and kills come once every rank has read a batch. A finished job is replaced at
// once by a new one (a fresh job name). Every `--sample-every`
// seconds it records emberd's VmRSS, Pss, descriptors, memfds, shm_bytes_in_use, streams
// and jobs, and /dev/shm's entries. Each rank logs the sample ids of every batch (the
// "sample_id" tensor, checked against the id each synthetic image carries); once a job has
// completed, every epoch must hold each sample of the dataset exactly once across its ranks.
// Run by `bench/compare soak`, which starts the daemon.
//
//   soak_driver run --socket S --dir DIR [--seconds 600] [--jobs 8] [--ranks 2]
//                   [--samples 4000] [--batch-size 32] [--min-epochs 2] [--max-epochs 5]
//                   [--step-ms 10] [--sample-every 10] [--stop-share 0.25]
//                   [--kill-share 0.25] [--seed 1] [--report FILE]
//   soak_driver reader ...   (one rank; started by `run`)
//
// `run` writes the synthetic dataset into DIR, registers it as "soak", runs one job to
// its end to warm the daemon up, takes the idle baseline, churns, waits for the daemon to
// release everything and takes the idle figures again. It prints one line per finished
// job that did not go as planned and a summary, writes samples.tsv in DIR and the
// markdown tables to --report. Exit status: 0 if every check passed, 1 otherwise.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/proc_stats.h"
#include "common/env.h"
#include "ember/client.h"
#include "tests/support/test_env.h"

namespace {

using Clock = std::chrono::steady_clock;
using ember::Client;
using ember::testing::CountEntries;
using ember::testing::CountFds;
using ember::testing::CountMemfds;
using ember::bench::LoadAverage1;
using ember::bench::ProcKib;
using ember::bench::ReadProcStat;

constexpr const char* kDataset = "soak";
// Reader exit codes besides 0 (every epoch read) and 1 (an error, on stderr).
constexpr int kExitStopped = 3;   // SIGTERM: closed its stream early
constexpr int kExitMismatch = 4;  // a batch's sample_id differed from its image's id

volatile sig_atomic_t g_stop = 0;
void OnTerm(int) { g_stop = 1; }

// ---------------------------------------------------------------- reader (one rank)

struct ReaderArgs {
  std::string socket, job, log;
  uint32_t rank = 0, world = 2, epochs = 1, batch = 32, step_ms = 10;
  uint64_t seed = 0;
};

int ReaderFail(const ReaderArgs& a, const std::string& what, const ember::Status& status) {
  std::fprintf(stderr, "soak reader %s/%u: %s: %s\n", a.job.c_str(), a.rank, what.c_str(),
               status.ToString().c_str());
  return 1;
}

// Reads every epoch of its stream, holding each batch for step_ms (a training step), and
// appends one record per batch to a.log: u64 epoch, u32 n, n x i64 sample ids.
int RunReader(const ReaderArgs& a) {
  signal(SIGTERM, OnTerm);
  ember::ClientOptions options;
  options.socket_path = a.socket;
  auto client = Client::Connect(options);
  if (!client.ok()) return ReaderFail(a, "connect", client.status());
  ember::StreamOptions so;
  so.job = a.job;
  so.dataset = kDataset;
  so.batch_size = a.batch;
  so.seed = a.seed;
  so.rank = a.rank;
  so.world_size = a.world;
  so.epochs = a.epochs;
  so.sample_ids = true;
  auto reader = (*client)->OpenStream(so);
  if (!reader.ok()) return ReaderFail(a, "open stream", reader.status());
  std::ofstream log(a.log, std::ios::binary);
  int mismatches = 0;
  while (!g_stop && !(*reader)->ended()) {
    auto next = (*reader)->Next();
    if (!next.ok()) return ReaderFail(a, "next", next.status());
    if (!next->has_value()) continue;  // an epoch's end
    const ember::RawBatch& batch = **next;
    const ember::RawTensor* ids = nullptr;
    const ember::RawTensor* images = nullptr;
    for (const auto& t : batch.tensors) {
      if (t.name == "sample_id") ids = &t;
      if (t.name == "image") images = &t;
    }
    if (ids == nullptr || images == nullptr || batch.num_samples == 0)
      return ReaderFail(a, "batch", ember::Status(ember::StatusCode::kInternal,
                                                  "no sample_id or image tensor"));
    const auto* id = static_cast<const int64_t*>(ids->data);
    const uint64_t image_bytes = images->nbytes / batch.num_samples;
    for (uint32_t i = 0; i < batch.num_samples; ++i) {
      const auto* image = static_cast<const uint8_t*>(images->data) + i * image_bytes;
      if (ember::testing::SyntheticId(image) != static_cast<uint64_t>(id[i]) && mismatches++ < 5)
        std::fprintf(stderr, "soak reader %s/%u: epoch %" PRIu64 ": sample_id %" PRId64
                     " holds the image of sample %u\n", a.job.c_str(), a.rank, batch.epoch,
                     id[i], ember::testing::SyntheticId(image));
    }
    const uint32_t n = batch.num_samples;
    log.write(reinterpret_cast<const char*>(&batch.epoch), sizeof(batch.epoch));
    log.write(reinterpret_cast<const char*>(&n), sizeof(n));
    log.write(reinterpret_cast<const char*>(id), n * sizeof(int64_t));
    log.flush();
    if (a.step_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(a.step_ms));
  }
  if (!log.good()) return ReaderFail(a, "log", ember::Status(ember::StatusCode::kInternal,
                                                             "cannot write " + a.log));
  if (mismatches > 0) return kExitMismatch;
  return g_stop ? kExitStopped : 0;
}

// ---------------------------------------------------------------- the daemon's figures

struct Sample {
  double t = 0;  // seconds since the churn started; negative: the idle baseline
  long rss_kib = 0, anon_kib = 0, pss_kib = 0;
  int fds = 0, memfds = 0, dev_shm = 0;
  uint64_t shm_bytes = 0;
  size_t streams = 0, jobs = 0;
  int readers = 0;
  double load1 = 0, cpu_s = 0;
};

// Fails if the daemon does not answer (it died).
std::optional<Sample> TakeSample(ember::Env& env, Client& client, pid_t daemon, double t,
                                 int readers) {
  auto status = client.GetStatus();
  if (!status.ok()) {
    std::fprintf(stderr, "soak: status: %s\n", status.status().ToString().c_str());
    return std::nullopt;
  }
  Sample s;
  s.t = t;
  s.rss_kib = ProcKib(env, daemon, "status", "VmRSS");
  s.anon_kib = ProcKib(env, daemon, "status", "RssAnon");
  s.pss_kib = ProcKib(env, daemon, "smaps_rollup", "Pss");
  s.fds = CountFds(daemon);
  s.memfds = CountMemfds(daemon);
  s.dev_shm = CountEntries("/dev/shm");
  s.shm_bytes = status->shm_bytes_in_use;
  s.streams = status->streams.size();
  s.jobs = status->jobs.size();
  s.readers = readers;
  s.load1 = LoadAverage1(env);
  auto stat = ReadProcStat(env, "/proc/" + std::to_string(daemon) + "/stat");
  s.cpu_s = stat.ok() ? stat->cpu_seconds : -1;
  return s;
}

// ---------------------------------------------------------------- jobs

enum class Fate { kComplete, kStop, kKill };

struct Rank {
  pid_t pid = -1;
  bool exited = false;
  int status = 0;
  std::string log, err;
};

struct Job {
  std::string name;
  uint32_t epochs = 0;
  uint64_t seed = 0;
  Fate fate = Fate::kComplete;
  uint32_t victim = 0;  // the rank SIGKILLed (kKill)
  Clock::time_point action_at, deadline;
  bool acted = false;  // the stop or kill reached a live rank
  bool hung = false;   // still running at its deadline: SIGKILLed
  std::vector<Rank> ranks;
};

struct RunArgs {
  std::string socket, dir, report;
  double seconds = 600, sample_every = 10;
  uint32_t jobs = 8, ranks = 2, samples = 4000, batch = 32, min_epochs = 2, max_epochs = 5,
           step_ms = 10;
  double stop_share = 0.25, kill_share = 0.25;
  uint64_t seed = 1;
};

struct Counts {
  int started = 0, completed = 0, stopped = 0, killed = 0, survivors_finished = 0,
      hung = 0, failures = 0, mismatched = 0;
  int epochs_checked = 0, violations = 0;
};

std::string Describe(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("signal ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

bool ExitedWith(const Rank& r, int code) {
  return WIFEXITED(r.status) && WEXITSTATUS(r.status) == code;
}

// Every epoch of `job` across its ranks' logs: each of the `samples` ids exactly once.
// Adds the epochs checked and those violating it to *counts; prints each violation.
void CheckEpochs(const Job& job, uint32_t samples, Counts* counts) {
  std::map<uint64_t, std::vector<int64_t>> epochs;
  for (const Rank& r : job.ranks) {
    std::ifstream in(r.log, std::ios::binary);
    uint64_t epoch = 0;
    uint32_t n = 0;
    while (in.read(reinterpret_cast<char*>(&epoch), sizeof(epoch)) &&
           in.read(reinterpret_cast<char*>(&n), sizeof(n))) {
      std::vector<int64_t>& ids = epochs[epoch];
      const size_t at = ids.size();
      ids.resize(at + n);
      if (!in.read(reinterpret_cast<char*>(ids.data() + at), n * sizeof(int64_t))) break;
    }
  }
  for (uint64_t e = 0; e < job.epochs; ++e) {
    ++counts->epochs_checked;
    std::vector<int64_t> ids = epochs.count(e) ? epochs[e] : std::vector<int64_t>{};
    std::vector<int> seen(samples, 0);
    uint64_t out_of_range = 0, duplicates = 0, missing = 0;
    for (int64_t id : ids) {
      if (id < 0 || id >= static_cast<int64_t>(samples)) {
        ++out_of_range;
      } else if (seen[static_cast<size_t>(id)]++ > 0) {
        ++duplicates;
      }
    }
    for (int s : seen) missing += s == 0 ? 1 : 0;
    if (out_of_range + duplicates + missing > 0) {
      ++counts->violations;
      std::printf("VIOLATION job %s epoch %" PRIu64 ": %zu ids, %" PRIu64 " duplicates, %" PRIu64
                  " missing, %" PRIu64 " out of range\n",
                  job.name.c_str(), e, ids.size(), duplicates, missing, out_of_range);
    }
  }
  if (epochs.size() > job.epochs) {
    ++counts->violations;
    std::printf("VIOLATION job %s: %zu epochs logged, %u asked for\n", job.name.c_str(),
                epochs.size(), job.epochs);
  }
}

class Soak {
 public:
  Soak(RunArgs args, std::string self) : a_(std::move(args)), self_(std::move(self)),
                                         rng_(a_.seed) {}

  int Run();

 private:
  Job Start(Fate fate, Clock::time_point now);
  // Reaps exited ranks; stops or kills as planned; true once every rank has exited.
  bool Poll(Job& job, Clock::time_point now);
  void Finish(Job& job);
  int Readers() const;
  bool Record(double t);
  // Prints the tables (and writes them to --report); true if the daemon's heap (RssAnon)
  // stayed flat: the last window's mean within 5% + 1 MiB of the first window's.
  bool Report(const Sample& baseline, const Sample& idle, double churn_s, bool idle_ok);

  RunArgs a_;
  std::string self_;
  std::unique_ptr<ember::Env> env_ = ember::NewPosixEnv();
  std::mt19937_64 rng_;
  std::unique_ptr<Client> client_;
  pid_t daemon_ = -1;
  int next_job_ = 0;
  std::vector<Job> running_;
  std::vector<Sample> samples_;
  Counts counts_;
  std::string logs_;
};

Job Soak::Start(Fate fate, Clock::time_point now) {
  Job job;
  job.name = "soak-" + std::to_string(next_job_++);
  job.epochs = std::uniform_int_distribution<uint32_t>(a_.min_epochs, a_.max_epochs)(rng_);
  job.seed = rng_();
  job.fate = fate;
  job.victim = std::uniform_int_distribution<uint32_t>(0, a_.ranks - 1)(rng_);
  const uint32_t steps = (a_.samples + a_.batch * a_.ranks - 1) / (a_.batch * a_.ranks);
  const auto expected = std::chrono::milliseconds(uint64_t{job.epochs} * steps * a_.step_ms);
  job.action_at = now + std::chrono::duration_cast<Clock::duration>(
                            expected * std::uniform_real_distribution<double>(0.1, 0.9)(rng_));
  job.deadline = now + expected * 4 + std::chrono::seconds(60);
  for (uint32_t r = 0; r < a_.ranks; ++r) {
    Rank rank;
    const std::string base = logs_ + "/" + job.name + ".r" + std::to_string(r);
    rank.log = base + ".ids";
    rank.err = base + ".err";
    rank.pid = ember::testing::Spawn(
        {self_, "reader", "--socket", a_.socket, "--job", job.name, "--rank", std::to_string(r),
         "--world", std::to_string(a_.ranks), "--epochs", std::to_string(job.epochs),
         "--batch-size", std::to_string(a_.batch), "--step-ms", std::to_string(a_.step_ms),
         "--seed", std::to_string(job.seed), "--log", rank.log},
        {}, rank.err, rank.err);
    job.ranks.push_back(rank);
  }
  ++counts_.started;
  return job;
}

// True once every rank of `job` has exited or logged a batch: all have joined, so a stop
// or kill now hits the job mid-epoch. (A rank killed before it joins leaves its job
// waiting for it until the daemon's job_fill_timeout, 600 s by default, as designed.)
bool Reading(const Job& job) {
  for (const Rank& r : job.ranks) {
    std::error_code ec;
    if (!r.exited && (std::filesystem::file_size(r.log, ec) == 0 || ec)) return false;
  }
  return true;
}

bool Soak::Poll(Job& job, Clock::time_point now) {
  bool all = true;
  for (Rank& r : job.ranks) {
    if (!r.exited && waitpid(r.pid, &r.status, WNOHANG) == r.pid) r.exited = true;
    all = all && r.exited;
  }
  if (all) return true;
  if (!job.acted && job.fate != Fate::kComplete && now >= job.action_at && Reading(job)) {
    job.acted = true;
    if (job.fate == Fate::kStop) {
      for (Rank& r : job.ranks)
        if (!r.exited) kill(r.pid, SIGTERM);
    } else if (!job.ranks[job.victim].exited) {
      kill(job.ranks[job.victim].pid, SIGKILL);
    } else {
      job.acted = false;  // the victim had already finished: the job completes
      job.fate = Fate::kComplete;
    }
  }
  if (now >= job.deadline && !job.hung) {
    job.hung = true;
    for (Rank& r : job.ranks)
      if (!r.exited) kill(r.pid, SIGKILL);
  }
  return false;
}

void Soak::Finish(Job& job) {
  auto fail = [&](const std::string& why) {
    ++counts_.failures;
    std::printf("FAILED job %s (%u epochs): %s\n", job.name.c_str(), job.epochs, why.c_str());
    for (const Rank& r : job.ranks) {
      const std::string err = ember::testing::ReadFileOrEmpty(r.err);
      if (!err.empty()) std::printf("  %s: %s", r.err.c_str(), err.c_str());
    }
  };
  std::string statuses;
  for (const Rank& r : job.ranks) statuses += " " + Describe(r.status);
  for (const Rank& r : job.ranks)
    if (ExitedWith(r, kExitMismatch)) ++counts_.mismatched;
  bool keep = false;
  if (job.hung) {
    ++counts_.hung;
    fail("still running at its deadline:" + statuses);
    keep = true;
  } else if (job.fate == Fate::kKill && job.acted) {
    ++counts_.killed;
    bool survivors_ok = true;
    for (uint32_t i = 0; i < job.ranks.size(); ++i)
      if (i != job.victim && !ExitedWith(job.ranks[i], 0)) survivors_ok = false;
    if (survivors_ok) {
      ++counts_.survivors_finished;
    } else {
      fail("a survivor of the kill did not read to its end:" + statuses);
      keep = true;
    }
  } else if (job.fate == Fate::kStop && job.acted) {
    ++counts_.stopped;
    for (const Rank& r : job.ranks) {
      if (!ExitedWith(r, 0) && !ExitedWith(r, kExitStopped)) {
        fail("a stopped rank did not exit cleanly:" + statuses);
        keep = true;
        break;
      }
    }
  } else {
    bool ok = true;
    for (const Rank& r : job.ranks) ok = ok && ExitedWith(r, 0);
    if (ok) {
      ++counts_.completed;
      const int before = counts_.violations;
      CheckEpochs(job, a_.samples, &counts_);
      keep = counts_.violations != before;
    } else {
      fail("a rank did not read to its end:" + statuses);
      keep = true;
    }
  }
  if (!keep) {
    for (const Rank& r : job.ranks) {
      std::remove(r.log.c_str());
      std::remove(r.err.c_str());
    }
  }
}

int Soak::Readers() const {
  int n = 0;
  for (const Job& job : running_)
    for (const Rank& r : job.ranks) n += r.exited ? 0 : 1;
  return n;
}

bool Soak::Record(double t) {
  auto s = TakeSample(*env_, *client_, daemon_, t, Readers());
  if (!s) return false;
  samples_.push_back(*s);
  return true;
}

// Waits for every stream, job and ring of the daemon to be gone (up to 30 s).
bool WaitIdle(Client& client, pid_t daemon, int memfds) {
  return ember::testing::Eventually(
      [&] {
        auto status = client.GetStatus();
        return status.ok() && status->streams.empty() && status->jobs.empty() &&
               status->shm_bytes_in_use == 0 && CountMemfds(daemon) <= memfds;
      },
      std::chrono::seconds(30));
}

int Soak::Run() {
  logs_ = a_.dir + "/logs";
  std::filesystem::create_directories(logs_);
  const std::string data = a_.dir + "/data";
  std::filesystem::create_directories(data);
  ember::testing::WriteSyntheticIdx(data, "train", a_.samples);
  ember::ClientOptions options;
  options.socket_path = a_.socket;
  auto client = Client::Connect(options);
  if (!client.ok()) {
    std::fprintf(stderr, "soak: %s\n", client.status().ToString().c_str());
    return 1;
  }
  client_ = std::move(*client);
  ember::DatasetSpec spec;
  spec.name = kDataset;
  spec.path = data;
  auto added = client_->AddDataset(spec);
  if (!added.ok()) {
    std::fprintf(stderr, "soak: register %s: %s\n", data.c_str(),
                 added.status().ToString().c_str());
    return 1;
  }
  auto status = client_->GetStatus();
  if (!status.ok()) return 1;
  daemon_ = static_cast<pid_t>(status->pid);
  const int memfds_at_start = CountMemfds(daemon_);

  // Warm-up: one job to its end, so that what stays (the dataset's source, allocator
  // arenas, the journal) is in the baseline.
  {
    Job warm = Start(Fate::kComplete, Clock::now());
    while (!Poll(warm, Clock::now())) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    Finish(warm);
  }
  if (!WaitIdle(*client_, daemon_, memfds_at_start)) std::printf("soak: not idle after warm-up\n");
  auto baseline = TakeSample(*env_, *client_, daemon_, -1, 0);
  if (!baseline) return 1;
  const Counts warm_counts = counts_;

  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(a_.seconds));
  auto next_sample = start;
  std::uniform_real_distribution<double> fate(0, 1);
  bool daemon_ok = true;
  while (daemon_ok) {
    const auto now = Clock::now();
    if (now < end) {
      while (running_.size() < a_.jobs) {
        const double f = fate(rng_);
        running_.push_back(Start(f < a_.stop_share                  ? Fate::kStop
                                 : f < a_.stop_share + a_.kill_share ? Fate::kKill
                                                                     : Fate::kComplete,
                                 now));
      }
    } else if (running_.empty()) {
      break;
    }
    for (auto it = running_.begin(); it != running_.end();) {
      if (Poll(*it, now)) {
        Finish(*it);
        it = running_.erase(it);
      } else {
        ++it;
      }
    }
    if (now >= next_sample && now < end) {
      daemon_ok = Record(std::chrono::duration<double>(now - start).count());
      next_sample += std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(a_.sample_every));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double churn_s = std::chrono::duration<double>(Clock::now() - start).count();
  if (!daemon_ok) {
    for (Job& job : running_)
      for (Rank& r : job.ranks)
        if (!r.exited) kill(r.pid, SIGKILL), waitpid(r.pid, nullptr, 0);
    std::printf("soak: the daemon stopped answering\n");
    return 1;
  }
  const bool idle_ok = WaitIdle(*client_, daemon_, baseline->memfds);
  auto idle = TakeSample(*env_, *client_, daemon_, churn_s, 0);
  if (!idle) return 1;

  counts_.started -= warm_counts.started;
  counts_.completed -= warm_counts.completed;
  counts_.epochs_checked -= warm_counts.epochs_checked;
  const bool heap_flat = Report(*baseline, *idle, churn_s, idle_ok);
  const bool leftovers = !idle_ok || idle->fds > baseline->fds ||
                         idle->memfds > baseline->memfds || idle->dev_shm > baseline->dev_shm ||
                         idle->shm_bytes != 0 || idle->streams != 0 || idle->jobs != 0;
  return counts_.violations == 0 && counts_.failures == 0 && counts_.mismatched == 0 &&
                 !leftovers && heap_flat
             ? 0
             : 1;
}

// The mean of `field` over the samples with first <= t < last.
template <typename Field>
double Mean(const std::vector<Sample>& samples, double first, double last, Field field) {
  double sum = 0;
  int n = 0;
  for (const Sample& s : samples) {
    if (s.t < first || s.t >= last) continue;
    sum += static_cast<double>(field(s));
    ++n;
  }
  return n == 0 ? 0 : sum / n;
}

std::string Format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

bool Soak::Report(const Sample& baseline, const Sample& idle, double churn_s, bool idle_ok) {
  {
    std::ofstream tsv(a_.dir + "/samples.tsv");
    tsv << "t_s\trss_kib\trss_anon_kib\tpss_kib\tfds\tmemfds\tshm_bytes\tdev_shm\tstreams\tjobs"
           "\treaders\tload1\tcpu_s\n";
    std::vector<Sample> all = {baseline};
    all.insert(all.end(), samples_.begin(), samples_.end());
    all.push_back(idle);
    for (const Sample& s : all)
      tsv << s.t << "\t" << s.rss_kib << "\t" << s.anon_kib << "\t" << s.pss_kib << "\t" << s.fds
          << "\t" << s.memfds << "\t" << s.shm_bytes << "\t" << s.dev_shm << "\t" << s.streams
          << "\t" << s.jobs << "\t" << s.readers << "\t" << s.load1 << "\t" << s.cpu_s << "\n";
  }
  const double warm = std::min(60.0, a_.seconds / 6), window = std::min(60.0, a_.seconds / 4);
  const double f0 = warm, f1 = warm + window, l0 = a_.seconds - window, l1 = a_.seconds + 1;
  std::ostringstream out;
  struct Row {
    const char* name;
    const char* fmt;
    double scale;
    std::function<double(const Sample&)> field;
  };
  const double kib = 1.0 / 1024, bytes = 1.0 / (1024 * 1024);
  const std::vector<Row> rows = {
      {"emberd VmRSS, MiB", "%.1f", kib, [](const Sample& s) { return s.rss_kib; }},
      {"emberd RssAnon (heap), MiB", "%.1f", kib, [](const Sample& s) { return s.anon_kib; }},
      {"emberd Pss, MiB", "%.1f", kib, [](const Sample& s) { return s.pss_kib; }},
      {"emberd fds", "%.1f", 1, [](const Sample& s) { return s.fds; }},
      {"emberd memfds", "%.1f", 1, [](const Sample& s) { return s.memfds; }},
      {"shm_bytes_in_use, MiB", "%.2f", bytes, [](const Sample& s) { return s.shm_bytes; }},
      {"/dev/shm entries", "%.1f", 1, [](const Sample& s) { return s.dev_shm; }},
      {"streams", "%.1f", 1, [](const Sample& s) { return s.streams; }},
      {"jobs", "%.1f", 1, [](const Sample& s) { return s.jobs; }},
      {"reader processes", "%.1f", 1, [](const Sample& s) { return s.readers; }},
      {"load (1 min)", "%.2f", 1, [](const Sample& s) { return s.load1; }},
  };
  out << "| every " << a_.sample_every << " s | idle before | mean, " << f0 << "-" << f1
      << " s | mean, " << l0 << "-" << a_.seconds << " s | last / first | idle after |\n";
  out << "|---|---|---|---|---|---|\n";
  for (const Row& row : rows) {
    const double first = Mean(samples_, f0, f1, row.field) * row.scale;
    const double last = Mean(samples_, l0, l1, row.field) * row.scale;
    out << "| " << row.name << " | " << Format(row.fmt, row.field(baseline) * row.scale) << " | "
        << Format(row.fmt, first) << " | " << Format(row.fmt, last) << " | "
        << (first > 0 ? Format("%.3f", last / first) : std::string("-")) << " | "
        << Format(row.fmt, row.field(idle) * row.scale) << " |\n";
  }
  out << "\n| tenth of the run | RssAnon, MiB | VmRSS, MiB | Pss, MiB | fds | memfds | "
         "shm_bytes_in_use, MiB | load |\n|---|---|---|---|---|---|---|---|\n";
  for (int i = 0; i < 10; ++i) {
    const double t0 = a_.seconds * i / 10, t1 = a_.seconds * (i + 1) / 10;
    out << "| " << Format("%.0f", t0) << "-" << Format("%.0f", t1) << " s";
    for (size_t r : {1, 0, 2, 3, 4, 5, 10})
      out << " | " << Format(rows[r].fmt, Mean(samples_, t0, t1, rows[r].field) * rows[r].scale);
    out << " |\n";
  }
  auto anon = [](const Sample& s) { return s.anon_kib; };
  const double anon_first = Mean(samples_, f0, f1, anon) * kib;
  const double anon_last = Mean(samples_, l0, l1, anon) * kib;
  const bool heap_flat = anon_last <= anon_first * 1.05 + 1.0;
  const double cpu = samples_.empty() ? 0 : idle.cpu_s - baseline.cpu_s;
  out << "\n| jobs started | completed | stopped (SIGTERM) | killed (a rank SIGKILLed) | "
         "survivors read to the end | hung | failed | epochs checked | exactly-once violations "
         "| id/image mismatches |\n";
  out << "|---|---|---|---|---|---|---|---|---|---|\n";
  out << "| " << counts_.started << " | " << counts_.completed << " | " << counts_.stopped << " | "
      << counts_.killed << " | " << counts_.survivors_finished << " | " << counts_.hung << " | "
      << counts_.failures << " | " << counts_.epochs_checked << " | " << counts_.violations
      << " | " << counts_.mismatched << " |\n\n";
  out << a_.jobs << " jobs x " << a_.ranks << " ranks, " << a_.samples << " samples, batch "
      << a_.batch << ", " << a_.min_epochs << "-" << a_.max_epochs << " epochs a job, "
      << a_.step_ms << " ms a step; churn " << Format("%.0f", churn_s)
      << " s (the last jobs' ends included); emberd used " << Format("%.1f", cpu) << " CPU s ("
      << Format("%.2f", churn_s > 0 ? cpu / churn_s : 0) << " cores). Heap (RssAnon) "
      << (heap_flat ? "flat" : "GREW") << " (last window " << Format("%.1f", anon_last)
      << " MiB against " << Format("%.1f", anon_first) << " MiB, limit +5% +1 MiB); idle after: "
      << (idle_ok && idle.fds <= baseline.fds && idle.memfds <= baseline.memfds &&
                  idle.dev_shm <= baseline.dev_shm && idle.shm_bytes == 0 && idle.streams == 0 &&
                  idle.jobs == 0
              ? "back to the baseline (no stream, job, ring or shared memory left)"
              : "NOT back to the baseline")
      << ".\n";
  const std::string text = out.str();
  std::fputs(text.c_str(), stdout);
  if (!a_.report.empty()) std::ofstream(a_.report) << text;
  return heap_flat;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"soak_driver: jobs started, stopped and killed against one emberd"};
  app.require_subcommand(1);
  RunArgs run;
  CLI::App* run_cmd = app.add_subcommand("run", "the soak (bench/compare soak)");
  run_cmd->add_option("--socket", run.socket, "emberd's unix socket")->required();
  run_cmd->add_option("--dir", run.dir, "for the dataset, the ranks' logs, samples.tsv")
      ->required();
  run_cmd->add_option("--seconds", run.seconds, "churn time")->capture_default_str();
  run_cmd->add_option("--jobs", run.jobs, "jobs kept running")->check(CLI::Range(1, 64))
      ->capture_default_str();
  run_cmd->add_option("--ranks", run.ranks, "reader processes a job")->check(CLI::Range(1, 16))
      ->capture_default_str();
  run_cmd->add_option("--samples", run.samples, "synthetic samples")
      ->check(CLI::Range(64, 1 << 22))->capture_default_str();
  run_cmd->add_option("--batch-size", run.batch)->check(CLI::Range(1, 4096))
      ->capture_default_str();
  run_cmd->add_option("--min-epochs", run.min_epochs)->check(CLI::Range(1, 1000))
      ->capture_default_str();
  run_cmd->add_option("--max-epochs", run.max_epochs)->check(CLI::Range(1, 1000))
      ->capture_default_str();
  run_cmd->add_option("--step-ms", run.step_ms, "each rank holds each batch this long")
      ->capture_default_str();
  run_cmd->add_option("--sample-every", run.sample_every, "seconds between samples")
      ->check(CLI::Range(0.1, 600.0))->capture_default_str();
  run_cmd->add_option("--stop-share", run.stop_share, "of jobs stopped early")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  run_cmd->add_option("--kill-share", run.kill_share, "of jobs with a rank SIGKILLed")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  run_cmd->add_option("--seed", run.seed)->capture_default_str();
  run_cmd->add_option("--report", run.report, "write the markdown tables here");
  ReaderArgs reader;
  CLI::App* reader_cmd = app.add_subcommand("reader", "one rank (started by run)");
  reader_cmd->add_option("--socket", reader.socket)->required();
  reader_cmd->add_option("--job", reader.job)->required();
  reader_cmd->add_option("--rank", reader.rank)->required();
  reader_cmd->add_option("--world", reader.world)->required();
  reader_cmd->add_option("--epochs", reader.epochs)->required();
  reader_cmd->add_option("--batch-size", reader.batch)->required();
  reader_cmd->add_option("--step-ms", reader.step_ms)->required();
  reader_cmd->add_option("--seed", reader.seed)->required();
  reader_cmd->add_option("--log", reader.log)->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (*reader_cmd) return RunReader(reader);
  if (run.min_epochs > run.max_epochs || run.stop_share + run.kill_share > 1) {
    std::fprintf(stderr, "soak_driver: --min-epochs over --max-epochs, or the shares over 1\n");
    return 2;
  }
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  try {
    return Soak(run, self).Run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "soak_driver: %s\n", e.what());
    return 1;
  }
}
