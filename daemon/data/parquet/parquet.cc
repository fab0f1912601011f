#include "daemon/data/parquet/parquet.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/strict_yaml.h"
#include "daemon/data/field_values.h"
#include "daemon/data/image/pipeline.h"
#include "daemon/data/parquet/row_group_cache.h"
#include "daemon/data/remote/http_fetch.h"
#include "daemon/data/remote/shard_reads.h"
#include "daemon/data/webdataset/shard_list.h"
#include "ember/ring_layout.h"

namespace ember::daemon {
namespace {

constexpr char kSuffix[] = ".parquet";
// The decoded row groups' budget (see parquet.h).
constexpr uint64_t kMinRowGroupBudget = uint64_t{64} << 20;
constexpr uint64_t kMaxRowGroupBudget = uint64_t{1} << 30;

enum class Kind { kImage, kInteger, kFloat, kBytes, kArray, kPadded };

// One column served as one tensor (two for kBytes and kPadded).
struct Field {
  int column = 0;  // in the files' columns
  Kind kind = Kind::kBytes;
  std::string name;                         // the tensor's
  ParquetType type = ParquetType::kOther;   // the values' (a list's elements')
  ring::DType dtype = ring::DType::kUInt8;  // kFloat, kArray, kPadded: the tensor's elements'
  int64_t length = 0;                       // kArray: a row's elements; kPadded: the longest's
  uint32_t max_size = 0;                    // kBytes: the longest of the set
  bool sized_by_scan = false;               // a list: kArray if every row has one length
  int64_t min_length = std::numeric_limits<int64_t>::max();  // a list's rows, while scanned
  int64_t max_length = 0;
  int slot = 0;  // in the columns a row group is read with (Index::read)
};

struct File {
  std::string path;  // a path or a URL
  std::string name;  // as messages name it (a URL without credentials)
  bool remote = false;
  uint64_t size = 0;
  uint64_t first = 0;                 // the id of its first sample
  std::vector<uint64_t> group_first;  // each row group's first row, then the file's rows
  std::vector<std::pair<uint64_t, uint64_t>> group_span;  // a load's: its chunks' bytes
  std::shared_ptr<const MappedFile> local;                // a load's local file
  std::shared_ptr<const ParquetFile> parquet;             // a load's footer
};

struct Index {
  DatasetInfo info;
  std::optional<std::vector<std::string>> selected;  // the pipeline's `columns`
  std::string first_file;                            // the one the columns are of
  std::vector<ParquetColumn> columns;                // the first file's
  std::vector<Field> fields;
  std::vector<int> read;       // the columns the fields read, ascending
  std::vector<File> files;     // those with rows
  uint64_t budget = 0;         // of decoded row groups
  uint64_t largest_group = 0;  // bytes uncompressed of the read columns, as footers say
  uint64_t total_bytes = 0;
  std::shared_ptr<const ImagePipeline> pipeline;
};

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string NameOf(const std::string& path) { return IsRemoteShard(path) ? RedactUrl(path) : path; }

bool IsInteger(ParquetType type) {
  switch (type) {
    case ParquetType::kBool:
    case ParquetType::kInt8:
    case ParquetType::kInt16:
    case ParquetType::kInt32:
    case ParquetType::kInt64:
    case ParquetType::kUInt8:
    case ParquetType::kUInt16:
    case ParquetType::kUInt32:
    case ParquetType::kUInt64: return true;
    default: return false;
  }
}

// The dtype an array's elements of `type` are served as (see parquet.h).
ring::DType ElementDType(ParquetType type) {
  switch (type) {
    case ParquetType::kBool:
    case ParquetType::kUInt8: return ring::DType::kUInt8;
    case ParquetType::kInt8: return ring::DType::kInt8;
    case ParquetType::kInt16: return ring::DType::kInt16;
    case ParquetType::kUInt16: return ring::DType::kUInt16;
    case ParquetType::kInt32: return ring::DType::kInt32;
    case ParquetType::kFloat16:
    case ParquetType::kFloat32: return ring::DType::kFloat32;
    case ParquetType::kFloat64: return ring::DType::kFloat64;
    default: return ring::DType::kInt64;
  }
}

// "SPLIT" of Hugging Face's split file name "SPLIT-00000-of-00003.parquet", else "".
std::string SplitOf(const std::string& path) {
  const std::string name = path.substr(path.rfind('/') + 1);
  if (!EndsWith(name, kSuffix)) return "";
  const std::string stem = name.substr(0, name.size() - std::strlen(kSuffix));
  auto digits_before = [&](size_t end) {  // where the digits ending at `end` begin
    size_t begin = end;
    while (begin > 0 && std::isdigit(static_cast<unsigned char>(stem[begin - 1]))) --begin;
    return end - begin >= 5 ? begin : std::string::npos;
  };
  const size_t total = digits_before(stem.size());
  if (total == std::string::npos || total < 4 || stem.compare(total - 4, 4, "-of-") != 0) return "";
  const size_t index = digits_before(total - 4);
  if (index == std::string::npos || index < 2 || stem[index - 1] != '-') return "";
  return stem.substr(0, index - 1);
}

// The files of `spec.path` (shard_list.h); of a directory whose files are all Hugging
// Face's split files, those of spec.split.
Result<std::vector<std::string>> ListFiles(Env& env, const DatasetSpec& spec, ShardCache* cache) {
  EMBER_ASSIGN_OR_RETURN(
      std::vector<std::string> files,
      ListShards(env, spec.path, cache != nullptr ? &cache->fetcher() : nullptr, kSuffix,
                 spec.endpoint));
  if (IsRemoteShard(spec.path) || spec.path.find('{') != std::string::npos ||
      !env.IsDirectory(spec.path)) {
    return files;
  }
  std::vector<std::string> splits, chosen;
  for (const std::string& file : files) {
    const std::string split = SplitOf(file);
    if (split.empty()) return files;
    if (std::find(splits.begin(), splits.end(), split) == splits.end()) splits.push_back(split);
    if (split == spec.split) chosen.push_back(file);
  }
  if (chosen.empty()) {
    std::string found;
    for (const std::string& split : splits) found += (found.empty() ? "" : ", ") + split;
    return NotFound(spec.path + ": no files of split '" + spec.split + "' (" + spec.split +
                    "-NNNNN-of-NNNNN.parquet) in this directory of Hugging Face's split files "
                    "(its splits: " +
                    found + ")");
  }
  return chosen;
}

// Hugging Face's feature type ("_type") of each column, from a footer's "huggingface"
// metadata ({"info": {"features": {"image": {"_type": "Image"}, ...}}}); none if there is
// none or it does not parse.
std::map<std::string, std::string> HuggingFaceTypes(const std::string& text) {
  std::map<std::string, std::string> types;
  if (text.empty()) return types;
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return types;
  const auto info = json.find("info");
  if (info == json.end() || !info->is_object()) return types;
  const auto features = info->find("features");
  if (features == info->end() || !features->is_object()) return types;
  for (const auto& [name, feature] : features->items()) {
    if (!feature.is_object()) continue;
    const auto type = feature.find("_type");
    if (type != feature.end() && type->is_string()) types[name] = type->get<std::string>();
  }
  return types;
}

std::string ColumnList(const std::vector<ParquetColumn>& columns, bool types = false) {
  std::string list;
  for (const ParquetColumn& column : columns) {
    list += (list.empty() ? "" : ", ") + column.name;
    if (types) list += " " + column.type_text;
  }
  return list;
}

bool SameColumns(const std::vector<ParquetColumn>& a, const std::vector<ParquetColumn>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].name != b[i].name || a[i].type_text != b[i].type_text) return false;
  return true;
}

// A spec's pipeline text split: the columns its top-level `columns` key selects (none:
// every column) and the image pipeline's YAML (the rest).
struct Selection {
  std::optional<std::vector<std::string>> columns;
  std::string pipeline;
};

// The text itself when it has no `columns`; else the rest re-emitted (the image pipeline's
// errors then count lines in that). kInvalidArgument naming the line for a `columns` that
// is not a list of distinct names.
Result<Selection> SplitPipeline(const std::string& text) {
  const StrictYaml yaml("pipeline");
  return yaml.Parse(text, [&](const YAML::Node& root) -> Result<Selection> {
    if (!root.IsMap() || !root["columns"]) return Selection{std::nullopt, text};
    const YAML::Node list = root["columns"];
    if (!list.IsSequence() || list.size() == 0) {
      return yaml.Error(
          list, "'columns' must be a non-empty list of column names, got " + DescribeYaml(list));
    }
    std::vector<std::string> columns;
    for (const YAML::Node& node : list) {
      EMBER_ASSIGN_OR_RETURN(std::string name,
                             yaml.String(node, "a column in 'columns'", "a column name"));
      if (std::find(columns.begin(), columns.end(), name) != columns.end())
        return yaml.Error(node, "column '" + name + "' is in 'columns' twice");
      columns.push_back(std::move(name));
    }
    YAML::Node rest(YAML::NodeType::Map);
    for (const auto& entry : root) {
      if (entry.first.Scalar() != "columns") rest[entry.first] = entry.second;
    }
    Selection selection{std::move(columns), ""};
    if (rest.size() > 0) {
      YAML::Emitter out;
      out << rest;
      selection.pipeline = out.c_str();
    }
    return selection;
  });
}

Field MakeField(int column, Kind kind, const std::string& name, ParquetType type) {
  Field field;
  field.column = column;
  field.kind = kind;
  field.name = name;
  field.type = type;
  return field;
}

// The tensors the columns make (see parquet.h), of those `selected` (none: all), in order;
// lists sized by the scan are kArray until it says otherwise. kInvalidArgument naming
// `file` for a type not read or a column selected that it does not have.
Result<std::vector<Field>> FieldsOf(const std::string& file, const ParquetLayout& layout,
                                    const std::optional<std::vector<std::string>>& selected) {
  const std::vector<ParquetColumn>& columns = layout.columns;
  std::vector<bool> used(columns.size(), !selected.has_value());
  if (selected) {
    for (const std::string& name : *selected) {
      const auto found = std::find_if(columns.begin(), columns.end(),
                                      [&](const ParquetColumn& c) { return c.name == name; });
      if (found == columns.end()) {
        return InvalidArgument(file + ": no column '" + name +
                               "' (pipeline 'columns'; its "
                               "columns: " +
                               ColumnList(columns) + ")");
      }
      used[found - columns.begin()] = true;
    }
  }
  const std::map<std::string, std::string> hf = HuggingFaceTypes(layout.huggingface);
  auto holds_images = [&](const ParquetColumn& column) {
    const auto type = hf.find(column.name);
    if (column.type == ParquetType::kImage) return type == hf.end() || type->second == "Image";
    return column.type == ParquetType::kBinary && column.name == "image";
  };
  std::optional<int> image, label;
  for (int c = 0; c < static_cast<int>(columns.size()); ++c) {
    if (!used[c]) continue;
    if (holds_images(columns[c]) && (!image || columns[c].name == "image")) {
      if (!image || columns[*image].name != "image") image = c;
    }
    if (columns[c].name == "label" && IsInteger(columns[c].type)) label = c;
  }
  std::vector<Field> fields;
  if (image) fields.push_back(MakeField(*image, Kind::kImage, "image", columns[*image].type));
  if (label) fields.push_back(MakeField(*label, Kind::kInteger, "label", columns[*label].type));
  for (int c = 0; c < static_cast<int>(columns.size()); ++c) {
    if (!used[c] || c == image || c == label) continue;
    const ParquetColumn& column = columns[c];
    Field field = MakeField(c, Kind::kBytes, column.name, column.type);
    switch (column.type) {
      case ParquetType::kBinary:
      case ParquetType::kImage: break;
      case ParquetType::kFixedList:
        field.kind = Kind::kArray;
        field.type = column.element;
        field.dtype = ElementDType(column.element);
        field.length = column.list_size;
        break;
      case ParquetType::kList:
        field.type = column.element;
        field.dtype = ElementDType(column.element);
        if (column.name == "input_ids" && IsInteger(column.element)) {
          field.kind = Kind::kPadded;
          field.dtype = ring::DType::kInt64;
        } else {
          field.kind = Kind::kArray;
          field.sized_by_scan = true;
        }
        break;
      case ParquetType::kOther:
        return InvalidArgument(file + ": column '" + column.name + "': type " + column.type_text +
                               " is not read (Ember reads integer, floating-point, binary and "
                               "string columns, lists of numbers and image structs; pipeline "
                               "'columns' selects the others)");
      default:
        if (IsInteger(column.type)) {
          field.kind = Kind::kInteger;
        } else {
          field.kind = Kind::kFloat;
          field.dtype =
              column.type == ParquetType::kFloat64 ? ring::DType::kFloat64 : ring::DType::kFloat32;
        }
        break;
    }
    fields.push_back(std::move(field));
  }
  if (fields.empty()) return InvalidArgument(file + ": no columns");
  return fields;
}

// What the ring can carry (CheckColumnTensors).
Status CheckTensors(const Index& index) {
  std::vector<ColumnTensor> tensors;
  for (const Field& field : index.fields) {
    const std::string& column = index.columns[field.column].name;
    tensors.push_back({field.name, column});
    if (field.kind == Kind::kBytes || field.kind == Kind::kPadded)
      tensors.push_back({field.name + "_size", column});
  }
  return CheckColumnTensors(index.first_file, tensors, ColumnList(index.columns));
}

// A file's bytes in memory (a mapping: local, or a remote file in the shard cache).
class MappedBytes final : public ParquetBytes {
 public:
  explicit MappedBytes(const MappedFile& file) : file_(file) {}
  uint64_t size() const override { return file_.size(); }
  const char* data() const override { return file_.data(); }
  Status ReadAt(uint64_t offset, uint64_t length, char* out) const override {
    if (offset > file_.size() || length > file_.size() - offset) {
      return DataLoss(file_.path() + ": bytes [" + std::to_string(offset) + ", " +
                      std::to_string(offset + length) + ") are past its end (" +
                      std::to_string(file_.size()) + " bytes)");
    }
    if (length > 0) std::memcpy(out, file_.data() + offset, length);
    return Status::Ok();
  }

 private:
  const MappedFile& file_;
};

// A remote file not in the shard cache: its bytes by range GETs.
class RangeBytes final : public ParquetBytes {
 public:
  RangeBytes(ShardCache& cache, const File& file) : cache_(cache), file_(file) {}
  uint64_t size() const override { return file_.size; }
  const char* data() const override { return nullptr; }
  Status ReadAt(uint64_t offset, uint64_t length, char* out) const override {
    std::string got;
    EMBER_RETURN_IF_ERROR(cache_.ReadRange(file_.path, offset, length, got));
    if (got.size() != length) {
      return DataLoss(file_.name + ": " + std::to_string(got.size()) + " bytes at " +
                      std::to_string(offset) + ", " + std::to_string(length) + " asked for");
    }
    std::memcpy(out, got.data(), length);
    return Status::Ok();
  }

 private:
  ShardCache& cache_;
  const File& file_;
};

// The columns fields read, ascending; sets each field's slot in them.
std::vector<int> ReadColumns(std::vector<Field>& fields) {
  std::vector<int> read;
  for (const Field& field : fields) read.push_back(field.column);
  std::sort(read.begin(), read.end());
  for (Field& field : fields)
    field.slot =
        static_cast<int>(std::lower_bound(read.begin(), read.end(), field.column) - read.begin());
  return read;
}

// Scans the columns whose longest value sizes a tensor (kBytes, lists) in every row group.
Status Scan(const ParquetFile& parquet, const ParquetBytes& bytes, Index& index) {
  std::vector<Field*> scanned;
  std::vector<int> columns;
  for (Field& field : index.fields) {
    if (field.kind == Kind::kBytes || field.sized_by_scan || field.kind == Kind::kPadded) {
      scanned.push_back(&field);
      columns.push_back(field.column);
    }
  }
  if (columns.empty()) return Status::Ok();
  std::vector<size_t> order(columns.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return columns[a] < columns[b]; });
  std::vector<int> sorted;
  for (size_t i : order) sorted.push_back(columns[i]);
  const std::vector<int64_t>& rows = parquet.layout().row_group_rows;
  for (size_t g = 0; g < rows.size(); ++g) {
    if (rows[g] == 0) continue;
    EMBER_ASSIGN_OR_RETURN(std::vector<ParquetValues> values,
                           parquet.Read(bytes, static_cast<int>(g), sorted));
    for (size_t k = 0; k < order.size(); ++k) {
      Field& field = *scanned[order[k]];
      const ParquetValues& column = values[k];
      for (int64_t r = 0; r < rows[g]; ++r) {
        if (!column.valid.empty() && column.valid[r] == 0) continue;
        const int64_t length = column.offsets[r + 1] - column.offsets[r];
        if (field.kind == Kind::kBytes) {
          if (static_cast<uint64_t>(length) <= kMaxFieldBytes)
            field.max_size = std::max(field.max_size, static_cast<uint32_t>(length));
        } else if (static_cast<uint64_t>(length) * ring::DTypeSize(field.dtype) <= kMaxFieldBytes) {
          field.min_length = std::min(field.min_length, length);
          field.max_length = std::max(field.max_length, length);
        }
      }
    }
  }
  return Status::Ok();
}

// Reads file `file`'s footer (and with it, for the first file, the set's fields) and scans
// it; a load keeps its footer and, if local, its mapping.
Status ReadFile(Env& env, ShardCache* cache, const ParquetBackend& backend, File& file,
                Index& index, DatasetMemory::Charge* memory, bool keep) {
  std::shared_ptr<const MappedFile> mapped;
  if (file.remote) {
    if (cache == nullptr) {
      return FailedPrecondition(file.name + ": this emberd has no shard cache for remote files");
    }
    EMBER_ASSIGN_OR_RETURN(mapped, cache->Get(file.path));
  } else {
    EMBER_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> local, env.MapReadOnly(file.path));
    mapped = std::move(local);
  }
  file.size = mapped->size();
  const MappedBytes bytes(*mapped);
  Result<std::unique_ptr<ParquetFile>> opened = backend.Open(file.name, bytes);
  if (mapped->shrunk()) return mapped->ShrunkError();
  if (!opened.ok()) return opened.status();
  std::shared_ptr<const ParquetFile> parquet = std::move(opened).value();
  const ParquetLayout& layout = parquet->layout();
  if (index.first_file.empty()) {
    index.first_file = file.name;
    index.columns = layout.columns;
    EMBER_ASSIGN_OR_RETURN(index.fields, FieldsOf(file.name, layout, index.selected));
    EMBER_RETURN_IF_ERROR(CheckTensors(index));  // before anything is scanned
    index.read = ReadColumns(index.fields);
  } else if (!SameColumns(layout.columns, index.columns)) {
    return InvalidArgument(file.name + ": columns (" + ColumnList(layout.columns, true) +
                           ") are not those of the set's first file (" +
                           ColumnList(index.columns, true) + " in " + index.first_file + ")");
  }
  uint64_t rows = 0;
  for (size_t g = 0; g < layout.row_group_rows.size(); ++g) {
    file.group_first.push_back(rows);
    rows += static_cast<uint64_t>(layout.row_group_rows[g]);
    uint64_t group_bytes = static_cast<uint64_t>(layout.row_group_rows[g]) * 9;  // offsets, nulls
    for (int c : index.read) group_bytes += static_cast<uint64_t>(layout.column_bytes[g][c]);
    index.largest_group = std::max(index.largest_group, group_bytes);
    index.total_bytes += group_bytes;
  }
  file.group_first.push_back(rows);
  if (memory != nullptr) {
    const uint64_t cost = sizeof(File) + file.path.size() + file.name.size() +
                          file.group_first.size() * sizeof(uint64_t) +
                          (keep ? layout.footer_bytes : 0);
    EMBER_RETURN_IF_ERROR(memory->Add(cost, file.name + " (its footer and row groups)"));
  }
  Status scanned = Scan(*parquet, bytes, index);
  if (mapped->shrunk()) return mapped->ShrunkError();
  EMBER_RETURN_IF_ERROR(scanned);
  if (keep) {
    file.group_span = layout.row_group_span;
    file.parquet = std::move(parquet);
    if (!file.remote) file.local = std::move(mapped);
  }
  return Status::Ok();
}

// Each file's first sample id, then the count (ShardSet::first, DatasetInfo::shard_starts).
std::vector<uint64_t> FileFirsts(const Index& index) {
  std::vector<uint64_t> first;
  for (const File& file : index.files) first.push_back(file.first);
  first.push_back(index.info.count);
  return first;
}

Result<Index> BuildIndex(const ParquetBackend& backend, Env& env, const DatasetSpec& spec,
                         const PluginRegistry* plugins, DatasetMemory::Charge* memory,
                         ShardCache* cache, bool keep, IndexingProgress* progress = nullptr) {
  Index index;
  Result<Selection> selection = SplitPipeline(spec.pipeline);
  if (!selection.ok()) return selection.status().WithContext("dataset '" + spec.name + "'");
  index.selected = std::move(selection->columns);
  auto pipeline = ImagePipeline::Parse(selection->pipeline, plugins);
  if (!pipeline.ok()) return pipeline.status().WithContext("dataset '" + spec.name + "'");
  index.pipeline = std::make_shared<const ImagePipeline>(std::move(pipeline).value());
  EMBER_ASSIGN_OR_RETURN(std::vector<std::string> paths, ListFiles(env, spec, cache));
  if (progress != nullptr) progress->SetShards(paths.size());
  for (const std::string& path : paths) {
    File file;
    file.path = path;
    file.name = NameOf(path);
    file.remote = IsRemoteShard(path);
    file.first = index.info.count;
    EMBER_RETURN_IF_ERROR(ReadFile(env, cache, backend, file, index, memory, keep));
    if (progress != nullptr) progress->ShardIndexed(file.size);
    if (file.group_first.back() == 0) continue;
    index.info.count += file.group_first.back();
    index.info.files.push_back(file.name);
    index.files.push_back(std::move(file));
  }
  if (index.info.count == 0) {
    return InvalidArgument(NameOf(spec.path) + ": no rows in its " + std::to_string(paths.size()) +
                           " file(s)");
  }
  for (Field& field : index.fields) {
    if (field.sized_by_scan) {
      const bool one_length = field.min_length == field.max_length && field.max_length > 0;
      field.kind = one_length ? Kind::kArray : Kind::kPadded;
      field.length = field.max_length;
    } else if (field.kind == Kind::kPadded) {
      field.length = field.max_length;
    }
  }
  EMBER_RETURN_IF_ERROR(CheckTensors(index));
  index.budget = std::min(
      index.total_bytes, std::max(index.largest_group,
                                  std::min(kMaxRowGroupBudget,
                                           std::max(kMinRowGroupBudget, 4 * index.largest_group))));
  if (memory != nullptr) {
    EMBER_RETURN_IF_ERROR(
        memory->Add(index.budget, NameOf(spec.path) + " (its decoded row groups)"));
  }
  DatasetInfo& info = index.info;
  info.spec = spec;
  info.shards = index.files.size();
  if (spec.shuffle == "shards") info.shard_starts = FileFirsts(index);
  for (const Field& field : index.fields) {
    switch (field.kind) {
      case Kind::kImage:
        info.tensors.push_back(
            TensorSpec{"image", index.pipeline->dtype(), index.pipeline->shape()});
        break;
      case Kind::kInteger:
        info.tensors.push_back(TensorSpec{field.name, ring::DType::kInt64, {}});
        break;
      case Kind::kFloat: info.tensors.push_back(TensorSpec{field.name, field.dtype, {}}); break;
      case Kind::kArray:
        info.tensors.push_back(TensorSpec{field.name, field.dtype, {field.length}});
        break;
      case Kind::kPadded:
        info.tensors.push_back(
            TensorSpec{field.name, field.dtype, {std::max<int64_t>(field.length, 1)}});
        info.tensors.push_back(TensorSpec{field.name + "_size", ring::DType::kInt64, {}});
        break;
      case Kind::kBytes:
        for (TensorSpec& tensor : BytesTensors(field.name, field.max_size))
          info.tensors.push_back(std::move(tensor));
        break;
    }
  }
  return index;
}

// An integer of `type` at `data` as int64: false for a uint64 over INT64_MAX.
bool IntegerAt(ParquetType type, const char* data, int64_t& value) {
  switch (type) {
    case ParquetType::kBool:
    case ParquetType::kUInt8:
    case ParquetType::kUInt16:
    case ParquetType::kUInt32:
    case ParquetType::kUInt64: return LoadInt64(data, ParquetTypeBytes(type), false, value);
    case ParquetType::kInt8:
    case ParquetType::kInt16:
    case ParquetType::kInt32:
    case ParquetType::kInt64: return LoadInt64(data, ParquetTypeBytes(type), true, value);
    default: return false;
  }
}

// Writes `count` values of `type` at `src` as `dtype` (ElementDType's, or int64) to `dst`:
// false for a uint64 over INT64_MAX.
bool ConvertValues(ParquetType type, const char* src, size_t count, ring::DType dtype, char* dst) {
  const size_t width = ParquetTypeBytes(type);
  if (dtype == ring::DType::kInt64) {
    for (size_t i = 0; i < count; ++i) {
      int64_t value = 0;
      if (!IntegerAt(type, src + i * width, value)) return false;
      std::memcpy(dst + i * sizeof(value), &value, sizeof(value));
    }
    return true;
  }
  if (type == ParquetType::kFloat16) {
    for (size_t i = 0; i < count; ++i) {
      uint16_t half = 0;
      std::memcpy(&half, src + i * width, sizeof(half));
      const float value = HalfToFloat(half);
      std::memcpy(dst + i * sizeof(value), &value, sizeof(value));
    }
    return true;
  }
  if (count > 0) std::memcpy(dst, src, count * width);  // the same representation
  return true;
}

class ParquetSource : public Source {
 public:
  // Remote files come from `cache` (not null when the index has any: ReadFile refuses
  // them otherwise).
  ParquetSource(Index index, ShardCache* cache)
      : index_(std::move(index)),
        cache_(cache),
        reads_(FilesOf(index_), cache),
        groups_(index_.budget) {}

  const DatasetInfo& info() const override { return index_.info; }

  Status ReadSample(uint64_t id, const SampleContext& context, void* const* dsts) const override {
    EMBER_RETURN_IF_ERROR(CheckInRange(id));
    const uint32_t f = reads_.ShardOf(id);
    const File& file = index_.files[f];
    const uint64_t row = id - file.first;
    const size_t group = GroupOf(file, row);
    auto decoded = groups_.Get((uint64_t{f} << 32) | group,
                               [&] { return Decode(file, static_cast<int>(group)); });
    if (!decoded.ok()) return decoded.status();
    return Write(id, file, row, group, **decoded, context, dsts);
  }

  bool ParallelDecode() const override { return true; }

  // Local files: the kernel reads the row groups' chunks ahead (each once a batch).
  void Prefetch(const uint64_t* ids, size_t count) const override {
    uint64_t last = UINT64_MAX;
    for (size_t i = 0; i < count; ++i) {
      if (ids[i] >= index_.info.count) continue;
      const uint32_t f = reads_.ShardOf(ids[i]);
      const File& file = index_.files[f];
      if (file.local == nullptr) continue;
      const size_t group = GroupOf(file, ids[i] - file.first);
      const uint64_t key = (uint64_t{f} << 32) | group;
      if (key == last || group >= file.group_span.size()) continue;
      last = key;
      file.local->WillNeed(file.group_span[group].first, file.group_span[group].second);
    }
    reads_.Prefetch(ids, count);  // remote files: these and the readers' next ones
  }

  void Follow(std::weak_ptr<const ReadForecast> reader) const override {
    reads_.Follow(std::move(reader));
  }

 private:
  // The row group holding `row` of `file`.
  static size_t GroupOf(const File& file, uint64_t row) {
    return static_cast<size_t>(
        std::upper_bound(file.group_first.begin(), file.group_first.end(), row) -
        file.group_first.begin() - 1);
  }

  static ShardSet FilesOf(const Index& index) {
    ShardSet set;
    set.first = FileFirsts(index);
    for (const File& file : index.files) {
      set.urls.push_back(file.path);
      set.sizes.push_back(file.size);
      set.remote.push_back(file.remote);
    }
    return set;
  }

  // Row group `group` of `file`, the columns the fields read: from the local mapping, the
  // cache's, or (a remote file not in the cache) range GETs.
  Result<DecodedRowGroup> Decode(const File& file, int group) const {
    std::shared_ptr<const MappedFile> cached;
    const MappedFile* mapping = file.local.get();
    if (mapping == nullptr && (cached = cache_->Cached(file.path)) != nullptr &&
        cached->size() == file.size) {
      mapping = cached.get();
    }
    Result<std::vector<ParquetValues>> columns =
        mapping != nullptr ? file.parquet->Read(MappedBytes(*mapping), group, index_.read)
                           : file.parquet->Read(RangeBytes(*cache_, file), group, index_.read);
    if (mapping != nullptr && mapping->shrunk()) return mapping->ShrunkError();
    if (!columns.ok()) return columns.status();
    DecodedRowGroup decoded;
    decoded.columns = std::move(columns).value();
    return decoded;
  }

  Status Write(uint64_t id, const File& file, uint64_t row, size_t group,
               const DecodedRowGroup& decoded, const SampleContext& context,
               void* const* dsts) const {
    const uint64_t r = row - file.group_first[group];
    const std::string where =
        file.name + ": row " + std::to_string(row) + " (row group " + std::to_string(group) + ")";
    size_t tensor = 0;
    for (const Field& field : index_.fields) {
      const ParquetValues& values = decoded.columns[field.slot];
      const std::string column = " column '" + index_.columns[field.column].name + "'";
      auto bad = [&](const std::string& what) { return DataLoss(where + column + ": " + what); };
      if (!values.valid.empty() && values.valid[r] == 0) {
        return bad(field.kind == Kind::kArray || field.kind == Kind::kPadded
                       ? "null, or a list holding a null"
                       : "null");
      }
      const char* data = values.data.data();
      const int64_t begin = values.offsets.empty() ? 0 : values.offsets[r];
      const int64_t count = values.offsets.empty() ? 0 : values.offsets[r + 1] - begin;
      switch (field.kind) {
        case Kind::kImage:
          EMBER_RETURN_IF_ERROR(index_.pipeline->Run(
              where + column, reinterpret_cast<const uint8_t*>(data + begin),
              static_cast<size_t>(count), context.seed, context.epoch, id, dsts[tensor++]));
          break;
        case Kind::kInteger: {
          int64_t value = 0;
          if (!IntegerAt(field.type, data + r * ParquetTypeBytes(field.type), value))
            return bad("a uint64 over the int64 it is served as");
          std::memcpy(dsts[tensor++], &value, sizeof(value));
          break;
        }
        case Kind::kFloat:
          ConvertValues(field.type, data + r * ParquetTypeBytes(field.type), 1, field.dtype,
                        static_cast<char*>(dsts[tensor++]));
          break;
        case Kind::kArray: {
          const size_t width = ParquetTypeBytes(field.type);
          const char* elements = data + r * field.length * width;
          if (!values.offsets.empty()) {  // a list whose rows the scan found of one length
            if (count != field.length) {
              return bad("a list of " + std::to_string(count) + " elements, the set's have " +
                         std::to_string(field.length));
            }
            elements = data + begin * width;
          }
          if (!ConvertValues(field.type, elements, field.length, field.dtype,
                             static_cast<char*>(dsts[tensor++])))
            return bad("a uint64 over the int64 it is served as");
          break;
        }
        case Kind::kPadded: {
          if (count > field.length) {
            return bad("a list of " + std::to_string(count) +
                       " elements, over the set's longest (" + std::to_string(field.length) + ")");
          }
          auto* dst = static_cast<char*>(dsts[tensor++]);
          const size_t element = ring::DTypeSize(field.dtype);
          if (!ConvertValues(field.type, data + begin * ParquetTypeBytes(field.type),
                             static_cast<size_t>(count), field.dtype, dst))
            return bad("a uint64 over the int64 it is served as");
          std::memset(dst + count * element, 0,
                      (std::max<int64_t>(field.length, 1) - count) * element);
          const int64_t size = count;
          std::memcpy(dsts[tensor++], &size, sizeof(size));
          break;
        }
        case Kind::kBytes:
          if (static_cast<uint64_t>(count) > field.max_size) {
            return bad(
                std::to_string(count) + " bytes, over " +
                (static_cast<uint64_t>(count) > kMaxFieldBytes
                     ? "the limit of " + std::to_string(kMaxFieldBytes) + " bytes for one field"
                     : "the set's longest (" + std::to_string(field.max_size) + ")"));
          }
          WriteBytesTensors(data + begin, static_cast<uint32_t>(count), field.max_size,
                            dsts[tensor], dsts[tensor + 1]);
          tensor += 2;
          break;
      }
    }
    return Status::Ok();
  }

  const Index index_;
  ShardCache* const cache_;
  mutable ShardReads reads_;
  mutable RowGroupCache groups_;
};

}  // namespace

Result<DatasetInfo> ProbeParquet(const ParquetBackend& backend, Env& env, const DatasetSpec& spec,
                                 const PluginRegistry* plugins, DatasetMemory::Charge* memory,
                                 ShardCache* cache, IndexingProgress* progress) {
  EMBER_ASSIGN_OR_RETURN(Index index, BuildIndex(backend, env, spec, plugins, memory, cache,
                                                 /*keep=*/false, progress));
  return std::move(index.info);
}

Result<std::unique_ptr<Source>> LoadParquet(const ParquetBackend& backend, Env& env,
                                            const DatasetSpec& spec, const PluginRegistry* plugins,
                                            DatasetMemory::Charge* memory, ShardCache* cache) {
  EMBER_ASSIGN_OR_RETURN(Index index,
                         BuildIndex(backend, env, spec, plugins, memory, cache, /*keep=*/true));
  return std::unique_ptr<Source>(std::make_unique<ParquetSource>(std::move(index), cache));
}

}  // namespace ember::daemon
