// All-reduce bandwidth on the local GPUs, as nccl-tests' all_reduce_perf reports it
// (issue 4's benchmark), through Ember's NCCL communicator and through NCCL alone.
//
//   ember-run --nproc <GPUs> -- nccl_bench --mode ember   one rank per GPU (rank r on
//                          cuda:EMBER_LOCAL_RANK), rendezvous through emberd's KV store
//                          (ember::MakeNcclCommunicator); rank 0 prints
//   nccl_bench --mode raw  the reference without Ember: one process drives every local
//                          GPU (or --gpus of them) through ncclCommInitAll
//   nccl_bench --device-count   prints how many CUDA devices this process sees
//
// Both modes all-reduce (sum, in place) float32 buffers of --min-mib .. --max-mib MiB,
// doubling. Per size, after --warmup all-reduces: time_us is the wall time of --iters
// all-reduces launched back to back, then waited for, divided by --iters (nccl-tests'
// way); call_us is the median wall time of one all-reduce launched and waited for on
// its own (Ember: Communicator::AllReduceSum; raw: ncclAllReduce + cudaStreamSynchronize),
// which is what a training step waiting on its gradients sees. As nccl-tests defines
// them: algbw = bytes / time, busbw = algbw * 2(n-1)/n for n ranks, in GB/s (1e9 B/s).
// NCCL cannot put two ranks of one communicator on one GPU, so one GPU means one rank:
// busbw is then 0 by definition and algbw measures only NCCL's one-rank path (no data
// moves between GPUs); the program says so.
//
// Exit: 0 measured, 1 an error, 77 no CUDA device is visible (nothing measured; the
// message starts with "nccl_bench: SKIP:").
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/cuda_check.h"
#include "bench/json_lines.h"
#include "bench/stats.h"
#include "ember/client.h"
#include "ember/communicator.h"
#include "ember/launch_env.h"
#include "ember/nccl_communicator.h"
#include "sdk/examples/program_main.h"

namespace ember::bench {
namespace {

using examples::Fatal;

using Clock = std::chrono::steady_clock;

struct Flags {
  std::string mode = "ember";
  uint32_t min_mib = 1;
  uint32_t max_mib = 1024;
  uint32_t iters = 20;
  uint32_t warmup = 5;
  int gpus = 0;  // raw: 0 = all visible
  std::string socket;
  double timeout_s = 120;
  std::string json;
};

void CheckNccl(ncclResult_t result, const std::string& what) {
  if (result != ncclSuccess) throw Fatal(what + ": " + ncclGetErrorString(result));
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string DeviceName(int device) {
  cudaDeviceProp props{};
  CheckCuda(cudaGetDeviceProperties(&props, device), "cudaGetDeviceProperties");
  return props.name;
}

std::vector<uint64_t> Sizes(const Flags& flags) {
  std::vector<uint64_t> sizes;
  for (uint64_t mib = flags.min_mib; mib <= flags.max_mib; mib *= 2) sizes.push_back(mib * kMiB);
  return sizes;
}

// One measured size.
struct Row {
  uint64_t bytes = 0;
  double time_s = 0;  // per all-reduce, back to back
  double call_s = 0;  // median of single blocking all-reduces
};

// What a mode provides: all-reduces of the first `count` floats, launched or waited for.
struct Collective {
  // Enqueues one all-reduce.
  std::function<void(size_t count)> launch;
  // Waits for everything launched so far.
  std::function<void()> wait;
  // Returns once every rank has reached the point named `tag`.
  std::function<void(const std::string& tag)> align;
};

std::vector<Row> Measure(const Flags& flags, const Collective& c) {
  std::vector<Row> rows;
  for (uint64_t bytes : Sizes(flags)) {
    const size_t count = bytes / sizeof(float);
    c.align("size-" + std::to_string(bytes));
    for (uint32_t i = 0; i < flags.warmup; ++i) c.launch(count);
    c.wait();
    Row row;
    row.bytes = bytes;
    const Clock::time_point start = Clock::now();
    for (uint32_t i = 0; i < flags.iters; ++i) c.launch(count);
    c.wait();
    row.time_s = Seconds(Clock::now() - start) / flags.iters;
    std::vector<double> calls;
    for (uint32_t i = 0; i < flags.iters; ++i) {
      const Clock::time_point t = Clock::now();
      c.launch(count);
      c.wait();
      calls.push_back(Seconds(Clock::now() - t));
    }
    row.call_s = Median(calls);
    rows.push_back(row);
  }
  return rows;
}

void Report(const Flags& flags, const std::string& mode, int ranks, const std::string& devices,
            const std::vector<Row>& rows) {
  const double factor = 2.0 * (ranks - 1) / ranks;
  std::printf(
      "nccl_bench: mode=%s ranks=%d (%s), all-reduce sum in place, float32, "
      "%u iterations after %u\n",
      mode.c_str(), ranks, devices.c_str(), flags.iters, flags.warmup);
  std::printf("%12s %12s %10s %11s %11s %10s\n", "size_B", "count", "time_us", "algbw_GB/s",
              "busbw_GB/s", "call_us");
  const ember::bench::JsonLines json(flags.json, "nccl_bench");
  double busbw_sum = 0;
  for (const Row& row : rows) {
    const double algbw = static_cast<double>(row.bytes) / row.time_s / 1e9;
    const double busbw = algbw * factor;
    busbw_sum += busbw;
    std::printf("%12llu %12llu %10.1f %11.2f %11.2f %10.1f\n",
                static_cast<unsigned long long>(row.bytes),
                static_cast<unsigned long long>(row.bytes / sizeof(float)), row.time_s * 1e6, algbw,
                busbw, row.call_s * 1e6);
    json.Append(ember::bench::StringPrintf(
        "\"mode\": \"%s\", \"ranks\": %d, \"devices\": \"%s\", \"bytes\": %llu, "
        "\"iters\": %u, \"time_us\": %.2f, \"algbw_gbps\": %.3f, \"busbw_gbps\": %.3f, "
        "\"call_us\": %.2f",
        mode.c_str(), ranks, devices.c_str(), static_cast<unsigned long long>(row.bytes),
        flags.iters, row.time_s * 1e6, algbw, busbw, row.call_s * 1e6));
  }
  std::printf("nccl_bench: mode=%s ranks=%d avg_busbw_GB/s=%.2f (mean over sizes, as nccl-tests)\n",
              mode.c_str(), ranks, rows.empty() ? 0.0 : busbw_sum / rows.size());
  if (ranks == 1) {
    std::printf(
        "nccl_bench: one rank (one GPU): busbw = algbw * 2(n-1)/n is 0 by definition; "
        "algbw only measures NCCL's one-rank all-reduce (no data moves between GPUs)\n");
  }
  std::fflush(stdout);
}

// --- Ember: one rank of ember-run, Ember's NCCL communicator ---------------------------

int RunEmber(const Flags& flags) {
  ember::Result<ember::LaunchEnv> launch =
      ember::ReadLaunchEnv("nccl-bench-" + std::to_string(getpid()));
  if (!launch.ok()) throw Fatal(launch.status().message());
  const int rank = launch->rank;
  const int world_size = launch->world_size;
  const std::string job = launch->job;
  const int device = launch->local_rank;
  const int count = VisibleDevices();
  if (device >= count)
    throw Fatal("rank " + std::to_string(rank) + " needs cuda:" + std::to_string(device) +
                " but this process sees " + std::to_string(count) +
                " CUDA device(s): one GPU per rank (NCCL cannot put two ranks of one "
                "communicator on one GPU)");

  ember::ClientOptions options;
  options.socket_path = flags.socket;
  ember::Result<std::unique_ptr<ember::Client>> connected = ember::Client::Connect(options);
  if (!connected.ok()) throw Fatal(connected.status().ToString());
  std::unique_ptr<ember::Client> client = std::move(connected).value();
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(flags.timeout_s * 1000));

  const Clock::time_point init_start = Clock::now();
  std::unique_ptr<ember::Communicator> comm =
      ember::MakeNcclCommunicator(*client, job, rank, world_size, device, timeout, "nccl_bench");
  const double init_s = Seconds(Clock::now() - init_start);

  const uint64_t max_bytes = uint64_t{flags.max_mib} * kMiB;
  void* data = nullptr;
  CheckCuda(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  CheckCuda(cudaMalloc(&data, max_bytes), "cudaMalloc of " + std::to_string(max_bytes) + " bytes");
  std::unique_ptr<void, void (*)(void*)> holder(data, [](void* p) { cudaFree(p); });
  CheckCuda(cudaMemset(data, 0, max_bytes), "cudaMemset");
  CheckCuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");

  std::vector<std::shared_ptr<ember::PendingCollective>> pending;
  std::vector<torch::Tensor> tensors;  // one view of the buffer's first floats
  Collective c;
  c.launch = [&](size_t n) {
    if (tensors.empty() || static_cast<size_t>(tensors[0].numel()) != n) {
      // Made without ATen's CUDA parts (as nccl_communicator_test does): the device is
      // given, so nothing asks CUDA where the memory is.
      const auto index = static_cast<c10::DeviceIndex>(device);
      tensors = {
          at::for_blob(data, {static_cast<int64_t>(n)})
              .options(torch::TensorOptions().dtype(torch::kFloat).device(torch::kCUDA, index))
              .target_device(torch::Device(torch::kCUDA, index))
              .make_tensor()};
    }
    pending.push_back(comm->AllReduceSumAsync(tensors));
  };
  c.wait = [&] {
    for (const auto& p : pending) p->Wait();
    pending.clear();
  };
  c.align = [&](const std::string& tag) {
    const ember::Status s =
        client->Barrier(job, "nccl_bench." + tag, static_cast<uint32_t>(world_size), timeout);
    if (!s.ok()) throw Fatal("barrier " + tag + ": " + s.ToString());
  };
  const std::vector<Row> rows = Measure(flags, c);
  c.align("done");
  if (rank == 0) {
    std::printf("nccl_bench: Ember communicator of %d rank(s) (job '%s') ready in %.2f s\n",
                world_size, job.c_str(), init_s);
    Report(flags, "ember", world_size,
           "one GPU per rank; rank 0 on cuda:" + std::to_string(device) + " " + DeviceName(device),
           rows);
  }
  return 0;
}

// --- Raw NCCL: one process over the local GPUs --------------------------------------------

int RunRaw(const Flags& flags) {
  const int count = VisibleDevices();
  const int n = flags.gpus == 0 ? count : flags.gpus;
  if (n > count)
    throw Fatal("--gpus " + std::to_string(n) + ": this process sees " + std::to_string(count) +
                " CUDA device(s)");
  std::vector<int> devices(n);
  std::iota(devices.begin(), devices.end(), 0);

  const Clock::time_point init_start = Clock::now();
  std::vector<ncclComm_t> comms(n, nullptr);
  CheckNccl(ncclCommInitAll(comms.data(), n, devices.data()), "ncclCommInitAll");
  const double init_s = Seconds(Clock::now() - init_start);

  const uint64_t max_bytes = uint64_t{flags.max_mib} * kMiB;
  std::vector<void*> buffers(n, nullptr);
  std::vector<cudaStream_t> streams(n, nullptr);
  struct Cleanup {
    std::vector<ncclComm_t>& comms;
    std::vector<void*>& buffers;
    std::vector<cudaStream_t>& streams;
    ~Cleanup() {
      for (size_t d = 0; d < comms.size(); ++d) {
        cudaSetDevice(static_cast<int>(d));
        if (streams[d] != nullptr) cudaStreamSynchronize(streams[d]);
        if (comms[d] != nullptr) ncclCommDestroy(comms[d]);
        if (streams[d] != nullptr) cudaStreamDestroy(streams[d]);
        if (buffers[d] != nullptr) cudaFree(buffers[d]);
      }
    }
  } cleanup{comms, buffers, streams};
  for (int d = 0; d < n; ++d) {
    const std::string where = " on cuda:" + std::to_string(d);
    CheckCuda(cudaSetDevice(d), "cudaSetDevice" + where);
    CheckCuda(cudaMalloc(&buffers[d], max_bytes), "cudaMalloc" + where);
    CheckCuda(cudaMemset(buffers[d], 0, max_bytes), "cudaMemset" + where);
    CheckCuda(cudaStreamCreateWithFlags(&streams[d], cudaStreamNonBlocking),
              "cudaStreamCreate" + where);
    CheckCuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize" + where);
  }

  Collective c;
  c.launch = [&](size_t count_floats) {
    CheckNccl(ncclGroupStart(), "ncclGroupStart");
    for (int d = 0; d < n; ++d) {
      CheckNccl(ncclAllReduce(buffers[d], buffers[d], count_floats, ncclFloat32, ncclSum, comms[d],
                              streams[d]),
                "ncclAllReduce on cuda:" + std::to_string(d));
    }
    CheckNccl(ncclGroupEnd(), "ncclGroupEnd");
  };
  c.wait = [&] {
    for (int d = 0; d < n; ++d)
      CheckCuda(cudaStreamSynchronize(streams[d]), "all-reduce on cuda:" + std::to_string(d));
  };
  c.align = [](const std::string&) {};
  const std::vector<Row> rows = Measure(flags, c);

  std::string names;
  for (int d = 0; d < n; ++d)
    names += (d > 0 ? ", " : "") + ("cuda:" + std::to_string(d) + " " + DeviceName(d));
  int version = 0;  // the library's, MAJOR * 10000 + MINOR * 100 + PATCH
  CheckNccl(ncclGetVersion(&version), "ncclGetVersion");
  std::printf(
      "nccl_bench: raw NCCL %d.%d.%d, ncclCommInitAll over %d GPU(s) in one process in %.2f s\n",
      version / 10000, version / 100 % 100, version % 100, n, init_s);
  Report(flags, "raw", n, names, rows);
  return 0;
}

// --device-count, or a run of --mode; exit 77 without a GPU.
int Run(const Flags& flags, bool device_count) {
  if (flags.min_mib > flags.max_mib) {
    throw Fatal("--min-mib " + std::to_string(flags.min_mib) + " is above --max-mib " +
                std::to_string(flags.max_mib));
  }
  if (device_count) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
    std::printf("%d\n", count);
    return 0;
  }
  try {
    return flags.mode == "ember" ? RunEmber(flags) : RunRaw(flags);
  } catch (const NoGpu& e) {
    return SkipNoGpu("nccl_bench", e);
  }
}

}  // namespace
}  // namespace ember::bench

int main(int argc, char** argv) {
  CLI::App app{
      "nccl_bench: all-reduce bus bandwidth through Ember's NCCL communicator "
      "(under ember-run) or raw NCCL"};
  ember::bench::Flags flags;
  bool device_count = false;
  app.add_option("--mode", flags.mode, "ember (one rank per GPU, under ember-run) or raw")
      ->check(CLI::IsMember({"ember", "raw"}))
      ->capture_default_str();
  app.add_option("--min-mib", flags.min_mib, "smallest all-reduce (MiB)")
      ->check(CLI::Range(1u, 1u << 16))
      ->capture_default_str();
  app.add_option("--max-mib", flags.max_mib, "largest all-reduce (MiB); sizes double")
      ->check(CLI::Range(1u, 1u << 16))
      ->capture_default_str();
  app.add_option("--iters", flags.iters, "timed all-reduces per size")
      ->check(CLI::Range(1u, 1000000u))
      ->capture_default_str();
  app.add_option("--warmup", flags.warmup, "untimed all-reduces per size first")
      ->capture_default_str();
  app.add_option("--gpus", flags.gpus, "raw: GPUs to use (0: all visible)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--socket", flags.socket, "ember: emberd's socket (default $EMBER_SOCKET)");
  app.add_option("--timeout-s", flags.timeout_s, "ember: the communicator's timeout")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--json", flags.json, "append one JSON line per size to this file");
  app.add_flag("--device-count", device_count, "print the number of visible CUDA devices and exit");
  return ember::examples::ProgramMain(
      app, argc, argv, "nccl_bench", [&] { return ember::bench::Run(flags, device_count); });
}
