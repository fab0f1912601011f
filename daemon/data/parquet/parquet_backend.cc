#include "daemon/data/parquet/parquet_backend.h"

#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

#include <cerrno>

#include "common/mutex.h"

namespace ember::daemon {
namespace {

std::string DlError() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown dlopen error";
}

// The backend once found (its library is never closed).
struct Loaded {
  Mutex mu;
  const ParquetBackend* backend GUARDED_BY(mu) = nullptr;
};

Loaded& TheLoaded() {
  static Loaded* const loaded = new Loaded();
  return *loaded;
}

// What to do about a backend that cannot be loaded.
constexpr char kBuildIt[] =
    "bazel builds it with emberd (//daemon:emberd), against the pyarrow that tools/install-deps "
    "installs, or the one EMBER_ARROW names; an installed emberd looks in ../lib/ember/";
constexpr char kArrowGone[] =
    "it links the Arrow libraries of the pyarrow it was built against, from their directory: "
    "run tools/install-deps, or rebuild with EMBER_ARROW naming another pyarrow";

}  // namespace

std::vector<std::string> ParquetBackendCandidates() {
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return {};
  std::string dir(exe, static_cast<size_t>(n));
  dir = dir.substr(0, dir.rfind('/'));
  return {dir + "/" + kParquetBackendLibrary, dir + "/data/parquet/" + kParquetBackendLibrary,
          dir + "/../lib/ember/" + kParquetBackendLibrary};
}

Result<const ParquetBackend*> LoadParquetBackendFrom(const std::string& path) {
  const std::string what = "format parquet needs Arrow C++: ";
  dlerror();
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    return FailedPrecondition(what + "cannot load " + path + ": " + DlError() + " (" + kArrowGone +
                              ")");
  }
  dlerror();
  void* symbol = dlsym(library, EMBER_PARQUET_BACKEND_SYMBOL);
  if (symbol == nullptr) {
    dlclose(library);
    return FailedPrecondition(what + path + " has no " + EMBER_PARQUET_BACKEND_SYMBOL +
                              ": not Ember's parquet backend");
  }
  const ParquetBackend* backend =
      reinterpret_cast<EmberParquetBackendFn>(symbol)(kParquetBackendAbi);
  if (backend == nullptr) {
    dlclose(library);
    return FailedPrecondition(what + path + " was built from another version of Ember (not " +
                              "backend ABI " + std::to_string(kParquetBackendAbi) +
                              "): rebuild it with this emberd");
  }
  return backend;  // (the library stays loaded for the life of the process)
}

Result<const ParquetBackend*> LoadParquetBackend() {
  Loaded& loaded = TheLoaded();
  MutexLock lock(&loaded.mu);
  if (loaded.backend != nullptr) return loaded.backend;
  const std::vector<std::string> candidates = ParquetBackendCandidates();
  std::string looked;
  for (const std::string& path : candidates) {
    if (access(path.c_str(), F_OK) != 0) {
      looked += (looked.empty() ? "" : ", ") + path;
      continue;
    }
    Result<const ParquetBackend*> backend = LoadParquetBackendFrom(path);
    if (backend.ok()) loaded.backend = *backend;
    return backend;
  }
  return FailedPrecondition("format parquet needs Arrow C++: its backend, " +
                            std::string(kParquetBackendLibrary) + ", is not beside this program (" +
                            looked + "; " + kBuildIt + ")");
}

}  // namespace ember::daemon
