#include "daemon/data/mds/mds.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "daemon/data/field_values.h"
#include "daemon/data/image/pipeline.h"
#include "daemon/data/mds/mds_index.h"
#include "daemon/data/mds/mds_shard.h"
#include "daemon/data/remote/http_fetch.h"
#include "daemon/data/webdataset/shard_list.h"
#include "daemon/data/remote/shard_reads.h"
#include "ember/ring_layout.h"

namespace ember::daemon {
namespace {

constexpr char kIndexName[] = "index.json";

enum class Kind { kImage, kLabel, kScalar, kStrInt, kStrFloat, kBytes, kArray };

// One column served as one tensor (two for kBytes).
struct Field {
  size_t column = 0;
  Kind kind = Kind::kBytes;
  std::string name;                // the tensor's
  MdsType type = MdsType::kUInt8;  // kLabel (of a scalar), kScalar, kArray: as stored
  std::vector<int64_t> shape;      // kArray: the set's
  bool shape_known = false;        // kArray: the encoding's, or a sample's seen
  uint32_t max_size = 0;           // kBytes: the longest of the set
};

struct Shard {
  std::string path;         // the file read (the compressed one if compressed): a path or a URL
  std::string name;         // as errors name it (a URL without credentials)
  uint64_t first = 0;       // the id of its first sample
  uint64_t file_bytes = 0;  // the file's size
  bool remote = false;
  bool compressed = false;
  std::vector<uint32_t> offsets;            // samples + 1, of its uncompressed bytes
  std::shared_ptr<const MappedFile> local;  // a load's local uncompressed shard
  std::unique_ptr<char[]> raw;              // a load's compressed shard, decompressed
};

struct Index {
  DatasetInfo info;
  std::string first_index;  // the index.json the columns are the first shard's of
  std::vector<MdsColumn> columns;
  std::vector<Field> fields;
  std::vector<Shard> shards;  // those with samples
  std::shared_ptr<const ImagePipeline> pipeline;
};

bool IsUrl(const std::string& path) { return path.find("://") != std::string::npos; }

std::string NameOf(const std::string& path) { return IsUrl(path) ? RedactUrl(path) : path; }

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A dataset directory and its index.json (a path or a URL).
struct Root {
  std::string dir;
  std::string index;
};

Result<std::vector<Root>> FindRoots(Env& env, const std::string& path) {
  std::string dir = path;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir == kIndexName || EndsWith(dir, std::string("/") + kIndexName)) {
    const std::string parent = dir.substr(0, dir.size() - sizeof(kIndexName) + 1);
    return std::vector<Root>{{parent.empty() ? "." : parent.substr(0, parent.size() - 1), dir}};
  }
  const std::string index = dir + "/" + kIndexName;
  if (IsUrl(dir) || env.FileExists(index)) return std::vector<Root>{{dir, index}};
  if (!env.IsDirectory(dir)) {
    if (env.FileExists(dir)) {
      return InvalidArgument(path + ": a file, not an MDS dataset's directory or its index.json");
    }
    return NotFound(path + ": no such directory");
  }
  EMBER_ASSIGN_OR_RETURN(std::vector<std::string> names, env.ListDir(dir));
  std::vector<Root> roots;
  for (const std::string& name : names) {  // sorted
    const std::string sub = dir + "/" + name;
    if (env.IsDirectory(sub) && env.FileExists(sub + "/" + kIndexName))
      roots.push_back(Root{sub, sub + "/" + kIndexName});
  }
  if (roots.empty()) {
    return NotFound(path +
                    ": no index.json in it or in its subdirectories (an MDS dataset's "
                    "directory holds index.json and its shards)");
  }
  return roots;
}

Result<std::string> ReadIndexText(Env& env, ShardCache* cache, const std::string& index) {
  const std::string name = NameOf(index);
  auto too_big = [&](uint64_t size) {
    return InvalidArgument(name + ": " + std::to_string(size) + " bytes, more than the " +
                           std::to_string(kMaxMdsIndexBytes) + " an index.json may have");
  };
  std::string text;
  if (IsUrl(index)) {
    EMBER_ASSIGN_OR_RETURN(ObjectInfo object, cache->Stat(index));
    if (object.size > kMaxMdsIndexBytes) return too_big(object.size);
    if (object.size > 0) EMBER_RETURN_IF_ERROR(cache->ReadRange(index, 0, object.size, text));
    return text;
  }
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<ReadableFile> file, env.OpenForRead(index));
  if (file->Size() > kMaxMdsIndexBytes) return too_big(file->Size());
  text.resize(file->Size());
  EMBER_RETURN_IF_ERROR(file->ReadAt(0, text.size(), text.data()));
  return text;
}

// "a, b" or, with their encodings, "a jpeg, b int".
std::string ColumnList(const std::vector<MdsColumn>& columns, bool encodings = false) {
  std::string list;
  for (const MdsColumn& column : columns) {
    list += (list.empty() ? "" : ", ") + column.name;
    if (encodings) list += " " + column.encoding;
  }
  return list;
}

Field MakeField(size_t column, Kind kind, const std::string& name) {
  Field field;
  field.column = column;
  field.kind = kind;
  field.name = name;
  return field;
}

// The tensors the columns make (see mds.h), in order.
std::vector<Field> FieldsOf(const std::vector<MdsColumn>& columns) {
  std::vector<Field> fields;
  std::optional<size_t> image, label;
  // The image: the column named image, else the first jpeg, else the first png.
  auto rank = [&](size_t c) {
    return columns[c].name == "image" ? 0 : columns[c].encoding == "jpeg" ? 1 : 2;
  };
  for (size_t c = 0; c < columns.size(); ++c) {
    const MdsColumn& column = columns[c];
    if (column.kind == MdsEncoding::kImage && (!image || rank(c) < rank(*image))) image = c;
    const bool integer = column.kind == MdsEncoding::kStrInt ||
                         (column.kind == MdsEncoding::kScalar && IsIntegerType(*column.type));
    if (column.name == "label" && integer) label = c;
  }
  if (image) fields.push_back(MakeField(*image, Kind::kImage, "image"));
  if (label) {
    Field field = MakeField(*label, Kind::kLabel, "label");
    if (columns[*label].type) field.type = *columns[*label].type;
    fields.push_back(field);
  }
  for (size_t c = 0; c < columns.size(); ++c) {
    if (c == image || c == label) continue;
    const MdsColumn& column = columns[c];
    Field field = MakeField(c, Kind::kBytes, column.name);
    switch (column.kind) {
      case MdsEncoding::kBytes:
      case MdsEncoding::kImage: break;
      case MdsEncoding::kScalar:
        field.kind = Kind::kScalar;
        field.type = *column.type;
        break;
      case MdsEncoding::kStrInt: field.kind = Kind::kStrInt; break;
      case MdsEncoding::kStrFloat: field.kind = Kind::kStrFloat; break;
      case MdsEncoding::kNdArray:
        field.kind = Kind::kArray;
        if (column.type && !column.shape.empty()) {
          field.type = *column.type;
          field.shape = column.shape;
          field.shape_known = true;
        }
        break;
    }
    fields.push_back(std::move(field));
  }
  return fields;
}

// What the ring can carry (CheckColumnTensors).
Status CheckTensors(const Index& index) {
  std::vector<ColumnTensor> tensors;
  for (const Field& field : index.fields) {
    const std::string& column = index.columns[field.column].name;
    tensors.push_back({field.name, column});
    if (field.kind == Kind::kBytes) tensors.push_back({field.name + "_size", column});
  }
  return CheckColumnTensors(index.first_index, tensors, ColumnList(index.columns));
}

// "SHARD: sample K (byte B)": where a sample's errors happened.
std::string SampleWhere(const Shard& shard, uint64_t k) {
  return shard.name + ": sample " + std::to_string(k) + " (byte " +
         std::to_string(shard.offsets[k]) + (shard.compressed ? " decompressed" : "") + ")";
}

std::string ArrayText(MdsType type, const std::vector<int64_t>& shape) {
  std::string text = ShapeText(ring::DType::kUInt8, shape);
  return text.substr(0, text.rfind(' ') + 1) + MdsTypeName(type);
}

// Scans the samples of a shard (`data`, uncompressed) for what registration needs of them:
// the longest value of each bytes field, and the dtype and shape of the ndarrays the
// encoding does not fix, from the set's first sample that splits. Samples that do not split
// are left for their reads to report.
Status ScanSamples(const Shard& shard, const char* data, Index& index) {
  bool needed = false;
  for (const Field& field : index.fields) {
    if ((field.kind == Kind::kBytes && !index.columns[field.column].size) ||
        (field.kind == Kind::kArray && !field.shape_known))
      needed = true;
  }
  if (!needed) return Status::Ok();
  std::array<MdsSpan, ring::kMaxTensors> spans;
  for (size_t k = 0; k + 1 < shard.offsets.size(); ++k) {
    const uint32_t begin = shard.offsets[k];
    if (!SplitMdsSample(shard.name, index.columns, data + begin, shard.offsets[k + 1] - begin,
                        spans.data())
             .ok())
      continue;
    for (Field& field : index.fields) {
      const MdsSpan& span = spans[field.column];
      if (field.kind == Kind::kBytes && span.size <= kMaxFieldBytes) {
        field.max_size = std::max(field.max_size, span.size);
      } else if (field.kind == Kind::kArray && !field.shape_known) {
        const std::string where = SampleWhere(shard, k) + " column '" + field.name + "'";
        EMBER_ASSIGN_OR_RETURN(MdsArray array,
                               ParseMdsArray(where, index.columns[field.column],
                                             data + begin + span.offset, span.size));
        field.type = array.type;
        field.shape = array.shape;
        field.shape_known = true;
      }
    }
  }
  return Status::Ok();
}

// Reads one shard (index.json's `where`, e.g. "/d/index.json shards[3]"): maps or fetches
// its file, checks its size and hashes, decompresses it, reads its offsets and scans its
// samples. Keeps the local mapping or the decompressed bytes in `shard` if `keep`.
Status IndexShard(Env& env, ShardCache* cache, const MdsShardInfo& info, const std::string& where,
                  Shard& shard, Index& index, DatasetMemory::Charge* memory, bool keep) {
  const MdsFileInfo& file = info.file();
  const std::string field = where + (info.zip ? ".zip_data" : ".raw_data");
  uint64_t cost = sizeof(Shard) + shard.path.size() + shard.name.size() +
                  sizeof(uint32_t) * (uint64_t{info.samples} + 1);
  if (info.zip) cost += info.raw.bytes;
  if (memory != nullptr) {
    EMBER_RETURN_IF_ERROR(memory->Add(
        cost, shard.name + (info.zip ? " (its index and decompressed bytes)" : " (its index)")));
  }
  std::shared_ptr<const MappedFile> mapped;
  if (shard.remote) {
    auto fetched = cache->Get(shard.path, file.bytes);
    if (!fetched.ok()) return fetched.status().WithContext(field);
    mapped = std::move(fetched).value();
  } else {
    EMBER_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> local, env.MapReadOnly(shard.path));
    mapped = std::move(local);
  }
  if (mapped->size() != file.bytes) {
    return DataLoss(shard.name + ": " + std::to_string(mapped->size()) + " bytes, " + field +
                    ".bytes says " + std::to_string(file.bytes));
  }
  Status hashed =
      CheckMdsHashes(shard.name, field + ".hashes", file, mapped->data(), mapped->size());
  if (mapped->shrunk()) return mapped->ShrunkError();
  EMBER_RETURN_IF_ERROR(hashed);
  const char* data = mapped->data();
  std::unique_ptr<char[]> raw;
  if (info.zip) {
    raw.reset(new (std::nothrow) char[std::max<uint64_t>(info.raw.bytes, 1)]);
    if (raw == nullptr) {
      return ResourceExhausted(shard.name + ": no memory for its " +
                               std::to_string(info.raw.bytes) + " bytes decompressed");
    }
    Status decompressed = DecompressMdsShard(shard.name, info.compression, mapped->data(),
                                             mapped->size(), raw.get(), info.raw.bytes);
    if (mapped->shrunk()) return mapped->ShrunkError();
    EMBER_RETURN_IF_ERROR(decompressed);
    EMBER_RETURN_IF_ERROR(CheckMdsHashes(shard.name + " (decompressed)", where + ".raw_data.hashes",
                                         info.raw, raw.get(), info.raw.bytes));
    mapped.reset();  // (a remote one stays in the cache until evicted)
    data = raw.get();
  }
  EMBER_ASSIGN_OR_RETURN(shard.offsets,
                         ReadMdsOffsets(shard.name, data, info.raw.bytes, info.samples));
  Status scanned = ScanSamples(shard, data, index);
  if (mapped != nullptr && mapped->shrunk()) return mapped->ShrunkError();
  EMBER_RETURN_IF_ERROR(scanned);
  if (keep) {
    shard.raw = std::move(raw);
    if (!shard.remote) shard.local = std::move(mapped);
  }
  return Status::Ok();
}

// Each shard's first sample id, then the count (ShardSet::first).
std::vector<uint64_t> ShardFirsts(const Index& index) {
  std::vector<uint64_t> first;
  for (const Shard& shard : index.shards) first.push_back(shard.first);
  first.push_back(index.info.count);
  return first;
}

Result<Index> BuildIndex(Env& env, const DatasetSpec& spec, const PluginRegistry* plugins,
                         DatasetMemory::Charge* memory, ShardCache* cache, bool keep,
                         IndexingProgress* progress = nullptr) {
  Index index;
  auto pipeline = ImagePipeline::Parse(spec.pipeline, plugins);
  if (!pipeline.ok()) return pipeline.status().WithContext("dataset '" + spec.name + "'");
  index.pipeline = std::make_shared<const ImagePipeline>(std::move(pipeline).value());
  if (IsUrl(spec.path) && cache == nullptr) {
    return FailedPrecondition(RedactUrl(spec.path) +
                              ": this emberd has no shard cache for "
                              "remote datasets");
  }
  std::string path = spec.path;
  if (path.rfind("s3://", 0) == 0) {
    // The set's index.json as an S3 object's internal URL (its directory is the set's).
    std::string index_path = path;
    if (!EndsWith(index_path, std::string("/") + kIndexName)) {
      while (!index_path.empty() && index_path.back() == '/') index_path.pop_back();
      index_path += std::string("/") + kIndexName;
    }
    EMBER_ASSIGN_OR_RETURN(std::vector<std::string> urls,
                           ListShards(env, index_path, &cache->fetcher(), ".json", spec.endpoint));
    path = urls.front();
  }
  EMBER_ASSIGN_OR_RETURN(std::vector<Root> roots, FindRoots(env, path));
  // index.json files first: what the fingerprint reads of a set is its first files.
  std::vector<std::pair<MdsIndex, const Root*>> indexes;
  for (const Root& root : roots) {
    EMBER_ASSIGN_OR_RETURN(std::string text, ReadIndexText(env, cache, root.index));
    EMBER_ASSIGN_OR_RETURN(MdsIndex parsed, ParseMdsIndex(NameOf(root.index), text));
    indexes.emplace_back(std::move(parsed), &root);
    index.info.files.push_back(NameOf(root.index));
  }
  // Columns, fields and tensors first: nothing is read of a set the ring cannot carry.
  for (const auto& [parsed, root] : indexes) {
    for (size_t i = 0; i < parsed.shards.size(); ++i) {
      const MdsShardInfo& info = parsed.shards[i];
      if (index.first_index.empty()) {
        index.first_index = NameOf(root->index);
        index.columns = info.columns;
      } else if (!SameColumns(info.columns, index.columns)) {
        return InvalidArgument(NameOf(root->index) + ": shards[" + std::to_string(i) +
                               "]: columns (" + ColumnList(info.columns, true) +
                               ") are not those of the set's first shard (" +
                               ColumnList(index.columns, true) + " in " + index.first_index + ")");
      }
    }
  }
  if (index.columns.empty())
    return InvalidArgument(NameOf(roots.front().index) + ": shards: none listed");
  index.fields = FieldsOf(index.columns);
  EMBER_RETURN_IF_ERROR(CheckTensors(index));
  if (progress != nullptr) {
    uint64_t with_samples = 0;
    for (const auto& [parsed, root] : indexes)
      for (const MdsShardInfo& info : parsed.shards) with_samples += info.samples != 0;
    progress->SetShards(with_samples);
  }
  size_t shards = 0;
  for (const auto& [parsed, root] : indexes) {
    shards += parsed.shards.size();
    for (size_t i = 0; i < parsed.shards.size(); ++i) {
      const MdsShardInfo& info = parsed.shards[i];
      if (info.samples == 0) continue;
      Shard shard;
      shard.path = root->dir + "/" + info.file().basename;
      shard.name = NameOf(shard.path);
      shard.remote = IsUrl(shard.path);
      shard.compressed = info.zip.has_value();
      shard.first = index.info.count;
      shard.file_bytes = info.file().bytes;
      const std::string where = NameOf(root->index) + " shards[" + std::to_string(i) + "]";
      EMBER_RETURN_IF_ERROR(IndexShard(env, cache, info, where, shard, index, memory, keep));
      if (progress != nullptr) progress->ShardIndexed(shard.file_bytes);
      index.info.count += info.samples;
      index.info.files.push_back(shard.name);
      index.shards.push_back(std::move(shard));
    }
  }
  if (index.info.count == 0) {
    return InvalidArgument(index.first_index + ": no samples in its " + std::to_string(shards) +
                           " shard(s)");
  }
  DatasetInfo& info = index.info;
  info.spec = spec;
  info.shards = index.shards.size();
  if (spec.shuffle == "shards") info.shard_starts = ShardFirsts(index);
  for (const Field& field : index.fields) {
    switch (field.kind) {
      case Kind::kImage:
        info.tensors.push_back(
            TensorSpec{"image", index.pipeline->dtype(), index.pipeline->shape()});
        break;
      case Kind::kLabel:
      case Kind::kStrInt:
        info.tensors.push_back(TensorSpec{field.name, ring::DType::kInt64, {}});
        break;
      case Kind::kScalar:
        info.tensors.push_back(TensorSpec{field.name, TensorDTypeOf(field.type), {}});
        break;
      case Kind::kStrFloat:
        info.tensors.push_back(TensorSpec{field.name, ring::DType::kFloat64, {}});
        break;
      case Kind::kArray:
        if (!field.shape_known) {
          return DataLoss(index.first_index + ": column '" + field.name +
                          "': no sample's ndarray "
                          "could be read to tell its dtype and shape");
        }
        info.tensors.push_back(TensorSpec{field.name, TensorDTypeOf(field.type), field.shape});
        break;
      case Kind::kBytes:
        for (TensorSpec& tensor : BytesTensors(field.name, field.max_size))
          info.tensors.push_back(std::move(tensor));
        break;
    }
  }
  return index;
}

// An integer scalar of `type` as int64: false for a uint64 over INT64_MAX.
bool IntegerValue(MdsType type, const char* data, int64_t& value) {
  switch (type) {
    case MdsType::kUInt8: return LoadInt64(data, 1, false, value);
    case MdsType::kInt8: return LoadInt64(data, 1, true, value);
    case MdsType::kUInt16: return LoadInt64(data, 2, false, value);
    case MdsType::kInt16: return LoadInt64(data, 2, true, value);
    case MdsType::kUInt32: return LoadInt64(data, 4, false, value);
    case MdsType::kInt32: return LoadInt64(data, 4, true, value);
    case MdsType::kInt64: return LoadInt64(data, 8, true, value);
    case MdsType::kUInt64: return LoadInt64(data, 8, false, value);
    default: return false;
  }
}

std::string Excerpt(const char* data, size_t size) {
  return std::string(data, std::min<size_t>(size, 32));
}

class MdsSource : public Source {
 public:
  // Remote shards come from `cache` (not null when the index has any: BuildIndex refuses
  // them otherwise).
  MdsSource(Index index, ShardCache* cache)
      : index_(std::move(index)), cache_(cache), reads_(ShardsOf(index_), cache) {}

  const DatasetInfo& info() const override { return index_.info; }

  Status ReadSample(uint64_t id, const SampleContext& context, void* const* dsts) const override {
    EMBER_RETURN_IF_ERROR(CheckInRange(id));
    const Shard& shard = ShardOf(id);
    const uint64_t k = id - shard.first;
    const uint32_t begin = shard.offsets[k];
    const uint32_t size = shard.offsets[k + 1] - begin;
    // The sample's bytes: decompressed in memory, in the mapped shard (local, or remote
    // and in the cache), or (a remote shard not in the cache) fetched by a range GET into
    // this thread's buffer; whole shards come in by Prefetch, when they fit without evicting.
    std::shared_ptr<const MappedFile> cached;
    const MappedFile* mapping = shard.local.get();
    const char* data = nullptr;
    if (shard.raw != nullptr) {
      data = shard.raw.get() + begin;
    } else if (mapping != nullptr) {
      data = mapping->data() + begin;
    } else if ((cached = cache_->Cached(shard.path)) != nullptr &&
               cached->size() == shard.file_bytes) {
      mapping = cached.get();
      data = mapping->data() + begin;
    } else {
      thread_local std::string fetched;
      EMBER_RETURN_IF_ERROR(cache_->ReadRange(shard.path, begin, size, fetched));
      data = fetched.data();
    }
    Status status = Decode(id, shard, k, data, size, context, dsts);
    if (mapping != nullptr && mapping->shrunk()) return mapping->ShrunkError();
    return status;
  }

  bool ParallelDecode() const override {
    return std::any_of(index_.fields.begin(), index_.fields.end(),
                       [](const Field& f) { return f.kind == Kind::kImage; });
  }

  void Prefetch(const uint64_t* ids, size_t count) const override {
    for (size_t i = 0; i < count; ++i) {
      if (ids[i] >= index_.info.count) continue;
      const Shard& shard = ShardOf(ids[i]);
      const uint64_t k = ids[i] - shard.first;
      if (shard.local != nullptr)
        shard.local->WillNeed(shard.offsets[k], shard.offsets[k + 1] - shard.offsets[k]);
    }
    reads_.Prefetch(ids, count);  // remote shards: these and the readers' next ones
  }

  void Follow(std::weak_ptr<const ReadForecast> reader) const override {
    reads_.Follow(std::move(reader));
  }

 private:
  // Remote shards are read through the cache unless decompressed in memory.
  static ShardSet ShardsOf(const Index& index) {
    ShardSet set;
    set.first = ShardFirsts(index);
    for (const Shard& shard : index.shards) {
      set.urls.push_back(shard.path);
      set.sizes.push_back(shard.file_bytes);
      set.remote.push_back(shard.remote && shard.raw == nullptr);
    }
    return set;
  }

  const Shard& ShardOf(uint64_t id) const { return index_.shards[reads_.ShardOf(id)]; }

  Status Decode(uint64_t id, const Shard& shard, uint64_t k, const char* data, uint32_t size,
                const SampleContext& context, void* const* dsts) const {
    const std::string where = SampleWhere(shard, k);
    std::array<MdsSpan, ring::kMaxTensors> spans;
    EMBER_RETURN_IF_ERROR(SplitMdsSample(where, index_.columns, data, size, spans.data()));
    size_t tensor = 0;
    for (const Field& field : index_.fields) {
      const MdsColumn& column = index_.columns[field.column];
      const char* value = data + spans[field.column].offset;
      const uint32_t value_size = spans[field.column].size;
      auto bad = [&](const std::string& what) {
        return DataLoss(where + " column '" + column.name + "': " + what);
      };
      switch (field.kind) {
        case Kind::kImage:
          EMBER_RETURN_IF_ERROR(index_.pipeline->Run(
              where + " column '" + column.name + "'", reinterpret_cast<const uint8_t*>(value),
              value_size, context.seed, context.epoch, id, dsts[tensor++]));
          break;
        case Kind::kLabel:
        case Kind::kStrInt: {
          int64_t number = 0;
          if (column.kind == MdsEncoding::kStrInt) {
            if (!ParseDecimalInt64(value, value_size, number))
              return bad("not an integer: '" + Excerpt(value, value_size) + "'");
          } else if (!IntegerValue(field.type, value, number)) {
            return bad("a uint64 over the int64 it is served as");
          }
          std::memcpy(dsts[tensor++], &number, sizeof(number));
          break;
        }
        case Kind::kStrFloat: {
          double number = 0;
          if (!ParseDecimalDouble(value, value_size, number))
            return bad("not a number: '" + Excerpt(value, value_size) + "'");
          std::memcpy(dsts[tensor++], &number, sizeof(number));
          break;
        }
        case Kind::kScalar:
          if (!ConvertMdsValues(field.type, value, 1, dsts[tensor++]))
            return bad("a uint64 over the int64 it is served as");
          break;
        case Kind::kArray: {
          EMBER_ASSIGN_OR_RETURN(
              MdsArray array,
              ParseMdsArray(where + " column '" + column.name + "'", column, value, value_size));
          if (array.type != field.type || array.shape != field.shape) {
            return bad("an array of " + ArrayText(array.type, array.shape) + ", the set's are " +
                       ArrayText(field.type, field.shape));
          }
          if (!ConvertMdsValues(array.type, value + array.data_offset, array.elements,
                                dsts[tensor++]))
            return bad("a uint64 over the int64 it is served as");
          break;
        }
        case Kind::kBytes:
          if (value_size > field.max_size) {
            return bad(
                std::to_string(value_size) + " bytes, over " +
                (value_size > kMaxFieldBytes
                     ? "the limit of " + std::to_string(kMaxFieldBytes) + " bytes for one field"
                     : "the set's longest (" + std::to_string(field.max_size) + ")"));
          }
          WriteBytesTensors(value, value_size, field.max_size, dsts[tensor], dsts[tensor + 1]);
          tensor += 2;
          break;
      }
    }
    return Status::Ok();
  }

  const Index index_;
  ShardCache* const cache_;
  mutable ShardReads reads_;
};

}  // namespace

Result<DatasetInfo> ProbeMds(Env& env, const DatasetSpec& spec, const PluginRegistry* plugins,
                             DatasetMemory::Charge* memory, ShardCache* cache,
                             IndexingProgress* progress) {
  EMBER_ASSIGN_OR_RETURN(Index index, BuildIndex(env, spec, plugins, memory, cache,
                                                 /*keep=*/false, progress));
  return std::move(index.info);
}

Result<std::unique_ptr<Source>> LoadMds(Env& env, const DatasetSpec& spec,
                                        const PluginRegistry* plugins,
                                        DatasetMemory::Charge* memory, ShardCache* cache) {
  EMBER_ASSIGN_OR_RETURN(Index index, BuildIndex(env, spec, plugins, memory, cache, /*keep=*/true));
  return std::unique_ptr<Source>(std::make_unique<MdsSource>(std::move(index), cache));
}

}  // namespace ember::daemon
