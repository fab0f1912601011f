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

constexpr size_t kMaxNameBytes = 32;  // format and step names

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

// Checks a name read from the plugin's memory without reading past 33 bytes: 1..32
// bytes of [a-z0-9_], and '-' if `dash`. `what` is "format_name" or "transform 2:
// step_name".
Status CheckName(const std::string& path, const std::string& what, const char* name,
                 bool dash) {
  if (name == nullptr) return InvalidArgument("plugin " + path + ": " + what + " is NULL");
  const size_t len = strnlen(name, kMaxNameBytes + 1);
  std::string shown(name, len);
  if (len == 0 || len > kMaxNameBytes) {
    return InvalidArgument("plugin " + path + ": " + what + " '" + shown + "' must be 1.." +
                           std::to_string(kMaxNameBytes) + " bytes");
  }
  for (char c : shown) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || (dash && c == '-'))) {
      return InvalidArgument("plugin " + path + ": " + what + " '" + shown +
                             "' may only hold " + (dash ? "[a-z0-9_-]" : "[a-z0-9_]"));
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
  EMBER_RETURN_IF_ERROR(CheckName(path, "format_name", table->format_name, /*dash=*/true));
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

// Checks transform table number `index` (from 0; shown from 1) of `path`.
Status CheckTransform(const std::string& path, size_t index, const ember_transform_v1* table) {
  const std::string where = "plugin " + path + ": transform " + std::to_string(index + 1);
  if (table->abi_version != EMBER_TRANSFORM_ABI_VERSION) {
    return InvalidArgument(where + ": transform ABI version " +
                           std::to_string(table->abi_version) + ", this emberd speaks " +
                           std::to_string(EMBER_TRANSFORM_ABI_VERSION));
  }
  if (table->struct_size < sizeof(ember_transform_v1)) {
    return InvalidArgument(where + ": struct_size " + std::to_string(table->struct_size) +
                           " is less than " + std::to_string(sizeof(ember_transform_v1)));
  }
  EMBER_RETURN_IF_ERROR(CheckName(path, "transform " + std::to_string(index + 1) + ": step_name",
                                  table->step_name, /*dash=*/false));
  const char* missing = !table->create    ? "create"
                        : !table->destroy ? "destroy"
                        : !table->apply   ? "apply"
                                          : nullptr;
  if (missing) {
    return InvalidArgument(where + " ('" + table->step_name + "'): function '" + missing +
                           "' is NULL");
  }
  return Status::Ok();
}

// Reads and checks the NULL-terminated array from ember_transform_init.
Result<std::vector<const ember_transform_v1*>> CheckTransforms(
    const std::string& path, const ember_transform_v1* const* tables) {
  if (tables == nullptr) {
    return InvalidArgument("plugin " + path + ": " EMBER_TRANSFORM_INIT_SYMBOL
                           "() returned NULL");
  }
  std::vector<const ember_transform_v1*> transforms;
  for (size_t i = 0; tables[i] != nullptr; ++i) {
    if (i == EMBER_TRANSFORM_MAX_STEPS) {
      return InvalidArgument("plugin " + path + ": " EMBER_TRANSFORM_INIT_SYMBOL
                             "() returned more than " +
                             std::to_string(EMBER_TRANSFORM_MAX_STEPS) +
                             " transforms (or its array lacks the final NULL)");
    }
    EMBER_RETURN_IF_ERROR(CheckTransform(path, i, tables[i]));
    for (const ember_transform_v1* earlier : transforms) {
      if (std::strcmp(earlier->step_name, tables[i]->step_name) == 0) {
        return InvalidArgument("plugin " + path + ": two transforms named '" +
                               tables[i]->step_name + "'");
      }
    }
    transforms.push_back(tables[i]);
  }
  if (transforms.empty()) {
    return InvalidArgument("plugin " + path + ": " EMBER_TRANSFORM_INIT_SYMBOL
                           "() returned no transforms");
  }
  return transforms;
}

// The symbol's address in `library`, or nullptr if it does not export it.
void* FindSymbol(void* library, const char* name) {
  dlerror();
  return dlsym(library, name);
}

}  // namespace

Plugin::Plugin(std::string path, void* library, const ember_plugin_v1* table,
               std::vector<const ember_transform_v1*> transforms)
    : path_(std::move(path)),
      format_(table != nullptr ? table->format_name : ""),
      library_(library),
      table_(table),
      transforms_(std::move(transforms)) {}

Plugin::~Plugin() { dlclose(library_); }

const ember_transform_v1* Plugin::FindTransform(const std::string& step) const {
  for (const ember_transform_v1* transform : transforms_) {
    if (step == transform->step_name) return transform;
  }
  return nullptr;
}

Result<std::shared_ptr<const Plugin>> LoadPlugin(const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(std::string real, RealPath(path));
  dlerror();
  void* library = dlopen(real.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    return InvalidArgument("plugin " + real + ": cannot load: " + DlError());
  }
  void* reader_init = FindSymbol(library, EMBER_PLUGIN_INIT_SYMBOL);
  void* transform_init = FindSymbol(library, EMBER_TRANSFORM_INIT_SYMBOL);
  if (reader_init == nullptr && transform_init == nullptr) {
    dlclose(library);
    return InvalidArgument("plugin " + real + ": not an Ember plugin: no symbol '" +
                           EMBER_PLUGIN_INIT_SYMBOL + "' nor '" + EMBER_TRANSFORM_INIT_SYMBOL +
                           "'");
  }
  const ember_plugin_v1* table = nullptr;
  if (reader_init != nullptr) {
    table = reinterpret_cast<ember_plugin_init_fn>(reader_init)();
    Status checked = CheckTable(real, table);
    if (!checked.ok()) {
      dlclose(library);
      return checked;
    }
  }
  std::vector<const ember_transform_v1*> transforms;
  if (transform_init != nullptr) {
    auto checked =
        CheckTransforms(real, reinterpret_cast<ember_transform_init_fn>(transform_init)());
    if (!checked.ok()) {
      dlclose(library);
      return checked.status();
    }
    transforms = std::move(*checked);
  }
  return std::shared_ptr<const Plugin>(
      new Plugin(real, library, table, std::move(transforms)));
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
