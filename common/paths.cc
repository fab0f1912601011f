#include "common/paths.h"

#include <filesystem>
#include <system_error>

namespace ember {

Result<std::string> AbsolutePath(const std::string& path, const std::string& what) {
  if (path.empty()) return InvalidArgument(what + " is empty");
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(path, error);
  if (error) return ErrnoStatus(path + ": cannot make the path absolute", error.value());
  std::string out = absolute.lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

}  // namespace ember
