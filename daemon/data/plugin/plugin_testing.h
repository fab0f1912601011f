// Test helpers: where the test plugins are in a test's runfiles, and temp files.
#ifndef EMBER_DAEMON_DATA_PLUGIN_PLUGIN_TESTING_H_
#define EMBER_DAEMON_DATA_PLUGIN_PLUGIN_TESTING_H_

#include <cstdlib>
#include <fstream>
#include <string>

namespace ember::daemon {

// The absolute runfiles path of daemon/data/plugin/examples/<name>.
inline std::string TestPluginPath(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return std::string(srcdir ? srcdir : ".") + "/" + (workspace ? workspace : "ember") +
         "/daemon/data/plugin/examples/" + name;
}

// Writes `text` to $TEST_TMPDIR/<name> and returns the path.
inline std::string WriteTempFile(const std::string& name, const std::string& text) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  return path;
}

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_PLUGIN_PLUGIN_TESTING_H_
