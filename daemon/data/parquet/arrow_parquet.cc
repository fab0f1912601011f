#include "daemon/data/parquet/arrow_parquet.h"

#include <arrow/api.h>
#include <arrow/io/interfaces.h>
#include <arrow/io/memory.h>
#include <arrow/util/config.h>
#include <arrow/util/key_value_metadata.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/schema.h>
#include <parquet/exception.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#include <parquet/properties.h>

#include <algorithm>
#include <exception>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

#include "common/mutex.h"

namespace ember::daemon {
namespace {

// An Arrow file over ParquetBytes::ReadAt, for one reader on one thread (Arrow's
// default ReadAt seeks and reads under its own lock). Keeps the first error of `bytes` so
// that it is reported as it was, not as Arrow's IOError.
class BytesFile final : public arrow::io::RandomAccessFile {
 public:
  explicit BytesFile(const ParquetBytes& bytes) : bytes_(bytes) {}

  arrow::Status Close() override {
    closed_ = true;
    return arrow::Status::OK();
  }
  bool closed() const override { return closed_; }
  arrow::Result<int64_t> Tell() const override { return position_; }
  arrow::Status Seek(int64_t position) override {
    if (position < 0) return arrow::Status::Invalid("negative position ", position);
    position_ = position;
    return arrow::Status::OK();
  }
  arrow::Result<int64_t> GetSize() override { return static_cast<int64_t>(bytes_.size()); }

  arrow::Result<int64_t> Read(int64_t nbytes, void* out) override {
    const int64_t size = static_cast<int64_t>(bytes_.size());
    const int64_t n = std::max<int64_t>(0, std::min(nbytes, size - position_));
    if (n > 0) {
      Status status = bytes_.ReadAt(static_cast<uint64_t>(position_), static_cast<uint64_t>(n),
                                    static_cast<char*>(out));
      if (!status.ok()) {
        MutexLock lock(&mu_);
        if (error_.ok()) error_ = status;
        return arrow::Status::IOError(status.message());
      }
    }
    position_ += n;
    return n;
  }

  arrow::Result<std::shared_ptr<arrow::Buffer>> Read(int64_t nbytes) override {
    const int64_t size = static_cast<int64_t>(bytes_.size());
    const int64_t n = std::max<int64_t>(0, std::min(nbytes, size - position_));
    ARROW_ASSIGN_OR_RAISE(std::unique_ptr<arrow::ResizableBuffer> buffer,
                          arrow::AllocateResizableBuffer(n));
    ARROW_ASSIGN_OR_RAISE(int64_t read, Read(n, buffer->mutable_data()));
    ARROW_RETURN_NOT_OK(buffer->Resize(read));
    return std::shared_ptr<arrow::Buffer>(std::move(buffer));
  }

  // The first error `bytes` returned (OK if none).
  Status error() const {
    MutexLock lock(&mu_);
    return error_;
  }

 private:
  const ParquetBytes& bytes_;
  int64_t position_ = 0;
  bool closed_ = false;
  mutable Mutex mu_;
  Status error_ GUARDED_BY(mu_);
};

// The Arrow file a reader reads `bytes` through: in memory without a copy, else by ReadAt.
struct Opened {
  std::shared_ptr<arrow::io::RandomAccessFile> file;
  std::shared_ptr<BytesFile> by_range;  // null when in memory

  explicit Opened(const ParquetBytes& bytes) {
    if (bytes.data() != nullptr) {
      auto buffer = std::make_shared<arrow::Buffer>(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                    static_cast<int64_t>(bytes.size()));
      file = std::make_shared<arrow::io::BufferReader>(std::move(buffer));
    } else {
      by_range = std::make_shared<BytesFile>(bytes);
      file = by_range;
    }
  }

  // The error to report for Arrow's `reason`: the bytes' own if reading them failed.
  Status Failed(Status arrow_error) const {
    if (by_range != nullptr) {
      Status read = by_range->error();
      if (!read.ok()) return read;
    }
    return arrow_error;
  }
};

parquet::ReaderProperties ReaderProperties() { return parquet::default_reader_properties(); }

parquet::ArrowReaderProperties ArrowProperties() {
  parquet::ArrowReaderProperties properties(/*use_threads=*/false);
  properties.set_pre_buffer(false);
  return properties;
}

ParquetType NumberType(const arrow::DataType& type) {
  switch (type.id()) {
    case arrow::Type::BOOL: return ParquetType::kBool;
    case arrow::Type::INT8: return ParquetType::kInt8;
    case arrow::Type::INT16: return ParquetType::kInt16;
    case arrow::Type::INT32: return ParquetType::kInt32;
    case arrow::Type::INT64: return ParquetType::kInt64;
    case arrow::Type::UINT8: return ParquetType::kUInt8;
    case arrow::Type::UINT16: return ParquetType::kUInt16;
    case arrow::Type::UINT32: return ParquetType::kUInt32;
    case arrow::Type::UINT64: return ParquetType::kUInt64;
    case arrow::Type::HALF_FLOAT: return ParquetType::kFloat16;
    case arrow::Type::FLOAT: return ParquetType::kFloat32;
    case arrow::Type::DOUBLE: return ParquetType::kFloat64;
    default: return ParquetType::kOther;
  }
}

bool IsBinary(arrow::Type::type id) {
  switch (id) {
    case arrow::Type::BINARY:
    case arrow::Type::STRING:
    case arrow::Type::LARGE_BINARY:
    case arrow::Type::LARGE_STRING:
    case arrow::Type::BINARY_VIEW:
    case arrow::Type::STRING_VIEW:
    case arrow::Type::FIXED_SIZE_BINARY: return true;
    default: return false;
  }
}

ParquetColumn Classify(const arrow::Field& field) {
  ParquetColumn column;
  column.name = field.name();
  const arrow::DataType& type = *field.type();
  column.type_text = type.ToString();
  switch (type.id()) {
    case arrow::Type::LIST:
    case arrow::Type::LARGE_LIST: {
      column.element = NumberType(*static_cast<const arrow::BaseListType&>(type).value_type());
      if (column.element != ParquetType::kOther) column.type = ParquetType::kList;
      break;
    }
    case arrow::Type::FIXED_SIZE_LIST: {
      const auto& list = static_cast<const arrow::FixedSizeListType&>(type);
      column.element = NumberType(*list.value_type());
      column.list_size = list.list_size();
      if (column.element != ParquetType::kOther && column.list_size > 0)
        column.type = ParquetType::kFixedList;
      break;
    }
    case arrow::Type::STRUCT: {
      const int bytes = static_cast<const arrow::StructType&>(type).GetFieldIndex("bytes");
      if (bytes >= 0 && IsBinary(type.field(bytes)->type()->id()))
        column.type = ParquetType::kImage;
      break;
    }
    default: column.type = IsBinary(type.id()) ? ParquetType::kBinary : NumberType(type); break;
  }
  return column;
}

void CollectLeaves(const parquet::arrow::SchemaField& field, std::vector<int>& leaves) {
  if (field.is_leaf()) leaves.push_back(field.column_index);
  for (const parquet::arrow::SchemaField& child : field.children) CollectLeaves(child, leaves);
}

// Appends values [begin, begin + length) of the number array `array` (of `type`).
void AppendNumbers(const arrow::Array& array, int64_t begin, int64_t length, ParquetType type,
                   std::string& data) {
  if (length <= 0) return;
  if (type == ParquetType::kBool) {
    const auto& booleans = static_cast<const arrow::BooleanArray&>(array);
    for (int64_t i = begin; i < begin + length; ++i) data.push_back(booleans.Value(i) ? 1 : 0);
    return;
  }
  const size_t width = ParquetTypeBytes(type);
  const uint8_t* values =
      array.data()->buffers[1]->data() + static_cast<size_t>(array.offset() + begin) * width;
  data.append(reinterpret_cast<const char*>(values), static_cast<size_t>(length) * width);
}

bool AnyNull(const arrow::Array& array, int64_t begin, int64_t end) {
  if (array.null_count() == 0) return false;
  for (int64_t i = begin; i < end; ++i)
    if (array.IsNull(i)) return true;
  return false;
}

// Appends the bytes of rows of `array` (a binary type); row r is null if `rows` (the array
// the rows' validity comes from, e.g. an image struct) has it null or the bytes are.
template <typename BinaryArray>
void AppendBinary(const BinaryArray& array, const arrow::Array& rows, ParquetValues& out) {
  for (int64_t r = 0; r < array.length(); ++r) {
    const bool valid = rows.IsValid(r) && array.IsValid(r);
    out.valid.push_back(valid ? 1 : 0);
    if (valid) {
      const std::string_view view = array.GetView(r);
      out.data.append(view.data(), view.size());
    }
    out.offsets.push_back(static_cast<int64_t>(out.data.size()));
  }
}

Status AppendBinaryOf(const arrow::Array& array, const arrow::Array& rows, ParquetValues& out) {
  switch (array.type_id()) {
    case arrow::Type::BINARY:
    case arrow::Type::STRING:
      AppendBinary(static_cast<const arrow::BinaryArray&>(array), rows, out);
      return Status::Ok();
    case arrow::Type::LARGE_BINARY:
    case arrow::Type::LARGE_STRING:
      AppendBinary(static_cast<const arrow::LargeBinaryArray&>(array), rows, out);
      return Status::Ok();
    case arrow::Type::BINARY_VIEW:
    case arrow::Type::STRING_VIEW:
      AppendBinary(static_cast<const arrow::BinaryViewArray&>(array), rows, out);
      return Status::Ok();
    case arrow::Type::FIXED_SIZE_BINARY:
      AppendBinary(static_cast<const arrow::FixedSizeBinaryArray&>(array), rows, out);
      return Status::Ok();
    default:
      return Internal("an array of " + array.type()->ToString() + " where bytes were expected");
  }
}

// Appends one chunk of `column`'s values.
Status AppendChunk(const ParquetColumn& column, const arrow::Array& array, ParquetValues& out) {
  const int64_t rows = array.length();
  switch (column.type) {
    case ParquetType::kBinary: return AppendBinaryOf(array, array, out);
    case ParquetType::kImage: {
      const auto& image = static_cast<const arrow::StructArray&>(array);
      std::shared_ptr<arrow::Array> bytes = image.GetFieldByName("bytes");
      if (bytes == nullptr) return Internal("an image struct without its field 'bytes'");
      return AppendBinaryOf(*bytes, image, out);
    }
    case ParquetType::kList:
    case ParquetType::kFixedList: {
      std::shared_ptr<arrow::Array> values;
      std::vector<int64_t> starts(static_cast<size_t>(rows) + 1);
      if (array.type_id() == arrow::Type::LIST) {
        const auto& a = static_cast<const arrow::ListArray&>(array);
        values = a.values();
        for (int64_t r = 0; r <= rows; ++r) starts[r] = a.value_offset(r);
      } else if (array.type_id() == arrow::Type::LARGE_LIST) {
        const auto& a = static_cast<const arrow::LargeListArray&>(array);
        values = a.values();
        for (int64_t r = 0; r <= rows; ++r) starts[r] = a.value_offset(r);
      } else if (array.type_id() == arrow::Type::FIXED_SIZE_LIST) {
        const auto& a = static_cast<const arrow::FixedSizeListArray&>(array);
        values = a.values();
        for (int64_t r = 0; r <= rows; ++r) starts[r] = a.value_offset(r);
      } else {
        return Internal("an array of " + array.type()->ToString() + " where a list was expected");
      }
      const int64_t base = out.data.size() / ParquetTypeBytes(column.element);
      for (int64_t r = 0; r < rows; ++r) {
        // A null list's offsets may be anything: it takes no elements.
        const bool valid =
            array.IsValid(r) && (column.type == ParquetType::kFixedList
                                     ? !AnyNull(*values, starts[r], starts[r] + column.list_size)
                                     : !AnyNull(*values, starts[r], starts[r + 1]));
        out.valid.push_back(valid ? 1 : 0);
      }
      if (column.type == ParquetType::kFixedList) {
        for (int64_t r = 0; r < rows; ++r)
          AppendNumbers(*values, starts[r], column.list_size, column.element, out.data);
      } else {
        int64_t taken = base;
        for (int64_t r = 0; r < rows; ++r) {
          if (out.valid[out.valid.size() - rows + r]) {
            AppendNumbers(*values, starts[r], starts[r + 1] - starts[r], column.element, out.data);
            taken += starts[r + 1] - starts[r];
          }
          out.offsets.push_back(taken);
        }
      }
      return Status::Ok();
    }
    default: {
      if (ParquetTypeBytes(column.type) == 0)
        return Internal("column '" + column.name + "' of type " + column.type_text +
                        " is not read");
      for (int64_t r = 0; r < rows; ++r) out.valid.push_back(array.IsValid(r) ? 1 : 0);
      AppendNumbers(array, 0, rows, column.type, out.data);
      return Status::Ok();
    }
  }
}

class ArrowParquetFile final : public ParquetFile {
 public:
  ArrowParquetFile(std::string name, std::shared_ptr<parquet::FileMetaData> metadata,
                   ParquetLayout layout, std::vector<std::vector<int>> leaves)
      : name_(std::move(name)),
        metadata_(std::move(metadata)),
        layout_(std::move(layout)),
        leaves_(std::move(leaves)) {}

  const ParquetLayout& layout() const override { return layout_; }

  Result<std::vector<ParquetValues>> Read(const ParquetBytes& bytes, int group,
                                          const std::vector<int>& columns) const override {
    const std::string where = name_ + ": row group " + std::to_string(group);
    if (group < 0 || static_cast<size_t>(group) >= layout_.row_group_rows.size())
      return Internal(where + ": out of range");
    std::vector<int> leaves;
    for (size_t i = 0; i < columns.size(); ++i) {
      if (columns[i] < 0 || static_cast<size_t>(columns[i]) >= layout_.columns.size() ||
          (i > 0 && columns[i] <= columns[i - 1]))
        return Internal(where + ": bad column list");
      leaves.insert(leaves.end(), leaves_[columns[i]].begin(), leaves_[columns[i]].end());
    }
    const Opened opened(bytes);
    try {
      std::unique_ptr<parquet::ParquetFileReader> reader =
          parquet::ParquetFileReader::Open(opened.file, ReaderProperties(), metadata_);
      auto made = parquet::arrow::FileReader::Make(arrow::default_memory_pool(), std::move(reader),
                                                   ArrowProperties());
      if (!made.ok()) return opened.Failed(DataLoss(where + ": " + made.status().ToString()));
      auto table = (*made)->ReadRowGroup(group, leaves);
      if (!table.ok()) return opened.Failed(DataLoss(where + ": " + table.status().ToString()));
      const int64_t rows = layout_.row_group_rows[group];
      if (static_cast<size_t>((*table)->num_columns()) != columns.size() ||
          (*table)->num_rows() != rows) {
        return DataLoss(where + ": decoded " + std::to_string((*table)->num_columns()) +
                        " columns of " + std::to_string((*table)->num_rows()) +
                        " rows, the footer says " + std::to_string(columns.size()) + " of " +
                        std::to_string(rows));
      }
      std::vector<ParquetValues> out(columns.size());
      for (size_t i = 0; i < columns.size(); ++i) {
        const ParquetColumn& column = layout_.columns[columns[i]];
        ParquetValues& values = out[i];
        if (column.type == ParquetType::kBinary || column.type == ParquetType::kImage ||
            column.type == ParquetType::kList)
          values.offsets.push_back(0);
        for (const std::shared_ptr<arrow::Array>& chunk :
             (*table)->column(static_cast<int>(i))->chunks()) {
          Status appended = AppendChunk(column, *chunk, values);
          if (!appended.ok()) return appended.WithContext(where + " column '" + column.name + "'");
        }
        if (std::all_of(values.valid.begin(), values.valid.end(), [](uint8_t v) { return v != 0; }))
          values.valid.clear();
        values.valid.shrink_to_fit();
      }
      return out;
    } catch (const std::exception& e) {
      return opened.Failed(DataLoss(where + ": " + e.what()));
    }
  }

 private:
  const std::string name_;
  const std::shared_ptr<parquet::FileMetaData> metadata_;
  const ParquetLayout layout_;
  const std::vector<std::vector<int>> leaves_;  // by column: its leaf (Parquet) columns
};

class ArrowBackend final : public ParquetBackend {
 public:
  std::string version() const override { return std::string("Arrow ") + ARROW_VERSION_STRING; }

  Result<std::unique_ptr<ParquetFile>> Open(const std::string& name,
                                            const ParquetBytes& bytes) const override {
    const std::string bad = name + ": not a Parquet file, or a damaged one: ";
    const Opened opened(bytes);
    try {
      std::unique_ptr<parquet::ParquetFileReader> reader =
          parquet::ParquetFileReader::Open(opened.file, ReaderProperties());
      std::shared_ptr<parquet::FileMetaData> metadata = reader->metadata();
      auto made = parquet::arrow::FileReader::Make(arrow::default_memory_pool(), std::move(reader),
                                                   ArrowProperties());
      if (!made.ok()) return opened.Failed(DataLoss(bad + made.status().ToString()));
      const parquet::arrow::SchemaManifest& manifest = (*made)->manifest();
      ParquetLayout layout;
      std::vector<std::vector<int>> leaves;
      for (const parquet::arrow::SchemaField& field : manifest.schema_fields) {
        layout.columns.push_back(Classify(*field.field));
        leaves.emplace_back();
        CollectLeaves(field, leaves.back());
      }
      for (int g = 0; g < metadata->num_row_groups(); ++g) {
        std::unique_ptr<parquet::RowGroupMetaData> group = metadata->RowGroup(g);
        layout.row_group_rows.push_back(group->num_rows());
        std::vector<int64_t> column_bytes;
        int64_t begin = std::numeric_limits<int64_t>::max(), end = 0;
        for (const std::vector<int>& column : leaves) {
          int64_t sum = 0;
          for (int leaf : column) {
            std::unique_ptr<parquet::ColumnChunkMetaData> chunk = group->ColumnChunk(leaf);
            sum += chunk->total_uncompressed_size();
            const int64_t start =
                chunk->has_dictionary_page()
                    ? std::min(chunk->dictionary_page_offset(), chunk->data_page_offset())
                    : chunk->data_page_offset();
            begin = std::min(begin, start);
            end = std::max(end, start + chunk->total_compressed_size());
          }
          column_bytes.push_back(sum);
        }
        layout.column_bytes.push_back(std::move(column_bytes));
        if (end <= begin) begin = end = 0;
        layout.row_group_span.emplace_back(begin, end - begin);
      }
      layout.footer_bytes = metadata->size();
      if (const auto& kv = metadata->key_value_metadata()) {
        const int at = kv->FindKey("huggingface");
        if (at >= 0) layout.huggingface = kv->value(at);
      }
      return std::unique_ptr<ParquetFile>(std::make_unique<ArrowParquetFile>(
          name, std::move(metadata), std::move(layout), std::move(leaves)));
    } catch (const std::exception& e) {
      return opened.Failed(DataLoss(bad + e.what()));
    }
  }
};

}  // namespace

const ParquetBackend& ArrowParquetBackend() {
  static const ArrowBackend* const backend = new ArrowBackend();
  return *backend;
}

}  // namespace ember::daemon

extern "C" __attribute__((visibility("default"))) const ember::daemon::ParquetBackend*
ember_parquet_backend(uint32_t abi) {
  if (abi != ember::daemon::kParquetBackendAbi) return nullptr;
  return &ember::daemon::ArrowParquetBackend();
}
