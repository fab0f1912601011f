#include "sdk/examples/sample_log.h"

#include <string_view>
#include <vector>

namespace ember::examples {
namespace {

constexpr std::string_view kPrefix = "rank-";
constexpr std::string_view kSuffix = ".log";

// The four numbers of a complete line (without its newline), or false.
bool ParseLine(std::string_view line, uint64_t (&fields)[4]) {
  size_t at = 0;
  for (int i = 0; i < 4; ++i) {
    if (i > 0) {
      if (at >= line.size() || line[at] != ' ') return false;
      ++at;
    }
    const size_t begin = at;
    uint64_t value = 0;
    while (at < line.size() && line[at] >= '0' && line[at] <= '9') {
      if (value > (UINT64_MAX - 9) / 10) return false;
      value = value * 10 + static_cast<uint64_t>(line[at] - '0');
      ++at;
    }
    if (at == begin) return false;
    fields[i] = value;
  }
  return at == line.size();
}

// The rank a file name "rank-<r>.log" names, or -1.
int64_t RankOfName(std::string_view name) {
  if (name.size() <= kPrefix.size() + kSuffix.size() || name.substr(0, kPrefix.size()) != kPrefix ||
      name.substr(name.size() - kSuffix.size()) != kSuffix)
    return -1;
  const std::string_view digits =
      name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  if (digits.size() > 9) return -1;
  int64_t rank = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
    rank = rank * 10 + (c - '0');
  }
  return rank;
}

}  // namespace

std::string SampleLogPath(const std::string& dir, uint32_t rank) {
  return dir + "/" + std::string(kPrefix) + std::to_string(rank) + std::string(kSuffix);
}

Status TrimSampleLog(Env& env, const std::string& path, StepMark covered) {
  if (!env.FileExists(path)) return Status::Ok();
  EMBER_ASSIGN_OR_RETURN(const std::string contents, env.ReadFile(path));
  size_t keep = 0;
  uint64_t line_number = 0;
  for (size_t end; (end = contents.find('\n', keep)) != std::string::npos; keep = end + 1) {
    ++line_number;
    const std::string_view line(contents.data() + keep, end - keep);
    uint64_t fields[4];
    if (!ParseLine(line, fields))
      return DataLoss(path + ":" + std::to_string(line_number) + ": '" + std::string(line) +
                      "' is not '<epoch> <step> <rank> <sample_id>'");
    const uint64_t epoch = fields[0], step = fields[1];
    if (epoch > covered.epoch || (epoch == covered.epoch && step >= covered.step)) break;
  }
  if (keep == contents.size()) return Status::Ok();
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, env.OpenWritableFile(path));
  EMBER_RETURN_IF_ERROR(file->Truncate(keep));
  EMBER_RETURN_IF_ERROR(file->Sync());
  return file->Close();
}

Result<std::unique_ptr<SampleLog>> SampleLog::Open(Env& env, const std::string& dir,
                                                   uint32_t rank, uint32_t world_size,
                                                   StepMark covered) {
  EMBER_RETURN_IF_ERROR(env.CreateDirs(dir));
  if (rank == 0) {
    EMBER_ASSIGN_OR_RETURN(const std::vector<std::string> names, env.ListDir(dir));
    for (const std::string& name : names) {
      const int64_t other = RankOfName(name);
      if (other >= static_cast<int64_t>(world_size))
        EMBER_RETURN_IF_ERROR(TrimSampleLog(env, dir + "/" + name, covered));
    }
  }
  const std::string path = SampleLogPath(dir, rank);
  EMBER_RETURN_IF_ERROR(TrimSampleLog(env, path, covered));
  uint64_t size = 0;
  std::unique_ptr<WritableFile> file;
  if (env.FileExists(path)) {
    EMBER_ASSIGN_OR_RETURN(file, env.OpenWritableFile(path));
    EMBER_ASSIGN_OR_RETURN(std::unique_ptr<ReadableFile> reader, env.OpenForRead(path));
    size = reader->Size();
  } else {
    EMBER_ASSIGN_OR_RETURN(file, env.CreateWritableFile(path));
  }
  return std::unique_ptr<SampleLog>(new SampleLog(std::move(file), rank, size));
}

Status SampleLog::Append(uint64_t epoch, uint64_t step, const int64_t* ids, size_t count) {
  const std::string prefix =
      std::to_string(epoch) + " " + std::to_string(step) + " " + std::to_string(rank_) + " ";
  std::string lines;
  lines.reserve(count * (prefix.size() + 8));
  for (size_t i = 0; i < count; ++i) {
    lines += prefix;
    lines += std::to_string(ids[i]);
    lines += '\n';
  }
  EMBER_RETURN_IF_ERROR(file_->WriteAt(size_, lines.data(), lines.size()));
  size_ += lines.size();
  return Status::Ok();
}

Status SampleLog::Sync() { return file_->SyncData(); }

}  // namespace ember::examples
