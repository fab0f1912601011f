// A main() for libFuzzer targets built without libFuzzer (GCC, ordinary tests): runs
// LLVMFuzzerTestOneInput once on every file named on the command line, and on every file
// in each directory named (sorted by name, not recursive). The regression tests that
// ember_cc_fuzz (//:ember.bzl) creates run it on a target's seed and crash corpus, so an
// input that once crashed a parser keeps being checked by `bazel test //...`.
//
// Prints each input's name before running it (a crash is then the last name printed).
// Exit status: 0 after running every input, 1 if none was found or one cannot be read;
// a target that crashes or aborts ends the process as it would under libFuzzer.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    std::error_code error;
    if (!std::filesystem::is_directory(argv[i], error)) {
      inputs.push_back(argv[i]);
      continue;
    }
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(argv[i], error)) {
      if (entry.is_regular_file()) names.push_back(entry.path().string());
    }
    if (error) {
      std::fprintf(stderr, "fuzz_replay: %s: cannot list: %s\n", argv[i],
                   error.message().c_str());
      return 1;
    }
    std::sort(names.begin(), names.end());
    inputs.insert(inputs.end(), names.begin(), names.end());
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "fuzz_replay: no inputs (usage: %s FILE_OR_DIR...)\n", argv[0]);
    return 1;
  }
  for (const std::string& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      std::fprintf(stderr, "fuzz_replay: %s: cannot read\n", path.c_str());
      return 1;
    }
    std::printf("fuzz_replay: %s (%zu bytes)\n", path.c_str(), bytes.size());
    std::fflush(stdout);
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("fuzz_replay: ran %zu inputs\n", inputs.size());
  return 0;
}
