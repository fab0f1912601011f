// `emberctl pack SRC OUT --format imagefolder`: the command-line face of packing. Runs in
// the emberctl process (no daemon involved); the daemon later serves OUT as format
// "packed".
#ifndef EMBER_PACK_PACK_COMMAND_H_
#define EMBER_PACK_PACK_COMMAND_H_

#include <cstdint>
#include <cstdio>
#include <string>

#include "common/env.h"

namespace CLI {
class App;
}

namespace ember::pack {

struct PackCommand {
  std::string src;
  std::string out;
  std::string format = "imagefolder";
  uint64_t shard_mib = 512;
  uint32_t record_alignment = 4096;
  bool overwrite = false;
  bool quiet = false;  // no progress lines
};

// Adds the subcommand "pack" to `app`, parsing into `*command` (which must outlive the
// parse). Returns the subcommand; `if (*sub)` tells whether it was given.
CLI::App* AddPackCommand(CLI::App& app, PackCommand* command);

// Packs through `env`; prints progress to `err` (at most one line every 2 seconds, unless
// quiet), then a one-line summary to `out`, or "emberctl: pack SRC -> OUT: <error>" to
// `err`. Returns the process exit status: 0 on success, 1 on failure, 2 for an unknown
// format.
int RunPackCommand(Env& env, const PackCommand& command, std::FILE* out, std::FILE* err);

// As above through a PosixEnv of its own: emberctl's entry point.
int RunPackCommand(const PackCommand& command, std::FILE* out, std::FILE* err);

}  // namespace ember::pack

#endif  // EMBER_PACK_PACK_COMMAND_H_
