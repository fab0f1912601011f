// A dataset's fingerprint: a 64-bit digest of what decides which sample an index means,
// so that a loader state saved on one copy of a dataset is refused on another, and nodes
// whose copies differ do not serve one job.
//
// It covers the sample count, the tensors (names, dtypes, shapes), the files (their
// paths relative to the dataset's path, so copies under different mount points match,
// and their sizes) and the first and last 4 KiB of each of the first 16 files (the index
// and header files of idx, packed and tokens datasets; of a directory, such as an image
// folder's root, the names in it); a URL (a remote shard) by its name only. Not a
// checksum of all the data:
// an image replaced by one of the same size in a large folder goes unnoticed.
#ifndef EMBER_DAEMON_CATALOG_FINGERPRINT_H_
#define EMBER_DAEMON_CATALOG_FINGERPRINT_H_

#include <cstdint>
#include <string>

#include "common/env.h"
#include "daemon/catalog/dataset.h"
#include "ember/status.h"

namespace ember::daemon {

// Reads the files of `info` through `env`; errors name the file. Never 0 (0 means
// "unknown" in a catalog written before fingerprints).
Result<uint64_t> DatasetFingerprint(Env& env, const DatasetInfo& info);

// "0123456789abcdef": how fingerprints are shown and stored.
std::string FingerprintHex(uint64_t fingerprint);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_CATALOG_FINGERPRINT_H_
