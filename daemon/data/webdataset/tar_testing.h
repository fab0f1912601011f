// Test helper: tar archives written by libarchive (pax, as GNU tar and Python's tarfile
// write them), for the webdataset format's tests.
#ifndef EMBER_DAEMON_DATA_WEBDATASET_TAR_TESTING_H_
#define EMBER_DAEMON_DATA_WEBDATASET_TAR_TESTING_H_

#include <string>
#include <utility>
#include <vector>

namespace ember::daemon {

// (name, bytes) members, regular files in this order; a name ending in '/' is a directory.
using TarMembers = std::vector<std::pair<std::string, std::string>>;

// The archive's bytes. Fails the running test if libarchive fails.
std::string TarBytes(const TarMembers& members);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_WEBDATASET_TAR_TESTING_H_
