// Host-to-device copy bandwidth for batch-sized copies on one GPU (issue 4's benchmark:
// the registered ring against cudaMemcpy from cudaMallocHost memory, target >= 90%).
//
//   h2d_bench [--device 0] [--sizes-mib 1,4,16,64] [--reps 30] [--warmup 5]
//             [--socket PATH] [--loader-batches 100] [--tmp-dir DIR] [--host-only]
//             [--json FILE]
//
// Copies, each of one size from one source into a cudaMalloc'd buffer with
// cudaMemcpyAsync on a non-blocking stream, timed with CUDA events around the copy
// (after --warmup copies, the median of --reps; each rep times every source once, in
// turn, so that drifts hit them alike). Sources:
//   ring       a batch in a real emberd ring (the mapping of the memfd emberd passed to
//              this process), registered with cudaHostRegister as ember::DeviceLoader
//              registers it; needs a daemon
//   memfd      a MAP_SHARED mapping of this process's own memfd, registered the same way
//              (the same kind of memory, without a daemon)
//   pinned     cudaMallocHost: the reference of the target
//   pageable   malloc'd memory, for context
// With a daemon (--socket, else $EMBER_SOCKET), end to end for each size (--loader-batches
// batches, or more to make 1 GiB): batches/s and GB/s of ember::DeviceLoader (stream
// read, H2D copy on its side stream, a trainer that does nothing with the batch), against
// ember::Loader reading the same kind of stream on the host only, which is the rate the
// daemon delivers; with the stall (time Next() waited for the daemon) as a share of the
// run. The dataset is an uncompressed IDX file of
// 1 MiB samples (uint8 [1024, 1024]) that this program writes into a temporary directory,
// registers and removes again, so a batch of N samples is N MiB (plus N label bytes).
//
// --host-only measures just the ember::Loader rows (no CUDA), to check the daemon side on
// a machine without a GPU.
//
// Exit: 0 measured, 1 an error, 77 no CUDA device is visible (nothing measured; the
// message starts with "h2d_bench: SKIP:").
#include <sys/mman.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/cuda_check.h"
#include "bench/json_lines.h"
#include "bench/stats.h"
#include "ember/client.h"
#include "ember/device_loader.h"
#include "ember/loader.h"
#include "sdk/examples/program_main.h"

namespace ember::bench {
namespace {

using examples::Fatal;

using Clock = std::chrono::steady_clock;

constexpr uint32_t kSampleSide = 1024;  // uint8 [1024, 1024]: 1 MiB per sample

struct Flags {
  int device = 0;
  std::vector<uint32_t> sizes_mib = {1, 4, 16, 64};
  uint32_t reps = 30;
  uint32_t warmup = 5;
  std::string socket;
  uint32_t loader_batches = 100;
  std::string tmp_dir;
  bool host_only = false;
  std::string json;
};

double GBps(uint64_t bytes, double seconds) { return static_cast<double>(bytes) / seconds / 1e9; }

// --- Host sources ------------------------------------------------------------------------

// One place copies are made from. `data` is null when the source could not be set up
// (`why` says why): its rows then read n/a.
struct Source {
  std::string name;
  const void* data = nullptr;
  std::string why;
};

// A MAP_SHARED mapping of a memfd, like emberd's rings, registered with cudaHostRegister.
class MemfdBuffer {
 public:
  explicit MemfdBuffer(uint64_t bytes) : bytes_(bytes) {
    fd_ = memfd_create("h2d-bench", MFD_CLOEXEC);
    if (fd_ < 0) throw Fatal(std::string("memfd_create: ") + std::strerror(errno));
    if (ftruncate(fd_, static_cast<off_t>(bytes)) != 0)
      throw Fatal("ftruncate of the memfd to " + std::to_string(bytes) +
                  " bytes: " + std::strerror(errno));
    void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (base == MAP_FAILED) throw Fatal(std::string("mmap of the memfd: ") + std::strerror(errno));
    base_ = base;
    std::memset(base_, 0x5a, bytes);
    cudaError_t error = cudaHostRegister(base_, bytes, cudaHostRegisterDefault);
    if (error == cudaSuccess) {
      registered_ = true;
    } else {
      cudaGetLastError();
      why_ = "cudaHostRegister of a memfd mapping: " + CudaMessage(error);
    }
  }
  ~MemfdBuffer() {
    if (registered_) cudaHostUnregister(base_);
    if (base_ != nullptr) munmap(base_, bytes_);
    if (fd_ >= 0) close(fd_);
  }
  MemfdBuffer(const MemfdBuffer&) = delete;
  MemfdBuffer& operator=(const MemfdBuffer&) = delete;

  Source source() const { return {"memfd", registered_ ? base_ : nullptr, why_}; }

 private:
  const uint64_t bytes_;
  int fd_ = -1;
  void* base_ = nullptr;
  bool registered_ = false;
  std::string why_;
};

class PinnedBuffer {
 public:
  explicit PinnedBuffer(uint64_t bytes) {
    CheckCuda(cudaMallocHost(&data_, bytes),
              "cudaMallocHost of " + std::to_string(bytes) + " bytes");
    std::memset(data_, 0x5a, bytes);
  }
  ~PinnedBuffer() { cudaFreeHost(data_); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  Source source() const { return {"pinned", data_, ""}; }

 private:
  void* data_ = nullptr;
};

class PageableBuffer {
 public:
  explicit PageableBuffer(uint64_t bytes) : data_(bytes, 0x5a) {}
  Source source() const { return {"pageable", data_.data(), ""}; }

 private:
  std::vector<uint8_t> data_;
};

// --- The daemon's side: a dataset of 1 MiB samples ------------------------------------------

void WriteBigEndian32(FILE* out, uint32_t value) {
  const uint8_t bytes[4] = {static_cast<uint8_t>(value >> 24), static_cast<uint8_t>(value >> 16),
                            static_cast<uint8_t>(value >> 8), static_cast<uint8_t>(value)};
  std::fwrite(bytes, 1, 4, out);
}

// Uncompressed IDX files of `samples` uint8 [1024, 1024] images and uint8 labels in a fresh
// directory, registered with the daemon as dataset `name`; all removed again on
// destruction (best effort).
class TempDataset {
 public:
  TempDataset(ember::Client& client, const std::string& tmp_dir, const std::string& name,
              uint32_t samples)
      : client_(client), name_(name) {
    std::string pattern = tmp_dir + "/ember-h2d-bench.XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr)
      throw Fatal("mkdtemp " + pattern + ": " + std::strerror(errno));
    dir_ = pattern;
    Write(dir_ + "/train-images-idx3-ubyte", {samples, kSampleSide, kSampleSide});
    Write(dir_ + "/train-labels-idx1-ubyte", {samples});

    ember::DatasetSpec spec;
    spec.name = name_;
    spec.format = "idx";
    spec.path = dir_;
    spec.split = "train";
    ember::Result<ember::DatasetInfo> added = client_.AddDataset(spec);
    if (!added.ok())
      throw Fatal("registering dataset '" + name_ + "' (" + dir_ +
                  "): " + added.status().ToString());
    registered_ = true;
  }

  ~TempDataset() {
    if (registered_) {
      const ember::Status removed = client_.RemoveDataset(name_);
      if (!removed.ok())
        std::fprintf(stderr, "h2d_bench: removing dataset '%s': %s\n", name_.c_str(),
                     removed.ToString().c_str());
    }
    for (const std::string& file : files_) unlink(file.c_str());
    if (!dir_.empty()) rmdir(dir_.c_str());
  }
  TempDataset(const TempDataset&) = delete;
  TempDataset& operator=(const TempDataset&) = delete;

  const std::string& name() const { return name_; }

 private:
  // An IDX file of uint8 elements with these dimensions (dims[0]: samples); sample s
  // holds bytes (s + i) % 251.
  void Write(const std::string& path, const std::vector<uint32_t>& dims) {
    FILE* out = std::fopen(path.c_str(), "wb");
    if (out == nullptr) throw Fatal("cannot create " + path + ": " + std::strerror(errno));
    files_.push_back(path);
    const uint8_t magic[4] = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
    std::fwrite(magic, 1, 4, out);
    for (uint32_t dim : dims) WriteBigEndian32(out, dim);
    uint64_t per_sample = 1;
    for (size_t k = 1; k < dims.size(); ++k) per_sample *= dims[k];
    std::vector<uint8_t> sample(per_sample);
    for (uint32_t s = 0; s < dims[0]; ++s) {
      for (uint64_t i = 0; i < per_sample; ++i) sample[i] = static_cast<uint8_t>((s + i) % 251);
      std::fwrite(sample.data(), 1, sample.size(), out);
    }
    const bool failed = std::ferror(out) != 0;
    if (std::fclose(out) != 0 || failed) throw Fatal("cannot write " + path);
  }

  ember::Client& client_;
  const std::string name_;
  std::string dir_;
  std::vector<std::string> files_;
  bool registered_ = false;
};

ember::StreamOptions Stream(const std::string& job, const std::string& dataset, uint32_t batch) {
  ember::StreamOptions options;
  options.job = job;
  options.dataset = dataset;
  options.batch_size = batch;
  options.epochs = 0;  // until closed
  options.shuffle = false;
  return options;
}

// Waits (up to 10 s) until the daemon has published `batches` batches on the stream of
// `job`, so that it is no longer writing the ring while copies are timed.
void WaitUntilPublished(ember::Client& client, const std::string& job, uint64_t batches) {
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    ember::Result<ember::DaemonStatus> status = client.GetStatus();
    if (!status.ok()) throw Fatal("daemon status: " + status.status().ToString());
    for (const ember::StreamStatus& stream : status->streams) {
      if (stream.job == job && stream.batches_published >= batches) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::printf("h2d_bench: note: the daemon had not filled the ring of '%s' after 10 s\n",
              job.c_str());
}

// A batch held in a real emberd ring, with the ring registered as DeviceLoader registers
// it. Two slots: the daemon fills both, then waits while the copies are timed.
class RingBatch {
 public:
  RingBatch(ember::Client& client, const std::string& job, const std::string& dataset,
            uint32_t batch_size) {
    ember::StreamOptions options = Stream(job, dataset, batch_size);
    options.slots = 2;
    ember::Result<std::unique_ptr<ember::StreamReader>> opened = client.OpenStream(options);
    if (!opened.ok())
      throw Fatal("opening a stream of '" + dataset + "': " + opened.status().ToString());
    reader_ = std::move(opened).value();
    WaitUntilPublished(client, job, options.slots);
    ember::Result<std::optional<ember::RawBatch>> next = reader_->Next();
    if (!next.ok()) throw Fatal("reading a batch from the ring: " + next.status().ToString());
    if (!next->has_value()) throw Fatal("the stream of '" + dataset + "' ended at once");
    batch_ = std::move(**next);
    for (const ember::RawTensor& t : batch_->tensors) {
      if (t.name == "image") image_ = &t;
    }
    if (image_ == nullptr) throw Fatal("the ring's batch has no tensor 'image'");
    if (image_->nbytes != uint64_t{batch_size} * kMiB)
      throw Fatal("the ring's 'image' tensor has " + std::to_string(image_->nbytes) +
                  " bytes, expected " + std::to_string(uint64_t{batch_size} * kMiB));
    cudaError_t error = cudaHostRegister(const_cast<void*>(reader_->ring_base()),
                                         reader_->ring_size(), cudaHostRegisterDefault);
    if (error == cudaSuccess) {
      registered_ = true;
    } else {
      cudaGetLastError();
      why_ = "cudaHostRegister of the ring (" + std::to_string(reader_->ring_size()) +
             " bytes): " + CudaMessage(error);
    }
  }
  ~RingBatch() {
    if (registered_) cudaHostUnregister(const_cast<void*>(reader_->ring_base()));
  }
  RingBatch(const RingBatch&) = delete;
  RingBatch& operator=(const RingBatch&) = delete;

  Source source() const { return {"ring", registered_ ? image_->data : nullptr, why_}; }

 private:
  std::unique_ptr<ember::StreamReader> reader_;
  std::optional<ember::RawBatch> batch_;  // destroyed before the reader: hands the slot back
  const ember::RawTensor* image_ = nullptr;
  bool registered_ = false;
  std::string why_;
};

// --- Timing ---------------------------------------------------------------------------------

// Times single cudaMemcpyAsync calls into `dst` on a non-blocking stream with CUDA events.
class CopyTimer {
 public:
  explicit CopyTimer(void* dst) : dst_(dst) {
    CheckCuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    CheckCuda(cudaEventCreate(&start_), "cudaEventCreate");
    CheckCuda(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~CopyTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaStreamDestroy(stream_);
  }
  CopyTimer(const CopyTimer&) = delete;
  CopyTimer& operator=(const CopyTimer&) = delete;

  // Seconds the copy of `bytes` from `src` took on the GPU.
  double Time(const void* src, uint64_t bytes, const std::string& what) {
    CheckCuda(cudaEventRecord(start_, stream_), "cudaEventRecord");
    CheckCuda(cudaMemcpyAsync(dst_, src, bytes, cudaMemcpyHostToDevice, stream_),
              "cudaMemcpyAsync from " + what);
    CheckCuda(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    CheckCuda(cudaEventSynchronize(stop_), "copy from " + what);
    float ms = 0;
    CheckCuda(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return ms / 1e3;
  }

 private:
  void* const dst_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

// Median GB/s per source (0 for those without data) of copies of `bytes`.
std::vector<double> MeasureCopies(CopyTimer& timer, const std::vector<Source>& sources,
                                  uint64_t bytes, const Flags& flags) {
  std::vector<std::vector<double>> seconds(sources.size());
  for (uint32_t rep = 0; rep < flags.warmup + flags.reps; ++rep) {
    for (size_t k = 0; k < sources.size(); ++k) {
      if (sources[k].data == nullptr) continue;
      const double s = timer.Time(sources[k].data, bytes, sources[k].name);
      if (rep >= flags.warmup) seconds[k].push_back(s);
    }
  }
  std::vector<double> gbps(sources.size(), 0);
  for (size_t k = 0; k < sources.size(); ++k) {
    if (!seconds[k].empty()) gbps[k] = GBps(bytes, Median(seconds[k]));
  }
  return gbps;
}

struct LoaderRun {
  double batches_per_s = 0;
  double gbps = 0;
  double stall = 0;  // share of the timed run that Next() waited for the daemon
  uint64_t batch_bytes = 0;
};

// Takes --warmup batches, then times `batches` more (epochs roll over). `sync` runs
// before each clock read (for the device loader: waits for the copies).
template <typename L, typename Sync>
LoaderRun Drive(L& loader, const Flags& flags, uint32_t batches, Sync sync) {
  auto take = [&loader](uint64_t& bytes) {
    for (int tries = 0; tries < 2; ++tries) {
      std::optional<ember::Batch> batch = loader.Next();
      if (batch) {
        bytes = 0;
        for (const torch::Tensor& t : batch->tensors) bytes += t.nbytes();
        return;
      }
      if (loader.ended()) break;  // else the end of an epoch: the next call starts one
    }
    throw Fatal("the stream ended early");
  };
  LoaderRun run;
  for (uint32_t i = 0; i < flags.warmup; ++i) take(run.batch_bytes);
  sync();
  const auto wait_before = loader.reader().wait_time();
  const Clock::time_point start = Clock::now();
  uint64_t total = 0;
  for (uint32_t i = 0; i < batches; ++i) {
    take(run.batch_bytes);
    total += run.batch_bytes;
  }
  sync();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const double waited =
      std::chrono::duration<double>(loader.reader().wait_time() - wait_before).count();
  run.batches_per_s = batches / seconds;
  run.gbps = GBps(total, seconds);
  run.stall = waited / seconds;
  return run;
}

// --- Main -----------------------------------------------------------------------------------

std::string Cell(double gbps) {
  return gbps > 0 ? StringPrintf("%9.2f", gbps) : StringPrintf("%9s", "n/a");
}
std::string Ratio(double a, double b) {
  return a > 0 && b > 0 ? StringPrintf("%7.1f%%", 100 * a / b)
                        : StringPrintf("%8s", "n/a");
}

int Run(const Flags& flags) {
  if (flags.sizes_mib.empty()) throw Fatal("--sizes-mib: no sizes");
  if (!flags.host_only) {
    int count = 0;
    try {
      count = VisibleDevices();
    } catch (const NoGpu& e) {
      return SkipNoGpu("h2d_bench", e);
    }
    if (flags.device >= count)
      throw Fatal("--device " + std::to_string(flags.device) + ": this process sees " +
                  std::to_string(count) + " CUDA device(s)");
  }
  const uint32_t max_mib = *std::max_element(flags.sizes_mib.begin(), flags.sizes_mib.end());
  const uint64_t max_bytes = uint64_t{max_mib} * kMiB;
  const ember::bench::JsonLines json(flags.json, "h2d_bench");

  std::unique_ptr<ember::Client> client;
  std::unique_ptr<TempDataset> dataset;
  const std::string tag = "h2d-bench-" + std::to_string(getpid());
  if (!flags.socket.empty()) {
    ember::ClientOptions options;
    options.socket_path = flags.socket;
    ember::Result<std::unique_ptr<ember::Client>> connected = ember::Client::Connect(options);
    if (!connected.ok()) throw Fatal(connected.status().ToString());
    client = std::move(connected).value();
    // Two batches of the largest size per epoch.
    dataset = std::make_unique<TempDataset>(*client, flags.tmp_dir, tag, 2 * max_mib);
  } else if (flags.host_only) {
    throw Fatal("--host-only needs a daemon: --socket or EMBER_SOCKET");
  }

  if (!flags.host_only) {
    CheckCuda(cudaSetDevice(flags.device), "cudaSetDevice(" + std::to_string(flags.device) + ")");
    cudaDeviceProp props{};
    CheckCuda(cudaGetDeviceProperties(&props, flags.device), "cudaGetDeviceProperties");
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    std::printf(
        "h2d_bench: cuda:%d %s (PCI %04x:%02x:%02x), driver %d, runtime %d; "
        "median of %u copies after %u, GB/s = 1e9 bytes/s\n",
        flags.device, props.name, props.pciDomainID, props.pciBusID, props.pciDeviceID, driver,
        runtime, flags.reps, flags.warmup);

    void* device_buffer = nullptr;
    CheckCuda(cudaMalloc(&device_buffer, max_bytes),
              "cudaMalloc of " + std::to_string(max_bytes) + " bytes");
    std::unique_ptr<void, void (*)(void*)> device_holder(device_buffer,
                                                         [](void* p) { cudaFree(p); });
    CopyTimer timer(device_buffer);
    MemfdBuffer memfd(max_bytes);
    PinnedBuffer pinned(max_bytes);
    PageableBuffer pageable(max_bytes);

    std::printf(
        "\nRaw cudaMemcpyAsync host->device, GB/s (ring: a batch in emberd's ring; memfd: "
        "own memfd mapping; both cudaHostRegister'd)\n");
    std::printf("%8s %9s %9s %9s %9s %8s %8s\n", "size_MiB", "ring", "memfd", "pinned", "pageable",
                "ring/pin", "memfd/pin");
    double worst_ratio = -1;
    std::string worst_source;
    std::vector<std::string> notes;
    for (uint32_t mib : flags.sizes_mib) {
      const uint64_t bytes = uint64_t{mib} * kMiB;
      std::unique_ptr<RingBatch> ring;
      Source ring_source{"ring", nullptr, "no daemon (--socket or EMBER_SOCKET)"};
      if (client != nullptr) {
        ring = std::make_unique<RingBatch>(*client, tag + "-ring-" + std::to_string(mib),
                                           dataset->name(), mib);
        ring_source = ring->source();
      }
      const std::vector<Source> sources = {ring_source, memfd.source(), pinned.source(),
                                           pageable.source()};
      for (const Source& s : sources) {
        if (s.data == nullptr &&
            std::find(notes.begin(), notes.end(), s.name + ": " + s.why) == notes.end())
          notes.push_back(s.name + ": " + s.why);
      }
      const std::vector<double> gbps = MeasureCopies(timer, sources, bytes, flags);
      std::printf("%8u %s %s %s %s %s %s\n", mib, Cell(gbps[0]).c_str(), Cell(gbps[1]).c_str(),
                  Cell(gbps[2]).c_str(), Cell(gbps[3]).c_str(), Ratio(gbps[0], gbps[2]).c_str(),
                  Ratio(gbps[1], gbps[2]).c_str());
      std::fflush(stdout);
      for (size_t k = 0; k < sources.size(); ++k) {
        if (gbps[k] > 0)
          json.Append(StringPrintf(
              "\"kind\": \"copy\", \"device\": \"%s\", \"source\": \"%s\", "
              "\"size_mib\": %u, \"reps\": %u, \"gbps_median\": %.3f",
              props.name, sources[k].name.c_str(), mib, flags.reps, gbps[k]));
      }
      // The target is judged on the ring if there is one, else on the memfd mapping.
      const size_t judged = gbps[0] > 0 ? 0 : 1;
      if (gbps[judged] > 0 && gbps[2] > 0) {
        const double ratio = gbps[judged] / gbps[2];
        if (worst_ratio < 0 || ratio < worst_ratio) {
          worst_ratio = ratio;
          worst_source = sources[judged].name + " at " + std::to_string(mib) + " MiB";
        }
      }
    }
    for (const std::string& note : notes) std::printf("  n/a: %s\n", note.c_str());
    if (worst_ratio >= 0) {
      std::printf(
          "h2d_bench: registered (%s) / pinned, lowest over sizes: %.1f%% (target >= 90%%: %s)\n",
          worst_source.c_str(), 100 * worst_ratio, worst_ratio >= 0.9 ? "met" : "NOT met");
    } else {
      std::printf("h2d_bench: registered / pinned: n/a (no registered source)\n");
    }
  }

  if (client == nullptr) {
    std::printf("\nEnd to end (DeviceLoader): skipped, no daemon (--socket or EMBER_SOCKET)\n");
    return 0;
  }
  std::printf(
      "\nEnd to end from emberd (per size, %u batches or 1 GiB if more, after %u; "
      "stall: share of the time Next() waited for the daemon)\n",
      flags.loader_batches, flags.warmup);
  std::printf("%8s | %-28s | %-28s | %s\n", "", "ember::Loader (host only)",
              flags.host_only ? "" : "ember::DeviceLoader (to GPU)", "");
  std::printf("%8s | %9s %9s %7s | %9s %9s %7s | %s\n", "size_MiB", "batches/s", "GB/s", "stall",
              "batches/s", "GB/s", "stall", flags.host_only ? "" : "device/host");
  for (uint32_t mib : flags.sizes_mib) {
    const std::string job = tag + "-" + std::to_string(mib);
    const uint32_t batches = std::max(flags.loader_batches, 1024 / mib);
    LoaderRun host, device;
    {
      ember::Loader loader(*client, Stream(job + "-host", dataset->name(), mib));
      host = Drive(loader, flags, batches, [] {});
    }
    std::string registered;
    if (!flags.host_only) {
      ember::DeviceLoaderOptions options;
      options.device = flags.device;
      ember::DeviceLoader loader(*client, Stream(job + "-device", dataset->name(), mib), options);
      const c10::DeviceIndex index = static_cast<c10::DeviceIndex>(flags.device);
      device = Drive(loader, flags, batches,
                     [index] { c10::cuda::getCurrentCUDAStream(index).synchronize(); });
      registered = loader.ring_registered()
                       ? "ring registered"
                       : "NOT registered: " + loader.registration_status().ToString();
    }
    std::printf("%8u | %9.1f %9.2f %6.1f%% | ", mib, host.batches_per_s, host.gbps,
                100 * host.stall);
    if (flags.host_only) {
      std::printf("%9s %9s %7s |\n", "-", "-", "-");
    } else {
      std::printf("%9.1f %9.2f %6.1f%% | %7.1f%% (%s)\n", device.batches_per_s, device.gbps,
                  100 * device.stall, 100 * device.batches_per_s / host.batches_per_s,
                  registered.c_str());
    }
    std::fflush(stdout);
    json.Append(StringPrintf(
        "\"kind\": \"loader\", \"loader\": \"host\", \"size_mib\": %u, "
        "\"batches\": %u, \"batches_per_s\": %.2f, \"gbps\": %.3f, \"stall\": "
        "%.4f",
        mib, batches, host.batches_per_s, host.gbps, host.stall));
    if (!flags.host_only)
      json.Append(StringPrintf(
          "\"kind\": \"loader\", \"loader\": \"device\", \"size_mib\": %u, "
          "\"batches\": %u, \"batches_per_s\": %.2f, \"gbps\": %.3f, "
          "\"stall\": %.4f, \"ring_registered\": %s",
          mib, batches, device.batches_per_s, device.gbps, device.stall,
          registered == "ring registered" ? "true" : "false"));
  }
  return 0;
}

}  // namespace
}  // namespace ember::bench

int main(int argc, char** argv) {
  CLI::App app{
      "h2d_bench: host-to-device bandwidth of batch-sized copies (registered ring, "
      "pinned, pageable) and of ember::DeviceLoader"};
  ember::bench::Flags flags;
  if (const char* socket = std::getenv("EMBER_SOCKET")) flags.socket = socket;
  if (const char* tmp = std::getenv("TMPDIR"); tmp != nullptr && *tmp != '\0')
    flags.tmp_dir = tmp;
  else
    flags.tmp_dir = "/tmp";
  app.add_option("--device", flags.device, "CUDA device")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--sizes-mib", flags.sizes_mib, "copy / batch sizes in MiB")
      ->delimiter(',')
      ->check(CLI::Range(1u, 4096u))
      ->capture_default_str();
  app.add_option("--reps", flags.reps, "timed copies per source and size (median)")
      ->check(CLI::Range(1u, 100000u))
      ->capture_default_str();
  app.add_option("--warmup", flags.warmup, "untimed copies (and loader batches) first")
      ->capture_default_str();
  app.add_option("--socket", flags.socket,
                 "emberd's socket for the ring and loader rows (default $EMBER_SOCKET; "
                 "empty: no daemon rows)");
  app.add_option("--loader-batches", flags.loader_batches,
                 "timed batches per loader and size (more if under 1 GiB)")
      ->check(CLI::Range(1u, 1000000u))
      ->capture_default_str();
  app.add_option("--tmp-dir", flags.tmp_dir, "where the dataset's files go (the daemon reads them)")
      ->capture_default_str();
  app.add_flag("--host-only", flags.host_only,
               "only the ember::Loader rows, no CUDA (checks the daemon side without a GPU)");
  app.add_option("--json", flags.json, "append the results as JSON lines to this file");
  return ember::examples::ProgramMain(app, argc, argv, "h2d_bench",
                                      [&] { return ember::bench::Run(flags); });
}
