#include "daemon/data/formats.h"

#include "daemon/data/idx.h"

namespace ember::daemon {

namespace {

constexpr const char* kKnownFormats = "idx";

Status UnknownFormat(const std::string& format) {
  return InvalidArgument("unknown format '" + format + "' (known: " + kKnownFormats + ")");
}

}  // namespace

Result<DatasetInfo> ProbeDataset(Env& env, const DatasetSpec& spec) {
  if (spec.format == "idx") return ProbeIdx(env, spec);
  return UnknownFormat(spec.format);
}

Result<std::unique_ptr<Source>> LoadDataset(Env& env, const DatasetSpec& spec) {
  if (spec.format == "idx") return LoadIdx(env, spec);
  return UnknownFormat(spec.format);
}

}  // namespace ember::daemon
