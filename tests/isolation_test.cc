// Users on a shared node (issue 13): what one uid registers or runs, another cannot see,
// remove, stream, join, read or write, and one uid cannot take the memory every other
// needs. emberd runs as root (as CI does); the clients run as real other uids, in forked
// children (tests/support/as_user.h).
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/temp_dir_testing.h"
#include "tests/support/as_user.h"
#include "tests/support/hostile_client.h"
#include "tests/support/multinode_testing.h"
#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

const User kAlice{2001, 2001, {2001}};
const User kBob{2002, 2002, {2002}};
const User kRoot{0, 0, {0}};
constexpr gid_t kUsersGroup = 100;  // Debian's "users"

// A private emberd whose socket every uid may connect to (what the unit's group does).
class SharedDaemon {
 public:
  explicit SharedDaemon(std::vector<std::string> config_yaml = {}) : daemon_(MakeDaemon(config_yaml)) {
    daemon_->Start();
    chmod(daemon_->dir().c_str(), 0755);
    chmod(daemon_->socket().c_str(), 0777);
  }
  Daemon& operator*() { return *daemon_; }
  Daemon* operator->() { return daemon_.get(); }

 private:
  static std::unique_ptr<Daemon> MakeDaemon(const std::vector<std::string>& yaml) {
    if (yaml.empty()) return std::make_unique<Daemon>();
    TempDir* dir = new TempDir();  // leaked on purpose: removed by the OS's /tmp cleanup
    chmod(dir->path().c_str(), 0755);
    return std::make_unique<Daemon>(dir->path(), WriteDaemonConfig(dir->path(), yaml[0]));
  }
  std::unique_ptr<Daemon> daemon_;
};

std::unique_ptr<Client> ConnectTo(const std::string& socket) {
  ClientOptions options;
  options.socket_path = socket;
  options.call_timeout = std::chrono::seconds(30);
  auto client = Client::Connect(options);
  if (!client.ok()) throw std::runtime_error(client.status().ToString());
  return std::move(client).value();
}

std::string Code(const Status& s) { return s.ok() ? "ok" : s.ToString(); }

template <typename T>
std::string Code(const Result<T>& r) {
  return Code(r.ok() ? Status::Ok() : r.status());
}

// Resident memory of `pid` in bytes (VmRSS).
uint64_t RssOf(pid_t pid) {
  const std::string status = ReadFileOrEmpty("/proc/" + std::to_string(pid) + "/status");
  const size_t at = status.find("VmRSS:");
  if (at == std::string::npos) return 0;
  return std::stoull(status.substr(at + 6)) * 1024;
}

// A directory of `owner`'s (mode 0700) holding a tokens file (64 uint16 tokens, mode 0600).
class UserData {
 public:
  explicit UserData(const User& owner, size_t num_tokens = 64) {
    chmod(dir_.path().c_str(), 0700);
    std::vector<uint16_t> tokens(num_tokens);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>(i);
    WriteTestFile(tokens_path(), std::string(reinterpret_cast<const char*>(tokens.data()),
                                             tokens.size() * sizeof(uint16_t)));
    chmod(tokens_path().c_str(), 0600);
    REQUIRE(chown(tokens_path().c_str(), owner.uid, owner.gid) == 0);
    REQUIRE(chown(dir_.path().c_str(), owner.uid, owner.gid) == 0);
  }
  std::string dir() const { return dir_.path(); }
  std::string tokens_path() const { return dir_.path() + "/tokens.bin"; }

 private:
  TempDir dir_;
};

DatasetSpec TokensSpec(const std::string& name, const std::string& path, bool shared = false,
                       int seq_len = 4) {
  DatasetSpec spec;
  spec.name = name;
  spec.format = "tokens";
  spec.path = path;
  spec.pipeline = "tokens: {seq_len: " + std::to_string(seq_len) + "}";
  spec.shared = shared;
  return spec;
}

// `rank` of 2 of `job`, until the reader is destroyed.
StreamOptions Rank(const std::string& job, const std::string& dataset, uint32_t rank,
                   uint32_t batch = 2) {
  StreamOptions o = ReaderOptions(job, batch, 0, dataset);
  o.rank = rank;
  o.world_size = 2;
  return o;
}

#define SKIP_UNLESS_ROOT()                                              \
  if (!CanSwitchUsers()) {                                              \
    WARN("skipped: switching to other uids needs root (CI runs as root)"); \
    return;                                                             \
  }

TEST_CASE("a user cannot register a file it could not read, through a symlink neither") {
  SKIP_UNLESS_ROOT();
  SharedDaemon daemon;
  const std::string socket = daemon->socket();
  UserData roots(kRoot);  // a mode-600 file only root may read
  UserData bobs(kBob);
  const std::string link = bobs.dir() + "/corpus.bin";
  REQUIRE(symlink(roots.tokens_path().c_str(), link.c_str()) == 0);
  lchown(link.c_str(), kBob.uid, kBob.gid);

  const std::string direct = RunAs(kBob, [&] {
    return Code(ConnectTo(socket)->AddDataset(TokensSpec("stolen", roots.tokens_path())));
  });
  INFO(direct);
  CHECK(direct.rfind("permission_denied: dataset 'stolen': ", 0) == 0);
  CHECK(direct.find(roots.tokens_path() + ": permission denied for uid 2002 (search " + roots.dir() + ")") != std::string::npos);

  const std::string linked = RunAs(kBob, [&] {
    return Code(ConnectTo(socket)->AddDataset(TokensSpec("stolen", link)));
  });
  INFO(linked);
  CHECK(linked.rfind("permission_denied: ", 0) == 0);
  CHECK(linked.find(link + ": permission denied for uid 2002 (search " + roots.dir() + ")") != std::string::npos);

  // Nor does the daemon's capability tell Bob which names exist in root's closed
  // directory (issue 36, item 9): a file there and a missing one read the same.
  const std::string probed = RunAs(kBob, [&] {
    auto c = ConnectTo(socket);
    const std::string absent = roots.dir() + "/missing.bin";
    std::string there = Code(c->AddDataset(TokensSpec("p", roots.tokens_path())));
    std::string missing = Code(c->AddDataset(TokensSpec("p", absent)));
    there.replace(there.find(roots.tokens_path()), roots.tokens_path().size(), "PATH");
    missing.replace(missing.find(absent), absent.size(), "PATH");
    return there == missing ? "same" : there + "\n" + missing;
  });
  CHECK(probed == "same");

  // Bob's own file registers; root registers its own too.
  CHECK(RunAs(kBob, [&] { return Code(ConnectTo(socket)->AddDataset(TokensSpec("mine", bobs.tokens_path()))); }) == "ok");
  CHECK(RunAs(kRoot, [&] { return Code(ConnectTo(socket)->AddDataset(TokensSpec("roots", roots.tokens_path()))); }) == "ok");
  INFO(daemon->log());
  CHECK(RunAs(kBob, [&] {
          auto all = ConnectTo(socket)->ListDatasets();
          std::string names;
          for (const auto& d : *all) names += d.spec.name + ",";
          return names;
        }) == "mine,");
}

TEST_CASE("only root and emberd's own uid may register a dataset read with emberd's S3 credentials") {
  SKIP_UNLESS_ROOT();
  SharedDaemon daemon;
  const std::string socket = daemon->socket();
  auto s3_spec = [](const std::string& path) {
    DatasetSpec spec;
    spec.name = "s3-shards";
    spec.format = "webdataset";
    spec.path = path;
    return spec;
  };
  for (const std::string path : {"s3://data/train/", "s3+http://127.0.0.1:1/data/a.tar"}) {
    const std::string bob = RunAs(kBob, [&] { return Code(ConnectTo(socket)->AddDataset(s3_spec(path))); });
    INFO(bob);
    CHECK(bob.rfind("permission_denied: ", 0) == 0);
    CHECK(bob.find(path + ": an S3 dataset is read with emberd's own S3 credentials, so only root "
                   "and emberd's user (uid " + std::to_string(geteuid()) + ") may register one "
                   "on this shared emberd, not uid 2002") != std::string::npos);
  }
  // A dataset's own endpoint gets requests signed with them too.
  DatasetSpec elsewhere = s3_spec("s3://data/train/");
  elsewhere.endpoint = "http://127.0.0.1:1";
  const std::string bob = RunAs(kBob, [&] { return Code(ConnectTo(socket)->AddDataset(elsewhere)); });
  INFO(bob);
  CHECK(bob.rfind("permission_denied: ", 0) == 0);
  // Root gets past the check (to this emberd's lack of credentials: its environment has none).
  const std::string root = RunAs(kRoot, [&] { return Code(ConnectTo(socket)->AddDataset(s3_spec("s3://data/train/"))); });
  INFO(root);
  CHECK(root.find("emberd has no S3 credentials") != std::string::npos);
}

TEST_CASE("another user's dataset is not listed, inspected, removed or streamed") {
  SKIP_UNLESS_ROOT();
  SharedDaemon daemon;
  const std::string socket = daemon->socket();
  UserData alices(kAlice);
  REQUIRE(RunAs(kAlice, [&] {
            auto c = ConnectTo(socket);
            std::string r = Code(c->AddDataset(TokensSpec("alices", alices.tokens_path())));
            return r + " " + Code(c->AddDataset(TokensSpec("open", alices.tokens_path(), true)));
          }) == "ok ok");

  const std::string seen = RunAs(kBob, [&] {
    auto c = ConnectTo(socket);
    std::string out;
    auto listed = c->ListDatasets();
    if (!listed.ok()) return listed.status().ToString();
    for (const auto& d : *listed) out += d.spec.name + ",";
    out += " inspect=" + Code(c->InspectDataset("alices"));
    out += " rm=" + Code(c->RemoveDataset("alices"));
    out += " stream=" + Code(c->OpenStream(Rank("bobs-job", "alices", 0)));
    out += " shared=" + Code(c->OpenStream(Rank("bobs-job2", "open", 0)));
    out += " rm-shared=" + Code(c->RemoveDataset("open"));
    return out;
  });
  CHECK(seen ==
        "open, inspect=not_found: dataset 'alices' not found"
        " rm=not_found: dataset 'alices' not found"
        " stream=not_found: stream for job 'bobs-job' rank 0: dataset 'alices' not found"
        " shared=ok rm-shared=permission_denied: dataset 'open' belongs to uid 2001");
  // Byte for byte what a dataset that does not exist says.
  CHECK(RunAs(kBob, [&] {
          auto c = ConnectTo(socket);
          return Code(c->InspectDataset("nobody-has")) + " " +
                 Code(c->OpenStream(Rank("bobs-job", "nobody-has", 0)));
        }) ==
        "not_found: dataset 'nobody-has' not found"
        " not_found: stream for job 'bobs-job' rank 0: dataset 'nobody-has' not found");
  CHECK(RunAs(kAlice, [&] { return Code(ConnectTo(socket)->InspectDataset("alices")); }) == "ok");
  // Nor described, nor its registration followed.
  CHECK(RunAs(kBob, [&] {
          auto c = ConnectTo(socket);
          return Code(c->DescribeDataset("alices")) + " " + Code(c->DescribeDataset("open")) +
                 " " + Code(c->GetRegistrationProgress("alices"));
        }) ==
        "not_found: dataset 'alices' not found ok"
        " not_found: no registration of dataset 'alices' in progress");
}

TEST_CASE("the shard cache is the node's: a user lists it, only root and emberd clear it") {
  SKIP_UNLESS_ROOT();
  SharedDaemon daemon;
  const std::string socket = daemon->socket();
  CHECK(RunAs(kBob, [&] {
          auto c = ConnectTo(socket);
          Result<ShardCacheStatus> cache = c->GetShardCache();
          return Code(cache) + " " + (cache.ok() ? std::to_string(cache->listed.size()) : "") +
                 " " + Code(c->ClearShardCache());
        }) ==
        "ok 0 permission_denied: the shard cache is the node's, shared by every user's "
        "datasets: only root and emberd's own user may clear it, not uid 2002");
  CHECK(RunAs(kRoot, [&] { return Code(ConnectTo(socket)->ClearShardCache()); }) == "ok");
}

TEST_CASE("each user names datasets in its own namespace; shared ones are everyone's") {
  SKIP_UNLESS_ROOT();
  SharedDaemon daemon;
  const std::string socket = daemon->socket();
  UserData alices(kAlice, 64), bobs(kBob, 128);
  REQUIRE(RunAs(kAlice, [&] {
            auto c = ConnectTo(socket);
            std::string r = Code(c->AddDataset(TokensSpec("a-big", alices.tokens_path())));
            return r + " " + Code(c->AddDataset(TokensSpec("common", alices.tokens_path(), true)));
          }) == "ok ok");
  // Registering Alice's private name tells Bob nothing (it was already_exists, an
  // existence oracle): he gets a dataset of his own by that name. A shared name is
  // everyone's: taken, as he can see.
  const std::string bob_saw = RunAs(kBob, [&] {
    auto c = ConnectTo(socket);
    auto mine = c->AddDataset(TokensSpec("a-big", bobs.tokens_path()));
    std::string out = Code(mine);
    if (mine.ok()) out += " " + mine->spec.name + " " + std::to_string(mine->count);
    out += " shared-again=" + Code(c->AddDataset(TokensSpec("common", bobs.tokens_path(), true)));
    auto common = c->InspectDataset("common");
    out += " common-owner=" + (common.ok() ? std::to_string(common->owner_uid) : Code(common));
    // Once Bob has a "common" of his own, that is what the name means to him.
    out += " own-common=" + Code(c->AddDataset(TokensSpec("common", bobs.tokens_path())));
    common = c->InspectDataset("common");
    out += " common-owner=" + (common.ok() ? std::to_string(common->owner_uid) : Code(common));
    auto listed = c->ListDatasets();
    out += " listed=";
    for (const auto& d : *listed) out += d.spec.name + "/" + std::to_string(d.owner_uid) + ",";
    auto reader = c->OpenStream(Rank("j", "a-big", 0));
    out += " stream=" + Code(reader);
    out += " rm=" + Code(c->RemoveDataset("a-big"));
    return out;
  });
  CHECK(bob_saw ==
        "ok a-big 31 shared-again=already_exists: dataset 'common' already exists "
        "common-owner=2001 own-common=ok common-owner=2002 "
        "listed=common/2001,a-big/2002,common/2002, stream=ok rm=ok");
  // Alice's are untouched; root sees every key.
  CHECK(RunAs(kAlice, [&] {
          auto c = ConnectTo(socket);
          auto info = c->InspectDataset("a-big");
          return Code(info) + " " + (info.ok() ? std::to_string(info->count) : "");
        }) == "ok 15");
  CHECK(RunAs(kRoot, [&] {
          auto listed = ConnectTo(socket)->ListDatasets();
          if (!listed.ok()) return listed.status().ToString();
          std::string out;
          for (const auto& d : *listed) out += d.spec.name + " ";
          return out;
        }) == "common ~2001/a-big ~2002/common ");
}


// Alice runs rank 0 of 2 of job "train" (a stream, a rendezvous key, a pending
// shared-memory segment) and waits at a checkpoint while Bob tries her job.
std::unique_ptr<AsUser> StartAlicesJob(const std::string& socket, const std::string& dataset) {
  auto alice = std::make_unique<AsUser>(kAlice, [socket, dataset](const AsUser::Checkpoint& checkpoint) {
    auto c = ConnectTo(socket);
    auto reader = c->OpenStream(Rank("train", dataset, 0));
    if (!reader.ok()) return "stream: " + reader.status().ToString();
    Status set = c->KvSet("train", "gloo/addr", "10.0.0.1:1234");
    if (!set.ok()) return "kv: " + set.ToString();
    auto segment = c->OpenSharedMemory("train", "grads", 0, 2, 4096);
    if (!segment.ok()) return "segment: " + segment.status().ToString();
    checkpoint("running");
    auto value = c->KvGet("train", "gloo/addr", std::chrono::milliseconds(0));
    close(*segment);
    return value.ok() ? *value : value.status().ToString();
  });
  REQUIRE(alice->Next() == "running");
  return alice;
}

TEST_CASE("another user's job name is a job of one's own: its keys and segments untouched") {
  SKIP_UNLESS_ROOT();
  SharedDaemon daemon;
  const std::string socket = daemon->socket();
  UserData alices(kAlice);
  REQUIRE(RunAs(kAlice, [&] {
            return Code(ConnectTo(socket)->AddDataset(TokensSpec("shared", alices.tokens_path(), true)));
          }) == "ok");
  auto alice = StartAlicesJob(socket, "shared");

  // To Bob, Alice's job is one that does not exist: what he does with the name, he does
  // to a job of his own, exactly as with a name nobody has.
  const std::string tried = RunAs(kBob, [&] {
    auto c = ConnectTo(socket);
    std::vector<std::unique_ptr<StreamReader>> readers;
    std::vector<int> segments;
    auto as = [&](const std::string& job) {
      auto reader = c->OpenStream(Rank(job, "shared", 1));
      std::string out = "stream=" + Code(reader);
      if (reader.ok()) readers.push_back(std::move(reader).value());
      out += " get=" + Code(c->KvGet(job, "gloo/addr", std::chrono::milliseconds(0)));
      out += " set=" + Code(c->KvSet(job, "gloo/addr", "6.6.6.6:1"));
      auto segment = c->OpenSharedMemory(job, "grads", 1, 2, 4096);
      out += " segment=" + Code(segment);
      if (segment.ok()) segments.push_back(*segment);
      for (size_t at; (at = out.find("'" + job + "'")) != std::string::npos;)
        out.replace(at, job.size() + 2, "NAME");
      return out;
    };
    const std::string train = as("train"), untouched = as("untouched");
    if (train != untouched) return "'train': " + train + "\n'untouched': " + untouched;
    auto status = c->GetStatus();
    std::string out = train + "\nseen:";
    for (const auto& job : status->jobs) out += " " + job.job;
    for (const auto& stream : status->streams) out += " " + stream.job;
    for (const auto& segment : status->pending_segments) out += " " + segment.job;
    for (int fd : segments) close(fd);
    return out;
  });
  CHECK(tried ==
        "stream=ok get=deadline_exceeded: waiting for key 'gloo/addr' of job NAME: timed out "
        "after 0 ms set=ok segment=ok\n"
        "seen: train untouched train untouched train untouched");

  // Root sees everything, each user's jobs under its uid; Alice's key is untouched.
  CHECK(RunAs(kRoot, [&] {
          auto status = ConnectTo(socket)->GetStatus();
          std::string out;
          for (const auto& job : status->jobs) out += job.job + " ";
          return out;
        }) == "~2001/train ~2002/train ~2002/untouched ");
  alice->Continue();
  CHECK(alice->Next() == "10.0.0.1:1234");
}

TEST_CASE("one user's huge worlds are refused; another's status still answers") {
  SKIP_UNLESS_ROOT();
  SharedDaemon daemon;
  const std::string socket = daemon->socket();
  UserData bobs(kBob, 4096);
  const std::string tried = RunAs(kBob, [&] {
    auto c = ConnectTo(socket);
    if (auto added = c->AddDataset(TokensSpec("b", bobs.tokens_path())); !added.ok())
      return added.status().ToString();
    StreamOptions wide = Rank("w", "b", 0);
    wide.world_size = 16777216;
    StreamOptions rejoin = Rank("r", "b", 0);
    rejoin.rejoin = true;
    rejoin.rejoin_received = ~uint64_t{0};
    return Code(c->OpenSharedMemory("w", "grads", 0, 16777216, 4096)) + "\n" +
           Code(c->OpenStream(wide)) + "\n" + Code(c->OpenStream(rejoin));
  });
  CHECK(tried ==
        "invalid_argument: job 'w': shared memory 'grads': world_size: 16777216 is more than "
        "65536 ranks (max_world_size)\n"
        "invalid_argument: stream for job 'w' rank 0: world_size: 16777216 is more than 65536 "
        "ranks (max_world_size)\n"
        "invalid_argument: stream for job 'r' rank 0: rejoin_received: 18446744073709551615 is "
        "more than the 256 batches a rank of 2 gets of dataset 'b' in an epoch");
  CHECK(RunAs(kAlice, [&] { return Code(ConnectTo(socket)->GetStatus()); }) == "ok");

  // The largest worlds allowed: a status lists 1024 of their ranks and counts the rest,
  // so root's status does not grow with what every user's jobs could hold.
  UserData bigger(kBob, 65536 * 4 + 4);  // a sample for each rank (seq_len + 1 tokens)
  AsUser wide(kBob, [&](const AsUser::Checkpoint& checkpoint) {
    auto c = ConnectTo(socket);
    if (auto added = c->AddDataset(TokensSpec("big", bigger.tokens_path())); !added.ok())
      return added.status().ToString();
    StreamOptions o = Rank("w", "big", 0, 1);
    o.world_size = 65536;
    auto reader = c->OpenStream(o);
    auto segment = c->OpenSharedMemory("w", "grads", 0, 65536, 4096);
    checkpoint(Code(reader) + " " + Code(segment));
    if (segment.ok()) close(*segment);
    return std::string("done");
  });
  REQUIRE(wide.Next() == "ok ok");
  const std::string seen = RunAs(kRoot, [&] {
    auto status = ConnectTo(socket)->GetStatus();
    if (!status.ok() || status->jobs.size() != 1 || status->pending_segments.size() != 1)
      return Code(status);
    const JobStatus& job = status->jobs[0];
    const PendingSegmentStatus& segment = status->pending_segments[0];
    return std::to_string(job.ranks.size()) + " " + std::to_string(job.ranks_unlisted) + " " +
           std::to_string(job.ranks_joined) + " " + std::to_string(segment.missing_ranks.size()) +
           " " + std::to_string(segment.missing_unlisted);
  });
  CHECK(seen == "1024 64512 1 1024 64511");
  CHECK(RunAs(kAlice, [&] {
          auto status = ConnectTo(socket)->GetStatus();
          return Code(status) + " " + std::to_string(status->jobs.size()) + " " +
                 std::to_string(status->pending_segments.size());
        }) == "ok 0 0");
  wide.Continue();
  CHECK(wide.Next() == "done");
}

TEST_CASE("a user who truncates its own file ends its streams; emberd lives on") {
  SKIP_UNLESS_ROOT();
  SharedDaemon daemon;
  const std::string socket = daemon->socket();
  UserData bobs(kBob, size_t{1} << 20);  // 2 MiB of tokens
  UserData alices(kAlice);
  const std::string tried = RunAs(kBob, [&] {
    auto c = ConnectTo(socket);
    if (auto added = c->AddDataset(TokensSpec("b", bobs.tokens_path(), false, 64)); !added.ok())
      return added.status().ToString();
    StreamOptions o = ReaderOptions("cut", 16, 0, "b");
    auto reader = c->OpenStream(o);
    if (!reader.ok()) return reader.status().ToString();
    if (!(*reader)->Next().ok()) return std::string("no first batch");
    if (truncate(bobs.tokens_path().c_str(), 4096) != 0) return std::string("truncate failed");
    for (int i = 0; i < 100000; ++i) {  // what the ring held, then the error
      auto batch = (*reader)->Next();
      if (!batch.ok()) return batch.status().ToString();
    }
    return std::string("no error");
  });
  CHECK_THAT(tried, Catch::StartsWith("data_loss: ") &&
                        Catch::Contains(bobs.tokens_path() + ": the file shrank below the"));
  int wait_status = 0;  // was: exit 135 (SIGBUS), every user's streams cut
  CHECK(waitpid(daemon->pid(), &wait_status, WNOHANG) == 0);
  CHECK(RunAs(kAlice, [&] {
          auto c = ConnectTo(socket);
          return Code(c->AddDataset(TokensSpec("a", alices.tokens_path()))) + " " +
                 Code(c->GetStatus());
        }) == "ok ok");
}

TEST_CASE("a user's sparse file cannot fill the daemon: its in-memory sets are charged to it") {
  SKIP_UNLESS_ROOT();
  SharedDaemon daemon({"user_limits: {dataset_memory: 256MiB}\n"});
  const std::string socket = daemon->socket();
  const uint64_t rss_before = RssOf(daemon->pid());
  // Bob's idx set: 8 KB on disk, its images file 972 MB apparent (the finding: emberd
  // held 1.01 GB registering it and ~1 GB streaming it).
  UserData bobs(kBob);
  const std::string images = bobs.dir() + "/train-images-idx3-ubyte";
  std::string header("\0\0\x08\x03", 4);
  for (uint32_t d : {60000u, 90u, 180u})
    for (int shift = 24; shift >= 0; shift -= 8) header.push_back(static_cast<char>(d >> shift));
  WriteTestFile(images, header);
  REQUIRE(truncate(images.c_str(), 16 + uint64_t{60000} * 90 * 180) == 0);
  std::string labels("\0\0\x08\x01", 4);
  for (int shift = 24; shift >= 0; shift -= 8) labels.push_back(static_cast<char>(60000u >> shift));
  WriteTestFile(bobs.dir() + "/train-labels-idx1-ubyte", labels + std::string(60000, 1));
  for (const std::string& file : {images, bobs.dir() + "/train-labels-idx1-ubyte"})
    REQUIRE(chown(file.c_str(), kBob.uid, kBob.gid) == 0);
  const std::string tried = RunAs(kBob, [&] {
    return Code(ConnectTo(socket)->AddDataset({"sparse", "idx", bobs.dir(), "train"}));
  });
  CHECK(tried == "resource_exhausted: dataset 'sparse': " + images +
                     ": holding its 972000016 bytes in memory would take uid 2002's datasets "
                     "from 0 to more than its 268435456 bytes (user_limits.dataset_memory)");
  const uint64_t rss_after = RssOf(daemon->pid());
  INFO("rss before " << rss_before << ", after " << rss_after);
  CHECK(rss_after < rss_before + (uint64_t{64} << 20));
  // Alice's set, which fits her own share, registers and streams.
  UserData alices(kAlice);
  WriteSyntheticIdx(alices.dir(), "train", 64);
  for (const char* name : {"/train-images-idx3-ubyte.gz", "/train-labels-idx1-ubyte.gz"})
    REQUIRE(chown((alices.dir() + name).c_str(), kAlice.uid, kAlice.gid) == 0);
  CHECK(RunAs(kAlice, [&] {
          auto c = ConnectTo(socket);
          if (auto added = c->AddDataset({"small", "idx", alices.dir(), "train"}); !added.ok())
            return added.status().ToString();
          auto reader = c->OpenStream(ReaderOptions("a", 8, 0, "small"));
          if (!reader.ok()) return reader.status().ToString();
          return Code((*reader)->Next());
        }) == "ok");
}

TEST_CASE("members of the share group join each other's jobs") {
  SKIP_UNLESS_ROOT();
  SharedDaemon daemon({"share_group: users\n"});
  const std::string socket = daemon->socket();
  const User alice{kAlice.uid, kAlice.gid, {kAlice.gid, kUsersGroup}};
  const User bob{kBob.uid, kBob.gid, {kBob.gid, kUsersGroup}};
  UserData alices(alice);
  REQUIRE(RunAs(alice, [&] {
            return Code(ConnectTo(socket)->AddDataset(TokensSpec("team", alices.tokens_path())));
          }) == "ok");
  AsUser rank0(alice, [&](const AsUser::Checkpoint& checkpoint) {
    auto c = ConnectTo(socket);
    auto reader = c->OpenStream(Rank("train", "team", 0));
    if (!reader.ok()) return reader.status().ToString();
    checkpoint("running");
    return std::string("done");
  });
  REQUIRE(rank0.Next() == "running");
  CHECK(RunAs(bob, [&] {
          auto c = ConnectTo(socket);
          return Code(c->OpenStream(Rank("train", "team", 1))) + " " +
                 Code(c->KvSet("train", "k", "v"));
        }) == "ok ok");
  // Not a member: the team's job is not his; the name is a job of his own.
  CHECK(RunAs(kBob, [&] {
          auto value = ConnectTo(socket)->KvGet("train", "k", std::chrono::milliseconds(0));
          return value.ok() ? *value : value.status().ToString();
        }).rfind("deadline_exceeded", 0) == 0);
  rank0.Continue();
}

TEST_CASE("one user's rings hold at most its share of the budget") {
  SKIP_UNLESS_ROOT();
  SharedDaemon daemon;  // shm_budget 256 MiB; shm_user_share 0.5 by default
  const std::string socket = daemon->socket();
  UserData alices(kAlice, 4 << 20);
  REQUIRE(RunAs(kAlice, [&] {
            return Code(ConnectTo(socket)->AddDataset(TokensSpec("open", alices.tokens_path(), true, 1024)));
          }) == "ok");
  // Rings of 4 slots x batch 1024 windows of 1024 tokens: tens of MiB each.
  AsUser hog(kAlice, [&](const AsUser::Checkpoint& checkpoint) {
    auto c = ConnectTo(socket);
    std::vector<std::unique_ptr<StreamReader>> readers;
    std::string refused;
    for (int i = 0; i < 8 && refused.empty(); ++i) {
      StreamOptions o = Rank("hog" + std::to_string(i), "open", 0, 1024);
      o.world_size = 1;
      auto reader = c->OpenStream(o);
      if (reader.ok()) readers.push_back(std::move(reader).value());
      else refused = reader.status().ToString();
    }
    checkpoint(std::to_string(readers.size()) + " streams; " + refused);
    return std::string("done");
  });
  const std::string hogged = hog.Next();
  INFO(hogged);
  CHECK(hogged.find("resource_exhausted: ") != std::string::npos);
  CHECK(hogged.find("does not fit in the share of uid 2001") != std::string::npos);
  // Bob still gets a ring while Alice holds hers.
  CHECK(RunAs(kBob, [&] {
          StreamOptions o = Rank("bobs", "open", 0, 1024);
          o.world_size = 1;
          return Code(ConnectTo(socket)->OpenStream(o));
        }) == "ok");
  hog.Continue();
}

TEST_CASE("one user's connections are bounded; others still connect") {
  SKIP_UNLESS_ROOT();
  SharedDaemon daemon({"user_limits: {connections: 2}\n"});
  const std::string socket = daemon->socket();
  AsUser bob(kBob, [&](const AsUser::Checkpoint& checkpoint) {
    auto c1 = ConnectTo(socket);
    auto c2 = ConnectTo(socket);
    std::string out = Code(c1->GetStatus()) + " " + Code(c2->GetStatus());
    ClientOptions options;
    options.socket_path = socket;
    options.call_timeout = std::chrono::seconds(10);
    auto c3 = Client::Connect(options);
    out += " third=" + (c3.ok() ? Code((*c3)->GetStatus()) : c3.status().ToString());
    checkpoint(out);
    return std::string("done");
  });
  const std::string seen = bob.Next();
  CHECK(seen.rfind("ok ok third=unavailable: ", 0) == 0);
  CHECK(RunAs(kAlice, [&] { return Code(ConnectTo(socket)->GetStatus()); }) == "ok");
  bob.Continue();
  CHECK(daemon->log().find("uid 2002 has 2 connections, the most one user may open") !=
        std::string::npos);
}

TEST_CASE("one user's half-sent messages are bounded: its connections close, others go on") {
  SKIP_UNLESS_ROOT();
  SharedDaemon daemon;
  const std::string socket = daemon->socket();
  const uint64_t rss_before = RssOf(daemon->pid());
  // Bob opens 10 connections, each announcing a 60 MiB message and sending 1 MiB of it,
  // and keeps them open (the finding: 40 such held 2.43 GB until they went).
  AsUser bob(kBob, [&](const AsUser::Checkpoint& checkpoint) {
    const std::vector<int> fds = SendHalfMessages(socket, 10, 60u << 20, 1u << 20);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    checkpoint("closed=" + std::to_string(CountClosed(fds)));
    for (int fd : fds) close(fd);
    return std::string("done");
  });
  const std::string seen = bob.Next();
  // 256 MiB a user: 4 messages of 60 MiB fit, the other 6 connections are closed.
  CHECK(seen == "closed=6");
  // Alice is served meanwhile, and emberd holds what the 4 fit, not what 10 announced.
  CHECK(RunAs(kAlice, [&] { return Code(ConnectTo(socket)->GetStatus()); }) == "ok");
  const uint64_t rss_held = RssOf(daemon->pid());
  INFO("rss before " << rss_before << ", while bob holds " << rss_held);
  CHECK(rss_held < rss_before + (uint64_t{300} << 20));
  bob.Continue();
  CHECK(bob.Next() == "done");
  CHECK(daemon->log().find("closing a client connection: resource_exhausted: uid 2002: a "
                           "message of 62914560 bytes on top of 251658240") != std::string::npos);
}

TEST_CASE("replies a user never reads are bounded: its calls wait, others are served") {
  SKIP_UNLESS_ROOT();
  SharedDaemon daemon;
  const std::string socket = daemon->socket();
  const uint64_t rss_before = RssOf(daemon->pid());
  // Bob sets a 1 MiB value, then asks for it 800 times and reads no answer (the finding:
  // RSS grew 50 MB -> 868 MB). Everything is pipelined: no call needs an answer first.
  AsUser bob(kBob, [&](const AsUser::Checkpoint& checkpoint) {
    return SendCallsNeverReadReplies(socket, "deaf", 1 << 20, 800, std::chrono::seconds(3),
                                     [&] { checkpoint("held"); });
  });
  REQUIRE(bob.Next() == "held");
  CHECK(RunAs(kAlice, [&] { return Code(ConnectTo(socket)->GetStatus()); }) == "ok");
  const uint64_t rss_held = RssOf(daemon->pid());
  INFO("rss before " << rss_before << ", while bob does not read " << rss_held);
  CHECK(rss_held < rss_before + (uint64_t{64} << 20));
  bob.Continue();
  CHECK(bob.Next() == "");
}

TEST_CASE("a job spanning nodes: another node's user does not reach its store") {
  SKIP_UNLESS_ROOT();
  TestCluster cluster;
  chmod(cluster.tmp.path().c_str(), 0755);
  auto a = cluster.Node("node-a");
  auto b = cluster.Node("node-b");
  a->Start();
  b->Start();
  for (Daemon* d : {a.get(), b.get()}) {
    chmod(d->dir().c_str(), 0755);
    chmod(d->socket().c_str(), 0777);
  }
  const std::string coordinator = PeerAddress(*a);
  const std::string socket_a = a->socket(), socket_b = b->socket();
  AsUser alice(kAlice, [&](const AsUser::Checkpoint& checkpoint) {
    auto c = ConnectTo(socket_a);
    Status set = c->KvSet("train", "gloo/addr", "10.0.0.1:1234");
    checkpoint(Code(set));
    return std::string("done");
  });
  REQUIRE(alice.Next() == "ok");
  auto through_b = [&](const User& user) {
    return RunAs(user, [&] {
      setenv("EMBER_COORDINATOR", coordinator.c_str(), 1);
      auto value = ConnectTo(socket_b)->KvGet("train", "gloo/addr", std::chrono::milliseconds(0));
      return value.ok() ? *value : value.status().ToString();
    });
  };
  // Bob's "train" through node b is his own job at the coordinator, as it would be on a.
  CHECK(through_b(kBob).rfind("deadline_exceeded", 0) == 0);
  CHECK(through_b(kAlice) == "10.0.0.1:1234");
  alice.Continue();
}

}  // namespace
}  // namespace ember::testing
