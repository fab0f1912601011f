#include "daemon/data/parquet/parquet_backend.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "common/temp_dir_testing.h"

namespace ember::daemon {
namespace {

// A file's bytes from a string: in memory, or (by_range) only through ReadAt, counted.
class StringBytes final : public ParquetBytes {
 public:
  StringBytes(std::string bytes, bool by_range) : bytes_(std::move(bytes)), by_range_(by_range) {}
  uint64_t size() const override { return bytes_.size(); }
  const char* data() const override { return by_range_ ? nullptr : bytes_.data(); }
  Status ReadAt(uint64_t offset, uint64_t length, char* out) const override {
    ++reads;
    if (fail) return Unavailable("x.parquet: the server went away");
    if (offset + length > bytes_.size()) return DataLoss("past the end");
    std::memcpy(out, bytes_.data() + offset, length);
    return Status::Ok();
  }
  mutable std::atomic<int> reads{0};
  bool fail = false;

 private:
  const std::string bytes_;
  const bool by_range_;
};

const ParquetBackend& MustLoad() {
  auto backend = LoadParquetBackend();
  INFO(backend.status().ToString());
  REQUIRE(backend.ok());
  return **backend;
}

TEST_CASE("the backend library beside the program loads, once, and reads a file pyarrow wrote") {
  const std::vector<std::string> where = ParquetBackendCandidates();
  REQUIRE(where.size() == 3);
  CHECK(where[0].substr(where[0].rfind('/') + 1) == kParquetBackendLibrary);
  const ParquetBackend& backend = MustLoad();
  CHECK(&MustLoad() == &backend);
  CHECK(backend.version().rfind("Arrow ", 0) == 0);

  const std::string scalars = ReadTestFile("daemon/data/parquet/testdata/scalars.parquet");
  for (bool by_range : {false, true}) {
    INFO("by range: " << by_range);
    StringBytes bytes(scalars, by_range);
    auto file = backend.Open("scalars.parquet", bytes);
    INFO(file.status().ToString());
    REQUIRE(file.ok());
    const ParquetLayout& layout = (*file)->layout();
    REQUIRE(layout.columns.size() == 8);
    CHECK(layout.columns[0].name == "flag");
    CHECK(layout.columns[0].type == ParquetType::kBool);
    CHECK(layout.columns[4].type == ParquetType::kUInt64);
    CHECK(layout.columns[5].type == ParquetType::kFloat16);
    CHECK(layout.columns[5].type_text == "halffloat");
    CHECK(layout.row_group_rows == std::vector<int64_t>{4});
    CHECK(layout.footer_bytes > 0);
    REQUIRE(layout.row_group_span.size() == 1);  // after "PAR1", before the footer
    CHECK(layout.row_group_span[0].first == 4);
    CHECK(layout.row_group_span[0].second > 0);
    CHECK(layout.row_group_span[0].first + layout.row_group_span[0].second <=
          scalars.size() - 8 - layout.footer_bytes);
    REQUIRE(layout.column_bytes.size() == 1);
    CHECK(layout.column_bytes[0].size() == 8);
    CHECK(layout.huggingface.empty());
    auto values = (*file)->Read(bytes, 0, {1, 3});
    INFO(values.status().ToString());
    REQUIRE(values.ok());
    REQUIRE(values->size() == 2);
    const ParquetValues& small = (*values)[0];
    CHECK(small.valid.empty());
    CHECK(small.data == std::string("\x00\xff\xfe\xfd", 4));  // int8 -i
    CHECK((*values)[1].data.size() == 4 * 4);                 // uint32
    CHECK((by_range ? bytes.reads > 0 : bytes.reads == 0));
    CHECK((*file)->Read(bytes, 1, {0}).status().code() == StatusCode::kInternal);
    if (by_range) {
      bytes.fail = true;  // the bytes' own error, not Arrow's rewording of it
      CHECK((*file)->Read(bytes, 0, {0}).status().message() == "x.parquet: the server went away");
    }
  }
}

TEST_CASE("a library that is not there, or not the backend, is refused saying so") {
  auto missing = LoadParquetBackendFrom("/nonexistent/libember_parquet_arrow.so");
  CHECK(missing.status().code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(missing.status().message(),
             Catch::StartsWith("format parquet needs Arrow C++: cannot load "
                               "/nonexistent/libember_parquet_arrow.so: "));
  auto other = LoadParquetBackendFrom("libm.so.6");
  CHECK(other.status().code() == StatusCode::kFailedPrecondition);
  CHECK(other.status().message() ==
        "format parquet needs Arrow C++: libm.so.6 has no "
        "ember_parquet_backend: not Ember's parquet backend");
}

}  // namespace
}  // namespace ember::daemon
