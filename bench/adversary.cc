// adversary: the two sides of the shared-node soak (`bench/compare soak --adversary`), each
// run as its own uid against one emberd.
//
//   adversary honest --socket S --dir DIR --name NAME [--seconds 60] [--batch-size 32]
//                    [--samples 4000] [--step-ms 2]
//     Writes a synthetic idx set into DIR, registers it as NAME and reads it, epoch after
//     epoch, as a trainer would (a step of --step-ms after each batch), until --seconds
//     pass. Prints a line a second: "<unix ms> <batches in that second> <slowest Next ms>".
//     Exit status 1 (the error on stderr) if a call fails.
//
//   adversary hostile --socket S --dir DIR [--seconds 30]
//     What the third shared-node probe did (issue 36) and the second's (issue 33), in turn
//     until --seconds pass: replies never read, half-sent messages, rejoins and worlds of
//     absurd counts, a streamed file truncated, a sparse idx set, names probed in another
//     user's closed directory, connections past the limit, a key-value store filled. Each
//     attack's outcome must be the refusal (or the bounded effect) it gets on main; prints
//     one line per attack kind ("<kind> <tries> <as expected>") and, for an outcome that is
//     not, what it was. Exit status 1 if any was not.
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ember/client.h"
#include "tests/support/hostile_client.h"
#include "tests/support/test_env.h"

namespace {

using Clock = std::chrono::steady_clock;
using ember::Client;
using ember::Status;
using ember::StatusCode;
using std::chrono::milliseconds;

std::unique_ptr<Client> Connect(const std::string& socket) {
  ember::ClientOptions options;
  options.socket_path = socket;
  options.call_timeout = std::chrono::seconds(30);
  auto client = Client::Connect(options);
  if (!client.ok()) return nullptr;
  return std::move(client).value();
}

int64_t UnixMs() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// ---------------------------------------------------------------- honest

struct HonestArgs {
  std::string socket, dir, name;
  double seconds = 60;
  uint32_t batch = 32, samples = 4000, step_ms = 2;
};

int RunHonest(const HonestArgs& a) {
  ember::testing::WriteSyntheticIdx(a.dir, "train", a.samples);
  auto client = Connect(a.socket);
  if (!client) {
    std::fprintf(stderr, "honest %s: cannot connect to %s\n", a.name.c_str(), a.socket.c_str());
    return 1;
  }
  auto added = client->AddDataset({a.name, "idx", a.dir, "train"});
  if (!added.ok()) {
    std::fprintf(stderr, "honest %s: %s\n", a.name.c_str(), added.status().ToString().c_str());
    return 1;
  }
  ember::StreamOptions options;
  options.job = a.name;
  options.dataset = a.name;
  options.batch_size = a.batch;
  options.epochs = 0;
  auto reader = client->OpenStream(options);
  if (!reader.ok()) {
    std::fprintf(stderr, "honest %s: %s\n", a.name.c_str(), reader.status().ToString().c_str());
    return 1;
  }
  const auto end = Clock::now() + std::chrono::duration<double>(a.seconds);
  auto second = Clock::now() + std::chrono::seconds(1);
  uint64_t batches = 0;
  double slowest_ms = 0;
  while (Clock::now() < end) {
    const auto asked = Clock::now();
    auto next = (*reader)->Next();
    if (!next.ok()) {
      std::fprintf(stderr, "honest %s: %s\n", a.name.c_str(), next.status().ToString().c_str());
      return 1;
    }
    slowest_ms = std::max(
        slowest_ms, std::chrono::duration<double, std::milli>(Clock::now() - asked).count());
    if (next->has_value()) ++batches;
    std::this_thread::sleep_for(milliseconds(a.step_ms));
    if (Clock::now() >= second) {
      std::printf("%lld %llu %.1f\n", static_cast<long long>(UnixMs()),
                  static_cast<unsigned long long>(batches), slowest_ms);
      std::fflush(stdout);
      batches = 0;
      slowest_ms = 0;
      second += std::chrono::seconds(1);
    }
  }
  return 0;
}

// ---------------------------------------------------------------- hostile

struct HostileArgs {
  std::string socket, dir;
  double seconds = 30;
};

// One attack: "" when its outcome is the expected one, else what happened.
using Attack = std::function<std::string()>;

std::string Expect(const Status& got, StatusCode code, const std::string& what) {
  if (got.code() == code) return "";
  return what + ": " + (got.ok() ? std::string("ok") : got.ToString());
}

template <typename T>
Status StatusOf(const ember::Result<T>& r) {
  return r.ok() ? Status::Ok() : r.status();
}

// Writes a tokens file of `tokens` uint16 tokens.
void WriteTokens(const std::string& path, size_t tokens) {
  std::vector<uint16_t> data(tokens);
  for (size_t i = 0; i < tokens; ++i) data[i] = static_cast<uint16_t>(i);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(data.data()),
             static_cast<std::streamsize>(data.size() * sizeof(uint16_t)));
}

std::map<std::string, Attack> Attacks(const HostileArgs& a, std::atomic<int>& held_threads) {
  std::map<std::string, Attack> attacks;
  const std::string socket = a.socket;
  // Item 3: replies never read, held 5 s on a thread (at most 4 such connections at once).
  attacks["unread-replies"] = [socket, &held_threads]() -> std::string {
    if (held_threads.load() >= 4) return "";
    ++held_threads;
    std::thread([socket, &held_threads] {
      static std::atomic<int> n{0};
      ember::testing::SendCallsNeverReadReplies(
          socket, "deaf-" + std::to_string(n++), 1 << 20, 800, milliseconds(500),
          [] { std::this_thread::sleep_for(std::chrono::seconds(5)); });
      --held_threads;
    }).detach();
    return "";
  };
  // Issue 33, item 1: 10 connections announcing 60 MiB each and sending 1 MiB: past the
  // uid's 256 MiB, the daemon closes them.
  attacks["half-messages"] = [socket]() -> std::string {
    const std::vector<int> fds = ember::testing::SendHalfMessages(socket, 10, 60u << 20, 1u << 20);
    std::this_thread::sleep_for(milliseconds(300));
    const int closed = ember::testing::CountClosed(fds);
    for (int fd : fds) close(fd);
    return closed >= 6 ? "" : "only " + std::to_string(closed) + " of 10 closed";
  };
  // Items 1, 5, 7: counts a request carries, bounded before anything is built.
  attacks["absurd-counts"] = [socket]() -> std::string {
    auto c = Connect(socket);
    if (!c) return "connect failed";
    ember::StreamOptions rejoin;
    rejoin.job = "rejoin";
    rejoin.dataset = "hostile-tokens";
    rejoin.world_size = 2;
    rejoin.rejoin = true;
    rejoin.rejoin_received = ~uint64_t{0};
    std::string out = Expect(StatusOf(c->OpenStream(rejoin)), StatusCode::kInvalidArgument,
                             "rejoin_received 2^64-1");
    ember::StreamOptions wide = rejoin;
    wide.job = "wide";
    wide.rejoin = false;
    wide.world_size = 16777216;
    out += Expect(StatusOf(c->OpenStream(wide)), StatusCode::kInvalidArgument, "world 2^24");
    auto segment = c->OpenSharedMemory("wide", "grads", 0, 65536, 4096);
    if (segment.ok()) close(*segment);
    return out + Expect(StatusOf(segment), StatusCode::kOk, "a segment of 65536 ranks");
  };
  // Item 2: the streamed file truncated under the reader: a data_loss for that stream.
  attacks["truncate"] = [socket, dir = a.dir]() -> std::string {
    auto c = Connect(socket);
    if (!c) return "connect failed";
    const std::string path = dir + "/cut.bin";
    WriteTokens(path, size_t{1} << 20);
    (void)c->RemoveDataset("hostile-cut");
    auto added = c->AddDataset({"hostile-cut", "tokens", path, "train", "tokens: {seq_len: 64}"});
    if (!added.ok()) return "register: " + added.status().ToString();
    ember::StreamOptions o;
    o.job = "cut";
    o.dataset = "hostile-cut";
    o.batch_size = 16;
    auto reader = c->OpenStream(o);
    if (!reader.ok() || !(*reader)->Next().ok()) return "no first batch";
    if (truncate(path.c_str(), 4096) != 0) return "truncate failed";
    Status last;
    for (int i = 0; i < 100000 && last.ok(); ++i) last = StatusOf((*reader)->Next());
    reader->reset();
    (void)c->RemoveDataset("hostile-cut");
    return Expect(last, StatusCode::kDataLoss, "reading a truncated file");
  };
  // Item 8: an idx set 8 KB on disk with a 972 MB apparent size.
  attacks["sparse"] = [socket, dir = a.dir]() -> std::string {
    const std::string sparse = dir + "/sparse";
    std::filesystem::create_directories(sparse);
    std::string header("\0\0\x08\x03", 4);
    for (uint32_t d : {60000u, 90u, 180u})
      for (int shift = 24; shift >= 0; shift -= 8) header.push_back(static_cast<char>(d >> shift));
    std::ofstream(sparse + "/train-images-idx3-ubyte", std::ios::binary) << header;
    if (truncate((sparse + "/train-images-idx3-ubyte").c_str(), 16 + uint64_t{60000} * 90 * 180))
      return "truncate failed";
    std::string labels("\0\0\x08\x01", 4);
    for (int shift = 24; shift >= 0; shift -= 8) labels.push_back(static_cast<char>(60000u >> shift));
    std::ofstream(sparse + "/train-labels-idx1-ubyte", std::ios::binary)
        << labels << std::string(60000, 1);
    auto c = Connect(socket);
    if (!c) return "connect failed";
    return Expect(StatusOf(c->AddDataset({"hostile-sparse", "idx", sparse, "train"})),
                  StatusCode::kResourceExhausted, "a sparse set");
  };
  // Item 9 and issue 33: names in another user's closed directory read as one answer.
  attacks["probe"] = [socket]() -> std::string {
    auto c = Connect(socket);
    if (!c) return "connect failed";
    const Status there = StatusOf(c->AddDataset({"p", "tokens", "/root/.bashrc", "train"}));
    const Status missing = StatusOf(c->AddDataset({"p", "tokens", "/root/.nothing-here", "train"}));
    if (there.code() != missing.code()) return "exists: " + there.ToString() + " / missing: " + missing.ToString();
    return "";
  };
  // Connections past the uid's limit: refused, the others served.
  attacks["connections"] = [socket]() -> std::string {
    std::vector<std::unique_ptr<Client>> held;
    int refused = 0;
    for (int i = 0; i < 300; ++i) {
      auto c = Connect(socket);
      if (c && c->GetStatus().ok()) {
        held.push_back(std::move(c));
      } else {
        ++refused;
      }
    }
    return refused > 0 ? "" : "300 connections, none refused";
  };
  // The key-value store: values until the job's 16 MiB are full.
  attacks["kv-fill"] = [socket]() -> std::string {
    auto c = Connect(socket);
    if (!c) return "connect failed";
    const std::string value(1 << 20, 'v');
    Status last;
    for (int i = 0; i < 64 && last.ok(); ++i)
      last = c->KvSet("kv-fill", "k" + std::to_string(i), value);
    return Expect(last, StatusCode::kResourceExhausted, "the 17th MiB of a job's store");
  };
  return attacks;
}

int RunHostile(const HostileArgs& a) {
  {
    auto c = Connect(a.socket);
    if (!c) {
      std::fprintf(stderr, "hostile: cannot connect to %s\n", a.socket.c_str());
      return 1;
    }
    WriteTokens(a.dir + "/tokens.bin", 4096);
    (void)c->AddDataset({"hostile-tokens", "tokens", a.dir + "/tokens.bin", "train",
                         "tokens: {seq_len: 4}"});
  }
  std::atomic<int> held_threads{0};
  const std::map<std::string, Attack> attacks = Attacks(a, held_threads);
  std::map<std::string, std::pair<int, int>> tally;  // kind -> (tries, as expected)
  const auto end = Clock::now() + std::chrono::duration<double>(a.seconds);
  int failures = 0;
  while (Clock::now() < end) {
    for (const auto& [kind, attack] : attacks) {
      if (Clock::now() >= end) break;
      const std::string outcome = attack();
      auto& [tries, expected] = tally[kind];
      ++tries;
      if (outcome.empty()) {
        ++expected;
      } else {
        ++failures;
        std::printf("unexpected: %s: %s\n", kind.c_str(), outcome.c_str());
      }
      std::this_thread::sleep_for(milliseconds(200));
    }
  }
  while (held_threads.load() > 0) std::this_thread::sleep_for(milliseconds(100));
  for (const auto& [kind, counts] : tally)
    std::printf("%s %d %d\n", kind.c_str(), counts.first, counts.second);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"adversary: the honest and hostile sides of the shared-node soak"};
  app.require_subcommand(1);
  HonestArgs honest;
  auto* h = app.add_subcommand("honest", "read a dataset of one's own as a trainer would");
  h->add_option("--socket", honest.socket)->required();
  h->add_option("--dir", honest.dir)->required();
  h->add_option("--name", honest.name)->required();
  h->add_option("--seconds", honest.seconds);
  h->add_option("--batch-size", honest.batch);
  h->add_option("--samples", honest.samples);
  h->add_option("--step-ms", honest.step_ms);
  HostileArgs hostile;
  auto* x = app.add_subcommand("hostile", "what the shared-node probes did, in turn");
  x->add_option("--socket", hostile.socket)->required();
  x->add_option("--dir", hostile.dir)->required();
  x->add_option("--seconds", hostile.seconds);
  CLI11_PARSE(app, argc, argv);
  if (h->parsed()) return RunHonest(honest);
  return RunHostile(hostile);
}
