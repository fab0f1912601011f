#include "daemon/data/mds/mds_index.h"

#include <cctype>
#include <charconv>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>

#include "daemon/data/mds/mds_hash.h"
#include "ember/ring_layout.h"

namespace ember::daemon {
namespace {

using Json = nlohmann::json;

struct TypeName {
  MdsType type;
  const char* name;
  size_t size;
};
constexpr TypeName kTypes[] = {
    {MdsType::kUInt8, "uint8", 1},     {MdsType::kInt8, "int8", 1},
    {MdsType::kUInt16, "uint16", 2},   {MdsType::kInt16, "int16", 2},
    {MdsType::kUInt32, "uint32", 4},   {MdsType::kInt32, "int32", 4},
    {MdsType::kUInt64, "uint64", 8},   {MdsType::kInt64, "int64", 8},
    {MdsType::kFloat16, "float16", 2}, {MdsType::kFloat32, "float32", 4},
    {MdsType::kFloat64, "float64", 8},
};

// Encodings MDS has that Ember does not read.
constexpr const char* kRefused[] = {"pil",       "pkl",        "list[pil]", "list[jpeg]",
                                    "list[png]", "jpeg_array", "jpegarray", "str_decimal"};
constexpr const char* kKnown =
    "bytes, str, json, jpeg, png, int, int8, int16, int32, int64, uint8, uint16, uint32, "
    "uint64, float16, float32, float64, str_int, str_float, ndarray[:DTYPE[:SHAPE]]";

// A JSON value as errors quote it: its text, at most 64 bytes of it.
std::string Quote(const Json& value) {
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > 64) text = text.substr(0, 61) + "...";
  return text;
}

// Reads the fields of one index.json; errors are "NAME: FIELD: WHAT".
class Reader {
 public:
  explicit Reader(const std::string& name) : name_(name) {}

  Status Bad(const std::string& field, const std::string& what) const {
    return InvalidArgument(name_ + ": " + field + ": " + what);
  }

  // object[key], which must be there.
  Result<const Json*> Get(const Json& object, const std::string& at, const char* key) const {
    auto it = object.find(key);
    if (it == object.end()) return Bad(Field(at, key), "missing");
    return &*it;
  }

  Result<std::string> String(const Json& object, const std::string& at, const char* key) const {
    EMBER_ASSIGN_OR_RETURN(const Json* value, Get(object, at, key));
    if (!value->is_string()) return Bad(Field(at, key), Quote(*value) + ", not a string");
    return value->get<std::string>();
  }

  // A non-negative integer of at most `max`.
  Result<uint64_t> Unsigned(const Json& object, const std::string& at, const char* key,
                            uint64_t max) const {
    EMBER_ASSIGN_OR_RETURN(const Json* value, Get(object, at, key));
    return Unsigned(*value, Field(at, key), max);
  }

  Result<uint64_t> Unsigned(const Json& value, const std::string& field, uint64_t max) const {
    if (!value.is_number_unsigned()) {
      return Bad(field, Quote(value) + ", not a non-negative integer");
    }
    const uint64_t number = value.get<uint64_t>();
    if (number > max) return Bad(field, Quote(value) + ", more than " + std::to_string(max));
    return number;
  }

  Result<const Json*> Array(const Json& object, const std::string& at, const char* key) const {
    EMBER_ASSIGN_OR_RETURN(const Json* value, Get(object, at, key));
    if (!value->is_array()) return Bad(Field(at, key), Quote(*value) + ", not an array");
    return value;
  }

  Result<const Json*> Object(const Json& object, const std::string& at, const char* key) const {
    EMBER_ASSIGN_OR_RETURN(const Json* value, Get(object, at, key));
    if (!value->is_object()) return Bad(Field(at, key), Quote(*value) + ", not an object");
    return value;
  }

  Status Version(const Json& object, const std::string& at) const {
    EMBER_ASSIGN_OR_RETURN(const Json* version, Get(object, at, "version"));
    if (*version != 2)
      return Bad(Field(at, "version"), Quote(*version) + ", Ember reads version 2");
    return Status::Ok();
  }

  static std::string Field(const std::string& at, const char* key) {
    return at.empty() ? key : at + "." + key;
  }

 private:
  const std::string& name_;
};

std::string Item(const std::string& field, size_t i) {
  return field + "[" + std::to_string(i) + "]";
}

// A basename that stays below index.json's directory: relative, no "." or ".." or empty
// component, no NUL.
bool StaysBelow(const std::string& basename) {
  if (basename.empty() || basename.find('\0') != std::string::npos) return false;
  size_t start = 0;
  while (true) {
    const size_t slash = basename.find('/', start);
    const std::string part = basename.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (slash == std::string::npos) return true;
    start = slash + 1;
  }
}

Result<MdsFileInfo> FileInfo(const Reader& reader, const Json& object, const std::string& at) {
  MdsFileInfo file;
  EMBER_ASSIGN_OR_RETURN(file.basename, reader.String(object, at, "basename"));
  if (!StaysBelow(file.basename)) {
    return reader.Bad(Reader::Field(at, "basename"),
                      Quote(Json(file.basename)) + " is not a path below index.json's directory");
  }
  EMBER_ASSIGN_OR_RETURN(file.bytes, reader.Unsigned(object, at, "bytes", UINT64_MAX));
  EMBER_ASSIGN_OR_RETURN(const Json* hashes, reader.Object(object, at, "hashes"));
  for (const auto& [algorithm, digest] : hashes->items()) {
    const std::string field = Reader::Field(at, "hashes") + "." + algorithm;
    if (!IsMdsHash(algorithm)) {
      return reader.Bad(
          field, "'" + algorithm + "' is not a hash Ember checks (known: " + MdsHashNames() + ")");
    }
    if (!digest.is_string()) return reader.Bad(field, Quote(digest) + ", not a string");
    std::string hex = digest.get<std::string>();
    for (char& c : hex) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    file.hashes.emplace_back(algorithm, std::move(hex));
  }
  return file;
}

// "3,4" -> {3, 4}: dimensions of at least 1.
bool ParseShape(const std::string& text, std::vector<int64_t>& shape) {
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const size_t end = comma == std::string::npos ? text.size() : comma;
    int64_t dim = 0;
    auto [at, error] = std::from_chars(text.data() + start, text.data() + end, dim);
    if (error != std::errc() || at != text.data() + end || start == end || dim < 1) return false;
    shape.push_back(dim);
    if (comma == std::string::npos) return true;
    start = comma + 1;
  }
}

// The column's kind, type, shape and fixed size from its encoding.
Status ParseEncoding(const Reader& reader, const std::string& field, MdsColumn& column) {
  const std::string& encoding = column.encoding;
  auto fixed = [&](MdsType type) {
    column.kind = MdsEncoding::kScalar;
    column.type = type;
    column.size = static_cast<uint32_t>(MdsTypeSize(type));
    return Status::Ok();
  };
  MdsType type;
  if (encoding == "bytes" || encoding == "str" || encoding == "json") {
    column.kind = MdsEncoding::kBytes;
  } else if (encoding == "jpeg" || encoding == "png") {
    column.kind = MdsEncoding::kImage;
  } else if (encoding == "int") {
    return fixed(MdsType::kInt64);
  } else if (ParseMdsType(encoding, type)) {
    return fixed(type);
  } else if (encoding == "str_int") {
    column.kind = MdsEncoding::kStrInt;
  } else if (encoding == "str_float") {
    column.kind = MdsEncoding::kStrFloat;
  } else if (encoding == "ndarray" || encoding.rfind("ndarray:", 0) == 0) {
    column.kind = MdsEncoding::kNdArray;
    // ndarray:DTYPE:SHAPE, either part optional (NDArray.from_str).
    const std::string args = encoding.size() > 8 ? encoding.substr(8) : "";
    if (!args.empty()) {
      const size_t colon = args.find(':');
      const std::string dtype = args.substr(0, colon);
      if (!ParseMdsType(dtype, type)) {
        return reader.Bad(field, "'" + encoding + "': '" + dtype +
                                     "' is not an ndarray dtype "
                                     "(uint8, int8, uint16, int16, uint32, int32, uint64, int64, "
                                     "float16, float32, float64)");
      }
      column.type = type;
      if (colon != std::string::npos && !ParseShape(args.substr(colon + 1), column.shape)) {
        return reader.Bad(field, "'" + encoding +
                                     "': the shape is not dimensions of at least 1 "
                                     "separated by commas");
      }
      if (column.shape.size() + 1 > ring::kMaxDims) {
        return reader.Bad(field, "'" + encoding + "': more than " +
                                     std::to_string(ring::kMaxDims - 1) + " dimensions");
      }
      if (!column.shape.empty()) {
        uint64_t bytes = MdsTypeSize(type);
        for (int64_t dim : column.shape) {
          if (static_cast<uint64_t>(dim) > UINT32_MAX ||
              bytes * static_cast<uint64_t>(dim) > UINT32_MAX)
            return reader.Bad(field, "'" + encoding + "': over 4 GiB per sample");
          bytes *= static_cast<uint64_t>(dim);
        }
        column.size = static_cast<uint32_t>(bytes);
      }
    }
  } else {
    for (const char* refused : kRefused) {
      if (encoding == refused) {
        return reader.Bad(field, "'" + encoding +
                                     "' is an encoding Ember does not read (it "
                                     "reads " +
                                     kKnown + ")");
      }
    }
    return reader.Bad(field,
                      "'" + encoding + "' is not an MDS encoding (Ember reads " + kKnown + ")");
  }
  return Status::Ok();
}

Result<std::vector<MdsColumn>> Columns(const Reader& reader, const Json& shard,
                                       const std::string& at) {
  EMBER_ASSIGN_OR_RETURN(const Json* names, reader.Array(shard, at, "column_names"));
  EMBER_ASSIGN_OR_RETURN(const Json* encodings, reader.Array(shard, at, "column_encodings"));
  EMBER_ASSIGN_OR_RETURN(const Json* sizes, reader.Array(shard, at, "column_sizes"));
  const std::string names_field = at + ".column_names";
  if (names->empty()) return reader.Bad(names_field, "no columns");
  for (const auto& [other, array] :
       {std::pair{"column_encodings", encodings}, std::pair{"column_sizes", sizes}}) {
    if (array->size() != names->size()) {
      return reader.Bad(at + "." + other, std::to_string(array->size()) +
                                              " items, column_names has " +
                                              std::to_string(names->size()));
    }
  }
  std::vector<MdsColumn> columns;
  std::set<std::string> seen;
  for (size_t i = 0; i < names->size(); ++i) {
    MdsColumn column;
    const Json& name = (*names)[i];
    if (!name.is_string() || name.get<std::string>().empty())
      return reader.Bad(Item(names_field, i), Quote(name) + ", not a column name");
    column.name = name.get<std::string>();
    if (!seen.insert(column.name).second)
      return reader.Bad(Item(names_field, i), Quote(name) + " is there twice");
    const Json& encoding = (*encodings)[i];
    const std::string encoding_field = Item(at + ".column_encodings", i);
    if (!encoding.is_string())
      return reader.Bad(encoding_field, Quote(encoding) + ", not a string");
    column.encoding = encoding.get<std::string>();
    EMBER_RETURN_IF_ERROR(ParseEncoding(reader, encoding_field, column));
    const Json& size = (*sizes)[i];
    const std::string size_field = Item(at + ".column_sizes", i);
    if (column.size) {
      if (!size.is_number_unsigned() || size.get<uint64_t>() != *column.size) {
        return reader.Bad(size_field, Quote(size) + ", encoding '" + column.encoding + "' has " +
                                          std::to_string(*column.size) + " bytes");
      }
    } else if (!size.is_null()) {
      return reader.Bad(size_field, Quote(size) + ", encoding '" + column.encoding +
                                        "' has no fixed size (null)");
    }
    columns.push_back(std::move(column));
  }
  return columns;
}

Result<MdsShardInfo> Shard(const Reader& reader, const Json& shard, const std::string& at) {
  if (!shard.is_object()) return reader.Bad(at, Quote(shard) + ", not an object");
  EMBER_RETURN_IF_ERROR(reader.Version(shard, at));
  EMBER_ASSIGN_OR_RETURN(std::string format, reader.String(shard, at, "format"));
  if (format != "mds") {
    return reader.Bad(at + ".format", "'" + format +
                                          "', Ember reads 'mds' shards (not json, "
                                          "csv or tsv)");
  }
  MdsShardInfo info;
  EMBER_ASSIGN_OR_RETURN(info.columns, Columns(reader, shard, at));
  EMBER_ASSIGN_OR_RETURN(uint64_t samples, reader.Unsigned(shard, at, "samples", UINT32_MAX));
  info.samples = static_cast<uint32_t>(samples);
  EMBER_ASSIGN_OR_RETURN(const Json* raw, reader.Object(shard, at, "raw_data"));
  EMBER_ASSIGN_OR_RETURN(info.raw, FileInfo(reader, *raw, at + ".raw_data"));
  if (info.raw.bytes > UINT32_MAX) {
    return reader.Bad(at + ".raw_data.bytes", std::to_string(info.raw.bytes) +
                                                  ", over the 4 GiB an MDS shard's offsets reach");
  }
  EMBER_ASSIGN_OR_RETURN(const Json* compression, reader.Get(shard, at, "compression"));
  EMBER_ASSIGN_OR_RETURN(const Json* zip, reader.Get(shard, at, "zip_data"));
  if (compression->is_null()) {
    if (!zip->is_null())
      return reader.Bad(at + ".zip_data", "not null, but there is no compression");
    return info;
  }
  if (!compression->is_string()) {
    return reader.Bad(at + ".compression", Quote(*compression) + ", not a string or null");
  }
  if (!zip->is_object()) {
    return reader.Bad(at + ".zip_data",
                      Quote(*zip) + ", not an object (compression is " + Quote(*compression) + ")");
  }
  EMBER_ASSIGN_OR_RETURN(info.zip, FileInfo(reader, *zip, at + ".zip_data"));
  info.compression = compression->get<std::string>();
  const std::string family = info.compression.substr(0, info.compression.find(':'));
  if (family != "zstd") {
    return reader.Bad(at + ".compression", "'" + info.compression + "' (" + info.zip->basename +
                                               "): Ember decompresses zstd only");
  }
  return info;
}

}  // namespace

size_t MdsTypeSize(MdsType type) {
  for (const TypeName& t : kTypes)
    if (t.type == type) return t.size;
  return 0;
}

const char* MdsTypeName(MdsType type) {
  for (const TypeName& t : kTypes)
    if (t.type == type) return t.name;
  return "?";
}

bool ParseMdsType(const std::string& name, MdsType& type) {
  for (const TypeName& t : kTypes) {
    if (name == t.name) {
      type = t.type;
      return true;
    }
  }
  return false;
}

bool IsIntegerType(MdsType type) {
  return type != MdsType::kFloat16 && type != MdsType::kFloat32 && type != MdsType::kFloat64;
}

Result<MdsIndex> ParseMdsIndex(const std::string& name, const std::string& text) {
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::exception& e) {
    return InvalidArgument(name + ": not JSON: " + e.what());
  }
  const Reader reader(name);
  if (!root.is_object()) return InvalidArgument(name + ": " + Quote(root) + ", not a JSON object");
  EMBER_RETURN_IF_ERROR(reader.Version(root, ""));
  EMBER_ASSIGN_OR_RETURN(const Json* shards, reader.Array(root, "", "shards"));
  if (shards->size() > kMaxMdsShards) {
    return reader.Bad("shards", std::to_string(shards->size()) + " shards, at most " +
                                    std::to_string(kMaxMdsShards));
  }
  MdsIndex index;
  index.shards.reserve(shards->size());
  for (size_t i = 0; i < shards->size(); ++i) {
    EMBER_ASSIGN_OR_RETURN(MdsShardInfo shard, Shard(reader, (*shards)[i], Item("shards", i)));
    index.shards.push_back(std::move(shard));
  }
  return index;
}

bool SameColumns(const std::vector<MdsColumn>& a, const std::vector<MdsColumn>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].name != b[i].name || a[i].encoding != b[i].encoding) return false;
  return true;
}

}  // namespace ember::daemon
