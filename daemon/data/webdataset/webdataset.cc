#include "daemon/data/webdataset/webdataset.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "daemon/data/field_values.h"
#include "daemon/data/image/pipeline.h"
#include "daemon/data/remote/shard_reads.h"
#include "daemon/data/webdataset/npy_header.h"
#include "daemon/data/webdataset/shard_list.h"
#include "daemon/data/webdataset/tar_index.h"
#include "ember/ring_layout.h"

namespace ember::daemon {
namespace {

// Where one tensor's bytes of one sample lie; `size` holds a reason instead when it is
// at least kTooBig.
struct Part {
  uint64_t offset = 0;
  uint32_t size = 0;
  uint32_t shard = 0;
};
constexpr uint32_t kTooBig = UINT32_MAX - 2;   // a member over kMaxFieldBytes
constexpr uint32_t kTwice = UINT32_MAX - 1;    // the sample has the extension twice
constexpr uint32_t kMissing = UINT32_MAX;      // the sample lacks the extension

enum class Kind { kImage, kLabel, kBytes, kArray };

struct Field {
  std::string ext;
  Kind kind;
  std::string name;       // the tensor's
  uint32_t max_size = 0;  // kBytes: the longest of the set
  ring::DType dtype = ring::DType::kUInt8;  // kArray: the first sample's
  std::vector<int64_t> shape;               // kArray
};

bool IsNpy(const std::string& ext) {
  return ext == "npy" || (ext.size() > 4 && ext.compare(ext.size() - 4, 4, ".npy") == 0);
}

// The samples' keys in one buffer (no string per sample).
class Keys {
 public:
  void Add(const std::string& key) {
    names_ += key;
    ends_.push_back(names_.size());
  }
  std::string Get(uint64_t i) const {
    const uint64_t begin = i == 0 ? 0 : ends_[i - 1];
    return names_.substr(begin, ends_[i] - begin);
  }
  static uint64_t Cost(const std::string& key) { return key.size() + sizeof(uint64_t); }

 private:
  std::string names_;
  std::vector<uint64_t> ends_;
};

struct Index {
  DatasetInfo info;
  std::vector<std::string> shards;
  std::vector<uint64_t> shard_sizes;
  std::vector<uint64_t> shard_first;  // the shard's first sample id; then the count
  // By shard: the local shards' mappings, kept for a load so that reads see the bytes
  // that were indexed; null for remote shards (the cache holds those) and in a probe.
  std::vector<std::shared_ptr<const MappedFile>> local;
  std::vector<Field> fields;
  std::vector<Part> parts;  // [sample * fields.size() + field]
  Keys keys;
  std::shared_ptr<const ImagePipeline> pipeline;
};

// webdataset's base_plus_ext: "dir/abc.seg.png" -> ("dir/abc", "seg.png"); false for a
// file name without a '.' after its first character.
bool SplitKey(const std::string& path, std::string& key, std::string& ext) {
  const size_t slash = path.rfind('/');
  const size_t name = slash == std::string::npos ? 0 : slash + 1;
  const size_t dot = path.find('.', name);
  if (dot == std::string::npos || dot == name) return false;
  key = path.substr(0, dot);
  ext = path.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return true;
}

struct RawSample {
  std::string key;
  std::vector<std::pair<std::string, const TarMember*>> members;  // (ext, member)
};

// A member's bytes (the mapped shard's, or fetched by range when only its index is at hand).
using MemberBytes = std::function<Result<std::string>(const TarMember& member)>;

// The tensors the first sample's extensions give (see webdataset.h); an .npy's header,
// read with `bytes`, gives its tensor's dtype and shape.
Result<std::vector<Field>> FieldsOf(const RawSample& first, const std::string& shard_name,
                                    const MemberBytes& bytes) {
  std::vector<std::string> exts;
  for (const auto& [ext, member] : first.members) exts.push_back(ext);
  std::sort(exts.begin(), exts.end());
  exts.erase(std::unique(exts.begin(), exts.end()), exts.end());
  std::vector<Field> fields;
  for (const char* image : {"jpg", "jpeg", "png"}) {
    if (std::find(exts.begin(), exts.end(), image) != exts.end()) {
      fields.push_back(Field{image, Kind::kImage, "image"});
      break;
    }
  }
  if (std::find(exts.begin(), exts.end(), "cls") != exts.end())
    fields.push_back(Field{"cls", Kind::kLabel, "label"});
  for (const std::string& ext : exts) {
    const bool taken = std::any_of(fields.begin(), fields.end(),
                                   [&](const Field& f) { return f.ext == ext; });
    if (taken) continue;
    if (!IsNpy(ext)) {
      fields.push_back(Field{ext, Kind::kBytes, ext});
      continue;
    }
    Field field{ext, Kind::kArray, ext == "npy" ? "npy" : ext.substr(0, ext.size() - 4)};
    for (const auto& [member_ext, member] : first.members) {
      if (member_ext != ext) continue;
      EMBER_ASSIGN_OR_RETURN(std::string npy, bytes(*member));
      EMBER_ASSIGN_OR_RETURN(NpyHeader header,
                             ParseNpyHeader(shard_name + ": sample '" + first.key + "'." + ext,
                                            npy.data(), npy.size()));
      field.dtype = header.dtype;
      field.shape = header.shape;
      break;
    }
    fields.push_back(std::move(field));
  }
  return fields;
}

Part PartOf(const RawSample& sample, const std::string& ext, uint32_t shard) {
  Part part;
  part.shard = shard;
  part.size = kMissing;
  for (const auto& [member_ext, member] : sample.members) {
    if (member_ext != ext) continue;
    if (part.size != kMissing) {
      part.size = kTwice;
      return part;
    }
    part.offset = member->offset;
    part.size = member->size > kMaxFieldBytes ? kTooBig : static_cast<uint32_t>(member->size);
  }
  return part;
}

// A shard as errors name it: its path, or its URL without credentials.
std::string ShardName(const std::string& path) {
  return IsRemoteShard(path) ? RedactUrl(path) : path;
}

// Indexes one shard's samples into `index`: a local file mapped through `env` (the
// caller's rights; kept in index.local if `keep_local`), a URL through the node's shard
// cache.
Status IndexShard(Env& env, ShardCache* cache, uint32_t shard, Index& index,
                  DatasetMemory::Charge* memory, bool keep_local) {
  const std::string& path = index.shards[shard];
  std::shared_ptr<const MappedFile> mapped;
  std::vector<TarMember> members;
  uint64_t shard_size = 0;
  if (IsRemoteShard(path)) {
    if (cache == nullptr) {
      return FailedPrecondition(RedactUrl(path) + ": this emberd has no shard cache for "
                                "remote shards");
    }
    // A remote shard's index may be noted from an earlier registration of this version of
    // it (HEAD: size and ETag): then it is not fetched again to be indexed.
    EMBER_ASSIGN_OR_RETURN(ObjectInfo version, cache->Stat(path));
    std::optional<std::vector<TarMember>> noted;
    if (std::optional<std::string> note = cache->Note(path, version))
      noted = DecodeTarIndex(*note, version.size);
    if (noted) {
      members = std::move(*noted);
      shard_size = version.size;
      mapped = cache->Cached(path);
    } else {
      EMBER_ASSIGN_OR_RETURN(mapped, cache->Get(path, version.size));
      EMBER_ASSIGN_OR_RETURN(members, IndexTar(ShardName(path), mapped->data(), mapped->size()));
      shard_size = mapped->size();
      cache->SaveNote(path, version, EncodeTarIndex(members));
    }
  } else {
    EMBER_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, env.MapReadOnly(path));
    mapped = std::move(file);
    EMBER_ASSIGN_OR_RETURN(members, IndexTar(path, mapped->data(), mapped->size()));
    if (mapped->shrunk()) return mapped->ShrunkError();
    shard_size = mapped->size();
    if (keep_local) index.local[shard] = mapped;
  }
  index.shard_sizes.push_back(shard_size);
  index.shard_first.push_back(index.info.count);
  const MemberBytes member_bytes = [&](const TarMember& member) -> Result<std::string> {
    if (mapped != nullptr) return std::string(mapped->data() + member.offset, member.size);
    std::string out;
    EMBER_RETURN_IF_ERROR(cache->ReadRange(path, member.offset, member.size, out));
    return out;
  };
  std::vector<RawSample> samples;
  std::string key, ext;
  for (const TarMember& member : members) {
    if (!SplitKey(member.name, key, ext)) continue;
    if (samples.empty() || samples.back().key != key) samples.push_back(RawSample{key, {}});
    samples.back().members.emplace_back(ext, &member);
  }
  if (samples.empty()) return Status::Ok();
  if (index.fields.empty()) {
    EMBER_ASSIGN_OR_RETURN(index.fields, FieldsOf(samples.front(), ShardName(path), member_bytes));
    if (index.fields.empty()) {
      return InvalidArgument(ShardName(path) + ": the first sample ('" + samples.front().key +
                             "') has no member to serve");
    }
  }
  uint64_t cost = 0;
  for (const RawSample& sample : samples)
    cost += Keys::Cost(sample.key) + index.fields.size() * sizeof(Part);
  if (memory != nullptr) EMBER_RETURN_IF_ERROR(memory->Add(cost, path + " (its index)"));
  index.parts.reserve(index.parts.size() + samples.size() * index.fields.size());
  for (const RawSample& sample : samples) {
    index.keys.Add(sample.key);
    for (Field& field : index.fields) {
      Part part = PartOf(sample, field.ext, shard);
      if (field.kind == Kind::kBytes && part.size < kTooBig)
        field.max_size = std::max(field.max_size, part.size);
      index.parts.push_back(part);
    }
  }
  index.info.count += samples.size();
  return Status::Ok();
}

// What the ring can carry: names of at most ring::kNameBytes - 1 bytes, at most
// ring::kMaxTensors tensors.
Status CheckTensors(const Index& index) {
  size_t tensors = 0;
  std::string exts;
  for (const Field& field : index.fields) {
    tensors += field.kind == Kind::kBytes ? 2 : 1;
    exts += (exts.empty() ? "." : ", .") + field.ext;
    const std::string name = field.kind == Kind::kBytes ? field.name + "_size" : field.name;
    if (name.size() >= ring::kNameBytes) {
      return InvalidArgument(ShardName(index.shards.front()) + ": extension '." + field.ext +
                             "' makes tensor '" + name + "', longer than " +
                             std::to_string(ring::kNameBytes - 1) + " bytes");
    }
  }
  if (tensors > ring::kMaxTensors) {
    return InvalidArgument(ShardName(index.shards.front()) + ": the first sample's extensions (" + exts +
                           ") make " + std::to_string(tensors) + " tensors, at most " +
                           std::to_string(ring::kMaxTensors) + " fit a batch");
  }
  return Status::Ok();
}

Result<Index> BuildIndex(Env& env, const DatasetSpec& spec, const PluginRegistry* plugins,
                         DatasetMemory::Charge* memory, ShardCache* cache, bool keep_local,
                         IndexingProgress* progress = nullptr) {
  Index index;
  auto pipeline = ImagePipeline::Parse(spec.pipeline, plugins);
  if (!pipeline.ok()) return pipeline.status().WithContext("dataset '" + spec.name + "'");
  index.pipeline = std::make_shared<const ImagePipeline>(std::move(pipeline).value());
  EMBER_ASSIGN_OR_RETURN(index.shards,
                         ListShards(env, spec.path, cache != nullptr ? &cache->fetcher() : nullptr,
                                    ".tar", spec.endpoint));
  index.local.resize(index.shards.size());
  if (progress != nullptr) progress->SetShards(index.shards.size());
  for (uint32_t shard = 0; shard < index.shards.size(); ++shard) {
    EMBER_RETURN_IF_ERROR(IndexShard(env, cache, shard, index, memory, keep_local));
    if (progress != nullptr) progress->ShardIndexed(index.shard_sizes.back());
  }
  if (index.info.count == 0) {
    return InvalidArgument(ShardName(spec.path) + ": no samples in its " + std::to_string(index.shards.size()) +
                           " shard(s) (a sample is the members sharing a key: KEY.jpg, KEY.cls, ...)");
  }
  EMBER_RETURN_IF_ERROR(CheckTensors(index));
  index.shard_first.push_back(index.info.count);
  DatasetInfo& info = index.info;
  info.spec = spec;
  info.shards = index.shards.size();
  if (spec.shuffle == "shards") info.shard_starts = index.shard_first;
  for (const std::string& shard : index.shards) info.files.push_back(ShardName(shard));
  for (const Field& field : index.fields) {
    switch (field.kind) {
      case Kind::kImage:
        info.tensors.push_back(
            TensorSpec{"image", index.pipeline->dtype(), index.pipeline->shape()});
        break;
      case Kind::kLabel:
        info.tensors.push_back(TensorSpec{"label", ring::DType::kInt64, {}});
        break;
      case Kind::kBytes:
        for (TensorSpec& t : BytesTensors(field.name, field.max_size))
          info.tensors.push_back(std::move(t));
        break;
      case Kind::kArray:
        info.tensors.push_back(TensorSpec{field.name, field.dtype, field.shape});
        break;
    }
  }
  return index;
}

// Whether a member's shard was truncated under its mapping (never for fetched bytes).
struct Shrunk {
  const MappedFile* file;
  bool shrunk() const { return file != nullptr && file->shrunk(); }
  Status ShrunkError() const { return file->ShrunkError(); }
};

class WebDatasetSource : public Source {
 public:
  // Local shards are index.local's mappings; remote ones come from `cache` (not null
  // when the index has any: BuildIndex refuses them otherwise).
  WebDatasetSource(Index index, ShardCache* cache)
      : index_(std::move(index)), cache_(cache), reads_(ShardsOf(index_), cache) {}

  const DatasetInfo& info() const override { return index_.info; }

  Status ReadSample(uint64_t id, const SampleContext& context, void* const* dsts) const override {
    EMBER_RETURN_IF_ERROR(CheckInRange(id));
    const size_t fields = index_.fields.size();
    size_t tensor = 0;
    std::shared_ptr<const MappedFile> opened;
    uint32_t opened_shard = UINT32_MAX;
    for (size_t f = 0; f < fields; ++f) {
      const Field& field = index_.fields[f];
      const Part& part = index_.parts[id * fields + f];
      if (part.size >= kTooBig) return BadPart(id, part, field);
      // The member's bytes: in the mapped shard, or (a remote shard not in the cache) fetched
      // by a range GET into this thread's buffer; whole shards come in by Prefetch, when
      // they fit without evicting.
      thread_local std::string fetched[ring::kMaxTensors];
      if (opened_shard != part.shard) {  // a sample's members share a shard: look it up once
        opened = Shard(part.shard);
        opened_shard = part.shard;
      }
      const char* data = nullptr;
      if (opened != nullptr) {
        data = opened->data() + part.offset;
      } else {
        EMBER_RETURN_IF_ERROR(cache_->ReadRange(index_.shards[part.shard], part.offset,
                                                part.size, fetched[f]));
        data = fetched[f].data();
      }
      const Shrunk shard{opened.get()};
      switch (field.kind) {
        case Kind::kImage: {
          Status status = index_.pipeline->Run(
              Where(id, part) + "." + field.ext, reinterpret_cast<const uint8_t*>(data), part.size,
              context.seed, context.epoch, id, dsts[tensor++]);
          if (!status.ok()) return shard.shrunk() ? shard.ShrunkError() : status;
          break;
        }
        case Kind::kLabel: {
          int64_t label = 0;
          if (!ParseDecimalInt64(data, part.size, label)) {
            if (shard.shrunk()) return shard.ShrunkError();
            return DataLoss(Where(id, part) + ".cls: not an integer: '" +
                            std::string(data, std::min<size_t>(part.size, 32)) + "'");
          }
          std::memcpy(dsts[tensor++], &label, sizeof(label));
          break;
        }
        case Kind::kArray: {
          const std::string where = Where(id, part) + "." + field.ext;
          Result<NpyHeader> header = ParseNpyHeader(where, data, part.size);
          if (!header.ok()) return shard.shrunk() ? shard.ShrunkError() : header.status();
          if (header->dtype != field.dtype || header->shape != field.shape) {
            return DataLoss(where + ": an array of " + ShapeText(header->dtype, header->shape) +
                            ", the set's are " + ShapeText(field.dtype, field.shape));
          }
          std::memcpy(dsts[tensor++], data + header->data_offset, header->data_bytes);
          break;
        }
        case Kind::kBytes:
          WriteBytesTensors(data, part.size, field.max_size, dsts[tensor], dsts[tensor + 1]);
          tensor += 2;
          break;
      }
      if (shard.shrunk()) return shard.ShrunkError();
    }
    return Status::Ok();
  }

  bool ParallelDecode() const override {
    return std::any_of(index_.fields.begin(), index_.fields.end(),
                       [](const Field& f) { return f.kind == Kind::kImage; });
  }

  void Prefetch(const uint64_t* ids, size_t count) const override {
    const size_t fields = index_.fields.size();
    for (size_t i = 0; i < count; ++i) {
      if (ids[i] >= index_.info.count) continue;
      for (size_t f = 0; f < fields; ++f) {
        const Part& part = index_.parts[ids[i] * fields + f];
        if (part.size < kTooBig && index_.local[part.shard] != nullptr)
          index_.local[part.shard]->WillNeed(part.offset, part.size);
      }
    }
    reads_.Prefetch(ids, count);  // remote shards: these and the readers' next ones
  }

  void Follow(std::weak_ptr<const ReadForecast> reader) const override {
    reads_.Follow(std::move(reader));
  }

 private:
  static ShardSet ShardsOf(const Index& index) {
    ShardSet set{index.shards, index.shard_sizes, index.shard_first, {}};
    for (const auto& local : index.local) set.remote.push_back(local == nullptr);
    return set;
  }

  // Shard `i` mapped: local ones stay mapped, remote ones if the cache holds them (else
  // null: their members are read by range).
  std::shared_ptr<const MappedFile> Shard(uint32_t i) const {
    if (index_.local[i] != nullptr) return index_.local[i];
    return cache_->Cached(index_.shards[i]);
  }

  // "SHARD: sample 'KEY'"
  std::string Where(uint64_t id, const Part& part) const {
    return ShardName(index_.shards[part.shard]) + ": sample '" + index_.keys.Get(id) + "'";
  }

  Status BadPart(uint64_t id, const Part& part, const Field& field) const {
    std::string first;
    for (const Field& f : index_.fields) first += (first.empty() ? "" : ", ") + f.ext;
    switch (part.size) {
      case kMissing:
        return DataLoss(Where(id, part) + " has no ." + field.ext + " (the set's samples have " +
                        first + ")");
      case kTwice:
        return DataLoss(Where(id, part) + " has ." + field.ext + " twice");
      default:
        return DataLoss(Where(id, part) + "." + field.ext + ": over the limit of " +
                        std::to_string(kMaxFieldBytes) + " bytes for one member");
    }
  }

  const Index index_;
  ShardCache* const cache_;
  mutable ShardReads reads_;
};

}  // namespace

Result<DatasetInfo> ProbeWebDataset(Env& env, const DatasetSpec& spec,
                                    const PluginRegistry* plugins,
                                    DatasetMemory::Charge* memory, ShardCache* cache,
                                    IndexingProgress* progress) {
  EMBER_ASSIGN_OR_RETURN(Index index, BuildIndex(env, spec, plugins, memory, cache,
                                                 /*keep_local=*/false, progress));
  return std::move(index.info);
}

Result<std::unique_ptr<Source>> LoadWebDataset(Env& env, const DatasetSpec& spec,
                                               const PluginRegistry* plugins,
                                               DatasetMemory::Charge* memory, ShardCache* cache) {
  EMBER_ASSIGN_OR_RETURN(Index index,
                         BuildIndex(env, spec, plugins, memory, cache, /*keep_local=*/true));
  return std::unique_ptr<Source>(std::make_unique<WebDatasetSource>(std::move(index), cache));
}

}  // namespace ember::daemon
