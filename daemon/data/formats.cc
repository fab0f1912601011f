#include "daemon/data/formats.h"

#include "daemon/data/idx.h"
#include "daemon/data/image/imagefolder.h"
#include "daemon/data/image/packed_images.h"
#include "daemon/data/packed/packed_source.h"
#include "daemon/data/tokens/tokens.h"

namespace ember::daemon {

namespace {

struct Format {
  const char* name;
  Result<DatasetInfo> (*probe)(Env&, const DatasetSpec&);
  Result<std::unique_ptr<Source>> (*load)(Env&, const DatasetSpec&);
};

Result<DatasetInfo> ProbePackedImages(Env& env, const DatasetSpec& spec) {
  return ProbePacked(env, spec, ImageRecordCodec);
}

Result<std::unique_ptr<Source>> LoadPackedImages(Env& env, const DatasetSpec& spec) {
  return LoadPacked(env, spec, ImageRecordCodec);
}

constexpr Format kFormats[] = {
    {"idx", ProbeIdx, LoadIdx},
    {"imagefolder", ProbeImageFolder, LoadImageFolder},
    {"packed", ProbePackedImages, LoadPackedImages},
    {"tokens", ProbeTokens, LoadTokens},
};

Result<const Format*> Find(const std::string& name) {
  std::string known;
  for (const Format& format : kFormats) {
    if (name == format.name) return &format;
    known += (known.empty() ? "" : ", ") + std::string(format.name);
  }
  return InvalidArgument("unknown format '" + name + "' (known: " + known + ")");
}

}  // namespace

Result<DatasetInfo> ProbeDataset(Env& env, const DatasetSpec& spec) {
  EMBER_ASSIGN_OR_RETURN(const Format* format, Find(spec.format));
  return format->probe(env, spec);
}

Result<std::unique_ptr<Source>> LoadDataset(Env& env, const DatasetSpec& spec) {
  EMBER_ASSIGN_OR_RETURN(const Format* format, Find(spec.format));
  return format->load(env, spec);
}

}  // namespace ember::daemon
