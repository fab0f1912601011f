// Fuzzes the daemon's config parser (ParseConfig) on the input as YAML text, and
// ParseByteSize on it as a size ("4GiB").
#include <cstddef>
#include <cstdint>
#include <string>

#include "daemon/config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  using namespace ember::daemon;
  const std::string text(reinterpret_cast<const char*>(data), size);
  Result<DaemonConfig> config = ParseConfig(text, "emberd.yaml");
  if (config.ok()) (void)CheckListenHasTls(*config);
  (void)ParseByteSize(text);
  return 0;
}
