// PackWriter: writes a packed dataset (format.h) from records handed to it one at a
// time, whatever they encode. Used by PackImageFolder (imagefolder_pack.h); any other
// source of encoded samples can use it the same way.
//
// Atomic: everything is written into a temporary sibling directory "<out_dir>.tmp-<pid>",
// every file is fsynced, the result is reopened and every record's checksum re-read
// (after dropping the shards from the page cache, so the bytes come back from the
// disk), and only then is the directory renamed to out_dir and its parent fsynced.
// A pack that fails or is abandoned removes its temporary directory and never creates
// out_dir; readers of out_dir see no dataset, the old one or the new one, never a mix.
#ifndef EMBER_PACK_WRITER_H_
#define EMBER_PACK_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/env.h"
#include "pack/format.h"
#include "ember/status.h"

namespace ember::pack {

struct PackProgress {
  enum class Stage { kWrite, kVerify };
  Stage stage = Stage::kWrite;
  uint64_t done = 0;   // records written / verified so far
  uint64_t total = 0;  // records to write (0 when the writer does not know) / verify
};

struct PackOptions {
  // A shard is closed before a record would take its record bytes past this; a record
  // larger than this gets a shard of its own.
  uint64_t shard_bytes = uint64_t{512} << 20;
  // Every record starts at a multiple of this (a power of two, 8 .. 1 MiB). 4096: a
  // record spans the fewest pages and prefetching it reads nothing of its neighbours;
  // costs half a page per record on average (about 2% for 100 KB JPEGs).
  uint32_t record_alignment = 4096;
  // Replace an existing out_dir, if it is a packed dataset (has a manifest); the swap is
  // atomic where the filesystem supports renameat2(RENAME_EXCHANGE).
  bool overwrite = false;
  // Called after each record written and verified, on the calling thread. Optional.
  std::function<void(const PackProgress&)> progress;
};

struct PackSummary {
  std::string out_dir;       // absolute
  uint64_t records = 0;
  uint64_t classes = 0;
  uint64_t shards = 0;
  uint64_t record_bytes = 0;  // the records' bytes
  uint64_t file_bytes = 0;    // shards and manifest on disk
  uint64_t ignored_files = 0; // set by PackImageFolder: files skipped for their name
};

// Not thread-safe: one thread adds records and commits.
class PackWriter {
 public:
  // Starts a pack into `out_dir` (made absolute; missing parents are created). kAlreadyExists
  // if out_dir exists and !options.overwrite; kFailedPrecondition if it exists, overwrite
  // is set, and it is not a packed dataset; kInvalidArgument for bad options. A stale
  // temporary directory of this process id (from a crashed pack) is removed.
  // `class_names` (label i's name) and `source_format` go into the manifest; with class
  // names, every label must be in [0, class_names.size()).
  static Result<std::unique_ptr<PackWriter>> Create(Env& env, const std::string& out_dir,
                                                   const PackOptions& options,
                                                   const std::string& source_format,
                                                   std::vector<std::string> class_names);

  // Removes the temporary directory unless Commit succeeded.
  ~PackWriter();
  PackWriter(const PackWriter&) = delete;
  PackWriter& operator=(const PackWriter&) = delete;

  const std::string& out_dir() const { return out_dir_; }
  const std::string& temp_dir() const { return temp_dir_; }

  // Appends one record (copied; `path` is kept for error messages). Errors name the
  // shard file; after an error the writer is failed: Add and Commit return that error.
  Status Add(const uint8_t* data, size_t size, int64_t label, const std::string& path);

  // Closes the last shard, writes the manifest, verifies and renames into out_dir (see
  // above). On failure the temporary directory is removed and out_dir left untouched.
  // kAlreadyExists if out_dir appeared meanwhile (without overwrite).
  Result<PackSummary> Commit();

 private:
  class ShardFile;

  PackWriter(Env& env, PackOptions options, std::string out_dir, std::string temp_dir,
             Manifest manifest);
  Status StartShard();
  Status FinishShard();
  Status Verify();
  Status MoveIntoPlace();
  Status Fail(Status status);

  Env& env_;
  const PackOptions options_;
  const std::string out_dir_;
  const std::string temp_dir_;
  Manifest manifest_;  // shards are appended as they are finished
  std::unique_ptr<ShardFile> shard_;  // the shard being written, if any
  std::vector<IndexEntry> entries_;  // of the current shard
  std::string paths_;                        // the current shard's path table
  PackSummary summary_;
  Status status_;  // the first error; sticky
  bool done_ = false;  // committed, or the temporary directory removed
};

}  // namespace ember::pack

#endif  // EMBER_PACK_WRITER_H_
