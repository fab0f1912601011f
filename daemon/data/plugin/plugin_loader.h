// Loading dataset-format plugins (shared libraries speaking ember/plugin.h) into emberd.
#ifndef EMBER_DAEMON_DATA_PLUGIN_PLUGIN_LOADER_H_
#define EMBER_DAEMON_DATA_PLUGIN_PLUGIN_LOADER_H_

#include <memory>
#include <string>
#include <vector>

#include "ember/plugin.h"
#include "ember/status.h"

namespace ember::daemon {

// One loaded plugin library. Immutable and thread-safe; the library stays loaded until
// the last shared_ptr to it (the registry's, or a Source's) is dropped.
class Plugin {
 public:
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;
  ~Plugin();  // dlclose

  const std::string& path() const { return path_; }      // as loaded (canonical)
  const std::string& format() const { return format_; }  // the table's format_name
  const ember_plugin_v1& table() const { return *table_; }

 private:
  friend Result<std::shared_ptr<const Plugin>> LoadPlugin(const std::string& path);
  Plugin(std::string path, void* library, const ember_plugin_v1* table);

  std::string path_;
  std::string format_;
  void* library_;                 // from dlopen
  const ember_plugin_v1* table_;  // owned by the library
};

// dlopen(RTLD_NOW | RTLD_LOCAL)s `path`, calls its ember_plugin_init and checks the
// table: ABI version, struct size, format name ([a-z0-9_-]{1,32}) and every function.
// Errors name the file and what is wrong: kNotFound if the file does not exist,
// kInvalidArgument if it is not a loadable library or not a valid plugin. Does not
// check any allow-list: emberd calls it only through LoadAllowedPlugin.
Result<std::shared_ptr<const Plugin>> LoadPlugin(const std::string& path);

// LoadPlugin, but only if `path` resolves (realpath: symlinks, "..") to the same file as
// one of `allowed_paths`; kFailedPrecondition naming the path otherwise.
Result<std::shared_ptr<const Plugin>> LoadAllowedPlugin(
    const std::string& path, const std::vector<std::string>& allowed_paths);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_PLUGIN_PLUGIN_LOADER_H_
