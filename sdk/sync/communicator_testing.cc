#include "sdk/sync/communicator_testing.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <torch/csrc/distributed/c10d/FileStore.hpp>

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

}  // namespace ember::sdk::testing
