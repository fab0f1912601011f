// Parquet files as the parquet format (parquet.h) reads them, decoded by a backend over
// Arrow C++ (arrow_parquet.h). No Arrow type crosses this header: emberd builds without
// Arrow's headers and loads the backend, the one library that links Arrow, only when a
// parquet dataset is registered or loaded (parquet_backend.h).
//
// Glossary: a file's rows are cut into row groups, the unit Parquet compresses and
// decodes; a column is a top-level field of the file's Arrow schema (the one pyarrow
// stores in the footer, else the one Arrow derives from the Parquet schema); a column
// chunk is a column's bytes in one row group.
#ifndef EMBER_DAEMON_DATA_PARQUET_PARQUET_FILE_H_
#define EMBER_DAEMON_DATA_PARQUET_PARQUET_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ember/status.h"

namespace ember::daemon {

// Bumped on any change to this header: a backend library built from another version of it
// is refused (parquet_backend.h).
inline constexpr uint32_t kParquetBackendAbi = 1;

// The value types the format serves; every other Arrow type is kOther (refused, named by
// ParquetColumn::type_text).
enum class ParquetType : uint8_t {
  kOther,
  kBool,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUInt8,
  kUInt16,
  kUInt32,
  kUInt64,
  kFloat16,
  kFloat32,
  kFloat64,
  kBinary,     // binary, string, their large, view and fixed-size forms: bytes
  kList,       // list or large_list of numbers (ParquetColumn::element)
  kFixedList,  // fixed_size_list of numbers (element, list_size)
  kImage,      // a struct with a binary field `bytes`, as Hugging Face's Image feature
               // stores an image ({bytes, path}): its bytes
};

// The bytes one value of a number type takes in ParquetValues::data (kBool: one byte,
// 0 or 1); 0 for the others.
inline size_t ParquetTypeBytes(ParquetType type) {
  switch (type) {
    case ParquetType::kBool:
    case ParquetType::kInt8:
    case ParquetType::kUInt8: return 1;
    case ParquetType::kInt16:
    case ParquetType::kUInt16:
    case ParquetType::kFloat16: return 2;
    case ParquetType::kInt32:
    case ParquetType::kUInt32:
    case ParquetType::kFloat32: return 4;
    case ParquetType::kInt64:
    case ParquetType::kUInt64:
    case ParquetType::kFloat64: return 8;
    default: return 0;
  }
}

struct ParquetColumn {
  std::string name;
  std::string type_text;  // Arrow's, for messages: "list<element: int64>"
  ParquetType type = ParquetType::kOther;
  ParquetType element = ParquetType::kOther;  // kList, kFixedList: a number type
  int64_t list_size = 0;                      // kFixedList
};

// What a file's footer says.
struct ParquetLayout {
  std::vector<ParquetColumn> columns;
  std::vector<int64_t> row_group_rows;  // by row group
  // The bytes of each column's chunks uncompressed, [row group][column]: about what
  // decoding them holds in memory.
  std::vector<std::vector<int64_t>> column_bytes;
  // Where each row group's column chunks lie in the file: [offset, offset + length).
  std::vector<std::pair<uint64_t, uint64_t>> row_group_span;
  uint64_t footer_bytes = 0;  // the footer's size (what an open file holds)
  // The footer's "huggingface" key-value (Hugging Face datasets' features as JSON), or "".
  std::string huggingface;
};

// One column of one row group, decoded. Row r's value is
//   numbers             data[r * w, (r + 1) * w), w = ParquetTypeBytes(type)
//   kFixedList          data[r * n * w, (r + 1) * n * w), n = list_size, w the element's
//   kList               the elements [offsets[r], offsets[r + 1]) of data (w bytes each)
//   kBinary, kImage     the bytes data[offsets[r], offsets[r + 1])
// in native byte order, and null where valid[r] is 0 (valid empty: no row is); a list
// holding a null element and an image struct whose bytes are null are null.
struct ParquetValues {
  std::vector<uint8_t> valid;
  std::vector<int64_t> offsets;
  std::string data;

  uint64_t bytes() const { return valid.size() + offsets.size() * sizeof(int64_t) + data.size(); }
};

// A file's bytes, as a reader of it has them: all of them in memory (data(), a mapped
// file), or read on demand (ReadAt, e.g. range GETs of a remote file).
class ParquetBytes {
 public:
  virtual ~ParquetBytes() = default;
  virtual uint64_t size() const = 0;
  // The file's bytes, valid while this object lives; null: read them with ReadAt.
  virtual const char* data() const = 0;
  // Reads [offset, offset + length) into `out`. Thread-safe. Errors name the file.
  virtual Status ReadAt(uint64_t offset, uint64_t length, char* out) const = 0;
};

// A file whose footer was read. Immutable; thread-safe.
class ParquetFile {
 public:
  virtual ~ParquetFile() = default;
  virtual const ParquetLayout& layout() const = 0;

  // Decodes columns `columns` (indices into layout().columns, ascending, each once) of
  // row group `group` from `bytes`, the file's (as opened, or read again: the footer is
  // not). One ParquetValues per column, in that order. kDataLoss naming the file, the row
  // group and Arrow's reason for data that does not decode; the errors of `bytes`.
  virtual Result<std::vector<ParquetValues>> Read(const ParquetBytes& bytes, int group,
                                                  const std::vector<int>& columns) const = 0;
};

// Reads Parquet files. Thread-safe.
class ParquetBackend {
 public:
  virtual ~ParquetBackend() = default;

  // "Arrow 25.0.1": what decodes, for logs.
  virtual std::string version() const = 0;

  // Reads the footer of the file `name` (as messages name it) from `bytes`. kDataLoss
  // "NAME: not a Parquet file, or a damaged one: <Arrow's reason>" for a bad magic
  // number, footer or schema; the errors of `bytes`.
  virtual Result<std::unique_ptr<ParquetFile>> Open(const std::string& name,
                                                    const ParquetBytes& bytes) const = 0;
};

}  // namespace ember::daemon

// The backend library's one entry point (parquet_backend.h looks it up): the backend if
// `abi` is the kParquetBackendAbi it was built with, else null.
#define EMBER_PARQUET_BACKEND_SYMBOL "ember_parquet_backend"
extern "C" {
typedef const ember::daemon::ParquetBackend* (*EmberParquetBackendFn)(uint32_t abi);
}

#endif  // EMBER_DAEMON_DATA_PARQUET_PARQUET_FILE_H_
