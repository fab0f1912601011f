// The decode limit: how many images per second this machine can decode and transform
// with no loader at all — one process per core, each running the same decode + pipeline
// code emberd uses (libjpeg-turbo with DCT scaling, libpng, ImagePipeline) over files
// already in memory. Ember's image throughput is judged against this figure, measured in
// the same run.
//
// Where the output goes is part of the work: a loader hands its images to another
// process, so they are written to shared memory and leave the cache (a batch of 64
// 224x224 images is 9.2 MiB). Each process writes its images in turn to --outputs
// places (192 = three batches of 64, a ring's prefetch depth) of a memfd, as emberd
// writes a ring's slots; with --in-cache it rewrites one private buffer instead, which
// stays in cache and which no loader can do (on the bench folder's small images that took
// 7% less CPU per image, median of 6 interleaved rounds).
//
//   decode_limit --dir DIR --pipeline FILE [--procs N] [--seconds S] [--outputs K] [--in-cache]
//
// Last line: decode_limit: images_per_s=<float> procs=<N> files=<count> cpu_us_per_image=<float>
// (the processes' CPU time per image: steadier than the rate on a machine doing other
// work; compare builds with --procs 1).
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/env.h"
#include "daemon/data/image/pipeline.h"
#include "pack/imagefolder_pack.h"

namespace {

using ember::daemon::ImagePipeline;

double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Decodes files round-robin from `first` for `seconds`; writes
// "<images> <seconds> <CPU seconds>".
int Worker(const std::vector<std::string>& names, const std::vector<std::string>& bytes,
           const ImagePipeline& pipeline, size_t first, double seconds, size_t outputs,
           bool in_cache, int out_fd) {
  // Cache-line aligned places, as a ring slot's samples are.
  const size_t place = (pipeline.OutputBytes() + 63) / 64 * 64;
  std::vector<uint8_t> private_buffer;
  std::unique_ptr<ember::SharedMemory> shared;
  uint8_t* places = nullptr;
  if (in_cache) {
    outputs = 1;
    private_buffer.resize(place);
    places = private_buffer.data();
  } else {
    auto memory = ember::NewPosixEnv()->CreateSharedMemory("decode-limit", place * outputs);
    if (!memory.ok()) {
      std::fprintf(stderr, "decode_limit: %s\n", memory.status().ToString().c_str());
      return 1;
    }
    shared = std::move(memory).value();
    places = static_cast<uint8_t*>(shared->data());
    std::memset(places, 0, place * outputs);  // fault the pages in before the clock starts
  }
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const double cpu_start = ProcessCpuSeconds();
  const auto end = start + std::chrono::duration<double>(seconds);
  uint64_t images = 0, epoch = 0;
  for (size_t i = first; Clock::now() < end; ++i) {
    const size_t k = i % names.size();
    if (k == 0) ++epoch;
    ember::Status s = pipeline.Run(names[k], reinterpret_cast<const uint8_t*>(bytes[k].data()),
                                   bytes[k].size(), /*seed=*/1, epoch, k,
                                   places + (images % outputs) * place);
    if (!s.ok()) {
      std::fprintf(stderr, "decode_limit: %s\n", s.ToString().c_str());
      return 1;
    }
    ++images;
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const double cpu = ProcessCpuSeconds() - cpu_start;
  const std::string line =
      std::to_string(images) + " " + std::to_string(elapsed) + " " + std::to_string(cpu) + "\n";
  return write(out_fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"decode_limit: images/s of decode + transform, one process per core"};
  std::string dir, pipeline_file;
  unsigned procs = std::max(1u, std::thread::hardware_concurrency());
  double seconds = 10;
  size_t outputs = 192;
  bool in_cache = false;
  app.add_option("--dir", dir, "an image folder (class sub-folders of JPEG/PNG)")->required();
  app.add_option("--pipeline", pipeline_file, "pipeline YAML (e.g. configs/pipelines/imagenet_train.yaml)")->required();
  app.add_option("--procs", procs, "processes")->capture_default_str();
  app.add_option("--seconds", seconds, "measured seconds")->capture_default_str();
  app.add_option("--outputs", outputs, "shared-memory places each process writes in turn")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--in-cache", in_cache, "rewrite one private buffer instead (stays in cache)");
  CLI11_PARSE(app, argc, argv);

  std::ifstream in(pipeline_file);
  if (!in) {
    std::fprintf(stderr, "decode_limit: cannot read %s\n", pipeline_file.c_str());
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto pipeline = ImagePipeline::Parse(text.str());
  if (!pipeline.ok()) {
    std::fprintf(stderr, "decode_limit: %s: %s\n", pipeline_file.c_str(),
                 pipeline.status().message().c_str());
    return 1;
  }
  auto env = ember::NewPosixEnv();
  auto listing = ember::pack::ListImageFolder(*env, dir);
  if (!listing.ok()) {
    std::fprintf(stderr, "decode_limit: %s\n", listing.status().ToString().c_str());
    return 1;
  }
  std::vector<std::string> names, bytes;
  for (const auto& file : listing->files) {
    const std::string path = listing->root + "/" + file.path;
    auto contents = env->ReadFile(path);
    if (!contents.ok()) {
      std::fprintf(stderr, "decode_limit: %s\n", contents.status().ToString().c_str());
      return 1;
    }
    names.push_back(path);
    bytes.push_back(std::move(contents).value());
  }
  if (names.empty()) {
    std::fprintf(stderr, "decode_limit: no images under %s\n", dir.c_str());
    return 1;
  }

  std::vector<pid_t> pids;
  std::vector<int> pipes;
  for (unsigned p = 0; p < procs; ++p) {
    int fds[2];
    if (pipe(fds) != 0) return 1;
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      _exit(Worker(names, bytes, *pipeline, p * names.size() / procs, seconds, outputs,
                      in_cache, fds[1]));
    }
    close(fds[1]);
    pids.push_back(pid);
    pipes.push_back(fds[0]);
  }
  double total = 0, cpu_total = 0;
  unsigned long long images_total = 0;
  bool ok = true;
  for (unsigned p = 0; p < procs; ++p) {
    char buf[128] = {0};
    ssize_t n = read(pipes[p], buf, sizeof(buf) - 1);
    close(pipes[p]);
    int status = 0;
    waitpid(pids[p], &status, 0);
    unsigned long long images = 0;
    double elapsed = 0, cpu = 0;
    if (n <= 0 || std::sscanf(buf, "%llu %lf %lf", &images, &elapsed, &cpu) != 3 ||
        elapsed <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ok = false;
      continue;
    }
    total += images / elapsed;
    cpu_total += cpu;
    images_total += images;
  }
  if (!ok || images_total == 0) return 1;
  std::printf("decode_limit: images_per_s=%.1f procs=%u files=%zu cpu_us_per_image=%.1f\n", total,
              procs, names.size(), 1e6 * cpu_total / static_cast<double>(images_total));
  return 0;
}
