// Finds and loads the parquet format's Arrow backend, libember_parquet_arrow.so
// (arrow_parquet.h), the first time a parquet dataset needs it. emberd links no Arrow: where
// the library, or the Arrow libraries it links (the pyarrow wheel's, third_party/arrow.bzl),
// cannot be loaded, emberd starts and serves every other format as ever, and parquet
// datasets are refused with a message saying what is missing. (A plugin through ember/plugin.h
// cannot do what this format does: read with the caller's rights through Env, read remote
// files through the node's shard cache and its forecasts, charge dataset memory, shuffle by
// shards; so the format is built in and only Arrow's decoding is loaded.)
//
// Where: beside the running program (the directory of /proc/self/exe, DIR):
//   DIR/libember_parquet_arrow.so                a test binary in the library's package
//   DIR/data/parquet/libember_parquet_arrow.so   emberd in bazel-bin/daemon
//   DIR/../lib/ember/libember_parquet_arrow.so   an installed emberd (/usr/local/bin)
// the first that exists is loaded (RTLD_LOCAL) and asked for its table, which must have been
// built from the same parquet_file.h (kParquetBackendAbi).
//
// Process-wide: a loaded library stays loaded until exit (dlopen's state is the process's);
// a failure is not kept, so a backend installed later is found by the next registration.
// Thread-safe.
#ifndef EMBER_DAEMON_DATA_PARQUET_PARQUET_BACKEND_H_
#define EMBER_DAEMON_DATA_PARQUET_PARQUET_BACKEND_H_

#include <string>
#include <vector>

#include "daemon/data/parquet/parquet_file.h"
#include "ember/status.h"

namespace ember::daemon {

inline constexpr char kParquetBackendLibrary[] = "libember_parquet_arrow.so";

// The backend (see above). kFailedPrecondition "format parquet needs Arrow C++ ...", naming
// the paths looked at and the loader's reason (e.g. "libarrow.so.2500: cannot open shared
// object file"), and how to get it (tools/install-deps).
Result<const ParquetBackend*> LoadParquetBackend();

// The library at `path`, loaded as LoadParquetBackend loads the one it finds (tests).
Result<const ParquetBackend*> LoadParquetBackendFrom(const std::string& path);

// Where LoadParquetBackend looks, in order.
std::vector<std::string> ParquetBackendCandidates();

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_PARQUET_PARQUET_BACKEND_H_
