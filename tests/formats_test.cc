// Every dataset format through the whole stack: registered with emberctl (as a user
// would, with --pipeline), read through the SDK from a real emberd.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>

#include "common/temp_dir_testing.h"
#include "daemon/data/image/image_testing.h"
#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

int Emberctl(const Daemon& daemon, std::vector<std::string> args, std::string* err = nullptr) {
  args.insert(args.begin(), {Runfile("tools/emberctl/emberctl"), "--socket", daemon.socket()});
  ProcessOutput run = RunToExit(args, daemon.dir());
  if (err != nullptr) *err = run.err;
  return run.exit_code;
}

TEST_CASE("tokens: windows of seq_len+1 tokens, inputs and targets shifted by one") {
  TempDir tmp;
  const std::string& dir = tmp.path();
  std::string corpus;
  for (uint32_t t = 0; t < 10000; ++t) {
    const uint16_t id = static_cast<uint16_t>(t % 5000);
    corpus.append(reinterpret_cast<const char*>(&id), sizeof(id));
  }
  WriteTestFile(dir + "/corpus.bin", corpus);
  WriteTestFile(dir + "/lm.yaml", "tokens: {dtype: uint16, seq_len: 128, vocab_size: 5000}\n");
  Daemon daemon(dir);
  daemon.Start();
  std::string err;
  REQUIRE(Emberctl(daemon, {"dataset", "add", "corpus", "--format", "tokens", "--path",
                            dir + "/corpus.bin", "--pipeline", dir + "/lm.yaml"},
                   &err) == 0);
  {
    auto client = daemon.Connect();
    auto info = client->InspectDataset("corpus");
    REQUIRE(info.ok());
    CHECK(info->count == (10000 - 128) / 128);
    REQUIRE(info->tensors.size() == 2);
    CHECK(info->tensors[0].name == "input");
    CHECK(info->tensors[0].dtype == "int64");
    CHECK(info->tensors[0].shape == std::vector<int64_t>{128});

    auto reader = client->OpenStream(ReaderOptions("lm", 8, 1, "corpus"));
    REQUIRE(reader.ok());
    uint64_t rows = 0;
    while (true) {
      auto next = (*reader)->Next();
      REQUIRE(next.ok());
      if (!next->has_value()) break;
      const auto* input = static_cast<const int64_t*>((*next)->tensors[0].data);
      const auto* target = static_cast<const int64_t*>((*next)->tensors[1].data);
      for (uint32_t r = 0; r < (*next)->num_samples; ++r) {
        for (int k = 0; k + 1 < 128; ++k) REQUIRE(target[r * 128 + k] == input[r * 128 + k + 1]);
        REQUIRE((target[r * 128 + 127] == (input[r * 128 + 127] + 1) % 5000));
      }
      rows += (*next)->num_samples;
    }
    CHECK(rows == info->count);
  }
  // A bad pipeline file is refused with the file's name and the key.
  WriteTestFile(dir + "/bad.yaml", "tokens: {seq_len: 128, stride: 3}\n");
  CHECK(Emberctl(daemon, {"dataset", "add", "bad", "--format", "tokens", "--path",
                          dir + "/corpus.bin", "--pipeline", dir + "/bad.yaml"},
                 &err) != 0);
  CHECK(err.find(dir + "/bad.yaml") != std::string::npos);
  CHECK(err.find("stride") != std::string::npos);
  daemon.Stop();
}

// Reads one epoch (unshuffled) and returns its batches' image bytes and labels in order.
std::pair<std::string, std::vector<int64_t>> ReadEpoch(Client& client, const std::string& dataset,
                                                       const std::string& job) {
  StreamOptions options = ReaderOptions(job, 4, 1, dataset);
  options.shuffle = false;
  auto reader = client.OpenStream(options);
  REQUIRE(reader.ok());
  std::string images;
  std::vector<int64_t> labels;
  while (true) {
    auto next = (*reader)->Next();
    INFO(next.status().ToString());
    REQUIRE(next.ok());
    if (!next->has_value()) break;
    const RawBatch& b = **next;
    REQUIRE(b.tensors.at(0).name == "image");
    REQUIRE(b.tensors.at(0).shape == std::vector<int64_t>{b.num_samples, 3, 32, 32});
    images.append(static_cast<const char*>(b.tensors[0].data), b.tensors[0].nbytes);
    const auto* l = static_cast<const int64_t*>(b.tensors.at(1).data);
    labels.insert(labels.end(), l, l + b.num_samples);
  }
  return {images, labels};
}

TEST_CASE("imagefolder and its packed copy serve the same decoded samples; bad files are skipped") {
  TempDir tmp;
  const std::string& dir = tmp.path();
  const std::string root = dir + "/photos";
  // Classes in sorted order: "ant" (label 0), "bee" (1, empty), "cat" (2).
  for (const char* c : {"ant", "bee", "cat"}) std::filesystem::create_directories(root + "/" + c);
  for (int i = 0; i < 6; ++i) {
    auto image = daemon::GradientImage(40 + 4 * i, 36);
    WriteTestFile(root + "/ant/" + std::to_string(i) + ".jpg", daemon::EncodeJpeg(image));
    WriteTestFile(root + "/cat/" + std::to_string(i) + ".png", daemon::EncodePng(image));
  }
  WriteTestFile(root + "/cat/notes.txt", "not an image");
  WriteTestFile(dir + "/eval.yaml",
                "steps:\n  - resize: {size: 36}\n  - center_crop: {size: 32}\n");

  Daemon daemon(dir);
  daemon.Start();
  std::string err;
  REQUIRE(Emberctl(daemon, {"dataset", "add", "photos", "--format", "imagefolder", "--path", root,
                            "--pipeline", dir + "/eval.yaml"},
                   &err) == 0);
  REQUIRE(Emberctl(daemon, {"pack", root, dir + "/photos.packed"}, &err) == 0);
  INFO(err);
  REQUIRE(Emberctl(daemon, {"dataset", "add", "photos-packed", "--format", "packed", "--path",
                            dir + "/photos.packed", "--pipeline", dir + "/eval.yaml"},
                   &err) == 0);
  {
    auto client = daemon.Connect();
    auto folder = ReadEpoch(*client, "photos", "folder");
    auto packed = ReadEpoch(*client, "photos-packed", "packed");
    CHECK(folder.second == std::vector<int64_t>{0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2});
    CHECK(packed.second == folder.second);
    CHECK(packed.first == folder.first);  // bit-identical decoded pixels
  }

  // A corrupt file: with on_error skip the stream drops it and goes on.
  WriteTestFile(root + "/cat/3.png", "\x89PNG garbage");
  REQUIRE(Emberctl(daemon, {"dataset", "add", "photos-skip", "--format", "imagefolder", "--path",
                            root, "--pipeline", dir + "/eval.yaml", "--on-error", "skip"},
                   &err) == 0);
  {
    auto client = daemon.Connect();
    auto skipped = ReadEpoch(*client, "photos-skip", "skip");
    CHECK(skipped.second.size() == 11);
    auto status = client->GetStatus();
    REQUIRE(status.ok());
  }
  CHECK(daemon.log().find(root + "/cat/3.png") != std::string::npos);
  daemon.Stop();
}

TEST_CASE("a reader plugin allowed in emberd's config serves its format") {
  TempDir tmp;
  const std::string& dir = tmp.path();
  const std::string plugin = Runfile("daemon/data/plugin/examples/libember_csv_plugin.so");
  WriteTestFile(dir + "/points.csv", "0.5,1.5,3\n2.5,3.5,4\n-1,0,5\n");
  Daemon daemon(dir, WriteDaemonConfig(dir, "plugins: [" + plugin + "]\n"));
  daemon.Start();
  std::string err;
  REQUIRE(Emberctl(daemon, {"dataset", "add", "points", "--format", "csv", "--path",
                            dir + "/points.csv"},
                   &err) == 0);
  {
    auto client = daemon.Connect();
    StreamOptions options = ReaderOptions("csv", 3, 1, "points");
    options.shuffle = false;
    auto reader = client->OpenStream(options);
    REQUIRE(reader.ok());
    auto next = (*reader)->Next();
    REQUIRE(next.ok());
    REQUIRE(next->has_value());
    const RawBatch& b = **next;
    REQUIRE(b.num_samples == 3);
    const auto* features = static_cast<const float*>(b.tensors.at(0).data);
    const auto* labels = static_cast<const int64_t*>(b.tensors.at(1).data);
    CHECK(features[0] == 0.5f);
    CHECK(features[5] == 0.0f);
    CHECK(std::vector<int64_t>(labels, labels + 3) == std::vector<int64_t>{3, 4, 5});
  }
  // A bad line is refused at registration with the file and line.
  WriteTestFile(dir + "/broken.csv", "1,2,3\n4,five,6\n");
  CHECK(Emberctl(daemon, {"dataset", "add", "broken", "--format", "csv", "--path",
                          dir + "/broken.csv"},
                 &err) != 0);
  CHECK(err.find(dir + "/broken.csv") != std::string::npos);
  CHECK(err.find("line 2") != std::string::npos);
  daemon.Stop();
}

TEST_CASE("a transform plugin's step runs inside the image pipeline of a folder and a pack") {
  TempDir tmp;
  const std::string& dir = tmp.path();
  const std::string plugin = Runfile("daemon/data/plugin/examples/libember_color_plugin.so");
  const std::string root = dir + "/photos";
  std::filesystem::create_directories(root + "/a");
  for (int i = 0; i < 5; ++i) {
    WriteTestFile(root + "/a/" + std::to_string(i) + ".png",
                  daemon::EncodePng(daemon::GradientImage(40 + 2 * i, 36)));
  }
  const std::string crop = "steps:\n  - resize: {size: 36}\n  - center_crop: {size: 32}\n";
  WriteTestFile(dir + "/plain.yaml", crop);
  WriteTestFile(dir + "/inverted.yaml", crop + "  - solarize: {threshold: 0}\n");
  WriteTestFile(dir + "/bad.yaml", crop + "  - solarize: {threshold: 999}\n");

  Daemon daemon(dir, WriteDaemonConfig(dir, "plugins: [" + plugin + "]\n"));
  daemon.Start();
  std::string err;
  REQUIRE(Emberctl(daemon, {"dataset", "add", "plain", "--format", "imagefolder", "--path", root,
                            "--pipeline", dir + "/plain.yaml"},
                   &err) == 0);
  REQUIRE(Emberctl(daemon, {"dataset", "add", "inverted", "--format", "imagefolder", "--path",
                            root, "--pipeline", dir + "/inverted.yaml"},
                   &err) == 0);
  REQUIRE(Emberctl(daemon, {"pack", root, dir + "/photos.packed"}, &err) == 0);
  REQUIRE(Emberctl(daemon, {"dataset", "add", "inverted-packed", "--format", "packed", "--path",
                            dir + "/photos.packed", "--pipeline", dir + "/inverted.yaml"},
                   &err) == 0);
  {
    auto client = daemon.Connect();
    const std::string plain = ReadEpoch(*client, "plain", "plain").first;
    const std::string inverted = ReadEpoch(*client, "inverted", "inverted").first;
    REQUIRE(plain.size() == 5u * 3 * 32 * 32);
    REQUIRE(inverted.size() == plain.size());
    for (size_t i = 0; i < plain.size(); ++i) {
      REQUIRE(uint8_t(inverted[i]) == 255 - uint8_t(plain[i]));
    }
    CHECK(ReadEpoch(*client, "inverted-packed", "packed").first == inverted);
  }
  // Settings the plugin refuses: registration fails naming the step, the key and the value.
  CHECK(Emberctl(daemon, {"dataset", "add", "bad", "--format", "imagefolder", "--path", root,
                          "--pipeline", dir + "/bad.yaml"},
                 &err) != 0);
  CHECK(err.find("step 'solarize'") != std::string::npos);
  CHECK(err.find("threshold") != std::string::npos);
  CHECK(err.find("'999'") != std::string::npos);
  daemon.Stop();
}

}  // namespace
}  // namespace ember::testing
