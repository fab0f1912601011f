// Path helpers shared by the formats and the packer.
#ifndef EMBER_COMMON_PATHS_H_
#define EMBER_COMMON_PATHS_H_

#include <string>

#include "ember/status.h"

namespace ember {

// `path` made absolute (against the process's working directory), lexically normalized,
// without a trailing '/' (except for "/" itself). `what` names the path in errors:
// kInvalidArgument "<what> is empty" for an empty path.
Result<std::string> AbsolutePath(const std::string& path, const std::string& what);

}  // namespace ember

#endif  // EMBER_COMMON_PATHS_H_
