// The example trainer's sample log (--sample-log DIR): per rank a file DIR/rank-<r>.log of
// lines
//   <epoch> <step> <rank> <sample_id>
// one per sample the rank trained on, in the order it consumed them. `step` is the global
// step within the epoch, counted across resumes; `sample_id` is the sample's index in the
// dataset. The union of all ranks' files is what the job trained on: each sample once per
// epoch, whatever the world size of each run.
//
// Resuming from a checkpoint that covers the steps before (epoch, step), each rank cuts
// its own file to the lines of those steps (lines are in step order, so a prefix) and
// appends from there, so lines an interrupted run wrote after its checkpoint never count
// twice. Rank 0 also cuts the files of ranks that the resuming run does not have (an
// earlier run had more ranks): they keep their lines up to the checkpoint, and a reader
// takes the union of all files. A fresh run (no checkpoint) cuts every file to nothing.
#ifndef EMBER_SDK_EXAMPLES_SAMPLE_LOG_H_
#define EMBER_SDK_EXAMPLES_SAMPLE_LOG_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "common/env.h"
#include "ember/status.h"

namespace ember::examples {

// The steps before `step` of epoch `epoch` (and all steps of earlier epochs) are done.
struct StepMark {
  uint64_t epoch = 0;
  uint64_t step = 0;
};

// DIR/rank-<rank>.log
std::string SampleLogPath(const std::string& dir, uint32_t rank);

// Cuts the sample log at `path` to its lines of steps before `covered`. A last line
// without its newline (the write was cut short by a kill) goes too. OK if the file does
// not exist. kDataLoss "<path>:<line>: ..." if a complete line before the cut is not four
// numbers; the Env's errors otherwise.
Status TrimSampleLog(Env& env, const std::string& path, StepMark covered);

// One rank's sample log, open for appending. For one thread.
class SampleLog {
 public:
  // Creates `dir` if needed, cuts this rank's file to `covered` (TrimSampleLog) and opens
  // it at its end. Rank 0 also cuts the files of ranks >= world_size in `dir`. Errors name
  // the file.
  static Result<std::unique_ptr<SampleLog>> Open(Env& env, const std::string& dir,
                                                 uint32_t rank, uint32_t world_size,
                                                 StepMark covered);

  // Appends one line per id for step `step` of `epoch`, in one write: in the file (the
  // page cache) when it returns, so it outlives this process being killed. Errors name the
  // file.
  Status Append(uint64_t epoch, uint64_t step, const int64_t* ids, size_t count);

  // Makes what was appended durable (fdatasync), e.g. before a checkpoint covers it.
  Status Sync();

  const std::string& path() const { return file_->path(); }

 private:
  SampleLog(std::unique_ptr<WritableFile> file, uint32_t rank, uint64_t size)
      : file_(std::move(file)), rank_(rank), size_(size) {}

  std::unique_ptr<WritableFile> file_;
  uint32_t rank_;
  uint64_t size_;  // where the next line goes
};

}  // namespace ember::examples

#endif  // EMBER_SDK_EXAMPLES_SAMPLE_LOG_H_
