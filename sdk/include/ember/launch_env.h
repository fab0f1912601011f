// Where this process stands in a run: the environment that ember-run (tools/ember_run) sets
// for every rank it starts, EMBER_RANK, EMBER_WORLD_SIZE, EMBER_LOCAL_RANK and EMBER_JOB
// (EMBER_SOCKET is read by Client::Connect). A process started by hand without them is rank 0 of 1.
#ifndef EMBER_LAUNCH_ENV_H_
#define EMBER_LAUNCH_ENV_H_

#include <string>

#include "ember/status.h"

namespace ember {

struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // among the ranks on this node: the GPU a GPU rank uses
  std::string job;     // shared by the ranks of a run
};

// Reads EMBER_RANK (default 0), EMBER_WORLD_SIZE (default 1), EMBER_LOCAL_RANK (default
// the rank) and EMBER_JOB (default `default_job`; unset or empty means the default). kInvalidArgument naming the variable
// and its value for a value that is not a whole number, a world size below 1, or a rank
// not below the world size, e.g. "EMBER_RANK='2' is not below EMBER_WORLD_SIZE=2".
Result<LaunchEnv> ReadLaunchEnv(const std::string& default_job);

// The integer in environment variable `name`, `fallback` if it is unset or empty;
// kInvalidArgument "NAME='text' is not an integer >= min" otherwise.
Result<int> EnvInt(const char* name, int fallback, int min);

}  // namespace ember

#endif  // EMBER_LAUNCH_ENV_H_
