#include "pack/pack_command.h"

#include <cinttypes>
#include <memory>

#include "common/env.h"
#include "pack/imagefolder_pack.h"
#include "pack/writer.h"

namespace ember::pack {

namespace {

constexpr uint64_t kProgressIntervalMicros = 2'000'000;

}  // namespace

int RunPackCommand(Env& env, const PackCommand& command, std::FILE* out, std::FILE* err) {
  const std::string what = "pack " + command.src + " -> " + command.out;
  if (command.format != kImageFolderFormat) {
    std::fprintf(err, "emberctl: %s: unknown source format '%s' (known: %s)\n", what.c_str(),
                 command.format.c_str(), kImageFolderFormat);
    return 2;
  }
  PackOptions options;
  options.shard_bytes = command.shard_mib << 20;
  options.record_alignment = command.record_alignment;
  options.overwrite = command.overwrite;
  uint64_t last_report = env.NowMicros();
  if (!command.quiet) {
    options.progress = [&](const PackProgress& progress) {
      const uint64_t now = env.NowMicros();
      if (now - last_report < kProgressIntervalMicros && progress.done != progress.total) return;
      last_report = now;
      std::fprintf(err, "pack: %s %" PRIu64 " / %" PRIu64 " records\n",
                   progress.stage == PackProgress::Stage::kWrite ? "wrote" : "verified",
                   progress.done, progress.total);
      std::fflush(err);
    };
  }
  Result<PackSummary> summary = PackImageFolder(env, command.src, command.out, options);
  if (!summary.ok()) {
    std::fprintf(err, "emberctl: %s: %s\n", what.c_str(), summary.status().message().c_str());
    return 1;
  }
  std::fprintf(out,
               "packed %" PRIu64 " records of %" PRIu64 " classes (%.1f MiB) into %" PRIu64
               " shards in %s (%.1f MiB on disk); %" PRIu64 " non-image files ignored\n",
               summary->records, summary->classes, summary->record_bytes / 1048576.0,
               summary->shards, summary->out_dir.c_str(), summary->file_bytes / 1048576.0,
               summary->ignored_files);
  return 0;
}

int RunPackCommand(const PackCommand& command, std::FILE* out, std::FILE* err) {
  std::unique_ptr<Env> env = NewPosixEnv();
  return RunPackCommand(*env, command, out, err);
}

}  // namespace ember::pack
