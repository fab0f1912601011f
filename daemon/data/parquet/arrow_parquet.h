// The ParquetBackend over Arrow C++ (@arrow: the libarrow and libparquet of the pyarrow
// wheel tools/install-deps installs; third_party/arrow.bzl). Built into
// libember_parquet_arrow.so, which emberd loads when it first needs it
// (parquet_backend.h), and linked straight into tests.
//
// Footers are read once (Open) and kept; each Read opens the file's bytes again with that
// footer: an in-memory file (a mapping) through arrow::io::BufferReader without a copy,
// another through ParquetBytes::ReadAt, only the chunks of the columns asked for. Arrow
// decodes on the calling thread (no Arrow thread pool, no pre-buffering). Arrow's
// exceptions and errors become Statuses here; none leaves the library.
#ifndef EMBER_DAEMON_DATA_PARQUET_ARROW_PARQUET_H_
#define EMBER_DAEMON_DATA_PARQUET_ARROW_PARQUET_H_

#include "daemon/data/parquet/parquet_file.h"

namespace ember::daemon {

// The backend; lives as long as the program (or the library).
const ParquetBackend& ArrowParquetBackend();

}  // namespace ember::daemon

// EMBER_PARQUET_BACKEND_SYMBOL: ArrowParquetBackend() if abi == kParquetBackendAbi.
extern "C" const ember::daemon::ParquetBackend* ember_parquet_backend(uint32_t abi);

#endif  // EMBER_DAEMON_DATA_PARQUET_ARROW_PARQUET_H_
