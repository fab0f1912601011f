// What the main() of every LibTorch program here (the example trainers, the benchmarks)
// does around its work: parse the flags, run, and turn an exception into a message and
// exit code 1.
#ifndef EMBER_SDK_EXAMPLES_PROGRAM_MAIN_H_
#define EMBER_SDK_EXAMPLES_PROGRAM_MAIN_H_

#include <functional>
#include <stdexcept>

#include <CLI/CLI.hpp>

namespace ember::examples {

// Thrown for errors that have already been phrased for the user.
struct Fatal : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Parses argv into the flags of `app`, then returns run()'s exit code. --help prints the
// usage and returns 0; a bad flag prints CLI11's message and returns 1. An exception out
// of run() is printed to stderr as "<program>: <message>" (a c10::Error without its
// backtrace) and returns 1.
int ProgramMain(CLI::App& app, int argc, char** argv, const char* program,
                const std::function<int()>& run);

}  // namespace ember::examples

#endif  // EMBER_SDK_EXAMPLES_PROGRAM_MAIN_H_
