// Where this process stands in a run, read from the environment its launcher set: ember-run
// (tools/ember_run), torchrun, or Slurm's srun. A process started by hand is rank 0 of 1.
//
// Precedence: the first launcher, in this order, whose rank variable is set (not empty) gives
// the rank, world size, local rank, local world size, node rank, node count, restart count; no
// value is ever taken from another launcher's variables. (ember-run under srun, or torchrun
// under srun, both see their own launcher first.)
//
//   launcher   rank / world / local rank / local world size
//   ember-run  EMBER_RANK, EMBER_WORLD_SIZE, EMBER_LOCAL_RANK, EMBER_LOCAL_WORLD_SIZE
//   torchrun   RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE
//   slurm      SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, this node's entry of
//              SLURM_STEP_TASKS_PER_NODE, else of SLURM_TASKS_PER_NODE ("2(x3),1")
//   none       0, 1, 0, 1
//
//   launcher   node rank / nodes / restart count
//   ember-run  EMBER_NODE_RANK, EMBER_NNODES, EMBER_RESTART_COUNT
//   torchrun   GROUP_RANK, GROUP_WORLD_SIZE, TORCHELASTIC_RESTART_COUNT
//   slurm      SLURM_NODEID, SLURM_STEP_NUM_NODES else SLURM_NNODES, SLURM_RESTART_COUNT
//   none       0, 1, 0
//
// Unset, the world size is 1, the local rank the rank, the local world size the world size
// (one node), the node rank and restart count 0 and the node count unknown (0). Without a
// launcher ("none") the process is rank 0 of 1 on 1 node; other variables (EMBER_WORLD_SIZE
// without EMBER_RANK, say) are then ignored.
// The job, whatever the launcher: EMBER_JOB, else TORCHELASTIC_RUN_ID unless it is torchrun's
// placeholder "none", else SLURM_JOB_ID (".SLURM_STEP_ID" appended when set), else the caller's
// default. The coordinator is EMBER_COORDINATOR only (torchrun's MASTER_ADDR is the host of
// its own rendezvous store, not an emberd; it is kept apart in master_addr).
// EMBER_SOCKET is read by Client::Connect.
#ifndef EMBER_LAUNCH_ENV_H_
#define EMBER_LAUNCH_ENV_H_

#include <functional>
#include <string>

#include "ember/status.h"

namespace ember {

struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;        // among the ranks on this node: the GPU a GPU rank uses
  int local_world_size = 1;  // ranks on this node
  int node_rank = 0;
  int num_nodes = 1;         // 0: the launcher did not say
  int restart_count = 0;     // how often the launcher restarted this run's ranks
  std::string job;           // shared by the ranks of a run
  std::string coordinator;   // HOST:PORT of the job's coordinating emberd; empty: not given
  std::string master_addr;   // torchrun's MASTER_ADDR; empty under other launchers
  std::string launcher;      // where the values came from: ember-run, torchrun, slurm, none
};

// Looks up one environment variable: its value, or nullptr when it is unset. The pointer
// stays valid until the next call.
using EnvLookup = std::function<const char*(const char* name)>;

// Reads the process's environment (std::getenv) as the header comment says. Not thread-safe
// against setenv. kInvalidArgument naming the variable and its value for a value that is not
// a whole number, a world size or local world size below 1, an index not below its count
// ("EMBER_RANK='2' is not below EMBER_WORLD_SIZE=2"), more local ranks than ranks, a
// tasks-per-node list without an entry for the node, or an EMBER_COORDINATOR that is not
// HOST:PORT.
Result<LaunchEnv> ReadLaunchEnv(const std::string& default_job);

// As above, with the variables from `lookup` (tests, or an environment other than this
// process's).
Result<LaunchEnv> ReadLaunchEnv(const std::string& default_job, const EnvLookup& lookup);

// The integer in environment variable `name`, `fallback` if it is unset or empty;
// kInvalidArgument "NAME='text' is not an integer >= min" otherwise.
Result<int> EnvInt(const char* name, int fallback, int min);

// Ok if `value` is HOST:PORT: a host name, an IPv4 address or a bracketed IPv6 address
// ("[::1]:7070"), and a port in 1..65535. Otherwise kInvalidArgument
// "NAME='value' is not HOST:PORT: <why>", `name` being the variable or flag it came from.
Status CheckHostPort(const std::string& name, const std::string& value);

}  // namespace ember

#endif  // EMBER_LAUNCH_ENV_H_
