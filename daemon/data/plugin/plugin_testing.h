// Test helpers: where the test plugins are in a test's runfiles.
#ifndef EMBER_DAEMON_DATA_PLUGIN_PLUGIN_TESTING_H_
#define EMBER_DAEMON_DATA_PLUGIN_PLUGIN_TESTING_H_

#include <cstdlib>
#include <string>

namespace ember::daemon {

// The absolute runfiles path of daemon/data/plugin/examples/<name>.
inline std::string TestPluginPath(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return std::string(srcdir ? srcdir : ".") + "/" + (workspace ? workspace : "ember") +
         "/daemon/data/plugin/examples/" + name;
}

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_PLUGIN_PLUGIN_TESTING_H_
