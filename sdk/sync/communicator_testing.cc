#include "sdk/sync/communicator_testing.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <ATen/Parallel.h>
#include <torch/types.h>

#include "sdk/sync/error_message.h"
#include "sdk/sync/gloo_communicator.h"
#include "sdk/sync/shm_communicator.h"

namespace ember::sdk::testing {

std::unique_ptr<Communicator> MakeTestCommunicator(const std::string& backend,
                                                   const std::string& store_path, int rank,
                                                   int world_size,
                                                   std::chrono::milliseconds timeout,
                                                   const std::string& name) {
  if (backend == "gloo") {
    auto store = c10::make_intrusive<c10d::FileStore>(store_path, world_size);
    return MakeGlooCommunicator(store, rank, world_size, timeout, name);
  }
  TORCH_CHECK(backend == "shm", "unknown backend '", backend, "' (gloo or shm)");
  const std::string path = store_path + ".shm";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  TORCH_CHECK(fd >= 0, path, ": ", std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  // Every rank sets the same size; growing a file zero-fills it, and no rank writes
  // before it has sized the file itself.
  TORCH_CHECK(ftruncate(fd, static_cast<off_t>(ShmSegmentBytes(world_size))) == 0, path, ": ",
              std::strerror(errno));
  return MakeShmCommunicator(fd, rank, world_size, timeout, name);
}

void AddWorkerFlags(CLI::App& app, WorkerFlags& flags) {
  app.add_option("--store", flags.store_path, "c10d::FileStore file shared by the ranks")
      ->required();
  app.add_option("--backend", flags.backend, "gloo, or shm (segment in the file STORE.shm)")
      ->check(CLI::IsMember({"gloo", "shm"}));
  app.add_option("--rank", flags.rank)->required();
  app.add_option("--world", flags.world_size)->required();
  app.add_option("--steps", flags.steps);
  app.add_option("--timeout-ms", flags.timeout_ms);
  app.add_option("--die-after-step", flags.die_after_step, "SIGKILL this rank after that step");
}

std::unique_ptr<Communicator> MakeTestCommunicator(const WorkerFlags& flags,
                                                   const std::string& name) {
  return MakeTestCommunicator(flags.backend, flags.store_path, flags.rank, flags.world_size,
                              std::chrono::milliseconds(flags.timeout_ms), name);
}

void DieIfAsked(const WorkerFlags& flags, int step) {
  if (step != flags.die_after_step) return;
  std::fprintf(stderr, "rank %d: killing itself after step %d as asked\n", flags.rank, step);
  std::fflush(stderr);
  kill(getpid(), SIGKILL);
}

int WorkerMain(CLI::App& app, int argc, char** argv, const WorkerFlags& flags,
               const std::function<int()>& run) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;
  }
  at::set_num_threads(1);
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", flags.rank, ErrorMessage(e).c_str());
    std::fflush(stderr);
    std::_Exit(2);
  }
}

}  // namespace ember::sdk::testing
