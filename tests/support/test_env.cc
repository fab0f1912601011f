#include "tests/support/test_env.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace ember::testing {
namespace {

[[noreturn]] void Die(const std::string& what) { throw std::runtime_error(what); }

void PutBigEndian32(std::string& out, uint32_t v) {
  out.push_back(static_cast<char>(v >> 24));
  out.push_back(static_cast<char>(v >> 16));
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v));
}

void WriteGzip(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  if (f == nullptr) Die("gzopen " + path);
  if (gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) != static_cast<int>(bytes.size()))
    Die("gzwrite " + path);
  gzclose(f);
}

}  // namespace

TempDir::TempDir() {
  char tmpl[] = "/tmp/ember-test-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) Die("mkdtemp");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void WriteSyntheticIdx(const std::string& dir, const std::string& prefix, uint32_t count,
                       uint32_t rows, uint32_t cols) {
  std::string images;
  images.append("\0\0\x08\x03", 4);
  PutBigEndian32(images, count);
  PutBigEndian32(images, rows);
  PutBigEndian32(images, cols);
  std::string labels;
  labels.append("\0\0\x08\x01", 4);
  PutBigEndian32(labels, count);
  for (uint32_t i = 0; i < count; ++i) {
    for (uint32_t k = 0; k < rows * cols; ++k) {
      uint8_t v = k < 4 ? static_cast<uint8_t>(i >> (8 * k)) : static_cast<uint8_t>((i + k) % 251);
      images.push_back(static_cast<char>(v));
    }
    labels.push_back(static_cast<char>(i % 10));
  }
  WriteGzip(dir + "/" + prefix + "-images-idx3-ubyte.gz", images);
  WriteGzip(dir + "/" + prefix + "-labels-idx1-ubyte.gz", labels);
}

uint32_t SyntheticId(const uint8_t* image) {
  return uint32_t{image[0]} | uint32_t{image[1]} << 8 | uint32_t{image[2]} << 16 |
         uint32_t{image[3]} << 24;
}

namespace {

template <typename Fn>
int ForEachFd(pid_t pid, Fn&& fn) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) Die("opendir " + dir);
  int n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char target[512];
    ssize_t len = readlink((dir + "/" + e->d_name).c_str(), target, sizeof(target) - 1);
    if (len < 0) continue;
    target[len] = '\0';
    if (fn(std::string(target))) ++n;
  }
  closedir(d);
  return n;
}

}  // namespace

int CountFds(pid_t pid) {
  return ForEachFd(pid, [](const std::string&) { return true; });
}

int CountMemfds(pid_t pid) {
  return ForEachFd(pid, [](const std::string& t) { return t.rfind("/memfd:", 0) == 0; });
}

int CountMemfdMappings(pid_t pid) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);)
    if (line.find("/memfd:") != std::string::npos) ++n;
  return n;
}

long ProcKib(pid_t pid, const std::string& file, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/" + file);
  const std::string prefix = field + ":";
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) return std::atol(line.c_str() + prefix.size());
  return -1;
}

long RssKib(pid_t pid) { return ProcKib(pid, "status", "VmRSS"); }

int CountEntries(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] == '.' ? 0 : 1;
  closedir(d);
  return n;
}

std::vector<std::string> EmberdCommand(const std::string& dir,
                                       const std::vector<std::string>& extra_args) {
  std::vector<std::string> argv = {Runfile("daemon/emberd"),
                                   "--socket=" + dir + "/emberd.sock",
                                   "--state-dir=" + dir + "/state",
                                   "--decode-threads=2",
                                   "--shm-budget=256MiB",
                                   "--ring-slots=4",
                                   "--log-level=debug"};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  return argv;
}

std::vector<std::string> WriteDaemonConfig(const std::string& dir, const std::string& yaml) {
  const std::string path = dir + "/emberd.yaml";
  std::ofstream config(path);
  config << yaml;
  if (!config.good()) Die("writing " + path);
  return {"--config", path};
}

Daemon::Daemon() : Daemon(std::make_unique<TempDir>()) {}

Daemon::Daemon(std::unique_ptr<TempDir> own_dir) : Daemon(own_dir->path()) {
  own_dir_ = std::move(own_dir);
}

Daemon::Daemon(std::string dir, std::vector<std::string> extra_args,
               std::vector<std::string> wrapper)
    : dir_(std::move(dir)),
      extra_args_(std::move(extra_args)),
      wrapper_(std::move(wrapper)),
      socket_(dir_ + "/emberd.sock"),
      log_path_(dir_ + "/emberd.log") {}

Daemon::~Daemon() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    WaitFor(pid_, std::chrono::seconds(10));
  }
}

void Daemon::Start() {
  std::vector<std::string> argv = wrapper_;
  const std::vector<std::string> emberd = EmberdCommand(dir_, extra_args_);
  argv.insert(argv.end(), emberd.begin(), emberd.end());
  pid_ = Spawn(argv, {}, log_path_, log_path_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      Die("emberd exited during start-up; its log:\n" + log());
    }
    ClientOptions options;
    options.socket_path = socket_;
    options.connect_timeout = std::chrono::milliseconds(500);
    struct stat st;
    if (stat(socket_.c_str(), &st) == 0 && Client::Connect(options).ok()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Die("emberd did not start serving within 20 s; its log:\n" + log());
}

void Daemon::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  int status = WaitFor(pid_, std::chrono::seconds(15));
  const pid_t pid = pid_;
  pid_ = -1;
  if (status == -1) {
    kill(pid, SIGKILL);
    WaitFor(pid, std::chrono::seconds(5));
    Die("emberd did not stop within 15 s of SIGTERM; its log:\n" + log());
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    Die("emberd did not exit cleanly (status " + std::to_string(status) + "); its log:\n" + log());
}

void Daemon::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  WaitFor(pid_, std::chrono::seconds(10));
  pid_ = -1;
}

std::unique_ptr<Client> Daemon::Connect() const {
  ClientOptions options;
  options.socket_path = socket_;
  auto client = Client::Connect(options);
  if (!client.ok()) Die("connect: " + client.status().ToString() + "\nemberd log:\n" + log());
  return std::move(client).value();
}

namespace {

// Writes `count` synthetic samples of `split` ("train" or "test") into daemon.dir() and
// registers them as IDX dataset `name`; throws with the daemon's log if that fails.
void AddSyntheticSplit(const Daemon& daemon, Client& client, const std::string& name,
                       const std::string& split, uint32_t count) {
  WriteSyntheticIdx(daemon.dir(), split == "train" ? "train" : "t10k", count);
  auto added = client.AddDataset({name, "idx", daemon.dir(), split});
  if (!added.ok())
    Die("registering dataset '" + name + "' (" + std::to_string(count) + " synthetic samples in " +
        daemon.dir() + "): " + added.status().ToString() + "\nemberd log:\n" + daemon.log());
}

}  // namespace

std::unique_ptr<Client> StartWithSyntheticDataset(Daemon& daemon, uint32_t count,
                                                  const std::string& name) {
  daemon.Start();
  auto client = daemon.Connect();
  AddSyntheticSplit(daemon, *client, name, "train", count);
  return client;
}

std::unique_ptr<Client> StartWithSyntheticSplits(Daemon& daemon, uint32_t train_count,
                                                 uint32_t test_count, const std::string& name) {
  auto client = StartWithSyntheticDataset(daemon, train_count, name + "-train");
  AddSyntheticSplit(daemon, *client, name + "-test", "test", test_count);
  return client;
}

StreamOptions ReaderOptions(const std::string& job, uint32_t batch_size, uint32_t epochs,
                            const std::string& dataset) {
  StreamOptions options;
  options.job = job;
  options.dataset = dataset;
  options.batch_size = batch_size;
  options.epochs = epochs;
  options.rank = 0;
  options.world_size = 1;
  return options;
}

}  // namespace ember::testing
