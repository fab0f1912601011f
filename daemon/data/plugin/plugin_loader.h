// Loading plugins (shared libraries speaking ember/plugin.h) into emberd: a library
// may add a dataset format (a reader), image pipeline steps (transforms), or both.
#ifndef EMBER_DAEMON_DATA_PLUGIN_PLUGIN_LOADER_H_
#define EMBER_DAEMON_DATA_PLUGIN_PLUGIN_LOADER_H_

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ember/plugin.h"
#include "ember/status.h"

namespace ember::daemon {

// The `err` buffer emberd hands a plugin function (ember/plugin.h): zeroed, and always
// NUL-terminated when read. One per call, on the caller's stack.
class PluginErrorBuffer {
 public:
  PluginErrorBuffer() { std::memset(buf_, 0, sizeof(buf_)); }
  char* data() { return buf_; }
  size_t size() const { return sizeof(buf_); }
  // What the plugin wrote, or "<function> failed (the plugin gave no message)".
  std::string Message(const char* function) {
    buf_[sizeof(buf_) - 1] = '\0';
    if (buf_[0] == '\0') return std::string(function) + " failed (the plugin gave no message)";
    return buf_;
  }

 private:
  char buf_[1024];
};

// One loaded plugin library. Immutable and thread-safe; the library stays loaded until
// the last shared_ptr to it (the registry's, a Source's or a TransformStep's) is dropped.
class Plugin {
 public:
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;
  ~Plugin();  // dlclose

  const std::string& path() const { return path_; }  // as loaded (canonical)

  // Whether the library exports ember_plugin_init (a reader).
  bool has_reader() const { return table_ != nullptr; }
  // The reader's format_name; "" without a reader.
  const std::string& format() const { return format_; }
  // The reader table. Only if has_reader().
  const ember_plugin_v1& table() const { return *table_; }

  // The transform tables from ember_transform_init, in the library's order; empty if it
  // does not export that symbol. Each is owned by the library.
  const std::vector<const ember_transform_v1*>& transforms() const { return transforms_; }
  // The transform table whose step_name is `step`, or nullptr.
  const ember_transform_v1* FindTransform(const std::string& step) const;

 private:
  friend Result<std::shared_ptr<const Plugin>> LoadPlugin(const std::string& path);
  Plugin(std::string path, void* library, const ember_plugin_v1* table,
         std::vector<const ember_transform_v1*> transforms);

  std::string path_;
  std::string format_;
  void* library_;                 // from dlopen
  const ember_plugin_v1* table_;  // owned by the library; nullptr without a reader
  std::vector<const ember_transform_v1*> transforms_;
};

// dlopen(RTLD_NOW | RTLD_LOCAL)s `path` and calls its ember_plugin_init and
// ember_transform_init (it must export at least one). Checks the reader table (ABI
// version, struct size, format name [a-z0-9_-]{1,32}, every function) and every
// transform table (1..EMBER_TRANSFORM_MAX_STEPS of them, NULL-terminated; ABI version,
// struct size, step name [a-z0-9_]{1,32} unique within the library, every function).
// Errors name the file and what is wrong: kNotFound if the file does not exist,
// kInvalidArgument if it is not a loadable library or not a valid plugin. Does not
// check any allow-list (emberd calls it only through LoadAllowedPlugin), nor clashes
// with built-in names or other plugins (PluginRegistry does).
Result<std::shared_ptr<const Plugin>> LoadPlugin(const std::string& path);

// LoadPlugin, but only if `path` resolves (realpath: symlinks, "..") to the same file as
// one of `allowed_paths`; kFailedPrecondition naming the path otherwise.
Result<std::shared_ptr<const Plugin>> LoadAllowedPlugin(
    const std::string& path, const std::vector<std::string>& allowed_paths);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_PLUGIN_PLUGIN_LOADER_H_
