#include "pack/imagefolder_pack.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "common/fault_env.h"
#include "common/temp_dir_testing.h"
#include "pack/pack_testing.h"
#include "pack/packed_dataset.h"

namespace ember::pack {
namespace {

using Catch::Contains;

const std::vector<std::string> kClasses = {"cat", "dog", "empty", "fish"};

TEST_CASE("ListImageFolder orders classes and files as torchvision's ImageFolder") {
  auto env = NewPosixEnv();
  const std::string root = FreshTestDir("list") + "/src";
  const auto images = MakeImageFolder(root, 1);
  auto listing = ListImageFolder(*env, root);
  REQUIRE(listing.ok());
  CHECK(listing->root == root);
  CHECK(listing->classes == kClasses);
  REQUIRE(listing->files.size() == images.size());
  for (size_t i = 0; i < images.size(); ++i) {
    CHECK(listing->files[i].path == images[i].path);
    CHECK(listing->files[i].label == images[i].label);
  }
  CHECK(listing->ignored_files == 3);
}

TEST_CASE("ListImageFolder errors name the directory") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("list_errors");
  auto missing = ListImageFolder(*env, dir + "/nope");
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK_THAT(missing.status().message(), Contains(dir + "/nope"));

  WriteTestFile(dir + "/file", "x");
  CHECK(ListImageFolder(*env, dir + "/file").status().code() == StatusCode::kInvalidArgument);

  WriteTestFile(dir + "/flat/a.jpg", "x");
  auto flat = ListImageFolder(*env, dir + "/flat");
  CHECK(flat.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(flat.status().message(), Contains("no class folders"));

  WriteTestFile(dir + "/noimages/c/a.txt", "x");
  auto none = ListImageFolder(*env, dir + "/noimages");
  CHECK(none.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(none.status().message(), Contains("no .jpg, .jpeg or .png files"));

  std::filesystem::create_directories(dir + "/loop/c");
  std::filesystem::create_directory_symlink("..", dir + "/loop/c/again");
  auto loop = ListImageFolder(*env, dir + "/loop");
  CHECK(loop.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(loop.status().message(), Contains("symlink loop"));
}

TEST_CASE("PackImageFolder round trip: every file's bytes and label, over several shards") {
  auto env = NewPosixEnv();
  const std::string parent = FreshTestDir("pack");
  const std::string out = parent + "/out";
  const auto images = MakeImageFolder(parent + "/src", 2, 3000);
  PackOptions options;
  options.shard_bytes = 8192;
  auto summary = PackImageFolder(*env, parent + "/src", out, options);
  REQUIRE(summary.ok());
  CHECK(summary->records == images.size());
  CHECK(summary->classes == 4);
  CHECK(summary->ignored_files == 3);
  CHECK(summary->shards >= 4);
  CHECK(DirEntries(parent) == std::vector<std::string>{"out", "src"});

  auto dataset = PackedDataset::Open(*env, out);
  REQUIRE(dataset.ok());
  const PackedDataset& d = **dataset;
  CHECK(d.source_format() == "imagefolder");
  CHECK(d.class_names() == kClasses);
  REQUIRE(d.count() == images.size());
  for (uint64_t id = 0; id < d.count(); ++id) {
    const PackedRecord r = d.Get(id);
    CHECK(std::string(reinterpret_cast<const char*>(r.data), r.size) == images[id].bytes);
    CHECK(r.label == images[id].label);
    CHECK(r.path == images[id].path);
    CHECK(d.Verify(id).ok());
  }
}

TEST_CASE("PackImageFolder reports progress while writing and verifying") {
  auto env = NewPosixEnv();
  const std::string parent = FreshTestDir("progress");
  const auto images = MakeImageFolder(parent + "/src", 3, 100);
  PackOptions options;
  uint64_t written = 0;
  uint64_t verified = 0;
  options.progress = [&](const PackProgress& p) {
    CHECK(p.total == images.size());
    (p.stage == PackProgress::Stage::kWrite ? written : verified) = p.done;
  };
  REQUIRE(PackImageFolder(*env, parent + "/src", parent + "/out", options).ok());
  CHECK(written == images.size());
  CHECK(verified == images.size());
}

TEST_CASE("A file that cannot be read mid-pack fails it, naming the file, and leaves nothing") {
  auto posix = NewPosixEnv();
  const std::string parent = FreshTestDir("read_fault");
  const std::string src = parent + "/src";
  MakeImageFolder(src, 4, 3000);
  PackOptions options;
  options.shard_bytes = 8192;  // several shards are written before the failure

  SECTION("an injected read error") {
    FaultEnv env(posix.get());
    env.FailReadFile(src + "/dog/y.Jpeg", PermissionDenied(src + "/dog/y.Jpeg: open: Permission denied"));
    auto summary = PackImageFolder(env, src, parent + "/out", options);
    REQUIRE_FALSE(summary.ok());
    CHECK(summary.status().code() == StatusCode::kPermissionDenied);
    CHECK_THAT(summary.status().message(), Contains(src + "/dog/y.Jpeg"));
  }
  SECTION("a dangling symlink") {
    std::filesystem::create_symlink(parent + "/gone.jpg", src + "/dog/x2.jpg");
    auto summary = PackImageFolder(*posix, src, parent + "/out", options);
    REQUIRE_FALSE(summary.ok());
    CHECK(summary.status().code() == StatusCode::kNotFound);
    CHECK_THAT(summary.status().message(), Contains(src + "/dog/x2.jpg"));
  }
  CHECK(DirEntries(parent) == std::vector<std::string>{"src"});
}

TEST_CASE("PackImageFolder refuses an existing out_dir and nested directories") {
  auto env = NewPosixEnv();
  const std::string parent = FreshTestDir("refuse");
  const std::string src = parent + "/src";
  MakeImageFolder(src, 5, 10);
  std::filesystem::create_directories(parent + "/out");
  auto exists = PackImageFolder(*env, src, parent + "/out", {});
  CHECK(exists.status().code() == StatusCode::kAlreadyExists);
  CHECK(DirEntries(parent + "/out").empty());

  auto inside = PackImageFolder(*env, src, src + "/packed", {});
  CHECK(inside.status().code() == StatusCode::kInvalidArgument);
  auto around = PackImageFolder(*env, src + "/cat", src, {});
  CHECK(around.status().code() == StatusCode::kInvalidArgument);
  CHECK(DirEntries(parent) == std::vector<std::string>{"out", "src"});
  CHECK_FALSE(env->FileExists(src + "/packed"));
}

}  // namespace
}  // namespace ember::pack
