#include "daemon/data/formats.h"

#include "daemon/catalog/fingerprint.h"

#include "daemon/data/idx.h"
#include "daemon/data/image/imagefolder.h"
#include "daemon/data/image/packed_images.h"
#include "daemon/data/mds/mds.h"
#include "daemon/data/packed/packed_source.h"
#include "daemon/data/parquet/parquet.h"
#include "daemon/data/parquet/parquet_backend.h"
#include "daemon/data/plugin/plugin_source.h"
#include "daemon/data/tokens/tokens.h"
#include "daemon/data/webdataset/webdataset.h"

namespace ember::daemon {

namespace {

// A built-in format. `deps.plugins` gives the image formats their transform plugins,
// `deps.shards` the remote shards; `memory` is charged by the formats that hold a set (or
// its index) in memory (idx, mds, webdataset).
struct Format {
  const char* name;
  Result<DatasetInfo> (*probe)(Env&, const DatasetSpec&, const FormatDeps& deps,
                               DatasetMemory::Charge* memory);
  Result<std::unique_ptr<Source>> (*load)(Env&, const DatasetSpec&, const FormatDeps& deps,
                                          DatasetMemory::Charge* memory);
};

RecordCodecFactory ImageCodec(const PluginRegistry* plugins) {
  return [plugins](const pack::PackedDataset& dataset, const DatasetSpec& spec) {
    return ImageRecordCodec(dataset, spec, plugins);
  };
}

using Memory = DatasetMemory::Charge*;

constexpr Format kFormats[] = {
    {"idx",
     [](Env& env, const DatasetSpec& spec, const FormatDeps&, Memory memory) {
       return ProbeIdx(env, spec, memory);
     },
     [](Env& env, const DatasetSpec& spec, const FormatDeps&, Memory memory) {
       return LoadIdx(env, spec, memory);
     }},
    {"imagefolder",
     [](Env& env, const DatasetSpec& spec, const FormatDeps& deps, Memory) {
       return ProbeImageFolder(env, spec, deps.plugins);
     },
     [](Env& env, const DatasetSpec& spec, const FormatDeps& deps, Memory) {
       return LoadImageFolder(env, spec, deps.plugins);
     }},
    {"mds",
     [](Env& env, const DatasetSpec& spec, const FormatDeps& deps, Memory memory) {
       return ProbeMds(env, spec, deps.plugins, memory, deps.shards, deps.progress);
     },
     [](Env& env, const DatasetSpec& spec, const FormatDeps& deps, Memory memory) {
       return LoadMds(env, spec, deps.plugins, memory, deps.shards);
     }},
    {"packed",
     [](Env& env, const DatasetSpec& spec, const FormatDeps& deps, Memory) {
       return ProbePacked(env, spec, ImageCodec(deps.plugins));
     },
     [](Env& env, const DatasetSpec& spec, const FormatDeps& deps, Memory) {
       return LoadPacked(env, spec, ImageCodec(deps.plugins));
     }},
    {"parquet",  // Arrow's backend is loaded on first use (parquet_backend.h)
     [](Env& env, const DatasetSpec& spec, const FormatDeps& deps,
        Memory memory) -> Result<DatasetInfo> {
       EMBER_ASSIGN_OR_RETURN(const ParquetBackend* backend, LoadParquetBackend());
       return ProbeParquet(*backend, env, spec, deps.plugins, memory, deps.shards,
                           deps.progress);
     },
     [](Env& env, const DatasetSpec& spec, const FormatDeps& deps,
        Memory memory) -> Result<std::unique_ptr<Source>> {
       EMBER_ASSIGN_OR_RETURN(const ParquetBackend* backend, LoadParquetBackend());
       return LoadParquet(*backend, env, spec, deps.plugins, memory, deps.shards);
     }},
    {"tokens",
     [](Env& env, const DatasetSpec& spec, const FormatDeps&, Memory) {
       return ProbeTokens(env, spec);
     },
     [](Env& env, const DatasetSpec& spec, const FormatDeps&, Memory) {
       return LoadTokens(env, spec);
     }},
    {"webdataset",
     [](Env& env, const DatasetSpec& spec, const FormatDeps& deps, Memory memory) {
       return ProbeWebDataset(env, spec, deps.plugins, memory, deps.shards, deps.progress);
     },
     [](Env& env, const DatasetSpec& spec, const FormatDeps& deps, Memory memory) {
       return LoadWebDataset(env, spec, deps.plugins, memory, deps.shards);
     }},
};

const Format* FindBuiltin(const std::string& name) {
  for (const Format& format : kFormats) {
    if (name == format.name) return &format;
  }
  return nullptr;
}

std::shared_ptr<const Plugin> FindPlugin(const PluginRegistry* plugins, const std::string& name) {
  return plugins != nullptr ? plugins->Find(name) : nullptr;
}

Status UnknownFormat(const PluginRegistry* plugins, const std::string& name) {
  std::string known;
  for (const Format& format : kFormats) {
    known += (known.empty() ? "" : ", ") + std::string(format.name);
  }
  if (plugins != nullptr) {
    for (const std::string& format : plugins->Formats()) known += ", " + format;
  }
  return InvalidArgument("unknown format '" + name + "' (known: " + known + ")");
}

}  // namespace

Status CheckPluginFormats(const PluginRegistry& plugins) {
  for (const std::string& format : plugins.Formats()) {
    if (FindBuiltin(format) != nullptr) {
      return AlreadyExists("plugin " + plugins.Find(format)->path() + ": format '" + format +
                           "' is built into emberd");
    }
  }
  return Status::Ok();
}

Result<DatasetInfo> ProbeDataset(Env& env, const DatasetSpec& spec, const FormatDeps& deps,
                                 DatasetMemory::Charge* memory) {
  Result<DatasetInfo> info = [&]() -> Result<DatasetInfo> {
    if (const Format* format = FindBuiltin(spec.format))
      return format->probe(env, spec, deps, memory);
    if (auto plugin = FindPlugin(deps.plugins, spec.format)) return ProbeWithPlugin(plugin, spec);
    return UnknownFormat(deps.plugins, spec.format);
  }();
  if (!info.ok()) return info;
  if (spec.shuffle == "shards" && info->shard_starts.empty())
    return InvalidArgument("shuffle: shards needs a format that reads shards (webdataset, mds, "
                           "parquet); format '" + spec.format + "' has none");
  Result<uint64_t> fingerprint = DatasetFingerprint(env, *info);
  if (!fingerprint.ok()) return fingerprint.status().WithContext("fingerprint");
  info->fingerprint = *fingerprint;
  return info;
}

Result<DatasetInfo> ProbeDatasetAs(Env* base, const DatasetSpec& spec,
                                   const std::optional<Credentials>& reads_as,
                                   const FormatDeps& deps, DatasetMemory::Charge* memory) {
  std::shared_ptr<Env> env = EnvReadingAs(base, reads_as);
  if (reads_as && FindBuiltin(spec.format) == nullptr && FindPlugin(deps.plugins, spec.format)) {
    Status readable = env->IsDirectory(spec.path) ? env->ListDir(spec.path).status()
                                                  : env->OpenForRead(spec.path).status();
    if (!readable.ok()) return readable;
  }
  return ProbeDataset(*env, spec, deps, memory);
}

Result<std::unique_ptr<Source>> LoadDataset(Env& env, const DatasetSpec& spec,
                                            const FormatDeps& deps,
                                            DatasetMemory::Charge* memory) {
  if (const Format* format = FindBuiltin(spec.format))
    return format->load(env, spec, deps, memory);
  if (auto plugin = FindPlugin(deps.plugins, spec.format)) return LoadWithPlugin(plugin, spec);
  return UnknownFormat(deps.plugins, spec.format);
}

}  // namespace ember::daemon
