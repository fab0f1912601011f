#include "ember/status.h"

#include <cerrno>

#include <catch2/catch.hpp>

namespace ember {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("odd value " + std::to_string(x));
  return x / 2;
}

Result<int> Quarter(int x) {
  EMBER_ASSIGN_OR_RETURN(int half, Half(x));
  EMBER_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

TEST_CASE("context reads outermost first") {
  Status s = DataLoss("truncated at byte 12").WithContext("file /a").WithContext("dataset 'd'");
  CHECK(s.code() == StatusCode::kDataLoss);
  CHECK(s.message() == "dataset 'd': file /a: truncated at byte 12");
  CHECK(s.ToString() == "data_loss: dataset 'd': file /a: truncated at byte 12");
  CHECK(Status::Ok().WithContext("x").ok());
}

TEST_CASE("assign-or-return propagates the first error") {
  CHECK(*Quarter(8) == 2);
  Result<int> r = Quarter(6);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == "odd value 3");
}

TEST_CASE("errno maps to codes") {
  CHECK(ErrnoStatus("open /x", ENOENT).code() == StatusCode::kNotFound);
  CHECK(ErrnoStatus("open /x", EACCES).code() == StatusCode::kPermissionDenied);
  CHECK(ErrnoStatus("open /x", EPERM).code() == StatusCode::kPermissionDenied);
  CHECK(ErrnoStatus("open /x", ENOSPC).code() == StatusCode::kResourceExhausted);
  CHECK(ErrnoStatus("open /x", EIO).message().rfind("open /x: ", 0) == 0);
}

}  // namespace
}  // namespace ember
