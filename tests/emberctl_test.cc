// emberctl against a real emberd: registration errors name the file and what is wrong
// and leave the daemon and its catalog as they were; a missing daemon, an unknown
// dataset or a bad argument give a clear message and a non-zero exit; `jobs` and `job
// inspect` show a job's progress per rank. And `emberctl pack`, which needs no daemon,
// with its flags. Remote data: `dataset inspect` of a webdataset over HTTP (source without
// credentials, shards, index memory, what the shard cache holds), `cache` and `cache
// clear`, and `dataset add`'s progress lines while a slow server's shards are indexed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include "common/net_testing.h"
#include "daemon/data/remote/nginx_testing.h"
#include "daemon/data/webdataset/tar_testing.h"
#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

using Run = ProcessOutput;

Run Emberctl(const std::string& dir, std::vector<std::string> args) {
  args.insert(args.begin(), Runfile("tools/emberctl/emberctl"));
  return RunToExit(args, dir);
}

void Truncate(const std::string& path, size_t keep) {
  std::string bytes = ReadFileOrEmpty(path);
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), keep);
}

TEST_CASE("emberctl dataset add rejects truncated and corrupt IDX files") {
  TempDir tmp;
  const std::string& dir = tmp.path();
  const std::string good = dir + "/good", cut = dir + "/cut", bad = dir + "/bad";
  for (const auto& d : {good, cut, bad}) {
    std::filesystem::create_directories(d);
    WriteSyntheticIdx(d, "train", 200);
  }
  // A gzip stream cut in half, and a raw file whose magic is wrong.
  Truncate(cut + "/train-images-idx3-ubyte.gz",
           std::filesystem::file_size(cut + "/train-images-idx3-ubyte.gz") / 2);
  std::filesystem::remove(bad + "/train-labels-idx1-ubyte.gz");
  std::ofstream(bad + "/train-labels-idx1-ubyte", std::ios::binary) << "this is not an IDX file";

  Daemon daemon(dir);
  daemon.Start();
  const std::string sock = "--socket=" + daemon.socket();
  Run add = Emberctl(dir, {sock, "dataset", "add", "ok", "--format", "idx", "--path", good});
  INFO(add.err);
  REQUIRE(add.exit_code == 0);
  const std::string listing = Emberctl(dir, {sock, "dataset", "ls"}).out;

  Run truncated = Emberctl(dir, {sock, "dataset", "add", "cut", "--format", "idx", "--path", cut});
  CHECK(truncated.exit_code != 0);
  CHECK(truncated.err.find(cut + "/train-images-idx3-ubyte.gz") != std::string::npos);
  CHECK((truncated.err.find("truncated") != std::string::npos ||
         truncated.err.find("corrupt") != std::string::npos));

  Run corrupt = Emberctl(dir, {sock, "dataset", "add", "bad", "--format", "idx", "--path", bad});
  CHECK(corrupt.exit_code != 0);
  CHECK(corrupt.err.find(bad + "/train-labels-idx1-ubyte") != std::string::npos);
  CHECK(corrupt.err.find("magic") != std::string::npos);

  Run missing = Emberctl(dir, {sock, "dataset", "add", "gone", "--path", dir + "/nowhere"});
  CHECK(missing.exit_code != 0);
  CHECK(missing.err.find(dir + "/nowhere") != std::string::npos);

  // An s3:// URL reaches emberd as written, not made a path under the working directory
  // (this emberd has no S3 credentials, so it is refused).
  Run s3 = Emberctl(dir, {sock, "dataset", "add", "s3", "--format", "webdataset", "--path",
                          "s3://bucket/train/"});
  INFO(s3.err);
  CHECK(s3.exit_code != 0);
  CHECK(s3.err.find("s3://bucket/train/: ") != std::string::npos);
  CHECK(s3.err.find("/s3:") == std::string::npos);

  // The daemon is up and its catalog unchanged.
  Run after = Emberctl(dir, {sock, "dataset", "ls"});
  CHECK(after.exit_code == 0);
  CHECK(after.out == listing);
  CHECK(kill(daemon.pid(), 0) == 0);
  daemon.Stop();
}

TEST_CASE("emberctl gives up on a daemon that does not answer, after --timeout") {
  TempDir tmp;
  // A socket that takes connections into its backlog and never answers.
  const std::string path = tmp.path() + "/silent.sock";
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(listen(fd, 8) == 0);
  const auto start = std::chrono::steady_clock::now();
  Run silent = Emberctl(tmp.path(), {"--socket", path, "--timeout", "1", "status"});
  close(fd);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  CHECK(silent.exit_code != 0);
  CHECK_THAT(silent.err, Catch::Contains("emberd at " + path + " did not answer within 1000 ms"));
}

TEST_CASE("emberctl explains a missing daemon, an unknown dataset and bad arguments") {
  TempDir tmp;
  const std::string& dir = tmp.path();
  Run no_daemon = Emberctl(dir, {"--socket", dir + "/none.sock", "status"});
  CHECK(no_daemon.exit_code != 0);
  CHECK(no_daemon.err.find(dir + "/none.sock") != std::string::npos);
  CHECK(no_daemon.err.find("is emberd running?") != std::string::npos);

  WriteSyntheticIdx(dir, "train", 300);
  Daemon daemon(dir);
  daemon.Start();
  const std::string sock = "--socket=" + daemon.socket();
  Run unknown = Emberctl(dir, {sock, "dataset", "inspect", "nope"});
  CHECK(unknown.exit_code != 0);
  CHECK(unknown.err.find("'nope'") != std::string::npos);
  Run bad_split = Emberctl(dir, {sock, "dataset", "add", "x", "--path", dir, "--split", "valid"});
  CHECK(bad_split.exit_code != 0);
  CHECK(bad_split.err.find("valid") != std::string::npos);

  REQUIRE(Emberctl(dir, {sock, "dataset", "add", "syn", "--path", dir}).exit_code == 0);
  Run inspect = Emberctl(dir, {sock, "dataset", "inspect", "syn"});
  CHECK(inspect.out.find("300 samples") != std::string::npos);
  CHECK(inspect.out.find("uint8    [28,28]") != std::string::npos);
  Run status = Emberctl(dir, {sock, "status"});
  CHECK(status.exit_code == 0);
  CHECK(status.out.find("syn") != std::string::npos);
  CHECK(status.out.find("waiting for ranks") == std::string::npos);
  // A rendezvous that rank 2 of 3 has not joined yet shows up with the ranks it waits for.
  auto client = daemon.Connect();
  Result<int> fd = client->OpenSharedMemory("job-x", "grads", 2, 3, 4096);
  REQUIRE(fd.ok());
  close(*fd);
  Run waiting = Emberctl(dir, {sock, "status"});
  INFO(waiting.out);
  CHECK(waiting.out.find("shared-memory segments waiting for ranks (1)") != std::string::npos);
  CHECK(waiting.out.find("job job-x") != std::string::npos);
  CHECK(waiting.out.find("grads") != std::string::npos);
  CHECK(waiting.out.find("world 3") != std::string::npos);
  CHECK(waiting.out.find("for rank 0,1") != std::string::npos);
  Run rm = Emberctl(dir, {sock, "dataset", "rm", "syn"});
  CHECK(rm.exit_code == 0);
  CHECK(Emberctl(dir, {sock, "dataset", "rm", "syn"}).exit_code != 0);
  daemon.Stop();
}

TEST_CASE("emberctl jobs and job inspect show each rank's progress and the slowest rank") {
  Daemon daemon;
  auto client = StartWithSyntheticDataset(daemon, 320);  // 10 batches of 16 per rank of 2
  std::vector<std::unique_ptr<StreamReader>> readers;
  for (uint32_t rank : {0u, 1u}) {
    StreamOptions options = ReaderOptions("two-ranks", 16, 1);
    options.slots = 3;  // the initial prefetch depth: the leases in flight cannot vary
    options.rank = rank;
    options.world_size = 2;
    auto reader = client->OpenStream(options);
    REQUIRE(reader.ok());
    // Rank 0 consumes 3 batches, rank 1 5 (each slot handed back at once).
    for (int i = 0; i < (rank == 0 ? 3 : 5); ++i) REQUIRE((*reader)->Next().ok());
    readers.push_back(std::move(*reader));
  }
  // The daemon commits a batch when it takes its slot back, and leases the next into it:
  // each ring's 3 slots then hold leases again.
  REQUIRE(Eventually([&] {
    auto st = client->GetStatus();
    if (!st.ok() || st->jobs.size() != 1) return false;
    const auto& ranks = st->jobs[0].ranks;
    return ranks.size() == 2 && ranks[0].consumed == 3 && ranks[1].consumed == 5 &&
           ranks[0].leased == 3 && ranks[1].leased == 3;
  }));
  const std::string& dir = daemon.dir();
  const std::string sock = "--socket=" + daemon.socket();

  Run jobs = Emberctl(dir, {sock, "jobs"});
  INFO(jobs.out << jobs.err);
  REQUIRE(jobs.exit_code == 0);
  CHECK(std::regex_search(jobs.out, std::regex("JOB +DATASET +WORLD +BATCH +EPOCH +PROGRESS +"
                                               "LEASED +SLOWEST +COORDINATOR +NODES\n")));
  CHECK(std::regex_search(jobs.out, std::regex("\ntwo-ranks +syn +2 +16 +0 +8/20 \\(40%\\) +6 +"
                                               "r0 e0 3/10 +local +local,local\n")));

  Run inspect = Emberctl(dir, {sock, "job", "inspect", "two-ranks"});
  INFO(inspect.out << inspect.err);
  REQUIRE(inspect.exit_code == 0);
  CHECK(inspect.out.find("job two-ranks\n") != std::string::npos);
  CHECK(std::regex_search(inspect.out, std::regex("batches/rank +10 per epoch\n")));
  CHECK(std::regex_search(inspect.out, std::regex("coordinator +local\n")));
  CHECK(std::regex_search(inspect.out, std::regex("slowest rank +r0 e0 3/10\n")));
  CHECK(std::regex_search(inspect.out, std::regex("8 committed, 6 in flight\n")));
  for (uint32_t rank : {0u, 1u}) {
    const std::string row = std::to_string(rank) + " +yes +local +0 +" +
                            (rank == 0 ? "3" : "5") + "/10 +3 +#" +
                            std::to_string(readers[rank]->info().stream_id) +
                            " +[0-9]+ +[0-9]+%\n";
    CHECK(std::regex_search(inspect.out, std::regex("\n" + row)));
  }

  Run unknown = Emberctl(dir, {sock, "job", "inspect", "nope"});
  CHECK(unknown.exit_code == 1);
  CHECK(unknown.err == "emberctl: job 'nope' not found (jobs: two-ranks)\n");
  CHECK(Emberctl(dir, {sock, "job"}).exit_code != 0);  // inspect is required
  readers.clear();
  daemon.Stop();
}

// The u32 record alignment at byte 40 of a shard file's header (pack/format.h).
uint32_t ShardAlignment(const std::string& shard_path) {
  const std::string bytes = ReadFileOrEmpty(shard_path);
  REQUIRE(bytes.size() >= 44);
  uint32_t alignment = 0;
  for (int i = 3; i >= 0; --i) alignment = alignment << 8 | uint8_t(bytes[40 + i]);
  return alignment;
}

TEST_CASE("emberctl pack packs an image folder with the flags it is given") {
  TempDir tmp;
  const std::string& dir = tmp.path();
  for (const char* image : {"cat/a.jpg", "cat/b.png", "dog/c.jpeg"}) {
    std::filesystem::create_directories(std::filesystem::path(dir + "/src/" + image).parent_path());
    std::ofstream(dir + "/src/" + image) << std::string(700, 'x') << image;
  }
  const std::string src = dir + "/src", out = dir + "/out";
  // No daemon: the socket is never used.
  Run packed = Emberctl(dir, {"--socket", dir + "/none.sock", "pack", src, out, "--format",
                              "imagefolder", "--shard-mib", "1", "--align", "512"});
  INFO(packed.err);
  REQUIRE(packed.exit_code == 0);
  CHECK(packed.out.find("packed 3 records of 2 classes") != std::string::npos);
  CHECK(packed.out.find("into 1 shards in " + out) != std::string::npos);
  CHECK(packed.err.find("pack: wrote 3 / 3 records") != std::string::npos);
  CHECK(ShardAlignment(out + "/shard-00000.emb") == 512);

  Run again = Emberctl(dir, {"pack", src, out});
  CHECK(again.exit_code == 1);
  CHECK(again.err.find(out + ": already exists") != std::string::npos);
  Run overwrite = Emberctl(dir, {"pack", src, out, "--overwrite", "--quiet"});
  CHECK(overwrite.exit_code == 0);
  CHECK(overwrite.err.empty());
  CHECK(ShardAlignment(out + "/shard-00000.emb") == 4096);

  // Each refusal names what is wrong.
  for (const auto& [args, named] :
       std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"pack", src, dir + "/x", "--format", "tar"}, "--format"},
           {{"pack", src}, "out is required"},
           {{"pack", src, dir + "/x", "--shard-mib", "0"}, "--shard-mib"},
           {{"pack", src, dir + "/x", "--align", "4"}, "--align"}}) {
    Run refused = Emberctl(dir, args);
    INFO(refused.err);
    CHECK(refused.exit_code != 0);
    CHECK(refused.err.find(named) != std::string::npos);
    CHECK(!std::filesystem::exists(dir + "/x"));
  }
}

// `shards` webdataset shards of 4 samples (KEY.cls, KEY.txt) as DIR/d/shard-000.tar, ...
void WriteTextShards(const std::string& dir, int shards) {
  std::filesystem::create_directories(dir + "/d");
  for (int shard = 0; shard < shards; ++shard) {
    daemon::TarMembers members;
    for (int k = 0; k < 4; ++k) {
      const std::string key = "s" + std::to_string(shard * 4 + k);
      members.push_back({key + ".cls", std::to_string(k) + "\n"});
      members.push_back({key + ".txt", "caption of " + key});
    }
    char name[32];
    std::snprintf(name, sizeof(name), "/d/shard-%03d.tar", shard);
    std::ofstream(dir + name, std::ios::binary) << daemon::TarBytes(members);
  }
}

TEST_CASE("emberctl dataset inspect, cache and cache clear: a webdataset over HTTP") {
  TempDir tmp;
  const std::string& dir = tmp.path();
  WriteTextShards(dir + "/www", 3);
  daemon::NginxServer nginx(dir + "/www");
  Daemon daemon(dir);
  daemon.Start();
  const std::string sock = "--socket=" + daemon.socket();
  const std::string pattern = nginx.Url("/d/shard-{000..002}.tar");
  Run add = Emberctl(dir, {sock, "dataset", "add", "web", "--format", "webdataset", "--path",
                           pattern, "--quiet"});
  INFO(add.out << add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(add.err.empty());  // --quiet: no progress

  Run inspect = Emberctl(dir, {sock, "dataset", "inspect", "web"});
  INFO(inspect.out << inspect.err);
  REQUIRE(inspect.exit_code == 0);
  CHECK(inspect.out.find("12 samples") != std::string::npos);
  CHECK(inspect.out.find("  source  " + pattern + "\n") != std::string::npos);
  CHECK(inspect.out.find("  shards  3\n") != std::string::npos);
  CHECK(std::regex_search(inspect.out, std::regex("  index   [0-9.]+ (B|KiB) in emberd's memory")));
  CHECK(inspect.out.find("  shuffle samples\n") != std::string::npos);
  CHECK(std::regex_search(inspect.out, std::regex("  cache   3/3 shards cached, [0-9.]+ KiB\n")));

  // Root (this test) sees every entry, each with the dataset that reads it.
  Run cache = Emberctl(dir, {sock, "cache"});
  INFO(cache.out << cache.err);
  REQUIRE(cache.exit_code == 0);
  CHECK(std::regex_search(cache.out, std::regex("^shard cache: 3 entries, [0-9.]+ KiB of [0-9.]+ "
                                                "GiB; [0-9]+ hits, 3 misses")));
  for (const char* shard : {"000", "001", "002"}) {
    CHECK(std::regex_search(
        cache.out, std::regex("\n" + std::regex_replace(nginx.Url("/d/shard-"), std::regex("[.]"),
                                                        "\\.") +
                              shard + "\\.tar +[0-9.]+ KiB +no +web\n")));
  }

  Run clear = Emberctl(dir, {sock, "cache", "clear"});
  INFO(clear.out << clear.err);
  REQUIRE(clear.exit_code == 0);
  CHECK(std::regex_search(clear.out, std::regex("^cleared 3 entries \\([0-9.]+ KiB\\)\n$")));
  CHECK(Emberctl(dir, {sock, "cache"}).out.find("shard cache: 0 entries, 0 B") == 0);
  CHECK(Emberctl(dir, {sock, "dataset", "inspect", "web"}).out.find("  cache   0/3 shards "
                                                                    "cached, 0 B\n") !=
        std::string::npos);

  // A URL with credentials: registered and read with them, shown without them anywhere.
  const std::string secret = "http://user:s3cret@127.0.0.1:" + std::to_string(nginx.port()) +
                             "/d/shard-{000..002}.tar?token=t0ken";
  Run with_secret = Emberctl(dir, {sock, "dataset", "add", "private", "--format", "webdataset",
                                   "--path", secret});
  INFO(with_secret.out << with_secret.err);
  REQUIRE(with_secret.exit_code == 0);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{sock, "dataset", "inspect", "private"},
        std::vector<std::string>{sock, "dataset", "ls"}, std::vector<std::string>{sock, "status"},
        std::vector<std::string>{sock, "cache"}}) {
    Run shown = Emberctl(dir, args);
    INFO(args[1] << ": " << shown.out << shown.err);
    CHECK(shown.exit_code == 0);
    CHECK(shown.out.find("s3cret") == std::string::npos);
    CHECK(shown.out.find("t0ken") == std::string::npos);
  }
  CHECK(with_secret.out.find("s3cret") == std::string::npos);
  CHECK(Emberctl(dir, {sock, "dataset", "inspect", "private"}).out.find("  source  " + pattern) !=
        std::string::npos);
  daemon.Stop();
}

// A static file server answering each GET `delay` seconds late (HEAD at once).
constexpr const char* kSlowServer = R"(import functools, http.server, sys, time
class Slow(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        time.sleep(float(sys.argv[3]))
        super().do_GET()
    def log_message(self, *args):
        pass
handler = functools.partial(Slow, directory=sys.argv[2])
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), handler).serve_forever()
)";

bool Answers(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

TEST_CASE("emberctl dataset add shows shards indexed, bytes and rate while it registers") {
  TempDir tmp;
  const std::string& dir = tmp.path();
  WriteTextShards(dir + "/www", 4);
  std::ofstream(dir + "/slow.py") << kSlowServer;
  const int port = FreeLoopbackPort();
  const pid_t server = Spawn({"/usr/bin/python3", dir + "/slow.py", std::to_string(port),
                              dir + "/www", "0.5"},
                             {}, dir + "/server.log", dir + "/server.log");
  struct Stop {
    pid_t pid;
    ~Stop() {
      kill(pid, SIGKILL);
      WaitFor(pid, std::chrono::seconds(5));
    }
  } stop{server};
  REQUIRE(Eventually([&] { return Answers(port); }));
  Daemon daemon(dir);
  daemon.Start();
  const std::string sock = "--socket=" + daemon.socket();
  const std::string url =
      "http://127.0.0.1:" + std::to_string(port) + "/d/shard-{000..003}.tar";
  // Four shards, each GET half a second: about two seconds of indexing. Not a terminal
  // (a file): plain lines, when the count moved, at most one a second.
  Run add = Emberctl(dir, {sock, "dataset", "add", "slow", "--format", "webdataset", "--path", url});
  INFO(add.out << add.err << ReadFileOrEmpty(dir + "/server.log"));
  REQUIRE(add.exit_code == 0);
  CHECK(add.out.find("registered slow") == 0);
  CHECK(std::regex_search(
      add.err, std::regex("^indexing slow: [0-4]/4 shards, [0-9.]+ (B|KiB)(, [0-9.]+ (B|KiB)/s)?"
                          "(, ETA [0-9]+ s)? \\([0-9.]+ s\\)\n")));
  CHECK(add.err.find('\r') == std::string::npos);
  CHECK(add.err.find("\x1b[") == std::string::npos);
  CHECK(Emberctl(dir, {sock, "dataset", "inspect", "slow"}).out.find("  shards  4\n") !=
        std::string::npos);
  daemon.Stop();
}

}  // namespace
}  // namespace ember::testing
