// What `emberctl pack SRC OUT --format imagefolder` does (tools/emberctl parses the
// flags into a PackCommand): packs in the calling process (no daemon involved), with
// progress and a summary for a terminal; the daemon later serves OUT as format "packed".
#ifndef EMBER_PACK_PACK_COMMAND_H_
#define EMBER_PACK_PACK_COMMAND_H_

#include <cstdint>
#include <cstdio>
#include <string>

#include "common/env.h"

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

// Packs through `env`; prints progress to `err` (at most one line every 2 seconds, unless
// quiet), then a one-line summary to `out`, or "emberctl: pack SRC -> OUT: <error>" to
// `err`. Returns the process exit status: 0 on success, 1 on failure, 2 for an unknown
// format.
int RunPackCommand(Env& env, const PackCommand& command, std::FILE* out, std::FILE* err);

// As above through a PosixEnv of its own: emberctl's entry point.
int RunPackCommand(const PackCommand& command, std::FILE* out, std::FILE* err);

}  // namespace ember::pack

#endif  // EMBER_PACK_PACK_COMMAND_H_
