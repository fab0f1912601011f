#include "daemon/data/tokens/tokens.h"

#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon/catalog/dataset.h"
#include "common/env.h"
#include "common/fault_env.h"
#include "common/temp_dir_testing.h"
#include "daemon/data/source.h"
#include "ember/ring_layout.h"

namespace ember::daemon {
namespace {

// Writes `ids` little-endian, as np.array(ids, dtype).tofile(path) does.
template <typename Word>
std::string WriteTokens(const std::string& name, const std::vector<Word>& ids) {
  std::string bytes;
  for (Word id : ids) {
    for (size_t b = 0; b < sizeof(Word); ++b) bytes.push_back(static_cast<char>(id >> (8 * b)));
  }
  return WriteTempFile(name, bytes);
}

template <typename Word>
std::vector<Word> Iota(size_t n) {
  std::vector<Word> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = static_cast<Word>(i);
  return ids;
}

DatasetSpec Spec(const std::string& path, const std::string& pipeline) {
  DatasetSpec spec;
  spec.name = "lm";
  spec.format = "tokens";
  spec.path = path;
  spec.split = "train";
  spec.pipeline = pipeline;
  return spec;
}

std::unique_ptr<Source> Load(Env& env, const DatasetSpec& spec) {
  Result<std::unique_ptr<Source>> source = LoadTokens(env, spec);
  INFO(source.status().ToString());
  REQUIRE(source.ok());
  return std::move(source).value();
}

struct Sample {
  std::vector<int64_t> input;
  std::vector<int64_t> target;
};

Sample Read(const Source& source, uint64_t id, uint64_t seed, uint64_t epoch) {
  const uint64_t seq_len = static_cast<uint64_t>(source.info().tensors[0].shape[0]);
  Sample sample{std::vector<int64_t>(seq_len, -1), std::vector<int64_t>(seq_len, -1)};
  void* dsts[2] = {sample.input.data(), sample.target.data()};
  Status status = source.ReadSample(id, SampleContext{seed, epoch}, dsts);
  INFO(status.ToString());
  REQUIRE(status.ok());
  return sample;
}

// The error of probing and of loading `spec`, which must be the same.
Status ProbeError(Env& env, const DatasetSpec& spec) {
  Result<DatasetInfo> info = ProbeTokens(env, spec);
  REQUIRE_FALSE(info.ok());
  Result<std::unique_ptr<Source>> source = LoadTokens(env, spec);
  REQUIRE_FALSE(source.ok());
  CHECK(source.status().code() == info.status().code());
  CHECK(source.status().message() == info.status().message());
  return info.status();
}

TEST_CASE("probe describes a uint16 token file") {
  auto env = NewPosixEnv();
  const std::string path = WriteTokens<uint16_t>("probe", Iota<uint16_t>(100));
  Result<DatasetInfo> info = ProbeTokens(*env, Spec(path, "tokens: {dtype: uint16, seq_len: 8}"));
  INFO(info.status().ToString());
  REQUIRE(info.ok());
  CHECK(info->count == (100 - 8) / 8);
  CHECK(info->spec.path == path);
  CHECK(info->spec.name == "lm");
  CHECK(info->files == std::vector<std::string>{path});
  REQUIRE(info->tensors.size() == 2);
  CHECK(info->tensors[0].name == "input");
  CHECK(info->tensors[1].name == "target");
  for (const TensorSpec& tensor : info->tensors) {
    CHECK(tensor.dtype == ring::DType::kInt64);
    CHECK(tensor.shape == std::vector<int64_t>{8});
    CHECK(tensor.SampleBytes() == 64);
  }
  // dtype defaults to uint16: the same file, the same windows.
  Result<DatasetInfo> defaulted = ProbeTokens(*env, Spec(path, "tokens: {seq_len: 8}"));
  REQUIRE(defaulted.ok());
  CHECK(defaulted->count == info->count);
}

TEST_CASE("inputs and targets are the window shifted by one, uint16 and uint32") {
  auto env = NewPosixEnv();
  constexpr uint64_t kSeqLen = 16;
  constexpr size_t kTokens = 1000;
  std::vector<uint16_t> ids16(kTokens);
  std::vector<uint32_t> ids32(kTokens);
  for (size_t i = 0; i < kTokens; ++i) {
    ids16[i] = static_cast<uint16_t>(65535 - (i * 7919) % 65536);  // full 16 bits
    ids32[i] = static_cast<uint32_t>(4294967295u - i * 2654435761u);  // high bit set
  }
  struct Case {
    std::string dtype;
    std::string path;
    std::vector<int64_t> expected;
  };
  std::vector<Case> cases = {
      {"uint16", WriteTokens("shift16", ids16), std::vector<int64_t>(ids16.begin(), ids16.end())},
      {"uint32", WriteTokens("shift32", ids32), std::vector<int64_t>(ids32.begin(), ids32.end())},
  };
  for (const Case& c : cases) {
    INFO(c.dtype);
    auto source = Load(*env, Spec(c.path, "tokens: {dtype: " + c.dtype + ", seq_len: 16}"));
    CHECK_FALSE(source->ParallelDecode());
    REQUIRE(source->info().count == (kTokens - kSeqLen) / kSeqLen);
    for (uint64_t epoch : {0, 1, 5}) {
      const uint64_t offset = TokenEpochOffset(9, epoch, kSeqLen);
      for (uint64_t id = 0; id < source->info().count; ++id) {
        const Sample s = Read(*source, id, 9, epoch);
        const uint64_t start = offset + id * kSeqLen;
        for (uint64_t k = 0; k < kSeqLen; ++k) {
          REQUIRE(s.input[k] == c.expected[start + k]);
          REQUIRE(s.target[k] == c.expected[start + k + 1]);
          REQUIRE(s.input[k] >= 0);  // zero-extended, never sign-extended
        }
        for (uint64_t k = 0; k + 1 < kSeqLen; ++k) REQUIRE(s.target[k] == s.input[k + 1]);
      }
    }
  }
}

TEST_CASE("the windows of an epoch are disjoint and contiguous") {
  auto env = NewPosixEnv();
  constexpr uint64_t kSeqLen = 10;
  constexpr uint64_t kTokens = 537;
  auto source = Load(*env, Spec(WriteTokens("disjoint", Iota<uint32_t>(kTokens)),
                                "tokens: {dtype: uint32, seq_len: 10}"));
  const uint64_t count = source->info().count;
  REQUIRE(count == (kTokens - kSeqLen) / kSeqLen);
  for (uint64_t epoch = 0; epoch < 20; ++epoch) {
    std::vector<int64_t> starts;
    for (uint64_t id = 0; id < count; ++id) {
      const Sample s = Read(*source, id, 3, epoch);
      for (uint64_t k = 0; k < kSeqLen; ++k) {
        REQUIRE(s.input[k] == s.input[0] + static_cast<int64_t>(k));
        REQUIRE(s.target[k] == s.input[0] + static_cast<int64_t>(k) + 1);
      }
      starts.push_back(s.input[0]);
    }
    // Window i sits right after window i - 1: its inputs [start, start + L) never overlap
    // another window's, and the last target of one is the first input of the next.
    REQUIRE(starts[0] >= 0);
    REQUIRE(starts[0] < static_cast<int64_t>(kSeqLen));
    for (uint64_t id = 1; id < count; ++id) {
      REQUIRE(starts[id] == starts[id - 1] + static_cast<int64_t>(kSeqLen));
    }
    REQUIRE(starts.back() + static_cast<int64_t>(kSeqLen) < static_cast<int64_t>(kTokens));
  }
}

TEST_CASE("the epoch offset is deterministic and moves with the epoch") {
  auto env = NewPosixEnv();
  constexpr uint64_t kSeqLen = 64;
  const std::string path = WriteTokens("offset", Iota<uint32_t>(64 * 10));
  const DatasetSpec spec = Spec(path, "tokens: {dtype: uint32, seq_len: 64}");
  auto first = Load(*env, spec);
  auto second = Load(*env, spec);

  // Golden values (SplitMix64 mixer, computed independently): a job resumed by another
  // daemon build must cut the same windows.
  CHECK(TokenEpochOffset(0, 0, 1024) == 314);
  CHECK(TokenEpochOffset(42, 7, 1000) == 879);
  CHECK(TokenEpochOffset(UINT64_MAX, 123456789, kMaxTokensSeqLen) == 10547611);
  CHECK(TokenEpochOffset(5, 5, 1) == 0);

  std::set<int64_t> offsets;
  std::vector<int64_t> by_seed_1, by_seed_2;
  for (uint64_t epoch = 0; epoch < 64; ++epoch) {
    const int64_t offset = Read(*first, 0, 1, epoch).input[0];
    REQUIRE(offset == static_cast<int64_t>(TokenEpochOffset(1, epoch, kSeqLen)));
    REQUIRE(Read(*second, 0, 1, epoch).input[0] == offset);  // another load, same cuts
    REQUIRE(Read(*first, 3, 1, epoch).input[0] == offset + 3 * static_cast<int64_t>(kSeqLen));
    offsets.insert(offset);
    by_seed_1.push_back(offset);
    by_seed_2.push_back(Read(*first, 0, 2, epoch).input[0]);
  }
  // 64 draws from 64 offsets cover about 40 distinct ones.
  CHECK(offsets.size() >= 25);
  CHECK(by_seed_1 != by_seed_2);
  int changes = 0;
  for (size_t e = 1; e < by_seed_1.size(); ++e) changes += by_seed_1[e] != by_seed_1[e - 1];
  CHECK(changes >= 50);
}

TEST_CASE("the last window stays in the file at every offset") {
  // Exhaustively over the arithmetic: every offset, and the count is the most that fits.
  for (uint64_t seq_len = 1; seq_len <= 48; ++seq_len) {
    for (uint64_t n = 0; n <= 7 * seq_len + 3; ++n) {
      const uint64_t count = TokenWindowCount(n, seq_len);
      if (n < 2 * seq_len) {
        REQUIRE(count == 0);
        continue;
      }
      REQUIRE(count >= 1);
      for (uint64_t offset = 0; offset < seq_len; ++offset) {
        REQUIRE(offset + (count - 1) * seq_len + seq_len + 1 <= n);
      }
      // One more window would not fit at the largest offset.
      REQUIRE((seq_len - 1) + count * seq_len + seq_len + 1 > n);
    }
  }
  CHECK(TokenWindowCount(UINT64_MAX, uint64_t{1} << 63) == 0);
  CHECK(TokenWindowCount(UINT64_MAX, 1) == UINT64_MAX - 1);

  // Through the source, over many epochs: files of exactly one page, whose ids are their
  // positions, so a read past the end shows up as a wrong id (or a fault).
  auto env = NewPosixEnv();
  const std::string path16 = WriteTokens("bounds16", Iota<uint16_t>(2048));
  const std::string path32 = WriteTokens("bounds32", Iota<uint32_t>(1024));
  struct Case {
    std::string path;
    std::string dtype;
    uint64_t tokens;
    uint64_t seq_len;
  };
  std::vector<Case> cases;
  for (uint64_t seq_len : {1, 2, 3, 7, 100, 341, 512}) {
    cases.push_back({path32, "uint32", 1024, seq_len});
  }
  for (uint64_t seq_len : {5, 1000, 1023, 1024}) cases.push_back({path16, "uint16", 2048, seq_len});
  for (const Case& c : cases) {
    INFO(c.dtype << " seq_len " << c.seq_len);
    auto source = Load(*env, Spec(c.path, "tokens: {dtype: " + c.dtype +
                                              ", seq_len: " + std::to_string(c.seq_len) + "}"));
    const uint64_t last = source->info().count - 1;
    std::set<int64_t> seen_offsets;
    for (uint64_t seed = 0; seed < 3; ++seed) {
      for (uint64_t epoch = 0; epoch < 300; ++epoch) {
        const Sample s = Read(*source, last, seed, epoch);
        const int64_t start = s.input[0];
        const int64_t offset = start - static_cast<int64_t>(last * c.seq_len);
        REQUIRE(offset == static_cast<int64_t>(TokenEpochOffset(seed, epoch, c.seq_len)));
        seen_offsets.insert(offset);
        REQUIRE(s.target.back() == start + static_cast<int64_t>(c.seq_len));
        REQUIRE(s.target.back() < static_cast<int64_t>(c.tokens));
      }
    }
    if (c.seq_len <= 7) CHECK(seen_offsets.size() == c.seq_len);  // every offset was tried
  }
}

TEST_CASE("reading is thread-safe") {
  auto env = NewPosixEnv();
  auto source = Load(*env, Spec(WriteTokens("threads", Iota<uint32_t>(4096)),
                                "tokens: {dtype: uint32, seq_len: 32}"));
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<int64_t> input(32), target(32);
      void* dsts[2] = {input.data(), target.data()};
      for (uint64_t id = 0; id < source->info().count; ++id) {
        source->Prefetch(&id, 1);
        if (!source->ReadSample(id, SampleContext{7, static_cast<uint64_t>(t)}, dsts).ok() ||
            input[0] != static_cast<int64_t>(TokenEpochOffset(7, t, 32) + id * 32) ||
            target[31] != input[0] + 32) {
          ++failures[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(failures == std::vector<int>(4, 0));
}

TEST_CASE("out-of-range samples and prefetch hints") {
  auto env = NewPosixEnv();
  auto source = Load(*env, Spec(WriteTokens("range", Iota<uint16_t>(100)), "tokens: {seq_len: 10}"));
  REQUIRE(source->info().count == 9);
  std::vector<int64_t> input(10), target(10);
  void* dsts[2] = {input.data(), target.data()};
  Status status = source->ReadSample(9, SampleContext{}, dsts);
  CHECK(status.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(status.message(), Catch::Contains("sample 9") && Catch::Contains("9 samples"));
  const uint64_t ids[] = {0, 8, 9, UINT64_MAX};
  source->Prefetch(ids, 4);
  CHECK(Read(*source, 8, 0, 0).input[0] == static_cast<int64_t>(TokenEpochOffset(0, 0, 10) + 80));
}

TEST_CASE("a file truncated while it is streamed is an error of its reads, not a crash") {
  auto env = NewPosixEnv();
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t tokens = 8 * page / sizeof(uint16_t);  // eight pages
  const std::string path = WriteTokens("shrinking", Iota<uint16_t>(tokens));
  auto source = Load(*env, Spec(path, "tokens: {seq_len: 64}"));
  Read(*source, 0, 0, 0);
  REQUIRE(truncate(path.c_str(), static_cast<off_t>(page)) == 0);  // its owner cuts it short
  std::vector<int64_t> input(64), target(64);
  void* dsts[2] = {input.data(), target.data()};
  const uint64_t last = source->info().count - 1;
  Status status = source->ReadSample(last, SampleContext{}, dsts);  // was SIGBUS: exit 135
  CHECK(status.code() == StatusCode::kDataLoss);
  CHECK_THAT(status.message(), Catch::StartsWith(path + ": the file shrank below the " +
                                                 std::to_string(8 * page) + " bytes"));
}

TEST_CASE("file errors name the file") {
  auto env = NewPosixEnv();
  const std::string pipeline16 = "tokens: {dtype: uint16, seq_len: 8}";

  SECTION("missing") {
    const std::string path = TestTmpDir() + "/does_not_exist";
    Status status = ProbeError(*env, Spec(path, pipeline16));
    CHECK(status.code() == StatusCode::kNotFound);
    CHECK_THAT(status.message(), Catch::Contains(path));
  }
  SECTION("a directory") {
    const std::string tmp = TestTmpDir();
    Status status = ProbeError(*env, Spec(tmp, pipeline16));
    CHECK(status.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(status.message(), Catch::Contains(tmp) && Catch::Contains("directory"));
  }
  SECTION("empty path") {
    CHECK(ProbeError(*env, Spec("", pipeline16)).code() == StatusCode::kInvalidArgument);
  }
  SECTION("size not a multiple of the token width") {
    const std::string odd = WriteTempFile("odd16", std::string(2001, '\0'));
    Status status = ProbeError(*env, Spec(odd, pipeline16));
    CHECK(status.code() == StatusCode::kDataLoss);
    CHECK_THAT(status.message(), Catch::Contains(odd) && Catch::Contains("2001") &&
                                     Catch::Contains("uint16"));

    // A fine uint16 file, a bad uint32 one.
    const std::string odd32 = WriteTempFile("odd32", std::string(4002, '\0'));
    CHECK(ProbeTokens(*env, Spec(odd32, pipeline16)).ok());
    status = ProbeError(*env, Spec(odd32, "tokens: {dtype: uint32, seq_len: 8}"));
    CHECK(status.code() == StatusCode::kDataLoss);
    CHECK_THAT(status.message(), Catch::Contains(odd32) && Catch::Contains("4002") &&
                                     Catch::Contains("uint32"));
  }
  SECTION("too short for one window at every offset") {
    const std::string path = WriteTokens("short", Iota<uint16_t>(15));
    Status status = ProbeError(*env, Spec(path, pipeline16));
    CHECK(status.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(status.message(), Catch::Contains(path) && Catch::Contains("15 uint16 tokens") &&
                                     Catch::Contains("seq_len 8") && Catch::Contains("16"));
    const std::string exact = WriteTokens("exact", Iota<uint16_t>(16));
    Result<DatasetInfo> info = ProbeTokens(*env, Spec(exact, pipeline16));
    REQUIRE(info.ok());
    CHECK(info->count == 1);

    const std::string empty = WriteTempFile("empty", "");
    status = ProbeError(*env, Spec(empty, pipeline16));
    CHECK(status.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(status.message(), Catch::Contains(empty) && Catch::Contains("0 uint16 tokens"));
  }
}

TEST_CASE("a file that cannot be mapped fails probe and load, naming the file") {
  auto posix = NewPosixEnv();
  FaultEnv env(posix.get());
  const std::string path = WriteTokens("unmappable", Iota<uint16_t>(100));
  const DatasetSpec spec = Spec(path, "tokens: {seq_len: 10}");
  env.FailMapReadOnly(path, ResourceExhausted("cannot map 200 bytes: Cannot allocate memory"));
  Status status = ProbeError(env, spec);  // load fails the same way
  CHECK(status.code() == StatusCode::kResourceExhausted);
  CHECK(status.message() == path + ": cannot map 200 bytes: Cannot allocate memory");

  env.ClearFaults();
  CHECK(LoadTokens(env, spec).ok());
}

TEST_CASE("vocab_size is checked by a scan at load") {
  auto env = NewPosixEnv();
  SECTION("uint16: the first bad id is named with its offset") {
    std::vector<uint16_t> ids(2000, 7);
    ids[777] = 150;
    ids[1500] = 300;
    const std::string path = WriteTokens("vocab16", ids);
    const DatasetSpec spec = Spec(path, "tokens: {seq_len: 8, vocab_size: 100}");
    CHECK(ProbeTokens(*env, spec).ok());  // probing does not scan
    Result<std::unique_ptr<Source>> source = LoadTokens(*env, spec);
    REQUIRE_FALSE(source.ok());
    CHECK(source.status().code() == StatusCode::kDataLoss);
    CHECK_THAT(source.status().message(),
               Catch::Contains(path) && Catch::Contains("token 777") &&
                   Catch::Contains("byte offset 1554") && Catch::Contains("is 150") &&
                   Catch::Contains("vocab_size 100"));
    CHECK(LoadTokens(*env, Spec(path, "tokens: {seq_len: 8, vocab_size: 301}")).ok());
    CHECK_FALSE(LoadTokens(*env, Spec(path, "tokens: {seq_len: 8, vocab_size: 300}")).ok());
  }
  SECTION("uint32: a bad id past the first scan chunk") {
    std::vector<uint32_t> ids(70000, 50000);
    ids[65541] = 100000;
    const std::string path = WriteTokens("vocab32", ids);
    Result<std::unique_ptr<Source>> source =
        LoadTokens(*env, Spec(path, "tokens: {dtype: uint32, seq_len: 8, vocab_size: 100000}"));
    REQUIRE_FALSE(source.ok());
    CHECK(source.status().code() == StatusCode::kDataLoss);
    CHECK_THAT(source.status().message(),
               Catch::Contains(path) && Catch::Contains("token 65541") &&
                   Catch::Contains("byte offset 262164") && Catch::Contains("is 100000"));
    CHECK(LoadTokens(*env, Spec(path, "tokens: {dtype: uint32, seq_len: 8, vocab_size: 100001}"))
              .ok());
    CHECK(LoadTokens(*env, Spec(path, "tokens: {dtype: uint32, seq_len: 8}")).ok());
  }
}

TEST_CASE("pipeline options are parsed strictly") {
  SECTION("valid") {
    Result<TokensOptions> options =
        ParseTokensOptions("tokens:\n  seq_len: 2048\n  dtype: uint32\n  vocab_size: 100277\n");
    REQUIRE(options.ok());
    CHECK(options->seq_len == 2048);
    CHECK(options->width == TokenWidth::kUInt32);
    CHECK(options->vocab_size == std::optional<uint64_t>(100277));
    options = ParseTokensOptions("tokens: {seq_len: 1}");
    REQUIRE(options.ok());
    CHECK(options->width == TokenWidth::kUInt16);
    CHECK_FALSE(options->vocab_size.has_value());
    CHECK(ParseTokensOptions("tokens: {seq_len: 16777216, vocab_size: 65536}").ok());
  }

  struct Bad {
    std::string pipeline;
    std::vector<std::string> mentions;
  };
  const std::vector<Bad> bad = {
      {"", {"tokens.seq_len", "required"}},
      {"tokens:", {"tokens.seq_len", "required"}},
      {"tokens: {dtype: uint32}", {"tokens.seq_len", "required"}},
      {"tokens: {seq_len: 0}", {"tokens.seq_len", "'0'"}},
      {"tokens: {seq_len: -4}", {"tokens.seq_len", "'-4'"}},
      {"tokens: {seq_len: abc}", {"tokens.seq_len", "'abc'"}},
      {"tokens: {seq_len: 1.5}", {"tokens.seq_len", "'1.5'"}},
      {"tokens: {seq_len: 0x10}", {"tokens.seq_len", "'0x10'"}},
      {"tokens: {seq_len: 16777217}", {"tokens.seq_len", "'16777217'", "16777216"}},
      {"tokens: {seq_len: [8]}", {"tokens.seq_len", "a list"}},
      {"tokens: {seq_len: }", {"tokens.seq_len", "nothing"}},
      {"tokens: {seq_len: 8, dtype: int8}", {"tokens.dtype", "'int8'", "uint16 or uint32"}},
      {"tokens: {seq_len: 8, dtype: uint64}", {"tokens.dtype", "'uint64'"}},
      {"tokens: {seq_len: 8, dtype: {a: 1}}", {"tokens.dtype", "a map"}},
      {"tokens: {seq_len: 8, seq_len: 9}", {"tokens: key 'seq_len' is given more than once"}},
      {"tokens: {seq_len: 8}\ntokens: {seq_len: 8}", {"tokens", "more than once"}},
      {"tokens: {seq_len: 8, seqlen: 8}", {"tokens: unknown key 'seqlen'"}},
      {"tokens: {seq_len: 8, vocab_size: 0}", {"tokens.vocab_size", "'0'"}},
      {"tokens: {seq_len: 8, vocab_size: 4294967297}", {"tokens.vocab_size", "'4294967297'"}},
      {"tokens: {seq_len: 8, vocab_size: 65537}", {"tokens.vocab_size", "65537", "uint32"}},
      {"token: {seq_len: 8}", {"unknown key 'token'"}},
      {"tokens: {seq_len: 8}\nresize: 256", {"line 2, column 1: unknown key 'resize'"}},
      {"tokens: 1024", {"tokens", "'1024'"}},
      {"- tokens", {"pipeline", "a list"}},
      {"tokens: {seq_len: 8", {"pipeline", "line"}},
  };
  for (const Bad& b : bad) {
    INFO("pipeline: " << b.pipeline);
    Result<TokensOptions> options = ParseTokensOptions(b.pipeline);
    REQUIRE_FALSE(options.ok());
    CHECK(options.status().code() == StatusCode::kInvalidArgument);
    for (const std::string& mention : b.mentions) {
      CHECK_THAT(options.status().message(), Catch::Contains(mention));
    }
  }

  // A bad pipeline fails probe and load before the file is looked at.
  auto env = NewPosixEnv();
  Status status = ProbeError(*env, Spec(TestTmpDir() + "/never_created", "tokens: {seq_len: x}"));
  CHECK(status.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(status.message(), Catch::Contains("tokens.seq_len"));
}

}  // namespace
}  // namespace ember::daemon
