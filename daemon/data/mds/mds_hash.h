// The hashes an MDS index.json may name for its shards (Mosaic's streaming.base.hashing:
// Python's hashlib and xxhash), computed as their hexdigest() writes them: md5, sha1,
// sha224, sha256, sha384, sha512, sha3_224, sha3_256, sha3_384, sha3_512, blake2b,
// blake2s (OpenSSL's libcrypto) and xxh32, xxh64, xxh3_64, xxh3_128, xxh128 (libxxhash,
// seed 0; digests in canonical, big-endian, order).
#ifndef EMBER_DAEMON_DATA_MDS_MDS_HASH_H_
#define EMBER_DAEMON_DATA_MDS_MDS_HASH_H_

#include <cstddef>
#include <string>

#include "ember/status.h"

namespace ember::daemon {

// Whether `algorithm` is one of the above.
bool IsMdsHash(const std::string& algorithm);

// The algorithms, "blake2b, blake2s, md5, ...", for messages.
std::string MdsHashNames();

// The lowercase hex digest of `size` bytes at `data`. kInvalidArgument naming the
// algorithm if it is not IsMdsHash; kInternal if libcrypto fails.
Result<std::string> MdsHexDigest(const std::string& algorithm, const char* data, size_t size);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_MDS_MDS_HASH_H_
