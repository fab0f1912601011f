#include "pack/writer.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/fault_env.h"
#include "common/temp_dir_testing.h"
#include "pack/format.h"
#include "pack/pack_testing.h"
#include "pack/packed_dataset.h"

namespace ember::pack {
namespace {

using Catch::Contains;

Status AddString(PackWriter& writer, const std::string& bytes, int64_t label,
                 const std::string& path) {
  return writer.Add(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), label, path);
}

// Adds `n` records of 1000 random bytes to `writer`.
void AddRecords(PackWriter& writer, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int i = 0; i < n; ++i) {
    REQUIRE(AddString(writer, RandomBytes(rng, 1000), i % 2, "r" + std::to_string(i)).ok());
  }
}

// A writer of `out` with `options` (and no class names), already given `n` records by
// AddRecords(seed).
std::unique_ptr<PackWriter> WriterWithRecords(Env& env, const std::string& out,
                                              const PackOptions& options, int n, uint64_t seed) {
  auto writer = PackWriter::Create(env, out, options, "test", {});
  REQUIRE(writer.ok());
  AddRecords(**writer, n, seed);
  return std::move(writer).value();
}

std::string TempDirOf(const std::string& out) { return out + ".tmp-" + std::to_string(getpid()); }

TEST_CASE("Commit moves a verified pack into place and leaves no temporary directory") {
  auto env = NewPosixEnv();
  const std::string parent = FreshTestDir("commit");
  const std::string out = parent + "/nested/out";  // missing parents are created
  PackOptions options;
  options.shard_bytes = 4096;
  options.record_alignment = 8;
  std::vector<PackProgress> progress;
  options.progress = [&](const PackProgress& p) { progress.push_back(p); };
  auto writer = PackWriter::Create(*env, out, options, "test", {"a", "b"});
  REQUIRE(writer.ok());
  CHECK((*writer)->temp_dir() == TempDirOf(out));
  CHECK(env->IsDirectory(TempDirOf(out)));
  CHECK_FALSE(env->FileExists(out));
  AddRecords(**writer, 10, 1);
  CHECK_FALSE(env->FileExists(out));
  auto summary = (*writer)->Commit();
  REQUIRE(summary.ok());
  CHECK(summary->out_dir == out);
  CHECK(summary->records == 10);
  CHECK(summary->classes == 2);
  CHECK(summary->shards == 3);  // 4 records of 1000 bytes per 4096-byte shard (header first)
  CHECK(summary->record_bytes == 10000);
  CHECK(DirEntries(parent + "/nested") == std::vector<std::string>{"out"});
  CHECK(DirEntries(out) == std::vector<std::string>{"manifest", "shard-00000.emb",
                                                    "shard-00001.emb", "shard-00002.emb"});
  uint64_t on_disk = 0;
  for (const std::string& name : DirEntries(out)) on_disk += ReadTestFile(out + "/" + name).size();
  CHECK(summary->file_bytes == on_disk);
  REQUIRE(progress.size() == 10);  // one per record verified
  CHECK(progress.back().stage == PackProgress::Stage::kVerify);
  CHECK(progress.back().done == 10);
  CHECK(progress.back().total == 10);
  CHECK((*writer)->Commit().status().code() == StatusCode::kFailedPrecondition);
}

TEST_CASE("An existing out_dir is refused, and left as it was") {
  auto env = NewPosixEnv();
  const std::string parent = FreshTestDir("exists");
  const std::string out = parent + "/out";
  WriteTestFile(out + "/precious.txt", "keep me");
  auto writer = PackWriter::Create(*env, out, {}, "test", {});
  REQUIRE_FALSE(writer.ok());
  CHECK(writer.status().code() == StatusCode::kAlreadyExists);
  CHECK_THAT(writer.status().message(), Contains(out));
  CHECK(DirEntries(parent) == std::vector<std::string>{"out"});
  CHECK(ReadTestFile(out + "/precious.txt") == "keep me");

  SECTION("overwrite does not replace a directory that is not a packed dataset") {
    PackOptions options;
    options.overwrite = true;
    auto w = PackWriter::Create(*env, out, options, "test", {});
    REQUIRE_FALSE(w.ok());
    CHECK(w.status().code() == StatusCode::kFailedPrecondition);
    CHECK(ReadTestFile(out + "/precious.txt") == "keep me");
  }
}

TEST_CASE("An out_dir that appears during the pack is not replaced") {
  auto env = NewPosixEnv();
  const std::string out = FreshTestDir("appears") + "/out";
  auto writer = WriterWithRecords(*env, out, {}, 3, 2);
  WriteTestFile(out + "/other.txt", "someone else's");
  auto summary = writer->Commit();
  REQUIRE_FALSE(summary.ok());
  CHECK(summary.status().code() == StatusCode::kAlreadyExists);
  CHECK(DirEntries(out) == std::vector<std::string>{"other.txt"});
  CHECK_FALSE(env->FileExists(TempDirOf(out)));
}

TEST_CASE("overwrite replaces a packed dataset") {
  auto env = NewPosixEnv();
  const std::string parent = FreshTestDir("overwrite");
  const std::string out = parent + "/out";
  {
    auto writer = WriterWithRecords(*env, out, {}, 5, 3);
    REQUIRE(writer->Commit().ok());
  }
  PackOptions options;
  options.overwrite = true;
  auto writer = WriterWithRecords(*env, out, options, 7, 4);
  REQUIRE(writer->Commit().ok());
  auto dataset = PackedDataset::Open(*env, out);
  REQUIRE(dataset.ok());
  CHECK((*dataset)->count() == 7);
  CHECK(DirEntries(parent) == std::vector<std::string>{"out"});
}

TEST_CASE("A failed manifest write leaves neither out_dir nor the temporary directory") {
  auto posix = NewPosixEnv();
  FaultEnv env(posix.get());
  const std::string parent = FreshTestDir("manifest_fault");
  const std::string out = parent + "/out";
  env.FailWriteFileAtomic(TempDirOf(out) + "/manifest", ResourceExhausted("disk full"));
  PackOptions options;
  options.shard_bytes = 4096;
  auto writer = WriterWithRecords(env, out, options, 10, 5);
  auto summary = writer->Commit();
  REQUIRE_FALSE(summary.ok());
  CHECK(summary.status().code() == StatusCode::kResourceExhausted);
  CHECK(DirEntries(parent).empty());
  // The writer stays failed.
  CHECK(AddString(*writer, "x", 0, "x").code() == StatusCode::kResourceExhausted);
}

TEST_CASE("A failed final rename leaves neither out_dir nor the temporary directory") {
  auto posix = NewPosixEnv();
  FaultEnv env(posix.get());
  const std::string parent = FreshTestDir("rename_fault");
  const std::string out = parent + "/out";
  env.FailRename(out, Internal("rename: Input/output error"));
  PackOptions options;
  options.shard_bytes = 4096;
  auto writer = WriterWithRecords(env, out, options, 10, 8);
  auto summary = writer->Commit();
  REQUIRE_FALSE(summary.ok());
  CHECK(summary.status().code() == StatusCode::kInternal);
  CHECK(summary.status().message() == out + ": rename: Input/output error");
  CHECK(DirEntries(parent).empty());
  CHECK(writer->Commit().status().code() == StatusCode::kInternal);
}

TEST_CASE("A failed shard write fails the pack, naming the shard, and cleans up") {
  auto posix = NewPosixEnv();
  FaultEnv env(posix.get());
  const std::string parent = FreshTestDir("write_fault");
  const std::string out = parent + "/out";
  const std::string shard1 = TempDirOf(out) + "/shard-00001.emb";
  env.FailWriteAt(shard1, ResourceExhausted("No space left on device"));
  PackOptions options;
  options.shard_bytes = 4096;
  options.record_alignment = 8;
  auto writer = PackWriter::Create(env, out, options, "test", {});
  REQUIRE(writer.ok());
  std::mt19937_64 rng(9);
  Status status;
  int added = 0;
  for (; added < 10 && status.ok(); ++added) {
    status = AddString(**writer, RandomBytes(rng, 1000), 0, "r" + std::to_string(added));
  }
  // 4 records per shard, written when the shard is finished: shard 1 (records 4..7) when
  // record 8 is added.
  CHECK(added == 9);
  CHECK(status.code() == StatusCode::kResourceExhausted);
  CHECK(status.message() == shard1 + ": No space left on device");
  CHECK(DirEntries(parent).empty());
  CHECK((*writer)->Commit().status().code() == StatusCode::kResourceExhausted);
}

TEST_CASE("overwrite without an atomic exchange moves the old dataset aside, then drops it") {
  auto posix = NewPosixEnv();
  FaultEnv env(posix.get());
  env.DisableExchange();
  const std::string parent = FreshTestDir("overwrite_renames");
  const std::string out = parent + "/out";
  {
    auto writer = WriterWithRecords(env, out, {}, 5, 10);
    REQUIRE(writer->Commit().ok());
  }
  PackOptions options;
  options.overwrite = true;

  SECTION("the new dataset replaces the old one") {
    auto writer = WriterWithRecords(env, out, options, 7, 11);
    REQUIRE(writer->Commit().ok());
    auto dataset = PackedDataset::Open(env, out);
    REQUIRE(dataset.ok());
    CHECK((*dataset)->count() == 7);
    CHECK(DirEntries(parent) == std::vector<std::string>{"out"});
  }
  SECTION("if the new one cannot move in, the old one is put back") {
    env.FailRename(TempDirOf(out), Internal("rename: Input/output error"));
    auto writer = WriterWithRecords(env, out, options, 7, 12);
    auto summary = writer->Commit();
    REQUIRE_FALSE(summary.ok());
    CHECK(summary.status().message() == TempDirOf(out) + ": rename: Input/output error");
    auto dataset = PackedDataset::Open(env, out);
    REQUIRE(dataset.ok());
    CHECK((*dataset)->count() == 5);
    CHECK(DirEntries(parent) == std::vector<std::string>{"out"});
  }
}

TEST_CASE("An abandoned writer removes its temporary directory") {
  auto env = NewPosixEnv();
  const std::string parent = FreshTestDir("abandon");
  {
    auto writer = WriterWithRecords(*env, parent + "/out", {}, 3, 6);
    CHECK(DirEntries(parent).size() == 1);
  }
  CHECK(DirEntries(parent).empty());
}

TEST_CASE("A stale temporary directory of this pid is replaced") {
  auto env = NewPosixEnv();
  const std::string out = FreshTestDir("stale") + "/out";
  WriteTestFile(TempDirOf(out) + "/shard-00000.emb", "half-written");
  auto writer = WriterWithRecords(*env, out, {}, 2, 7);
  REQUIRE(writer->Commit().ok());
  auto dataset = PackedDataset::Open(*env, out);
  REQUIRE(dataset.ok());
  CHECK((*dataset)->count() == 2);
}

TEST_CASE("A label outside the classes fails the pack and cleans up") {
  auto env = NewPosixEnv();
  const std::string parent = FreshTestDir("label");
  auto writer = PackWriter::Create(*env, parent + "/out", {}, "test", {"a", "b"});
  REQUIRE(writer.ok());
  Status s = AddString(**writer, "abc", 2, "c/x.jpg");
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Contains("c/x.jpg: label 2"));
  CHECK(DirEntries(parent).empty());
  CHECK((*writer)->Commit().status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("Bad options are kInvalidArgument") {
  auto env = NewPosixEnv();
  const std::string parent = FreshTestDir("options");
  for (uint32_t alignment : {0u, 4u, 100u, 2u << 20}) {
    PackOptions options;
    options.record_alignment = alignment;
    auto writer = PackWriter::Create(*env, parent + "/out", options, "test", {});
    REQUIRE_FALSE(writer.ok());
    CHECK(writer.status().code() == StatusCode::kInvalidArgument);
  }
  PackOptions options;
  options.shard_bytes = 0;
  CHECK(PackWriter::Create(*env, parent + "/out", options, "test", {}).status().code() ==
        StatusCode::kInvalidArgument);
  CHECK(DirEntries(parent).empty());
}

TEST_CASE("An empty pack is a valid dataset of no records") {
  auto env = NewPosixEnv();
  const std::string out = FreshTestDir("empty") + "/out";
  auto writer = PackWriter::Create(*env, out, {}, "test", {});
  REQUIRE(writer.ok());
  auto summary = (*writer)->Commit();
  REQUIRE(summary.ok());
  CHECK(summary->shards == 0);
  auto dataset = PackedDataset::Open(*env, out);
  REQUIRE(dataset.ok());
  CHECK((*dataset)->count() == 0);
}

}  // namespace
}  // namespace ember::pack
