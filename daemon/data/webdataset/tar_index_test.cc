#include "daemon/data/webdataset/tar_index.h"

#include <catch2/catch.hpp>

#include <string>

#include "daemon/data/webdataset/tar_testing.h"

namespace ember::daemon {
namespace {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_CASE("members are listed in order with their bytes in place; directories are left out") {
  const std::string long_name = "train/" + std::string(150, 'k') + ".jpg";  // a pax header
  const std::string tar = TarBytes({{"train/", ""},
                                    {"train/0001.jpg", "JPEG bytes"},
                                    {"train/0001.cls", "7"},
                                    {"train/empty.txt", ""},
                                    {long_name, std::string(3000, 'x')}});
  auto members = IndexTar("s.tar", tar.data(), tar.size());
  REQUIRE(members.ok());
  REQUIRE(members->size() == 4);
  CHECK((*members)[0].name == "train/0001.jpg");
  CHECK(tar.substr((*members)[0].offset, (*members)[0].size) == "JPEG bytes");
  CHECK(tar.substr((*members)[1].offset, (*members)[1].size) == "7");
  CHECK((*members)[2].name == "train/empty.txt");
  CHECK((*members)[2].size == 0);
  CHECK((*members)[3].name == long_name);
  CHECK(tar.substr((*members)[3].offset, (*members)[3].size) == std::string(3000, 'x'));
  CHECK((*members)[0].offset % 512 == 0);
}

TEST_CASE("damaged, truncated, compressed and empty archives are data loss naming the file") {
  const std::string tar = TarBytes({{"a.jpg", std::string(5000, 'a')}, {"a.cls", "1"}});

  SECTION("truncated inside a member") {
    const std::string cut = tar.substr(0, 512 + 2000);
    auto members = IndexTar("cut.tar", cut.data(), cut.size());
    REQUIRE(members.status().code() == StatusCode::kDataLoss);
    CHECK(Contains(members.status().message(), "cut.tar: "));
    CHECK(Contains(members.status().message(), "a.jpg"));
  }
  SECTION("a damaged header") {
    std::string damaged = tar;
    for (size_t i = 0; i < 512; ++i) damaged[i] = static_cast<char>(i * 7 + 3);
    auto members = IndexTar("bad.tar", damaged.data(), damaged.size());
    REQUIRE(members.status().code() == StatusCode::kDataLoss);
    CHECK(Contains(members.status().message(), "bad.tar: not a readable tar archive"));
  }
  SECTION("gzip-compressed") {
    const std::string gz = std::string("\x1f\x8b\x08\x00", 4) + tar;
    auto members = IndexTar("s.tar.gz", gz.data(), gz.size());
    REQUIRE(members.status().code() == StatusCode::kDataLoss);
    CHECK(members.status().message() ==
          "s.tar.gz: a gzip-compressed archive; Ember reads shards in place: store them as "
          "plain tar");
  }
  SECTION("empty") {
    auto members = IndexTar("empty.tar", "", 0);
    REQUIRE(members.status().code() == StatusCode::kDataLoss);
    CHECK(Contains(members.status().message(), "empty.tar: empty file"));
  }
}

TEST_CASE("an index round-trips through its note bytes; bad or out-of-bounds bytes are refused") {
  const std::vector<TarMember> members = {{"a.jpg", 512, 1000}, {"a.cls", 2048, 1}, {"", 2560, 0}};
  const std::string bytes = EncodeTarIndex(members);
  auto back = DecodeTarIndex(bytes, 4096);
  REQUIRE(back.has_value());
  REQUIRE(back->size() == 3);
  CHECK((*back)[0].name == "a.jpg");
  CHECK((*back)[1].offset == 2048);
  CHECK((*back)[0].size == 1000);
  CHECK_FALSE(DecodeTarIndex(bytes, 2048).has_value());  // a member past the archive
  CHECK_FALSE(DecodeTarIndex(bytes.substr(0, bytes.size() - 1), 4096).has_value());
  CHECK_FALSE(DecodeTarIndex(bytes + "x", 4096).has_value());
  CHECK_FALSE(DecodeTarIndex("not an index", 4096).has_value());
}

}  // namespace
}  // namespace ember::daemon
