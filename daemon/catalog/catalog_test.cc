#include "daemon/catalog/catalog.h"

#include <atomic>
#include <catch2/catch.hpp>

#include <cstdio>
#include <thread>

#include "daemon/catalog/dataset.h"
#include "common/env.h"
#include "common/fault_env.h"
#include "common/temp_dir_testing.h"
#include "ember/ring_layout.h"

namespace ember::daemon {
namespace {

using ring::DType;

DatasetSpec Spec(const std::string& name, const std::string& path = "/data/fmnist") {
  return DatasetSpec{name, "idx", path, "train"};
}

// What a real probe of an MNIST-like split would report.
DatasetInfo InfoFor(const DatasetSpec& spec) {
  DatasetInfo info;
  info.spec = spec;
  info.count = 60000;
  info.tensors = {TensorSpec{"image", DType::kUInt8, {28, 28}},
                  TensorSpec{"label", DType::kUInt8, {}}};
  info.files = {spec.path + "/train-images-idx3-ubyte.gz",
                spec.path + "/train-labels-idx1-ubyte.gz"};
  info.fingerprint = 0x0123456789abcdefULL;
  if (spec.shuffle == "shards") info.shard_starts = {0, 250, 400, 60000};
  return info;
}

// A prober that succeeds unless the spec's path is "/bad", and counts its calls.
struct FakeProber {
  std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);

  Catalog::Prober Get() const {
    auto counter = calls;
    return [counter](const DatasetSpec& spec, const DatasetOwner&,
                     IndexingProgress*) -> Result<DatasetInfo> {
      ++*counter;
      if (spec.path == "/bad") return DataLoss("/bad/train-images-idx3-ubyte.gz: truncated");
      return InfoFor(spec);
    };
  }
};

// Catalog::Open with `prober`, which must succeed.
std::unique_ptr<Catalog> MustOpen(Env* env, const std::string& dir, const FakeProber& prober) {
  auto catalog = Catalog::Open(env, dir, prober.Get());
  INFO(catalog.status().ToString());
  REQUIRE(catalog.ok());
  return std::move(catalog).value();
}

void CheckSameInfo(const DatasetInfo& a, const DatasetInfo& b) {
  CHECK(a.spec.name == b.spec.name);
  CHECK(a.spec.format == b.spec.format);
  CHECK(a.spec.path == b.spec.path);
  CHECK(a.spec.split == b.spec.split);
  CHECK(a.fingerprint == b.fingerprint);
  CHECK(a.spec.pipeline == b.spec.pipeline);
  CHECK(a.spec.on_error == b.spec.on_error);
  CHECK(a.spec.shuffle == b.spec.shuffle);
  CHECK(a.spec.shuffle_window == b.spec.shuffle_window);
  CHECK(a.spec.endpoint == b.spec.endpoint);
  CHECK(a.shard_starts == b.shard_starts);
  CHECK(a.count == b.count);
  CHECK(a.files == b.files);
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    CHECK(a.tensors[i].name == b.tensors[i].name);
    CHECK(a.tensors[i].dtype == b.tensors[i].dtype);
    CHECK(a.tensors[i].shape == b.tensors[i].shape);
  }
}

std::vector<std::string> Names(const Catalog& catalog) {
  std::vector<std::string> names;
  for (const DatasetInfo& info : catalog.List()) names.push_back(info.spec.name);
  return names;
}

TEST_CASE("TensorSpec::SampleBytes") {
  CHECK(TensorSpec{"image", DType::kUInt8, {28, 28}}.SampleBytes() == 784);
  CHECK(TensorSpec{"label", DType::kInt64, {}}.SampleBytes() == 8);
  CHECK(TensorSpec{"x", DType::kFloat32, {3, 4, 5}}.SampleBytes() == 240);
  CHECK(TensorSpec{"x", DType::kInt16, {7}}.SampleBytes() == 14);
}

TEST_CASE("ValidateDatasetName") {
  const std::vector<std::string> good_names = {"a", "fmnist", "Fashion-MNIST_v1.2", "0",
                                               std::string(64, 'x')};
  for (const std::string& good : good_names) {
    INFO(good);
    CHECK(ValidateDatasetName(good).ok());
  }
  const std::vector<std::string> bad_names = {
      "", ".hidden", "a/b", "a b", "\xc3\xa4", "../x", "x\n", std::string(65, 'x'), "a:b"};
  for (const std::string& bad : bad_names) {
    INFO(bad);
    Status s = ValidateDatasetName(bad);
    CHECK(s.code() == StatusCode::kInvalidArgument);
    if (!bad.empty() && bad.size() <= 32)
      CHECK_THAT(s.message(), Catch::Contains("'" + bad + "'"));
  }
  // A long name is quoted in part: an error never grows with what the client sent.
  const Status huge = ValidateDatasetName(std::string(1 << 20, 'x'));
  CHECK(huge.message() == "dataset name '" + std::string(32, 'x') +
                              "...' is 1048576 characters long (at most 64)");
}

TEST_CASE("DTypeName and ParseDType round-trip every dtype") {
  for (DType dtype : {DType::kUInt8, DType::kInt8, DType::kInt16, DType::kUInt16, DType::kInt32,
                      DType::kInt64, DType::kFloat32, DType::kFloat64}) {
    Result<DType> parsed = ParseDType(DTypeName(dtype));
    REQUIRE(parsed.ok());
    CHECK(*parsed == dtype);
  }
  CHECK(std::string(DTypeName(DType::kFloat32)) == "float32");
  Result<DType> bad = ParseDType("float16");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(bad.status().message(), Catch::Contains("'float16'") && Catch::Contains("uint8"));
}

TEST_CASE("add, list, get and remove") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("basic");
  FakeProber prober;
  auto catalog = MustOpen(env.get(), dir, prober);
  CHECK(catalog->List().empty());

  Result<DatasetInfo> added = catalog->Add(Spec("zeta"));
  REQUIRE(added.ok());
  CheckSameInfo(*added, InfoFor(Spec("zeta")));
  REQUIRE(catalog->Add(Spec("alpha", "/data/other")).ok());
  CHECK(Names(*catalog) == std::vector<std::string>{"alpha", "zeta"});

  Result<DatasetInfo> got = catalog->Get("alpha");
  REQUIRE(got.ok());
  CheckSameInfo(*got, InfoFor(Spec("alpha", "/data/other")));

  Result<DatasetInfo> missing = catalog->Get("nope");
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK_THAT(missing.status().message(), Catch::Contains("'nope'"));

  REQUIRE(catalog->Remove("zeta").ok());
  CHECK(Names(*catalog) == std::vector<std::string>{"alpha"});
  Status again = catalog->Remove("zeta");
  CHECK(again.code() == StatusCode::kNotFound);
  CHECK_THAT(again.message(), Catch::Contains("'zeta'"));
  CHECK(*prober.calls == 2);
}

TEST_CASE("a daemon restart keeps the catalog") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("restart") + "/state/nested";  // Open creates it
  FakeProber prober;
  DatasetSpec odd{"odd.name-1", "idx", "/data/with: colon # and 'quotes' \"dq\" ", "test",
                  "# a pipeline\nsteps:\n  - resize: {size: 256}\n  - center_crop: {size: 224}\n",
                  "skip"};
  odd.shuffle = "shards";
  odd.shuffle_window = 3;
  DatasetSpec s3 = Spec("s3-set", "s3://data/train/");
  s3.endpoint = "http://[::1]:7480";
  {
    auto catalog = MustOpen(env.get(), dir, prober);
    REQUIRE(catalog->Add(Spec("fmnist")).ok());
    REQUIRE(catalog->Add(odd).ok());
    REQUIRE(catalog->Add(s3).ok());
    REQUIRE(catalog->Add(Spec("gone")).ok());
    REQUIRE(catalog->Remove("gone").ok());
  }
  CHECK(env->FileExists(dir + "/catalog.yaml"));
  CHECK(*prober.calls == 4);

  auto reopened = MustOpen(env.get(), dir, prober);
  CHECK(*prober.calls == 4);  // opening does not re-probe
  CHECK(Names(*reopened) == std::vector<std::string>{"fmnist", "odd.name-1", "s3-set"});
  CheckSameInfo(*reopened->Get("fmnist"), InfoFor(Spec("fmnist")));
  CheckSameInfo(*reopened->Get("odd.name-1"), InfoFor(odd));
  CheckSameInfo(*reopened->Get("s3-set"), InfoFor(s3));
  CHECK(reopened->Get("fmnist")->spec.endpoint.empty());
  CHECK(reopened->Get("gone").status().code() == StatusCode::kNotFound);
}

TEST_CASE("strings that look like other YAML values persist as the same strings") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("yaml_lookalikes");
  FakeProber prober;
  const std::vector<DatasetSpec> specs = {{"n1", "~", "null", ""},
                                          {"n2", "true", "123", "- x"},
                                          {"n3", "{a: 1}", " lead", "[1]"},
                                          {"n4", "idx", "/t\ttab\nnewline", "\xc3\xa4"}};
  {
    auto catalog = MustOpen(env.get(), dir, prober);
    for (const DatasetSpec& spec : specs) REQUIRE(catalog->Add(spec).ok());
  }
  auto reopened = MustOpen(env.get(), dir, prober);
  for (const DatasetSpec& spec : specs) CheckSameInfo(*reopened->Get(spec.name), InfoFor(spec));
}

TEST_CASE("an empty state directory opens as an empty catalog") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("empty");
  FakeProber prober;
  auto catalog = MustOpen(env.get(), dir + "/", prober);
  CHECK(catalog->List().empty());
  REQUIRE(catalog->Add(Spec("a")).ok());
  CHECK(env->FileExists(dir + "/catalog.yaml"));
}

TEST_CASE("a duplicate name is kAlreadyExists and a bad name kInvalidArgument, without probing") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("names");
  FakeProber prober;
  auto catalog = MustOpen(env.get(), dir, prober);
  REQUIRE(catalog->Add(Spec("fmnist")).ok());
  REQUIRE(*prober.calls == 1);

  Result<DatasetInfo> dup = catalog->Add(Spec("fmnist", "/elsewhere"));
  CHECK(dup.status().code() == StatusCode::kAlreadyExists);
  CHECK_THAT(dup.status().message(), Catch::Contains("'fmnist'"));
  CHECK(catalog->Get("fmnist")->spec.path == "/data/fmnist");

  Result<DatasetInfo> bad = catalog->Add(Spec("../etc"));
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(bad.status().message(), Catch::Contains("'../etc'"));
  CHECK(*prober.calls == 1);
  CHECK(Names(*catalog) == std::vector<std::string>{"fmnist"});
}

TEST_CASE("a failing probe leaves the catalog and its file unchanged") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("bad_probe");
  FakeProber prober;
  auto catalog = MustOpen(env.get(), dir, prober);
  REQUIRE(catalog->Add(Spec("good")).ok());
  const std::string before = *env->ReadFile(dir + "/catalog.yaml");

  Result<DatasetInfo> bad = catalog->Add(Spec("broken", "/bad"));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::kDataLoss);
  CHECK(bad.status().message() == "dataset 'broken': /bad/train-images-idx3-ubyte.gz: truncated");
  CHECK(Names(*catalog) == std::vector<std::string>{"good"});
  CHECK(*env->ReadFile(dir + "/catalog.yaml") == before);
}

TEST_CASE("a failing atomic write leaves the in-memory catalog unchanged") {
  auto base = NewPosixEnv();
  std::string dir = FreshTestDir("bad_write");
  const std::string file = dir + "/catalog.yaml";
  FaultEnv env(base.get());
  FakeProber prober;
  auto catalog = MustOpen(&env, dir, prober);
  REQUIRE(catalog->Add(Spec("kept")).ok());
  const std::string before = *base->ReadFile(file);

  env.FailWriteFileAtomic(file, ResourceExhausted(file + ": write: No space left on device"));
  Result<DatasetInfo> add = catalog->Add(Spec("new"));
  REQUIRE_FALSE(add.ok());
  CHECK(add.status().code() == StatusCode::kResourceExhausted);
  CHECK_THAT(add.status().message(), Catch::Contains("'new'") && Catch::Contains(file));
  CHECK(catalog->Get("new").status().code() == StatusCode::kNotFound);

  Status remove = catalog->Remove("kept");
  CHECK(remove.code() == StatusCode::kResourceExhausted);
  CHECK_THAT(remove.message(), Catch::Contains("'kept'"));
  CHECK(Names(*catalog) == std::vector<std::string>{"kept"});
  CHECK(*base->ReadFile(file) == before);
  CHECK(env.WriteCount(file) == 3);

  // Once the disk recovers, the same calls succeed: nothing half-done was left behind.
  env.ClearFaults();
  REQUIRE(catalog->Add(Spec("new")).ok());
  REQUIRE(catalog->Remove("kept").ok());
  auto reopened = MustOpen(base.get(), dir, prober);
  CHECK(Names(*reopened) == std::vector<std::string>{"new"});
}

TEST_CASE("a catalog file that cannot be read fails Open") {
  auto base = NewPosixEnv();
  std::string dir = FreshTestDir("unreadable");
  FakeProber prober;
  REQUIRE(MustOpen(base.get(), dir, prober)->Add(Spec("a")).ok());
  FaultEnv env(base.get());
  env.FailReadFile(dir + "/catalog.yaml",
                   Internal(dir + "/catalog.yaml: read: Input/output error"));
  auto catalog = Catalog::Open(&env, dir, prober.Get());
  REQUIRE_FALSE(catalog.ok());
  CHECK(catalog.status().code() == StatusCode::kInternal);
  CHECK_THAT(catalog.status().message(), Catch::Contains(dir + "/catalog.yaml"));
}

TEST_CASE("a corrupt catalog.yaml is an error naming the file") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("corrupt");
  const std::string file = dir + "/catalog.yaml";
  FakeProber prober;
  const std::string good_entry =
      "  - name: a\n    format: idx\n    path: /d\n    split: train\n    count: 3\n"
      "    tensors:\n      - {name: image, dtype: uint8, shape: [2, 2]}\n    files: [/d/x]\n";
  REQUIRE(env->WriteFileAtomic(file, "version: 1\ndatasets:\n" + good_entry).ok());
  auto ok = Catalog::Open(env.get(), dir, prober.Get());
  INFO(ok.status().ToString());
  REQUIRE(ok.ok());
  CHECK((*ok)->Get("a")->tensors.at(0).shape == std::vector<int64_t>{2, 2});

  struct Case {
    std::string text;
    std::string detail;
  };
  const Case cases[] = {
      {"version: 1\ndatasets: [unclosed\n", "line "},
      {"", "expected a map"},
      {"- a\n- b\n", "expected a map"},
      {"datasets: []\n", "missing 'version'"},
      {"version: 2\ndatasets: []\n", "unsupported version 2"},
      {"version: 1\n", "missing 'datasets'"},
      {"version: 1\ndatasets: {a: 1}\n", "'datasets' is not a list"},
      {"version: 1\ndatasets:\n  - name: a\n", "dataset 'a': missing 'format'"},
      {"version: 1\ndatasets:\n  - name: ../x\n", "entry 0"},
      {"version: 1\ndatasets:\n" + good_entry + good_entry, "dataset 'a': listed more than once"},
      {"version: 1\ndatasets:\n  - name: a\n    format: idx\n    path: /d\n    split: train\n"
       "    count: many\n    tensors: []\n    files: []\n",
       "'count' is not a non-negative integer: 'many'"},
      {"version: 1\ndatasets:\n  - name: a\n    format: idx\n    path: /d\n    split: train\n"
       "    count: 1\n    tensors: [{name: x, dtype: half, shape: []}]\n    files: []\n",
       "tensor 0: unknown dtype 'half'"},
      {"version: 1\ndatasets:\n  - name: a\n    format: idx\n    path: /d\n    split: train\n"
       "    count: 1\n    tensors: [{name: x, dtype: uint8, shape: [-1]}]\n    files: []\n",
       "shape dimension"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    REQUIRE(env->WriteFileAtomic(file, c.text).ok());
    auto catalog = Catalog::Open(env.get(), dir, prober.Get());
    REQUIRE_FALSE(catalog.ok());
    CHECK(catalog.status().code() == StatusCode::kDataLoss);
    CHECK_THAT(catalog.status().message(), Catch::StartsWith(file + ": "));
    CHECK_THAT(catalog.status().message(), Catch::Contains(c.detail));
  }
}

TEST_CASE("a missing catalog.yaml beside its previous copy is refused, not started empty") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("catalog_gone");
  const std::string file = dir + "/catalog.yaml";
  FakeProber prober;
  {
    auto catalog = MustOpen(env.get(), dir, prober);
    REQUIRE(catalog->Add(Spec("a")).ok());
    REQUIRE(catalog->Add(Spec("b")).ok());
  }
  REQUIRE(std::remove(file.c_str()) == 0);
  auto refused = Catalog::Open(env.get(), dir, prober.Get());
  REQUIRE(refused.status().code() == StatusCode::kFailedPrecondition);
  CHECK(refused.status().message() ==
        file + " is missing, but its previous copy " + file + ".prev is there: to keep its "
        "datasets, cp " + file + ".prev " + file + "; to start with an empty catalog, remove " +
        file + ".prev; then start emberd again");
  REQUIRE(std::rename((file + ".prev").c_str(), file.c_str()) == 0);  // as the hint says
  CHECK(MustOpen(env.get(), dir, prober)->List().size() == 1);
}

TEST_CASE("a truncated or damaged catalog.yaml is refused, naming it and the previous copy") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("checksum");
  const std::string file = dir + "/catalog.yaml";
  const std::string previous = file + ".prev";
  FakeProber prober;
  {
    auto catalog = MustOpen(env.get(), dir, prober);
    REQUIRE(catalog->Add(Spec("a")).ok());
    CHECK_FALSE(env->FileExists(previous));  // nothing before the first change
    REQUIRE(catalog->Add(Spec("b")).ok());
  }
  const std::string good = *env->ReadFile(file);
  CHECK_THAT(good, Catch::StartsWith("# emberd dataset catalog"));
  CHECK_THAT(good, Catch::Matches("[^]*\n# crc32: [0-9a-f]{8}\n"));
  // The previous good copy is the catalog before the last change: only "a".
  {
    REQUIRE(env->CreateDirs(dir + "/only-prev").ok());
    REQUIRE(env->WriteFileAtomic(dir + "/only-prev/catalog.yaml", *env->ReadFile(previous)).ok());
    auto before = MustOpen(env.get(), dir + "/only-prev", prober);
    CHECK(before->List().size() == 1);
  }

  // Every truncation, at any byte, is refused (a torn tail must not read as fewer datasets).
  for (size_t size = 0; size < good.size(); ++size) {
    INFO("truncated to " << size << " bytes");
    REQUIRE(env->WriteFileAtomic(file, good.substr(0, size)).ok());
    auto catalog = Catalog::Open(env.get(), dir, prober.Get());
    REQUIRE_FALSE(catalog.ok());
    CHECK(catalog.status().code() == StatusCode::kDataLoss);
    CHECK_THAT(catalog.status().message(), Catch::StartsWith(file + ": "));
    CHECK_THAT(catalog.status().message(),
               Catch::Contains("the previous good copy (before the last change) is " + previous +
                               ": stop emberd, cp " + previous + " " + file));
  }
  // A changed byte anywhere is refused as damaged (or, in the checksum line, truncated).
  for (size_t at = 0; at < good.size(); at += 7) {
    std::string damaged = good;
    damaged[at] = damaged[at] == 'x' ? 'y' : 'x';
    INFO("byte " << at);
    REQUIRE(env->WriteFileAtomic(file, damaged).ok());
    auto catalog = Catalog::Open(env.get(), dir, prober.Get());
    REQUIRE_FALSE(catalog.ok());
    CHECK(catalog.status().code() == StatusCode::kDataLoss);
    CHECK_THAT(catalog.status().message(), Catch::StartsWith(file + ": "));
  }
  std::string flipped = good;
  flipped[good.find("count: 60000")] = 'C';
  REQUIRE(env->WriteFileAtomic(file, flipped).ok());
  auto damaged = Catalog::Open(env.get(), dir, prober.Get());
  REQUIRE_FALSE(damaged.ok());
  CHECK_THAT(damaged.status().message(), Catch::Contains(file + ": damaged: checksum mismatch"));

  // Restoring the previous copy as the message says brings the catalog back.
  REQUIRE(env->WriteFileAtomic(file, *env->ReadFile(previous)).ok());
  CHECK(MustOpen(env.get(), dir, prober)->List().size() == 1);

  // With the previous copy damaged too, the message says so.
  REQUIRE(env->WriteFileAtomic(previous, good.substr(0, good.size() / 2)).ok());
  REQUIRE(env->WriteFileAtomic(file, flipped).ok());
  auto both = Catalog::Open(env.get(), dir, prober.Get());
  REQUIRE_FALSE(both.ok());
  CHECK_THAT(both.status().message(),
             Catch::Contains("the previous copy is damaged too (" + previous + ": truncated"));
  REQUIRE(env->RemoveAll(previous).ok());
  auto none = Catalog::Open(env.get(), dir, prober.Get());
  REQUIRE_FALSE(none.ok());
  CHECK_THAT(none.status().message(), Catch::Contains("there is no previous copy"));
}

TEST_CASE("a catalog written before checksums opens and gets one on its next change") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("legacy");
  const std::string file = dir + "/catalog.yaml";
  const std::string legacy =
      "# emberd dataset catalog; rewritten by the daemon on every change\nversion: 1\n"
      "datasets:\n  - name: a\n    format: idx\n    path: /d\n    split: train\n"
      "    count: 3\n    tensors: []\n    files: [/d/x]\n";
  REQUIRE(env->WriteFileAtomic(file, legacy).ok());
  FakeProber prober;
  auto catalog = MustOpen(env.get(), dir, prober);
  CHECK(catalog->Get("a").ok());
  REQUIRE(catalog->Add(Spec("b")).ok());
  CHECK(*env->ReadFile(file + ".prev") == legacy);
  CHECK_THAT(*env->ReadFile(file), Catch::Contains("# crc32: "));
  CHECK(MustOpen(env.get(), dir, prober)->List().size() == 2);
}

TEST_CASE("concurrent adds and reads keep every entry") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("concurrent");
  FakeProber prober;
  auto catalog = MustOpen(env.get(), dir, prober);
  Catalog* c = catalog.get();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([c, t, &failures] {
      for (int i = 0; i < 8; ++i) {
        std::string name = "t" + std::to_string(t) + "-" + std::to_string(i);
        if (!c->Add(Spec(name)).ok()) ++failures;
        if (!c->Get(name).ok()) ++failures;
        // Everyone races for the same name; exactly one wins.
        Result<DatasetInfo> shared = c->Add(Spec("shared"));
        if (!shared.ok() && shared.status().code() != StatusCode::kAlreadyExists) ++failures;
        c->List();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(failures == 0);
  CHECK(c->List().size() == 33);
  auto reopened = MustOpen(env.get(), dir, prober);
  CHECK(reopened->List().size() == 33);
}

}  // namespace
}  // namespace ember::daemon

namespace ember::daemon {
namespace {

TEST_CASE("a spec's text fields are bounded, refused without probing, errors short") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("spec_sizes");
  FakeProber prober;
  auto catalog = MustOpen(env.get(), dir, prober);
  DatasetSpec spec = Spec("d");
  spec.pipeline = std::string(kMaxPipelineBytes + 1, '#');
  Result<DatasetInfo> added = catalog->Add(spec);
  CHECK(added.status().code() == StatusCode::kInvalidArgument);
  CHECK(added.status().message() == "dataset 'd': pipeline: 65537 bytes, at most 65536");
  spec = Spec("d");
  spec.path = std::string(kMaxPathBytes + 1, 'p');
  CHECK_THAT(catalog->Add(spec).status().message(), Catch::Contains("path: 4097 bytes"));
  spec = Spec("d");
  spec.path = std::string("/data/mine\0/../../etc/shadow", 28);
  CHECK(catalog->Add(spec).status().message() ==
        "dataset 'd': path: a NUL byte at offset 10 ('/data/mine' before it)");
  spec = Spec("d");
  spec.on_error = std::string(1 << 20, 'o');
  const Status on_error = catalog->Add(spec).status();
  CHECK(on_error.code() == StatusCode::kInvalidArgument);
  CHECK(on_error.message().size() < 200);
  CHECK(*prober.calls == 0);
  CHECK(catalog->List().empty());
}

TEST_CASE("an unknown on_error policy is refused without probing") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("on_error");
  FakeProber prober;
  auto catalog = MustOpen(env.get(), dir, prober);
  DatasetSpec spec = Spec("d");
  spec.on_error = "ignore";
  Result<DatasetInfo> added = catalog->Add(spec);
  REQUIRE_FALSE(added.ok());
  CHECK(added.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(added.status().message(), Catch::Contains("on_error") && Catch::Contains("'ignore'"));
  CHECK(*prober.calls == 0);
  CHECK(catalog->List().empty());

  spec.on_error = "fail";
  spec.shuffle = "windows";
  CHECK_THAT(catalog->Add(spec).status().message(),
             Catch::Contains("shuffle: 'windows' is not one of samples, shards"));
  spec.shuffle = "shards";
  spec.shuffle_window = 0;
  CHECK_THAT(catalog->Add(spec).status().message(), Catch::Contains("shuffle_window: 0 is not in 1..4096"));
  CHECK(*prober.calls == 0);
}

TEST_CASE("an endpoint is http(s)://HOST[:PORT] for an s3:// path, else refused without probing") {
  auto env = NewPosixEnv();
  std::string dir = FreshTestDir("endpoint");
  FakeProber prober;
  auto catalog = MustOpen(env.get(), dir, prober);
  DatasetSpec spec = Spec("d", "s3://bucket/prefix/");
  for (const std::string good : {"", "http://127.0.0.1:7480", "https://s3.example.com",
                                 "https://minio.storage.svc:9000/", "http://[::1]:80",
                                 "http://[fd00::1]", "http://host_1:65535"}) {
    INFO(good);
    spec.endpoint = good;
    CHECK(ValidateEndpoint(spec).ok());
  }
  const std::pair<std::string, std::string> bad[] = {
      {"s3.example.com", "endpoint: 's3.example.com' is not an http:// or https:// URL"},
      {"ftp://host", "endpoint: 'ftp://host' is not an http:// or https:// URL"},
      {"HTTP://host", "is not an http:// or https:// URL"},
      {"http://", "endpoint: 'http://' names no host"},
      {"http://:80", "names no host"},
      {"http://host/bucket", "endpoint: 'http://host/bucket' has a path, query or fragment"},
      {"http://host//", "has a path, query or fragment"},
      {"http://host?x=1", "has a path, query or fragment"},
      {"http://host#f", "has a path, query or fragment"},
      {"http://ho st", "has a host of other than letters"},
      {"http://host:", "has a port that is not in 1..65535"},
      {"http://host:0", "has a port that is not in 1..65535"},
      {"http://host:65536", "has a port that is not in 1..65535"},
      {"http://host:80x", "has a port that is not in 1..65535"},
      {"http://host:1:2", "has a port that is not in 1..65535"},
      {"http://[::1", "has an unclosed or empty [address]"},
      {"http://[::1]x", "has text after its [address]"},
      {"http://[g::1]", "has an [address] that is not an IPv6 address"},
      {"http://key:secret@host", "endpoint: 'http://...@host' holds a user name"},
  };
  for (const auto& [endpoint, message] : bad) {
    INFO(endpoint);
    spec.endpoint = endpoint;
    const Result<DatasetInfo> added = catalog->Add(spec);
    CHECK(added.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(added.status().message(), Catch::Contains(message) && Catch::Contains("dataset 'd'"));
    CHECK(added.status().message().find("secret") == std::string::npos);
  }
  spec.endpoint = "http://host:1" + std::string(kMaxEndpointBytes, '0');
  CHECK(catalog->Add(spec).status().message() == "dataset 'd': endpoint: " +
                                                     std::to_string(spec.endpoint.size()) +
                                                     " bytes, at most 256");
  // Only s3:// paths have an endpoint.
  for (const std::string path : {"/data/shards", "https://host/s-{0..3}.tar", "S3://bucket/a"}) {
    INFO(path);
    spec.path = path;
    spec.endpoint = "http://127.0.0.1:7480";
    const Status refused = catalog->Add(spec).status();
    CHECK(refused.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(refused.message(), Catch::Contains("endpoint is for s3:// paths"));
  }
  CHECK(*prober.calls == 0);
  CHECK(catalog->List().empty());
}

}  // namespace
}  // namespace ember::daemon
