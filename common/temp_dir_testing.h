// Test helpers (tests only): scratch files and directories under $TEST_TMPDIR, which
// Bazel makes fresh for every test run, so tests leave nothing behind and never meet
// another run's files. Every helper fails the running Catch2 test (REQUIRE) rather than
// returning an error, naming the path.
#ifndef EMBER_COMMON_TEMP_DIR_TESTING_H_
#define EMBER_COMMON_TEMP_DIR_TESTING_H_

#include <string>

namespace ember {

// $TEST_TMPDIR. Fails the test when it is unset (outside `bazel test`).
std::string TestTmpDir();

// A fresh, empty directory $TEST_TMPDIR/<name> for one test case (`name` may contain
// '/'); whatever an earlier case or section left there is removed first.
std::string FreshTestDir(const std::string& name);

// Writes `contents` to `path`, replacing the file and creating missing parent
// directories.
void WriteTestFile(const std::string& path, const std::string& contents);

// Writes `contents` to $TEST_TMPDIR/<name> as WriteTestFile does and returns that path.
std::string WriteTempFile(const std::string& name, const std::string& contents);

// The whole contents of the file at `path`.
std::string ReadTestFile(const std::string& path);

}  // namespace ember

#endif  // EMBER_COMMON_TEMP_DIR_TESTING_H_
