#include "daemon/data/webdataset/npy_header.h"

#include <catch2/catch.hpp>

#include <string>

namespace ember::daemon {
namespace {

// .npy bytes as numpy.save writes them (format 1.0): the header padded with spaces to a
// multiple of 64 bytes with the magic, ending in '\n'.
std::string Npy(const std::string& dict, const std::string& data, char major = 1) {
  std::string header = dict;
  const size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  const size_t len = header.size();
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>((len >> 8) & 0xff);
  if (major != 1) out += std::string(2, '\0');
  return out + header + data;
}

TEST_CASE("numpy.save's headers give dtype, shape and where the elements are") {
  const std::string floats(3 * 2 * 4, 'x');
  const std::string npy = Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }", floats);
  auto header = ParseNpyHeader("a.npy", npy.data(), npy.size());
  REQUIRE(header.ok());
  CHECK(header->dtype == ring::DType::kFloat32);
  CHECK(header->shape == std::vector<int64_t>{3, 2});
  CHECK(header->data_offset == npy.size() - floats.size());
  CHECK(header->data_offset % 64 == 0);
  CHECK(header->data_bytes == 24);

  const std::string scalar = Npy("{'descr': '<i8', 'fortran_order': False, 'shape': (), }",
                                 std::string(8, '\0'), 2);
  auto s = ParseNpyHeader("s.npy", scalar.data(), scalar.size());
  REQUIRE(s.ok());
  CHECK(s->dtype == ring::DType::kInt64);
  CHECK(s->shape.empty());
  const std::string vector = Npy("{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }", "abcde");
  auto v = ParseNpyHeader("v.npy", vector.data(), vector.size());
  REQUIRE(v.ok());
  CHECK(v->shape == std::vector<int64_t>{5});
}

TEST_CASE("arrays Ember cannot serve are data loss naming the member and why") {
  auto refused = [](const std::string& npy, const std::string& why) {
    auto header = ParseNpyHeader("m.npy", npy.data(), npy.size());
    REQUIRE(header.status().code() == StatusCode::kDataLoss);
    CHECK(header.status().message() == "m.npy: not a usable .npy array: " + why);
  };
  refused("not numpy at all", "no \\x93NUMPY magic");
  refused(Npy("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", "xxxx"),
          "dtype '>f4' has no tensor type");
  refused(Npy("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", "xxxxxxxx"),
          "dtype '<c8' has no tensor type");
  refused(Npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", std::string(16, 'x')),
          "Fortran order");
  refused(Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", "xxxx"),
          "shape (4,) needs 16 bytes, the member has 4");
  refused(Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1), }", "xxxx"),
          "6 dimensions (at most 5)");
  refused(Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999,), }", ""),
          "shape (99999999999999,)");
}

}  // namespace
}  // namespace ember::daemon
