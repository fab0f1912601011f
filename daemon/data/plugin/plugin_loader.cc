#include "daemon/data/plugin/plugin_loader.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>

#include "ember/ring_layout.h"

namespace ember::daemon {

static_assert(EMBER_DTYPE_UINT8 == static_cast<uint32_t>(ring::DType::kUInt8));
static_assert(EMBER_DTYPE_INT8 == static_cast<uint32_t>(ring::DType::kInt8));
static_assert(EMBER_DTYPE_INT16 == static_cast<uint32_t>(ring::DType::kInt16));
static_assert(EMBER_DTYPE_INT32 == static_cast<uint32_t>(ring::DType::kInt32));
static_assert(EMBER_DTYPE_INT64 == static_cast<uint32_t>(ring::DType::kInt64));
static_assert(EMBER_DTYPE_FLOAT32 == static_cast<uint32_t>(ring::DType::kFloat32));
static_assert(EMBER_DTYPE_FLOAT64 == static_cast<uint32_t>(ring::DType::kFloat64));
static_assert(EMBER_DTYPE_UINT16 == static_cast<uint32_t>(ring::DType::kUInt16));
static_assert(EMBER_PLUGIN_NAME_BYTES == ring::kNameBytes);

namespace {

constexpr size_t kMaxFormatBytes = 32;

Result<std::string> RealPath(const std::string& path) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) {
    return ErrnoStatus("plugin '" + path + "'", errno);
  }
  return std::string(resolved);
}

std::string DlError() {
  const char* e = dlerror();
  return e ? e : "unknown dlopen error";
}

// Checks a format name read from the plugin's memory without reading past 33 bytes.
Status CheckFormatName(const std::string& path, const char* name) {
  if (name == nullptr) return InvalidArgument("plugin " + path + ": format_name is NULL");
  const size_t len = strnlen(name, kMaxFormatBytes + 1);
  std::string shown(name, len);
  if (len == 0 || len > kMaxFormatBytes) {
    return InvalidArgument("plugin " + path + ": format_name '" + shown +
                           "' must be 1.." + std::to_string(kMaxFormatBytes) + " bytes");
  }
  for (char c : shown) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) {
      return InvalidArgument("plugin " + path + ": format_name '" + shown +
                             "' may only hold [a-z0-9_-]");
    }
  }
  return Status::Ok();
}

Status CheckTable(const std::string& path, const ember_plugin_v1* table) {
  if (table == nullptr) {
    return InvalidArgument("plugin " + path + ": " EMBER_PLUGIN_INIT_SYMBOL "() returned NULL");
  }
  if (table->abi_version != EMBER_PLUGIN_ABI_VERSION) {
    return InvalidArgument("plugin " + path + ": ABI version " +
                           std::to_string(table->abi_version) + ", this emberd speaks " +
                           std::to_string(EMBER_PLUGIN_ABI_VERSION));
  }
  if (table->struct_size < sizeof(ember_plugin_v1)) {
    return InvalidArgument("plugin " + path + ": struct_size " +
                           std::to_string(table->struct_size) + " is less than " +
                           std::to_string(sizeof(ember_plugin_v1)));
  }
  EMBER_RETURN_IF_ERROR(CheckFormatName(path, table->format_name));
  const char* missing = !table->probe         ? "probe"
                        : !table->open        ? "open"
                        : !table->read_sample ? "read_sample"
                        : !table->close       ? "close"
                                              : nullptr;
  if (missing) {
    return InvalidArgument("plugin " + path + ": function '" + missing + "' is NULL");
  }
  return Status::Ok();
}

}  // namespace

Plugin::Plugin(std::string path, void* library, const ember_plugin_v1* table)
    : path_(std::move(path)), format_(table->format_name), library_(library), table_(table) {}

Plugin::~Plugin() { dlclose(library_); }

Result<std::shared_ptr<const Plugin>> LoadPlugin(const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(std::string real, RealPath(path));
  dlerror();
  void* library = dlopen(real.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    return InvalidArgument("plugin " + real + ": cannot load: " + DlError());
  }
  dlerror();
  void* init = dlsym(library, EMBER_PLUGIN_INIT_SYMBOL);
  if (init == nullptr) {
    std::string why = DlError();
    dlclose(library);
    return InvalidArgument("plugin " + real + ": not an Ember plugin: no symbol '" +
                           EMBER_PLUGIN_INIT_SYMBOL + "' (" + why + ")");
  }
  const ember_plugin_v1* table = reinterpret_cast<ember_plugin_init_fn>(init)();
  Status checked = CheckTable(real, table);
  if (!checked.ok()) {
    dlclose(library);
    return checked;
  }
  return std::shared_ptr<const Plugin>(new Plugin(real, library, table));
}

Result<std::shared_ptr<const Plugin>> LoadAllowedPlugin(
    const std::string& path, const std::vector<std::string>& allowed_paths) {
  EMBER_ASSIGN_OR_RETURN(std::string real, RealPath(path));
  for (const std::string& allowed : allowed_paths) {
    Result<std::string> allowed_real = RealPath(allowed);
    if (allowed_real.ok() && *allowed_real == real) return LoadPlugin(real);
  }
  return FailedPrecondition("plugin '" + path + "' is not listed under 'plugins' in the config");
}

}  // namespace ember::daemon
