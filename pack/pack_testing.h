// Test helpers for packed datasets: files of random bytes, an image-folder tree, and
// byte-level damage to files (directories to put them in: common/temp_dir_testing.h).
#ifndef EMBER_PACK_PACK_TESTING_H_
#define EMBER_PACK_PACK_TESTING_H_

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/temp_dir_testing.h"

namespace ember::pack {

inline std::string RandomBytes(std::mt19937_64& rng, size_t n) {
  std::string bytes(n, '\0');
  for (char& c : bytes) c = static_cast<char>(rng() & 0xff);
  return bytes;
}

// XORs the byte at `offset` of `path` with 0xff in place (same inode, no truncation),
// so a live shared mapping of the file sees the change.
inline void FlipByte(const std::string& path, uint64_t offset) {
  REQUIRE(offset < std::filesystem::file_size(path));
  std::fstream file(path, std::ios::binary | std::ios::in | std::ios::out);
  file.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  file.get(c);
  file.seekp(static_cast<std::streamoff>(offset));
  file.put(static_cast<char>(c ^ 0xff));
  file.flush();
  REQUIRE(file.good());
}

inline void TruncateTestFile(const std::string& path, uint64_t size) {
  std::filesystem::resize_file(path, size);
}

// Entry names in `dir`, sorted.
inline std::vector<std::string> DirEntries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

struct TestImage {
  std::string path;  // relative to the folder
  int64_t label;
  std::string bytes;
};

// Writes an image folder under `root` and returns its samples in ImageFolder order:
//   README.txt                      ignored (not in a class folder)
//   cat/B.JPG cat/a.jpg cat/c.png   label 0 (upper case sorts first); c.png is empty
//   cat/notes.txt                   ignored
//   cat/sub/d.jpeg  cat/sub-x/e.jpg  cat/sub/deeper/f.png
//                                   directories in sorted order of their whole path, as
//                                   sorted(os.walk()): cat/sub, cat/sub-x, cat/sub/deeper
//   dog/x.PNG dog/y.Jpeg            label 1
//   empty/readme.md                 label 2: no images, keeps its label
//   fish/z.jpg                      label 3
// The images hold `bytes_per_image` random bytes (but c.png, which is empty).
inline std::vector<TestImage> MakeImageFolder(const std::string& root, uint64_t seed,
                                              size_t bytes_per_image = 3000) {
  std::mt19937_64 rng(seed);
  std::vector<TestImage> images = {
      {"cat/B.JPG", 0, ""},        {"cat/a.jpg", 0, ""},           {"cat/c.png", 0, ""},
      {"cat/sub/d.jpeg", 0, ""},   {"cat/sub-x/e.jpg", 0, ""},     {"cat/sub/deeper/f.png", 0, ""},
      {"dog/x.PNG", 1, ""},        {"dog/y.Jpeg", 1, ""},          {"fish/z.jpg", 3, ""},
  };
  for (TestImage& image : images) {
    if (image.path != "cat/c.png") image.bytes = RandomBytes(rng, bytes_per_image + rng() % 97);
    WriteTestFile(root + "/" + image.path, image.bytes);
  }
  WriteTestFile(root + "/README.txt", "not a class");
  WriteTestFile(root + "/cat/notes.txt", "not an image");
  WriteTestFile(root + "/empty/readme.md", "no images here");
  return images;
}

}  // namespace ember::pack

#endif  // EMBER_PACK_PACK_TESTING_H_
