#include "daemon/data/field_values.h"

#include <catch2/catch.hpp>

#include <cmath>

#include <cstring>
#include <string>
#include <vector>

namespace ember::daemon {
namespace {

TEST_CASE("LoadInt64 reads 1, 2, 4 and 8 byte integers, signed or not") {
  int64_t v = 0;
  const int16_t minus_two = -2;
  CHECK(LoadInt64(reinterpret_cast<const char*>(&minus_two), 2, true, v));
  CHECK(v == -2);
  CHECK(LoadInt64(reinterpret_cast<const char*>(&minus_two), 2, false, v));
  CHECK(v == 65534);
  const uint8_t byte = 200;
  CHECK(LoadInt64(reinterpret_cast<const char*>(&byte), 1, true, v));
  CHECK(v == -56);
  const uint64_t big = uint64_t{1} << 63;
  CHECK_FALSE(LoadInt64(reinterpret_cast<const char*>(&big), 8, false, v));
  CHECK(LoadInt64(reinterpret_cast<const char*>(&big), 8, true, v));
  CHECK(v == INT64_MIN);
  CHECK_FALSE(LoadInt64(reinterpret_cast<const char*>(&big), 3, true, v));
}

TEST_CASE("decimal integers and floats: whitespace and a '+' allowed, nothing else") {
  int64_t value = 0;
  const std::string ok = " +42\n";
  CHECK(ParseDecimalInt64(ok.data(), ok.size(), value));
  CHECK(value == 42);
  CHECK(ParseDecimalInt64("-7", 2, value));
  CHECK(value == -7);
  for (const std::string bad : {"", " ", "4 2", "x", "1.5", "99999999999999999999"})
    CHECK_FALSE(ParseDecimalInt64(bad.data(), bad.size(), value));
  double real = 0;
  const std::string small = "1e-05";
  CHECK(ParseDecimalDouble(small.data(), small.size(), real));
  CHECK(real == 1e-05);
  CHECK(ParseDecimalDouble("inf", 3, real));
  CHECK_FALSE(ParseDecimalDouble("1.5x", 4, real));
}

TEST_CASE("bytes are two tensors, zero-padded to the longest, and their count") {
  const std::vector<TensorSpec> tensors = BytesTensors("txt", 5);
  REQUIRE(tensors.size() == 2);
  CHECK(tensors[0].name == "txt");
  CHECK(tensors[0].shape == std::vector<int64_t>{5});
  CHECK(tensors[1].name == "txt_size");
  CHECK(tensors[1].dtype == ring::DType::kInt64);
  CHECK(BytesTensors("empty", 0)[0].shape == std::vector<int64_t>{1});

  std::string bytes(5, 'x');
  int64_t size = -1;
  WriteBytesTensors("abc", 3, 5, bytes.data(), &size);
  CHECK(bytes == std::string("abc\0\0", 5));
  CHECK(size == 3);
  std::string one(1, 'x');
  WriteBytesTensors(nullptr, 0, 0, one.data(), &size);
  CHECK(one == std::string(1, '\0'));
  CHECK(size == 0);
  CHECK(ShapeText(ring::DType::kFloat32, {3}) == "(3,) float32");
  CHECK(ShapeText(ring::DType::kUInt8, {2, 4}) == "(2,4) uint8");
}

TEST_CASE("half precision widens exactly, signs and NaNs kept") {
  CHECK(HalfToFloat(0x3c00) == 1.0f);
  CHECK(HalfToFloat(0xc000) == -2.0f);
  CHECK(HalfToFloat(0x0001) == std::ldexp(1.0f, -24));  // the smallest subnormal
  CHECK(HalfToFloat(0x7bff) == 65504.0f);
  CHECK(std::isinf(HalfToFloat(0x7c00)));
  CHECK(std::signbit(HalfToFloat(0x8000)));  // -0
  CHECK(std::isnan(HalfToFloat(0xfe00)));
  CHECK(std::signbit(HalfToFloat(0xfe00)));
}

TEST_CASE("the tensors columns make must fit the ring: names, duplicates, count") {
  CHECK(CheckColumnTensors("i.json", {{"image", "jpg"}, {"label", "label"}}, "jpg, label").ok());
  const Status long_name = CheckColumnTensors("i.json", {{"attention_mask_size", "attention_mask"}}, "attention_mask");
  CHECK(long_name.message() ==
        "i.json: column 'attention_mask' makes tensor 'attention_mask_size', longer than 15 bytes");
  const Status twice = CheckColumnTensors("i.json", {{"label", "label"}, {"label", "cls"}}, "label, cls");
  CHECK(twice.message() == "i.json: columns 'label' and 'cls' both make tensor 'label'");
  std::vector<ColumnTensor> many;
  for (int i = 0; i < 9; ++i) many.push_back({"t" + std::to_string(i), "c" + std::to_string(i)});
  const Status too_many = CheckColumnTensors("f.parquet", many, "c0, ..., c8");
  CHECK(too_many.code() == StatusCode::kInvalidArgument);
  CHECK(too_many.message() == "f.parquet: the columns (c0, ..., c8) make 9 tensors, at most 8 fit a batch");
}

}  // namespace
}  // namespace ember::daemon
