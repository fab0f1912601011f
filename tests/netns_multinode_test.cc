// Two real emberd daemons as two nodes, each in a network namespace of its own, joined by
// a veth pair with per-test addresses in 10.213.0.0/16: the peer traffic crosses a real
// link between network stacks, not loopback. The test process stays in the root
// namespace and reaches both daemons by their unix sockets (files, visible from every
// network namespace). The same checks as multinode_test: one job served across the
// nodes, every sample once, and the coordinator's key-value store and barriers shared.
// Needs root and `ip` (iproute2); skips with a SKIP warning where they or network
// namespaces are unavailable.
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/temp_dir_testing.h"
#include "daemon/data/image/image_testing.h"
#include "daemon/peer/certs_testing.h"
#include "tests/support/multinode_testing.h"
#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

using daemon::MakeTestCa;
using daemon::TestKeypair;

// The first executable `ip` of the usual places, or "" (posix_spawn takes no PATH, and
// Bazel's test PATH has no sbin).
std::string FindIp() {
  for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"})
    if (access(path, X_OK) == 0) return path;
  return "";
}

// `text` without its trailing newlines (a command's stderr, for a message).
std::string Chomp(std::string text) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

// Two network namespaces, "a" and "b", joined by a veth pair: 10.213.X.1/30 in a,
// 10.213.X.2/30 in b (X from the pid), loopback up in both. The veth ends are made inside
// the namespaces, so no interface name is ever taken in the root namespace. The
// destructor removes the veth pair and both namespaces, ignoring failures; stop every
// process in them first (declare their owners after this).
class NamespacePair {
 public:
  // Makes the pair, running `ip` with its output in `dir`. Returns null with *why set
  // where this machine cannot: not root, no `ip`, `ip netns add` or the veth refused
  // (no namespaces in this kernel or container). Fails the test if a later step fails.
  static std::unique_ptr<NamespacePair> Create(const std::string& dir, std::string* why) {
    if (geteuid() != 0) {
      *why = "not root (euid " + std::to_string(geteuid()) + "): cannot make network namespaces";
      return nullptr;
    }
    const std::string ip = FindIp();
    if (ip.empty()) {
      *why = "no ip (iproute2) in /usr/sbin, /sbin, /usr/bin or /bin";
      return nullptr;
    }
    const unsigned pid = static_cast<unsigned>(getpid());
    // The pid and a random tag: under a sandbox's pid namespace two tests may share a pid.
    const std::string prefix =
        "ember-" + std::to_string(pid) + "-" + std::to_string(std::random_device()() % 100000);
    const std::string subnet = "10.213." + std::to_string(pid % 256) + ".";
    std::unique_ptr<NamespacePair> pair(
        new NamespacePair(ip, dir, prefix + "-a", prefix + "-b", subnet + "1", subnet + "2"));
    for (const std::string* name : {&pair->name_a_, &pair->name_b_}) {
      const ProcessOutput out = pair->Ip({"netns", "add", *name});
      if (out.exit_code != 0) {
        *why = "ip netns add " + *name + " failed (exit " + std::to_string(out.exit_code) +
               "): " + Chomp(out.err);
        return nullptr;  // the destructor removes the one made, if any
      }
      pair->made_.push_back(*name);
    }
    const ProcessOutput veth = pair->Ip({"-n", pair->name_a_, "link", "add", "veth-a", "type",
                                         "veth", "peer", "name", "veth-b", "netns",
                                         pair->name_b_});
    if (veth.exit_code != 0) {
      *why = "ip link add ... type veth failed (exit " + std::to_string(veth.exit_code) +
             "): " + Chomp(veth.err);
      return nullptr;
    }
    pair->Require({"-n", pair->name_a_, "addr", "add", pair->address_a_ + "/30", "dev", "veth-a"});
    pair->Require({"-n", pair->name_b_, "addr", "add", pair->address_b_ + "/30", "dev", "veth-b"});
    for (const auto& [ns, dev] : {std::pair{pair->name_a_, "veth-a"},
                                  std::pair{pair->name_b_, "veth-b"}}) {
      pair->Require({"-n", ns, "link", "set", "lo", "up"});
      pair->Require({"-n", ns, "link", "set", dev, "up"});
    }
    return pair;
  }

  ~NamespacePair() {
    try {
      if (made_.size() == 2) Ip({"-n", name_a_, "link", "del", "veth-a"});
      for (const std::string& name : made_) Ip({"netns", "del", name});
    } catch (const std::exception& e) {  // `ip` did not start: nothing more to do here
      WARN("removing network namespaces " << name_a_ << ", " << name_b_ << ": " << e.what());
    }
  }

  NamespacePair(const NamespacePair&) = delete;
  NamespacePair& operator=(const NamespacePair&) = delete;

  const std::string& address_a() const { return address_a_; }
  const std::string& address_b() const { return address_b_; }
  // The command prefix that runs a program in namespace a (b): a Daemon's wrapper.
  std::vector<std::string> ExecInA() const { return {ip_, "netns", "exec", name_a_}; }
  std::vector<std::string> ExecInB() const { return {ip_, "netns", "exec", name_b_}; }

 private:
  NamespacePair(std::string ip, std::string dir, std::string name_a, std::string name_b,
                std::string address_a, std::string address_b)
      : ip_(std::move(ip)),
        dir_(std::move(dir)),
        name_a_(std::move(name_a)),
        name_b_(std::move(name_b)),
        address_a_(std::move(address_a)),
        address_b_(std::move(address_b)) {}

  ProcessOutput Ip(std::vector<std::string> args) const {
    args.insert(args.begin(), ip_);
    return RunToExit(args, dir_, std::chrono::seconds(20));
  }

  void Require(const std::vector<std::string>& args) const {
    const ProcessOutput out = Ip(args);
    std::string command = ip_;
    for (const std::string& arg : args) command += " " + arg;
    INFO(command << " (exit " << out.exit_code << "): " << out.err);
    REQUIRE(out.exit_code == 0);
  }

  std::string ip_;
  std::string dir_;
  std::string name_a_;
  std::string name_b_;
  std::string address_a_;
  std::string address_b_;
  std::vector<std::string> made_;  // namespaces made, to delete
};

// The network namespace of a process (a link such as "net:[4026531840]").
std::string NetNamespaceOf(const std::string& pid) {
  const std::string link = "/proc/" + pid + "/ns/net";
  char target[128];
  const ssize_t n = readlink(link.c_str(), target, sizeof(target));
  INFO(link);
  REQUIRE(n > 0);
  return std::string(target, static_cast<size_t>(n));
}

// Checks that the daemons run in two network namespaces, neither of them the test's.
void CheckSeparateNamespaces(const Daemon& a, const Daemon& b) {
  const std::string mine = NetNamespaceOf("self");
  const std::string of_a = NetNamespaceOf(std::to_string(a.pid()));
  const std::string of_b = NetNamespaceOf(std::to_string(b.pid()));
  CHECK(of_a != mine);
  CHECK(of_b != mine);
  CHECK(of_a != of_b);
}

// Two node daemons (not started) from one per-test CA: node-a in namespace a serving
// peers on its veth address, node-b likewise in b.
struct NamespacedNodes {
  TempDir tmp;
  std::unique_ptr<NamespacePair> net;
  std::unique_ptr<Daemon> a;  // after `net`: the daemons stop before the namespaces go
  std::unique_ptr<Daemon> b;
};

// The nodes, or null (with a SKIP warning saying why) where this machine cannot make
// network namespaces.
std::unique_ptr<NamespacedNodes> MakeNamespacedNodes() {
  auto nodes = std::make_unique<NamespacedNodes>();
  std::string why;
  nodes->net = NamespacePair::Create(nodes->tmp.path(), &why);
  if (nodes->net == nullptr) {
    WARN("SKIP: " << why << "; the network-namespace test did not run");
    return nullptr;
  }
  const std::string dir = nodes->tmp.path();
  const std::string certs = dir + "/certs";
  REQUIRE(NewPosixEnv()->CreateDirs(certs).ok());
  const TestKeypair ca = MakeTestCa(certs, "ca");
  const NamespacePair& net = *nodes->net;
  nodes->a = NodeDaemon(dir + "/a", certs, ca, "node-a", net.address_a(), net.ExecInA());
  nodes->b = NodeDaemon(dir + "/b", certs, ca, "node-b", net.address_b(), net.ExecInB());
  return nodes;
}

TEST_CASE("two nodes in two network namespaces serve one job: each rank its slice, every sample once") {
  const auto nodes = MakeNamespacedNodes();
  if (nodes == nullptr) return;
  Daemon& a = *nodes->a;
  Daemon& b = *nodes->b;
  constexpr uint32_t kSamples = 203;
  auto client_a = StartWithSyntheticDataset(a, kSamples);
  auto client_b = StartWithSyntheticDataset(b, kSamples);
  CheckSeparateNamespaces(a, b);
  CheckOneJobOnTwoNodes(a, *client_a, b, *client_b, PeerAddress(a, nodes->net->address_a()),
                        kSamples, "node-b");
}

TEST_CASE("ranks on nodes in two network namespaces share the coordinator's key-value store") {
  const auto nodes = MakeNamespacedNodes();
  if (nodes == nullptr) return;
  Daemon& a = *nodes->a;
  Daemon& b = *nodes->b;
  a.Start();
  b.Start();
  CheckSeparateNamespaces(a, b);
  ::setenv("EMBER_COORDINATOR", PeerAddress(a, nodes->net->address_a()).c_str(), 1);
  auto client_a = a.Connect();
  auto client_b = b.Connect();
  CheckSharedKeyValueStore(*client_a, *client_b, b);
  ::unsetenv("EMBER_COORDINATOR");
}

// A folder of `count` JPEGs in two classes, each image its own (so bytes tell them apart).
std::string WritePhotos(const std::string& root, int count) {
  for (int i = 0; i < count; ++i) {
    const std::string dir = root + (i % 2 == 0 ? "/ant" : "/bee");
    std::filesystem::create_directories(dir);
    daemon::TestImage image = daemon::GradientImage(320 + i % 7, 240 + i % 5);
    image.pixels[0] = static_cast<uint8_t>(i);
    WriteTestFile(dir + "/" + std::to_string(i) + ".jpg", daemon::EncodeJpeg(image));
  }
  return root;
}

DatasetSpec PhotosSpec(const std::string& root) {
  DatasetSpec spec{"photos", "imagefolder", root, "train"};
  // Random crops and flips: a worker must decode with the stream's seed and epoch.
  spec.pipeline =
      "steps:\n  - random_resized_crop: {size: 96}\n  - horizontal_flip: {p: 0.5}\n";
  return spec;
}

// Every row (image bytes) a stream of `options` reads through `daemon`'s `client`, by
// (epoch, sample id); `midway` runs after the first few batches.
std::map<std::pair<uint64_t, int64_t>, std::string> ReadRows(Client& client, const Daemon& daemon,
                                                             StreamOptions options,
                                                             const std::function<void()>& midway) {
  options.sample_ids = true;
  auto reader = client.OpenStream(options);
  REQUIRE(reader.ok());
  std::map<std::pair<uint64_t, int64_t>, std::string> rows;
  int batches = 0;
  while (!(*reader)->ended()) {
    auto next = (*reader)->Next();
    if (!next.ok()) FAIL(next.status().ToString() << "; emberd's log:\n" << daemon.log());
    if (!next->has_value()) continue;
    const RawBatch& b = **next;
    const RawTensor* image = nullptr;
    const RawTensor* ids = nullptr;
    for (const RawTensor& t : b.tensors) {
      if (t.name == "image") image = &t;
      if (t.name == "sample_id") ids = &t;
    }
    REQUIRE(image != nullptr);
    REQUIRE(ids != nullptr);
    const uint64_t row = image->nbytes / b.num_samples;
    for (uint32_t r = 0; r < b.num_samples; ++r) {
      const int64_t id = static_cast<const int64_t*>(ids->data)[r];
      const auto* data = static_cast<const char*>(image->data) + r * row;
      CHECK(rows.emplace(std::pair{b.epoch, id}, std::string(data, row)).second);  // once
    }
    if (++batches == 3 && midway) midway();
  }
  return rows;
}

TEST_CASE("a node decodes with a worker node's cores; the worker killed mid-epoch loses its part") {
  auto nodes = std::make_unique<NamespacedNodes>();
  std::string why;
  nodes->net = NamespacePair::Create(nodes->tmp.path(), &why);
  if (nodes->net == nullptr) {
    WARN("SKIP: " << why << "; the network-namespace test did not run");
    return;
  }
  const std::string dir = nodes->tmp.path();
  const std::string certs = dir + "/certs";
  REQUIRE(NewPosixEnv()->CreateDirs(certs).ok());
  const TestKeypair ca = MakeTestCa(certs, "ca");
  const NamespacePair& net = *nodes->net;
  constexpr int kWorkerPort = 7411;  // fixed: the worker comes back on it after its kill
  const std::string worker = net.address_b() + ":" + std::to_string(kWorkerPort);
  // Node b lends its decode pool; node a (the trainer's) sends it parts of its batches.
  nodes->b = NodeDaemon(dir + "/b", certs, ca, "node-b", net.address_b(), net.ExecInB(),
                        kWorkerPort, "lend_decode: true\ndecode_threads: 1\n");
  nodes->a = NodeDaemon(dir + "/a", certs, ca, "node-a", net.address_a(), net.ExecInA(), 0,
                        "decode_workers: [" + worker + "]\ndecode_threads: 1\n");
  Daemon& a = *nodes->a;
  Daemon& b = *nodes->b;
  const std::string photos = WritePhotos(dir + "/photos", 96);
  b.Start();
  a.Start();
  CheckSeparateNamespaces(a, b);
  auto client_a = a.Connect();
  auto client_b = b.Connect();
  REQUIRE(client_a->AddDataset(PhotosSpec(photos)).ok());
  REQUIRE(client_b->AddDataset(PhotosSpec(photos)).ok());

  StreamOptions options = ReaderOptions("remote-decode", 8, 2, "photos");
  options.seed = 21;
  bool killed = false;
  const auto trained = ReadRows(*client_a, a, options, [&] {
    b.Kill();  // SIGKILL mid-epoch
    killed = true;
  });
  REQUIRE(killed);
  // Every sample once per epoch (ReadRows checks "once"), both epochs whole.
  CHECK(trained.size() == 2 * 96);
  auto status = client_a->GetStatus();
  REQUIRE(status.ok());
  REQUIRE(status->decode_workers.size() == 1);
  CHECK(status->decode_workers[0].address == worker);
  CHECK(status->decode_workers[0].rows > 0);          // it decoded part before it died
  CHECK(status->decode_workers[0].failed_calls > 0);  // and its calls then failed

  // Restarted, it gets its share again; the rows equal node b's own decoding of the same
  // samples with the same seed and epochs.
  b.Start();
  auto client_b2 = b.Connect();
  const uint64_t before = status->decode_workers[0].rows;
  // It is tried again after a backoff (1 s, doubling while it stays down): read until then.
  bool back = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(40);
  for (int run = 0; !back && std::chrono::steady_clock::now() < deadline; ++run) {
    options.job = "remote-decode-again-" + std::to_string(run);
    CHECK(ReadRows(*client_a, a, options, {}) == trained);
    auto later = client_a->GetStatus();
    REQUIRE(later.ok());
    back = later->decode_workers[0].rows > before && later->decode_workers[0].up;
  }
  CHECK(back);
  options.job = "local-on-b";
  const auto local = ReadRows(*client_b2, b, options, {});
  CHECK(local == trained);
}

}  // namespace
}  // namespace ember::testing
