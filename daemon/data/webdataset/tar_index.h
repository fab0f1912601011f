// The members of a tar archive and where their bytes lie in it, read with libarchive, so
// that a shard's samples can be read in place (no extraction, no scan per read).
#ifndef EMBER_DAEMON_DATA_WEBDATASET_TAR_INDEX_H_
#define EMBER_DAEMON_DATA_WEBDATASET_TAR_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ember/status.h"

namespace ember::daemon {

// One regular file of an archive: its bytes are data[offset, offset + size).
struct TarMember {
  std::string name;  // as stored (pax/GNU long names resolved)
  uint64_t offset = 0;
  uint64_t size = 0;
};

// The most members one archive may list (what a client's file can make emberd hold).
inline constexpr size_t kMaxTarMembers = 1 << 20;

// The regular files of the uncompressed tar archive `data` (`size` bytes, e.g. a mapped
// shard), in archive order; directories, links and other entries are left out. Names
// the archive `name` in errors: kDataLoss for a damaged or truncated archive (libarchive's
// reason and the member it was at), a compressed one (members must be readable in
// place), a sparse member, or more than kMaxTarMembers members.
Result<std::vector<TarMember>> IndexTar(const std::string& name, const void* data, size_t size);

// An index as bytes (kept as a shard cache note) and back. DecodeTarIndex checks that every
// member lies within an archive of `size` bytes and the count is within kMaxTarMembers;
// nullopt if `bytes` are not such an index.
std::string EncodeTarIndex(const std::vector<TarMember>& members);
std::optional<std::vector<TarMember>> DecodeTarIndex(const std::string& bytes, uint64_t size);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_WEBDATASET_TAR_INDEX_H_
