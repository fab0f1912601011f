#include "daemon/coordinator/journal.h"

#include <chrono>
#include <cstring>
#include <filesystem>
#include <utility>

#include "pack/format.h"

namespace ember::daemon {

namespace {

constexpr char kMagic[8] = {'E', 'M', 'B', 'J', 'O', 'U', 'R', 'N'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = Journal::kHeaderBytes;
constexpr size_t kFrameBytes = 8;  // length + CRC
constexpr uint32_t kMaxRecordLimit = uint32_t{1} << 30;

void Put32(uint32_t value, char* out) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>(value >> (8 * i));
}

uint32_t Get32(const char* in) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= uint32_t{static_cast<unsigned char>(in[i])} << (8 * i);
  return value;
}

// The CRC of a record: over its 4 length bytes, then its payload.
uint32_t RecordCrc(const char* length_bytes, const char* payload, size_t size) {
  return pack::Crc32(payload, size, pack::Crc32(length_bytes, 4));
}

void AppendFramed(std::string_view record, std::string* out) {
  char frame[kFrameBytes];
  Put32(static_cast<uint32_t>(record.size()), frame);
  Put32(RecordCrc(frame, record.data(), record.size()), frame + 4);
  out->append(frame, kFrameBytes);
  out->append(record.data(), record.size());
}

std::string Header() {
  std::string header(kHeaderBytes, '\0');
  std::memcpy(&header[0], kMagic, sizeof(kMagic));
  Put32(kVersion, &header[8]);
  return header;
}

Status CheckRecordSize(const std::string& path, size_t size, uint32_t max_record_bytes) {
  if (size <= max_record_bytes) return Status::Ok();
  return InvalidArgument(path + ": record of " + std::to_string(size) +
                         " bytes is over the limit of " + std::to_string(max_record_bytes));
}

// Whether a whole record with a matching CRC starts at `offset` of `contents`; *length
// is its payload's size.
bool GoodRecordAt(const std::string& contents, size_t offset, uint32_t max_record_bytes,
                  uint32_t* length) {
  if (contents.size() - offset < kFrameBytes) return false;
  const char* frame = contents.data() + offset;
  *length = Get32(frame);
  return *length <= max_record_bytes && *length <= contents.size() - offset - kFrameBytes &&
         RecordCrc(frame, frame + kFrameBytes, *length) == Get32(frame + 4);
}

// Why the record at `offset` is not good (GoodRecordAt is false), for the error message.
std::string Damage(const std::string& contents, size_t offset, uint32_t max_record_bytes) {
  const size_t remaining = contents.size() - offset;
  if (remaining < kFrameBytes) {
    return std::to_string(remaining) + " bytes, too few for a record's frame";
  }
  const uint32_t length = Get32(contents.data() + offset);
  if (length > max_record_bytes) {
    return "length " + std::to_string(length) + " over the limit of " +
           std::to_string(max_record_bytes);
  }
  if (length > remaining - kFrameBytes) {
    return "length " + std::to_string(length) + " runs past the end of the file";
  }
  return "CRC mismatch";
}

struct Parsed {
  std::vector<std::string> records;
  uint64_t valid_bytes = 0;  // the header and the good records before any torn tail
};

// Reads the journal file `contents` of `path` (see the format in journal.h). A bad
// record is a torn tail when no good record starts anywhere after it (zeros never read
// as one) and its length is within the limit; otherwise it is damage.
Result<Parsed> Parse(const std::string& path, const std::string& contents,
                     uint32_t max_record_bytes) {
  if (contents.size() < kHeaderBytes) {
    return DataLoss(path + ": not a journal: " + std::to_string(contents.size()) +
                    " bytes, shorter than its " + std::to_string(kHeaderBytes) + "-byte header");
  }
  if (std::memcmp(contents.data(), kMagic, sizeof(kMagic)) != 0) {
    return DataLoss(path + ": not a journal: bad magic at byte 0");
  }
  const uint32_t version = Get32(contents.data() + 8);
  if (version != kVersion) {
    return DataLoss(path + ": journal version " + std::to_string(version) +
                    " at byte 8, this build reads version " + std::to_string(kVersion));
  }
  Parsed parsed;
  size_t offset = kHeaderBytes;
  uint32_t length = 0;
  while (offset < contents.size()) {
    if (GoodRecordAt(contents, offset, max_record_bytes, &length)) {
      parsed.records.emplace_back(contents.data() + offset + kFrameBytes, length);
      offset += kFrameBytes + length;
      continue;
    }
    if (contents.size() - offset >= kFrameBytes && length > max_record_bytes) {
      // Never torn: a write cut short leaves a length whole or not at all.
      return DataLoss(path + ": corrupt journal record at byte " + std::to_string(offset) + " (" +
                      Damage(contents, offset, max_record_bytes) + "); the file is left as it is");
    }
    for (size_t next = offset + 1; next + kFrameBytes <= contents.size(); ++next) {
      if (GoodRecordAt(contents, next, max_record_bytes, &length)) {
        return DataLoss(path + ": corrupt journal record at byte " + std::to_string(offset) +
                        " (" + Damage(contents, offset, max_record_bytes) +
                        ") before a good one at byte " + std::to_string(next) +
                        "; the file is left as it is");
      }
    }
    break;  // a torn tail: a write cut short, or blocks a crash left zero
  }
  parsed.valid_bytes = offset;
  return parsed;
}

std::string DirOf(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

}  // namespace

Journal::Journal(Env& env, std::string path, JournalOptions options)
    : env_(&env),
      path_(std::move(path)),
      tmp_path_(path_ + ".tmp"),
      dir_(DirOf(path_)),
      options_(options) {}

Result<JournalReplay> Journal::Open(Env& env, const std::string& path, JournalOptions options) {
  if (options.max_record_bytes == 0 || options.max_record_bytes > kMaxRecordLimit) {
    return InvalidArgument(path + ": max_record_bytes " +
                           std::to_string(options.max_record_bytes) + " is not in 1.." +
                           std::to_string(kMaxRecordLimit));
  }
  JournalReplay replay;
  std::unique_ptr<Journal> journal(new Journal(env, path, options));
  EMBER_RETURN_IF_ERROR(env.RemoveAll(journal->tmp_path_));
  {
    // No other thread yet; taken for the analysis (and in the documented order).
    MutexLock write_lock(&journal->write_mu_);
    if (!env.FileExists(path)) {
      bool renamed = false;
      EMBER_ASSIGN_OR_RETURN(journal->file_,
                             journal->WriteNewFile({}, &journal->write_offset_, &renamed));
      replay.created = true;
    } else {
      EMBER_ASSIGN_OR_RETURN(const std::string contents, env.ReadFile(path));
      EMBER_ASSIGN_OR_RETURN(Parsed parsed, Parse(path, contents, options.max_record_bytes));
      EMBER_ASSIGN_OR_RETURN(journal->file_, env.OpenWritableFile(path));
      if (parsed.valid_bytes < contents.size()) {
        EMBER_RETURN_IF_ERROR(journal->file_->Truncate(parsed.valid_bytes));
        EMBER_RETURN_IF_ERROR(journal->file_->Sync());
        replay.torn_bytes = contents.size() - parsed.valid_bytes;
      }
      journal->write_offset_ = parsed.valid_bytes;
      replay.records = std::move(parsed.records);
    }
    MutexLock lock(&journal->mu_);
    journal->file_bytes_ = journal->write_offset_;
  }
  if (options.group_interval_micros > 0) {
    journal->syncer_ = std::thread([j = journal.get()] { j->SyncLoop(); });
  }
  replay.journal = std::move(journal);
  return replay;
}

Journal::~Journal() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  work_.SignalAll();
  if (syncer_.joinable()) syncer_.join();
  (void)Sync();
  MutexLock write_lock(&write_mu_);
  if (file_ != nullptr) (void)file_->Close();
}

Result<uint64_t> Journal::Append(std::string_view record) {
  EMBER_RETURN_IF_ERROR(CheckRecordSize(path_, record.size(), options_.max_record_bytes));
  bool was_empty;
  uint64_t sequence;
  {
    MutexLock lock(&mu_);
    EMBER_RETURN_IF_ERROR(status_);
    was_empty = pending_.empty();
    AppendFramed(record, &pending_);
    file_bytes_ += kFrameBytes + record.size();
    sequence = ++last_sequence_;
  }
  if (was_empty) work_.Signal();
  return sequence;
}

Status Journal::Sync() {
  MutexLock write_lock(&write_mu_);
  return SyncLocked();
}

Status Journal::SyncLocked() {
  uint64_t sequence;
  {
    MutexLock lock(&mu_);
    EMBER_RETURN_IF_ERROR(status_);
    if (pending_.empty()) return Status::Ok();
    writing_.swap(pending_);
    pending_.clear();
    sequence = last_sequence_;
  }
  Status written = file_->WriteAt(write_offset_, writing_.data(), writing_.size());
  if (written.ok()) written = file_->SyncData();
  MutexLock lock(&mu_);
  if (!written.ok()) {
    Fail(written);
    return status_;
  }
  write_offset_ += writing_.size();
  durable_sequence_ = sequence;
  ++sync_count_;
  durable_changed_.SignalAll();
  return Status::Ok();
}

Status Journal::WaitDurable(uint64_t sequence, uint32_t timeout_ms) {
  MutexLock lock(&mu_);
  if (sequence > last_sequence_) {
    return InvalidArgument(path_ + ": record " + std::to_string(sequence) +
                           " was not appended (the last is " + std::to_string(last_sequence_) +
                           ")");
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (durable_sequence_ < sequence && status_.ok() &&
         durable_changed_.WaitUntil(&mu_, deadline)) {
  }
  if (durable_sequence_ >= sequence) return Status::Ok();
  if (!status_.ok()) return status_;
  return DeadlineExceeded(path_ + ": record " + std::to_string(sequence) + " not durable after " +
                          std::to_string(timeout_ms) + " ms (durable up to " +
                          std::to_string(durable_sequence_) + ")");
}

uint64_t Journal::durable_sequence() const {
  MutexLock lock(&mu_);
  return durable_sequence_;
}

uint64_t Journal::last_sequence() const {
  MutexLock lock(&mu_);
  return last_sequence_;
}

uint64_t Journal::file_bytes() const {
  MutexLock lock(&mu_);
  return file_bytes_;
}

uint64_t Journal::sync_count() const {
  MutexLock lock(&mu_);
  return sync_count_;
}

Status Journal::status() const {
  MutexLock lock(&mu_);
  return status_;
}

Status Journal::Rewrite(const std::vector<std::string>& records) {
  for (const std::string& record : records) {
    EMBER_RETURN_IF_ERROR(CheckRecordSize(path_, record.size(), options_.max_record_bytes));
  }
  MutexLock write_lock(&write_mu_);
  // Everything appended so far goes into the old file first, so that it is complete if
  // the rewrite fails before the rename.
  EMBER_RETURN_IF_ERROR(SyncLocked());
  uint64_t bytes = 0;
  bool renamed = false;
  Result<std::unique_ptr<WritableFile>> file = WriteNewFile(records, &bytes, &renamed);
  if (!file.ok()) {
    if (renamed) {
      MutexLock lock(&mu_);
      Fail(file.status());
    }
    return file.status();
  }
  (void)file_->Close();  // the old file, synced above and replaced
  file_ = std::move(file).value();
  write_offset_ = bytes;
  MutexLock lock(&mu_);
  file_bytes_ = bytes + pending_.size();
  return Status::Ok();
}

Result<std::unique_ptr<WritableFile>> Journal::WriteNewFile(
    const std::vector<std::string>& records, uint64_t* bytes, bool* renamed) {
  *renamed = false;
  std::string contents = Header();
  for (const std::string& record : records) AppendFramed(record, &contents);
  EMBER_RETURN_IF_ERROR(env_->RemoveAll(tmp_path_));
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> tmp, env_->CreateWritableFile(tmp_path_));
  // Every job's name and progress: the owner's only, whatever the umask.
  Status status = env_->RestrictToOwner(tmp_path_);
  if (status.ok()) status = tmp->WriteAt(0, contents.data(), contents.size());
  if (status.ok()) status = tmp->Sync();
  const Status closed = tmp->Close();
  if (status.ok()) status = closed;
  if (status.ok()) status = env_->Rename(tmp_path_, path_);
  if (!status.ok()) {
    (void)env_->RemoveAll(tmp_path_);
    return status;
  }
  *renamed = true;
  EMBER_RETURN_IF_ERROR(
      env_->SyncDir(dir_).WithContext(path_ + ": after renaming the new journal"));
  *bytes = contents.size();
  return env_->OpenWritableFile(path_);
}

void Journal::Fail(const Status& error) {
  if (status_.ok()) status_ = error;
  durable_changed_.SignalAll();
}

void Journal::SyncLoop() {
  using Clock = std::chrono::steady_clock;
  const auto interval = std::chrono::microseconds(options_.group_interval_micros);
  Clock::time_point last_sync = Clock::now() - interval;
  MutexLock lock(&mu_);
  while (true) {
    while (!stopping_ && (pending_.empty() || !status_.ok())) work_.Wait(&mu_);
    const Clock::time_point due = last_sync + interval;  // group what comes until then
    while (!stopping_ && work_.WaitUntil(&mu_, due)) {
    }
    if (stopping_) return;
    last_sync = Clock::now();
    MutexUnlock unlocked(&mu_);
    (void)Sync();  // a failure is sticky in status_
  }
}

}  // namespace ember::daemon
