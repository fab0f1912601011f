#include "daemon/coordinator/journal.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/env.h"
#include "common/fault_env.h"
#include "common/temp_dir_testing.h"

namespace ember::daemon {
namespace {

constexpr size_t kHeader = 16;
constexpr size_t kFrame = 8;

// A record of `size` bytes that differs for every `seed`.
std::string TestRecord(size_t size, uint32_t seed) {
  std::string record(size, '\0');
  for (size_t i = 0; i < size; ++i) record[i] = static_cast<char>(seed * 131 + i * 7 + i / 251);
  return record;
}

JournalOptions NoSyncer() {
  JournalOptions options;
  options.group_interval_micros = 0;
  return options;
}

JournalReplay OpenOk(Env& env, const std::string& path, JournalOptions options = {}) {
  Result<JournalReplay> replay = Journal::Open(env, path, options);
  INFO(replay.status().ToString());
  REQUIRE(replay.ok());
  REQUIRE(replay->journal != nullptr);
  return std::move(replay).value();
}

// Writes a journal of `records` at `path` and returns the file's bytes.
std::string WriteJournal(Env& env, const std::string& path,
                         const std::vector<std::string>& records) {
  JournalReplay replay = OpenOk(env, path, NoSyncer());
  for (const std::string& record : records) REQUIRE(replay.journal->Append(record).ok());
  REQUIRE(replay.journal->Sync().ok());
  replay.journal.reset();
  return ReadTestFile(path);
}

TEST_CASE("Records of varied sizes survive reopening, in order") {
  auto env = NewPosixEnv();
  const std::string path = FreshTestDir("journal/round_trip") + "/jobs.journal";
  std::vector<std::string> written;
  {
    JournalReplay replay = OpenOk(*env, path);
    CHECK(replay.created);
    CHECK(replay.records.empty());
    CHECK(replay.journal->file_bytes() == kHeader);
    CHECK(ReadTestFile(path).size() == kHeader);
    for (uint32_t i = 0; i < 300; ++i) {
      const size_t size = i == 299 ? size_t{1} << 20 : (i * i * 37) % 5000;  // 0 and the limit
      written.push_back(TestRecord(size, i));
      Result<uint64_t> sequence = replay.journal->Append(written.back());
      REQUIRE(sequence.ok());
      CHECK(*sequence == i + 1);
    }
    CHECK(replay.journal->last_sequence() == 300);
    REQUIRE(replay.journal->Sync().ok());
    CHECK(replay.journal->durable_sequence() == 300);
    CHECK(replay.journal->file_bytes() == ReadTestFile(path).size());
  }
  {
    JournalReplay replay = OpenOk(*env, path, NoSyncer());
    CHECK_FALSE(replay.created);
    CHECK(replay.torn_bytes == 0);
    CHECK(replay.records == written);
    CHECK(replay.journal->last_sequence() == 0);  // sequences count this object's appends
    for (uint32_t i = 0; i < 10; ++i) {
      written.push_back(TestRecord(i * 10, 1000 + i));
      REQUIRE(replay.journal->Append(written.back()).ok());
    }
    CHECK(replay.journal->durable_sequence() == 0);
  }  // the destructor syncs what is buffered
  JournalReplay replay = OpenOk(*env, path);
  CHECK(replay.records == written);
  CHECK(replay.journal->file_bytes() == ReadTestFile(path).size());
}

TEST_CASE("Appends from several threads become durable in groups") {
  auto env = NewPosixEnv();
  const std::string path = FreshTestDir("journal/group") + "/j";
  constexpr int kThreads = 4;
  constexpr int kPerThread = 250;
  {
    JournalReplay replay = OpenOk(*env, path);
    Journal& journal = *replay.journal;
    std::vector<std::thread> threads;
    std::vector<Status> waits(kThreads);
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        uint64_t last = 0;
        for (int i = 0; i < kPerThread; ++i) {
          Result<uint64_t> sequence = journal.Append(std::to_string(t) + " " + std::to_string(i));
          if (!sequence.ok()) {
            waits[t] = sequence.status();
            return;
          }
          last = *sequence;
        }
        waits[t] = journal.WaitDurable(last, 10000);
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (const Status& wait : waits) CHECK(wait.ok());
    CHECK(journal.last_sequence() == kThreads * kPerThread);
    REQUIRE(journal.WaitDurable(kThreads * kPerThread, 10000).ok());
    CHECK(journal.durable_sequence() == kThreads * kPerThread);
    CHECK(journal.sync_count() >= 1);
    CHECK(journal.sync_count() < 100);  // groups, not one fdatasync per record
    CHECK(journal.WaitDurable(0, 0).ok());
    CHECK(journal.WaitDurable(kThreads * kPerThread + 1, 0).code() ==
          StatusCode::kInvalidArgument);
  }
  JournalReplay replay = OpenOk(*env, path);
  REQUIRE(replay.records.size() == kThreads * kPerThread);
  std::vector<int> next(kThreads, 0);  // each thread's records are in its order
  for (const std::string& record : replay.records) {
    const int t = std::stoi(record.substr(0, record.find(' ')));
    CHECK(record == std::to_string(t) + " " + std::to_string(next[t]++));
  }
}

TEST_CASE("A torn tail of any length is cut off and reported") {
  auto env = NewPosixEnv();
  const std::string path = FreshTestDir("journal/torn") + "/j";
  const std::vector<std::string> records = {"first", "second record", TestRecord(300, 3)};
  const std::string full = WriteJournal(*env, path, records);
  const size_t last_start = full.size() - kFrame - 300;
  const std::vector<std::string> before_last(records.begin(), records.end() - 1);

  SECTION("cut at every byte of the last record") {
    for (size_t cut = last_start; cut < full.size(); ++cut) {
      INFO("cut at byte " << cut);
      WriteTestFile(path, full.substr(0, cut));
      JournalReplay replay = OpenOk(*env, path, NoSyncer());
      CHECK(replay.records == before_last);
      CHECK(replay.torn_bytes == cut - last_start);
      CHECK(ReadTestFile(path).size() == last_start);
      CHECK(replay.journal->file_bytes() == last_start);
    }
    {  // the journal goes on after the cut
      JournalReplay replay = OpenOk(*env, path, NoSyncer());
      REQUIRE(replay.journal->Append("again").ok());
    }
    CHECK(OpenOk(*env, path).records ==
          std::vector<std::string>{"first", "second record", "again"});
  }
  SECTION("a whole last record with a bad CRC") {
    std::string damaged = full;
    damaged[full.size() - 1] ^= 1;
    WriteTestFile(path, damaged);
    JournalReplay replay = OpenOk(*env, path);
    CHECK(replay.records == before_last);
    CHECK(replay.torn_bytes == kFrame + 300);
  }
  SECTION("zeros after the last record, as a crash leaves unwritten blocks") {
    WriteTestFile(path, full + std::string(5000, '\0'));
    JournalReplay replay = OpenOk(*env, path);
    CHECK(replay.records == records);
    CHECK(replay.torn_bytes == 5000);
    CHECK(ReadTestFile(path) == full);
  }
}

TEST_CASE("A flipped byte in a middle record is kDataLoss naming its offset") {
  auto env = NewPosixEnv();
  const std::string path = FreshTestDir("journal/flipped") + "/j";
  const std::string full =
      WriteJournal(*env, path, {TestRecord(10, 1), TestRecord(20, 2), TestRecord(30, 3)});
  const size_t middle = kHeader + kFrame + 10;
  for (size_t byte = middle; byte < middle + kFrame + 20; ++byte) {
    for (const char flip : {'\x01', '\x80'}) {
      INFO("byte " << byte << " xor " << int(static_cast<unsigned char>(flip)));
      std::string damaged = full;
      damaged[byte] ^= flip;
      WriteTestFile(path, damaged);
      Result<JournalReplay> replay = Journal::Open(*env, path, NoSyncer());
      CHECK(replay.status().code() == StatusCode::kDataLoss);
      CHECK_THAT(replay.status().message(),
                 Catch::StartsWith(path + ": corrupt journal record at byte " +
                                   std::to_string(middle) + " ("));
      CHECK(ReadTestFile(path) == damaged);
    }
  }
}

TEST_CASE("A bad header or a record over the limit is kDataLoss, the file untouched") {
  auto env = NewPosixEnv();
  const std::string path = FreshTestDir("journal/header") + "/j";
  const std::string full = WriteJournal(*env, path, {"a", TestRecord(500, 1)});

  auto expect_data_loss = [&](const std::string& contents, const std::string& message) {
    WriteTestFile(path, contents);
    Result<JournalReplay> replay = Journal::Open(*env, path, NoSyncer());
    CHECK(replay.status().code() == StatusCode::kDataLoss);
    CHECK(replay.status().message() == path + ": " + message);
    CHECK(ReadTestFile(path) == contents);
  };
  std::string bad_magic = full;
  bad_magic[0] = 'X';
  expect_data_loss(bad_magic, "not a journal: bad magic at byte 0");
  std::string version = full;
  version[8] = 2;
  expect_data_loss(version, "journal version 2 at byte 8, this build reads version 1");
  expect_data_loss(full.substr(0, 5), "not a journal: 5 bytes, shorter than its 16-byte header");
  expect_data_loss("", "not a journal: 0 bytes, shorter than its 16-byte header");

  // A limit lowered below a record that is there: never cut off as if torn.
  WriteTestFile(path, full);
  JournalOptions small = NoSyncer();
  small.max_record_bytes = 100;
  Result<JournalReplay> replay = Journal::Open(*env, path, small);
  CHECK(replay.status().code() == StatusCode::kDataLoss);
  CHECK(replay.status().message() ==
        path + ": corrupt journal record at byte 25 (length 500 over the limit of 100); "
               "the file is left as it is");
  CHECK(ReadTestFile(path) == full);
}

TEST_CASE("Records over the limit are refused and the journal stays usable") {
  auto env = NewPosixEnv();
  const std::string path = FreshTestDir("journal/oversize") + "/j";
  JournalOptions options;
  options.max_record_bytes = 100;
  JournalReplay replay = OpenOk(*env, path, options);
  Result<uint64_t> big = replay.journal->Append(std::string(101, 'x'));
  CHECK(big.status().code() == StatusCode::kInvalidArgument);
  CHECK(big.status().message() == path + ": record of 101 bytes is over the limit of 100");
  CHECK(replay.journal->Append(std::string(100, 'x')).ok());
  CHECK(replay.journal->Rewrite({"small", std::string(101, 'x')}).code() ==
        StatusCode::kInvalidArgument);
  REQUIRE(replay.journal->Sync().ok());
  CHECK(OpenOk(*env, path + "2").journal->status().ok());  // other files unaffected

  options.max_record_bytes = 0;
  CHECK(Journal::Open(*env, path, options).status().code() == StatusCode::kInvalidArgument);
  replay.journal.reset();
  CHECK(OpenOk(*env, path).records == std::vector<std::string>{std::string(100, 'x')});
}

TEST_CASE("A failed write or sync is sticky, names the file, and is never durable") {
  auto base = NewPosixEnv();
  FaultEnv env(base.get());
  const std::string path = FreshTestDir("journal/sticky") + "/j";

  SECTION("sync, called by the owner") {
    JournalReplay replay = OpenOk(env, path, NoSyncer());
    Journal& journal = *replay.journal;
    REQUIRE(journal.Append("a").ok());
    REQUIRE(journal.Sync().ok());
    env.FailSync(path, Internal("Input/output error"));
    REQUIRE(journal.Append("b").ok());
    const Status failed = journal.Sync();
    CHECK(failed.code() == StatusCode::kInternal);
    CHECK(failed.message() == path + ": Input/output error");
    CHECK(journal.durable_sequence() == 1);
    CHECK(journal.WaitDurable(1, 0).ok());
    CHECK(journal.WaitDurable(2, 1000).message() == failed.message());
    env.ClearFaults();
    CHECK(journal.Append("c").status().message() == failed.message());
    CHECK(journal.Sync().message() == failed.message());
    CHECK(journal.Rewrite({}).message() == failed.message());
    CHECK(journal.status().message() == failed.message());
    CHECK(journal.durable_sequence() == 1);
  }
  SECTION("sync, by the background thread") {
    JournalReplay replay = OpenOk(env, path);
    env.FailSync(path, Internal("Input/output error"));
    Result<uint64_t> sequence = replay.journal->Append("a");
    REQUIRE(sequence.ok());
    CHECK(replay.journal->WaitDurable(*sequence, 10000).message() ==
          path + ": Input/output error");
    CHECK(replay.journal->durable_sequence() == 0);
  }
  SECTION("write") {
    WriteJournal(env, path, {"a"});
    env.FailWriteAt(path, ResourceExhausted("No space left on device"));
    JournalReplay replay = OpenOk(env, path, NoSyncer());
    REQUIRE(replay.journal->Append("b").ok());  // buffered
    const Status failed = replay.journal->Sync();
    CHECK(failed.code() == StatusCode::kResourceExhausted);
    CHECK(failed.message() == path + ": No space left on device");
    CHECK(replay.journal->Append("c").status().message() == failed.message());
    CHECK(replay.journal->durable_sequence() == 0);
  }
}

TEST_CASE("A wait for durability times out when the disk never syncs") {
  auto base = NewPosixEnv();
  FaultEnv env(base.get());
  const std::string path = FreshTestDir("journal/held") + "/j";
  JournalReplay replay = OpenOk(env, path);
  Journal& journal = *replay.journal;
  REQUIRE(journal.WaitDurable(*journal.Append("a"), 10000).ok());

  env.HoldSyncs(path);
  REQUIRE(journal.Append("b").ok());
  const Status timed_out = journal.WaitDurable(2, 100);
  CHECK(timed_out.code() == StatusCode::kDeadlineExceeded);
  CHECK(timed_out.message() == path + ": record 2 not durable after 100 ms (durable up to 1)");
  // Appends go on while the background thread waits for the disk.
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) REQUIRE(journal.Append("more").ok());
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
  CHECK(journal.durable_sequence() == 1);

  env.ClearFaults();
  CHECK(journal.WaitDurable(102, 10000).ok());
}

TEST_CASE("Rewrite replaces the journal with a snapshot and appending goes on") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("journal/rewrite");
  const std::string path = dir + "/j";
  {
    JournalReplay replay = OpenOk(*env, path);
    for (int i = 0; i < 100; ++i) REQUIRE(replay.journal->Append(TestRecord(100, i)).ok());
    REQUIRE(replay.journal->Sync().ok());
    CHECK(replay.journal->file_bytes() == kHeader + 100 * (kFrame + 100));
    REQUIRE(replay.journal->Rewrite({"snapshot 1", "snapshot 2"}).ok());
    CHECK(replay.journal->file_bytes() == kHeader + 2 * (kFrame + 10));
    CHECK(ReadTestFile(path).size() == replay.journal->file_bytes());
    CHECK(replay.journal->durable_sequence() == 100);
    REQUIRE(replay.journal->Append("after").ok());
    CHECK(replay.journal->file_bytes() == kHeader + 2 * (kFrame + 10) + kFrame + 5);
  }
  CHECK(OpenOk(*env, path).records ==
        std::vector<std::string>{"snapshot 1", "snapshot 2", "after"});
  CHECK(*env->ListDir(dir) == std::vector<std::string>{"j"});
}

TEST_CASE("A rewrite that fails at any step leaves the old or the new journal complete") {
  auto base = NewPosixEnv();
  FaultEnv env(base.get());
  const std::string dir = FreshTestDir("journal/rewrite_faults");
  const std::string path = dir + "/j";
  const std::string tmp = path + ".tmp";
  const std::vector<std::string> old_records = {"old 1", "old 2", "old 3"};
  const std::vector<std::string> snapshot = {"new 1", "new 2"};

  std::string step;
  bool renamed = false;  // the step comes after the rename
  SECTION("flush of the old file") { step = "flush"; }
  SECTION("write of the new file") { step = "write"; }
  SECTION("flush of the new file") { step = "sync"; }
  SECTION("rename") { step = "rename"; }
  SECTION("flush of the directory") {
    step = "dir";
    renamed = true;
  }
  INFO("failing step: " << step);
  {
    JournalReplay replay = OpenOk(env, path, NoSyncer());
    Journal& journal = *replay.journal;
    REQUIRE(journal.Append(old_records[0]).ok());
    REQUIRE(journal.Append(old_records[1]).ok());
    REQUIRE(journal.Sync().ok());
    REQUIRE(journal.Append(old_records[2]).ok());  // buffered: Rewrite writes it first
    if (step == "flush") env.FailSync(path, Internal("injected"));
    if (step == "write") env.FailWriteAt(tmp, ResourceExhausted("No space left on device"));
    if (step == "sync") env.FailSync(tmp, Internal("injected"));
    if (step == "rename") env.FailRename(tmp, Internal("injected"));
    if (step == "dir") env.FailSync(dir, Internal("injected"));
    const Status rewritten = journal.Rewrite(snapshot);
    REQUIRE_FALSE(rewritten.ok());
    CHECK_THAT(rewritten.message(), Catch::StartsWith(path));
    env.ClearFaults();
    CHECK_FALSE(base->FileExists(tmp));
    if (step == "write" || step == "sync" || step == "rename") {
      // The old file is complete and still the journal.
      REQUIRE(journal.status().ok());
      REQUIRE(journal.Append("old 4").ok());
      REQUIRE(journal.Sync().ok());
    } else {
      CHECK(journal.status().message() == rewritten.message());  // failed for good
    }
  }
  JournalReplay replay = OpenOk(*base, path);
  CHECK(replay.torn_bytes == 0);
  if (renamed) {
    CHECK(replay.records == snapshot);
  } else if (step == "flush") {
    CHECK(replay.records == old_records);  // written, only its flush failed
  } else {
    CHECK(replay.records == std::vector<std::string>{"old 1", "old 2", "old 3", "old 4"});
  }
}

TEST_CASE("A rewrite that crashed before its rename leaves a temporary file Open removes") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("journal/crashed_rewrite");
  const std::string path = dir + "/j";
  WriteJournal(*env, path, {"old"});
  WriteTestFile(path + ".tmp", "EMBJOURN half a snapsh");
  JournalReplay replay = OpenOk(*env, path);
  CHECK(replay.records == std::vector<std::string>{"old"});
  CHECK(*env->ListDir(dir) == std::vector<std::string>{"j"});
  REQUIRE(replay.journal->Rewrite({"new"}).ok());
  replay.journal.reset();
  CHECK(OpenOk(*env, path).records == std::vector<std::string>{"new"});
}

}  // namespace
}  // namespace ember::daemon
