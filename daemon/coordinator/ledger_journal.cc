#include "daemon/coordinator/ledger_journal.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <string_view>
#include <utility>

namespace ember::daemon {
namespace {

enum Tag : uint8_t {
  kFormat = 1,
  kJob = 2,
  kCommit = 3,
  kForget = 4,
  kFinished = 5,
  kConsumed = 6,
  kCommits = 7,
};

constexpr uint64_t kFormatVersion = 1;

std::string TagName(uint8_t tag) {
  switch (tag) {
    case kFormat: return "format";
    case kJob: return "job";
    case kCommit: return "commit";
    case kForget: return "forget";
    case kFinished: return "finished";
    case kConsumed: return "consumed";
    case kCommits: return "commits";
    default: return "tag " + std::to_string(tag);
  }
}

void PutVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>(value | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

void PutString(std::string_view value, std::string* out) {
  PutVarint(value.size(), out);
  out->append(value.data(), value.size());
}

// Reads a record's fields in order; each error names the field and the byte.
class Decoder {
 public:
  explicit Decoder(std::string_view in) : in_(in) {}

  Status Varint(const char* field, uint64_t* value) {
    *value = 0;
    const size_t start = pos_;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= in_.size()) return Truncated(field, start);
      const uint8_t byte = static_cast<uint8_t>(in_[pos_++]);
      if (shift == 63 && byte > 1) break;
      *value |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) return Status::Ok();
    }
    return InvalidArgument(std::string(field) + ": varint at byte " + std::to_string(start) +
                           " is over 64 bits");
  }

  Status Uint32(const char* field, uint32_t* value) {
    uint64_t wide = 0;
    EMBER_RETURN_IF_ERROR(Varint(field, &wide));
    if (wide > std::numeric_limits<uint32_t>::max())
      return InvalidArgument(std::string(field) + ": " + std::to_string(wide) +
                             " is over 32 bits");
    *value = static_cast<uint32_t>(wide);
    return Status::Ok();
  }

  Status Byte(const char* field, uint8_t* value) {
    if (pos_ >= in_.size()) return Truncated(field, pos_);
    *value = static_cast<uint8_t>(in_[pos_++]);
    return Status::Ok();
  }

  Status String(const char* field, std::string* value) {
    uint64_t size = 0;
    const size_t start = pos_;
    EMBER_RETURN_IF_ERROR(Varint(field, &size));
    if (size > in_.size() - pos_) return Truncated(field, start);
    value->assign(in_.data() + pos_, size);
    pos_ += size;
    return Status::Ok();
  }

  // A count of list entries, each at least one byte: bounded by what is left.
  Status Count(const char* field, uint64_t* count) {
    const size_t start = pos_;
    EMBER_RETURN_IF_ERROR(Varint(field, count));
    if (*count > in_.size() - pos_)
      return InvalidArgument(std::string(field) + ": " + std::to_string(*count) +
                             " entries at byte " + std::to_string(start) +
                             " do not fit in the record");
    return Status::Ok();
  }

  bool AtEnd() const { return pos_ == in_.size(); }

  // OK if every byte was read.
  Status Finish() const {
    if (pos_ == in_.size()) return Status::Ok();
    return InvalidArgument(std::to_string(in_.size() - pos_) + " bytes left over at byte " +
                           std::to_string(pos_));
  }

 private:
  Status Truncated(const char* field, size_t at) const {
    return InvalidArgument(std::string(field) + ": record ends at byte " +
                           std::to_string(in_.size()) + " in the field starting at byte " +
                           std::to_string(at));
  }

  std::string_view in_;
  size_t pos_ = 0;
};

void EncodeFormat(std::string* out) {
  out->push_back(static_cast<char>(kFormat));
  PutVarint(kFormatVersion, out);
}

void EncodeJob(uint64_t id, const std::string& job, const JobParams& p, std::string* out) {
  out->push_back(static_cast<char>(kJob));
  PutVarint(id, out);
  PutString(job, out);
  PutString(p.dataset, out);
  PutVarint(p.num_samples, out);
  PutVarint(p.batch_size, out);
  PutVarint(p.world_size, out);
  PutVarint(p.seed, out);
  out->push_back(p.shuffle ? 1 : 0);
  PutVarint(p.start_epoch, out);
  PutVarint(p.start_position, out);
  PutVarint(p.fingerprint, out);
  // The owner, last: records written before owners were kept end before it.
  PutVarint(p.owner.uid, out);
  out->push_back(static_cast<char>((p.owner.team ? 1 : 0) | (p.owner.privileged ? 2 : 0)));
  // The shuffle's shape, after the owner: records written before it end before it.
  PutVarint(p.shuffle_shape.digest, out);  // the blocks come with the job's ranks
  PutVarint(p.shuffle_shape.window, out);
}

Status DecodeJob(Decoder& in, uint64_t* id, std::string* job, JobParams* p) {
  EMBER_RETURN_IF_ERROR(in.Varint("id", id));
  EMBER_RETURN_IF_ERROR(in.String("name", job));
  EMBER_RETURN_IF_ERROR(in.String("dataset", &p->dataset));
  EMBER_RETURN_IF_ERROR(in.Varint("num_samples", &p->num_samples));
  EMBER_RETURN_IF_ERROR(in.Uint32("batch_size", &p->batch_size));
  EMBER_RETURN_IF_ERROR(in.Uint32("world_size", &p->world_size));
  EMBER_RETURN_IF_ERROR(in.Varint("seed", &p->seed));
  uint8_t shuffle = 0;
  EMBER_RETURN_IF_ERROR(in.Byte("shuffle", &shuffle));
  if (shuffle > 1) return InvalidArgument("shuffle: " + std::to_string(shuffle) + " is not 0 or 1");
  p->shuffle = shuffle == 1;
  EMBER_RETURN_IF_ERROR(in.Varint("start_epoch", &p->start_epoch));
  EMBER_RETURN_IF_ERROR(in.Varint("start_position", &p->start_position));
  EMBER_RETURN_IF_ERROR(in.Varint("fingerprint", &p->fingerprint));
  if (in.AtEnd()) return Status::Ok();  // no owner: open to all (principal.h)
  EMBER_RETURN_IF_ERROR(in.Uint32("owner uid", &p->owner.uid));
  uint8_t flags = 0;
  EMBER_RETURN_IF_ERROR(in.Byte("owner flags", &flags));
  if (flags > 3) return InvalidArgument("owner flags: " + std::to_string(flags) + " is over 3");
  p->owner.team = (flags & 1) != 0;
  p->owner.privileged = (flags & 2) != 0;
  if (in.AtEnd()) return Status::Ok();  // shuffled over the whole set
  EMBER_RETURN_IF_ERROR(in.Varint("shuffle blocks digest", &p->shuffle_shape.digest));
  EMBER_RETURN_IF_ERROR(in.Uint32("shuffle window", &p->shuffle_shape.window));
  if (p->shuffle_shape.window == 0) return InvalidArgument("shuffle window: 0");
  return Status::Ok();
}

// Appends records of `tag` (kFinished or kConsumed) to `out`: each `head` (the fields
// before the list, from the id on) followed by up to `per_record` entries of `list`;
// at least one record, also for an empty list.
void EncodeListRecords(Tag tag, const std::string& head, const std::vector<uint64_t>& list,
                       size_t per_record, std::vector<std::string>* out) {
  size_t next = 0;
  do {
    const size_t n = std::min(per_record, list.size() - next);
    std::string record(1, static_cast<char>(tag));
    record += head;
    PutVarint(n, &record);
    for (size_t i = next; i < next + n; ++i) PutVarint(list[i], &record);
    out->push_back(std::move(record));
    next += n;
  } while (next < list.size());
}

// Applies a journal's records to a ledger, one function per record type; keeps which job
// each live id names.
class RecordReplayer {
 public:
  RecordReplayer(JobLedger& ledger, LedgerReplay& counts) : ledger_(ledger), counts_(counts) {}

  // Applies record `index`, whose tag is read into *tag.
  Status Apply(size_t index, const std::string& record, uint8_t* tag) {
    Decoder in(record);
    EMBER_RETURN_IF_ERROR(in.Byte("tag", tag));
    if ((index == 0) != (*tag == kFormat))
      return InvalidArgument(index == 0 ? "the first record is not a format record"
                                        : "a format record after the first");
    switch (*tag) {
      case kFormat: return Format(in);
      case kJob: return Job(in);
      case kCommit: return Commit(in);
      case kCommits: return Commits(in);
      case kForget: return Forget(in);
      case kFinished: return Finished(in);
      case kConsumed: return Consumed(in);
      default: return InvalidArgument("unknown record tag " + std::to_string(*tag));
    }
  }

  const std::unordered_map<uint64_t, std::string>& live_jobs() const { return names_; }
  uint64_t max_id() const { return max_id_; }

 private:
  Result<std::string> NameOf(uint64_t id) const {
    auto it = names_.find(id);
    if (it == names_.end()) return NotFound("job id " + std::to_string(id) + " is not live");
    return it->second;
  }
  // The job named by the record's next field, an id.
  Result<std::string> ReadJob(Decoder& in) const {
    uint64_t id = 0;
    EMBER_RETURN_IF_ERROR(in.Varint("id", &id));
    return NameOf(id);
  }
  static Status CheckBelowMax(const char* what, uint64_t value) {
    if (value == std::numeric_limits<uint64_t>::max())
      return InvalidArgument(std::string(what) + " " + std::to_string(value) +
                             " is out of range");
    return Status::Ok();
  }

  Status Format(Decoder& in) {
    uint64_t version = 0;
    EMBER_RETURN_IF_ERROR(in.Varint("version", &version));
    if (version != kFormatVersion)
      return InvalidArgument("version " + std::to_string(version) + ", this build reads version " +
                             std::to_string(kFormatVersion));
    return in.Finish();
  }

  // A job created (or its params again, under a new id after a compaction).
  Status Job(Decoder& in) {
    uint64_t id = 0;
    std::string job;
    JobParams params;
    EMBER_RETURN_IF_ERROR(DecodeJob(in, &id, &job, &params));
    EMBER_RETURN_IF_ERROR(in.Finish());
    auto it = names_.find(id);
    if (it != names_.end() && it->second != job)
      return InvalidArgument("job id " + std::to_string(id) + " already names job '" +
                             it->second + "'");
    for (auto other = names_.begin(); other != names_.end(); ++other) {
      if (other->second == job) {
        names_.erase(other);
        break;
      }
    }
    EMBER_RETURN_IF_ERROR(ledger_.ReplayJob(job, params));
    names_[id] = job;
    max_id_ = std::max(max_id_, id);
    return Status::Ok();
  }

  // One rank's commit of one batch.
  Status Commit(Decoder& in) {
    EMBER_ASSIGN_OR_RETURN(const std::string job, ReadJob(in));
    uint32_t rank = 0;
    uint64_t epoch = 0, batch = 0;
    EMBER_RETURN_IF_ERROR(in.Uint32("rank", &rank));
    EMBER_RETURN_IF_ERROR(in.Varint("epoch", &epoch));
    EMBER_RETURN_IF_ERROR(in.Varint("batch", &batch));
    EMBER_RETURN_IF_ERROR(in.Finish());
    EMBER_RETURN_IF_ERROR(CheckBelowMax("batch", batch));
    ++counts_.commits;
    return ledger_.ReplayConsumed(job, rank, epoch, batch, batch + 1);
  }

  // One step's commits by runs of ranks.
  Status Commits(Decoder& in) {
    EMBER_ASSIGN_OR_RETURN(const std::string job, ReadJob(in));
    uint64_t epoch = 0, batch = 0, runs = 0;
    EMBER_RETURN_IF_ERROR(in.Varint("epoch", &epoch));
    EMBER_RETURN_IF_ERROR(in.Varint("batch", &batch));
    EMBER_RETURN_IF_ERROR(in.Count("runs", &runs));
    EMBER_RETURN_IF_ERROR(CheckBelowMax("batch", batch));
    for (uint64_t i = 0; i < runs; ++i) {
      uint32_t first = 0, count = 0;
      EMBER_RETURN_IF_ERROR(in.Uint32("first rank", &first));
      EMBER_RETURN_IF_ERROR(in.Uint32("rank count", &count));
      if (count == 0 || uint64_t{first} + count > std::numeric_limits<uint32_t>::max())
        return InvalidArgument("ranks " + std::to_string(first) + " + " +
                               std::to_string(count) + " are out of range");
      for (uint32_t rank = first; rank < first + count; ++rank) {
        ++counts_.commits;
        EMBER_RETURN_IF_ERROR(ledger_.ReplayConsumed(job, rank, epoch, batch, batch + 1));
      }
    }
    return in.Finish();
  }

  Status Forget(Decoder& in) {
    uint64_t id = 0;
    EMBER_RETURN_IF_ERROR(in.Varint("id", &id));
    EMBER_RETURN_IF_ERROR(in.Finish());
    EMBER_ASSIGN_OR_RETURN(const std::string job, NameOf(id));
    ledger_.ReplayForget(job);
    names_.erase(id);
    return Status::Ok();
  }

  // Epochs finished: all below a watermark, and some above it one by one.
  Status Finished(Decoder& in) {
    EMBER_ASSIGN_OR_RETURN(const std::string job, ReadJob(in));
    uint64_t below = 0, count = 0;
    EMBER_RETURN_IF_ERROR(in.Varint("below", &below));
    EMBER_RETURN_IF_ERROR(in.Count("count", &count));
    EMBER_RETURN_IF_ERROR(ledger_.ReplayEpochsFinished(job, 0, below));
    for (uint64_t i = 0; i < count; ++i) {
      uint64_t epoch = 0;
      EMBER_RETURN_IF_ERROR(in.Varint("epoch", &epoch));
      EMBER_RETURN_IF_ERROR(CheckBelowMax("epoch", epoch));
      EMBER_RETURN_IF_ERROR(ledger_.ReplayEpochsFinished(job, epoch, epoch + 1));
    }
    return in.Finish();
  }

  // A rank's batches of an epoch consumed: all below a watermark, and some above it.
  Status Consumed(Decoder& in) {
    EMBER_ASSIGN_OR_RETURN(const std::string job, ReadJob(in));
    uint32_t rank = 0;
    uint64_t epoch = 0, below = 0, count = 0;
    EMBER_RETURN_IF_ERROR(in.Varint("epoch", &epoch));
    EMBER_RETURN_IF_ERROR(in.Uint32("rank", &rank));
    EMBER_RETURN_IF_ERROR(in.Varint("below", &below));
    EMBER_RETURN_IF_ERROR(in.Count("count", &count));
    EMBER_RETURN_IF_ERROR(ledger_.ReplayConsumed(job, rank, epoch, 0, below));
    for (uint64_t i = 0; i < count; ++i) {
      uint64_t batch = 0;
      EMBER_RETURN_IF_ERROR(in.Varint("batch", &batch));
      EMBER_RETURN_IF_ERROR(CheckBelowMax("batch", batch));
      EMBER_RETURN_IF_ERROR(ledger_.ReplayConsumed(job, rank, epoch, batch, batch + 1));
    }
    return in.Finish();
  }

  JobLedger& ledger_;
  LedgerReplay& counts_;
  std::unordered_map<uint64_t, std::string> names_;  // live jobs by id
  uint64_t max_id_ = 0;
};

}  // namespace

LedgerJournal::LedgerJournal(JobLedger* ledger, std::unique_ptr<Journal> journal,
                             LedgerJournalOptions options)
    : ledger_(ledger), journal_(std::move(journal)), options_(options) {}

Result<LedgerReplay> LedgerJournal::Open(Env& env, const std::string& path, JobLedger* ledger,
                                         LedgerJournalOptions options) {
  if (ledger == nullptr) return InvalidArgument(path + ": no ledger to replay into");
  EMBER_ASSIGN_OR_RETURN(JournalReplay opened, Journal::Open(env, path, options.journal));
  LedgerReplay replay;
  replay.records = opened.records.size();
  replay.torn_bytes = opened.torn_bytes;
  replay.created = opened.created;
  std::unique_ptr<LedgerJournal> journal(
      new LedgerJournal(ledger, std::move(opened.journal), options));
  EMBER_RETURN_IF_ERROR(journal->Replay(opened.records, &replay));
  if (opened.records.empty()) {
    std::string format;
    EncodeFormat(&format);
    EMBER_RETURN_IF_ERROR(journal->journal_->Append(format).status());
  }
  ledger->SetObserver(journal.get());
  if (options.compact_min_bytes > 0)
    journal->compactor_ = std::thread([j = journal.get()] { j->CompactLoop(); });
  replay.journal = std::move(journal);
  return replay;
}

LedgerJournal::~LedgerJournal() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  compact_wanted_.SignalAll();
  if (compactor_.joinable()) compactor_.join();
  ledger_->SetObserver(nullptr);
}

Status LedgerJournal::Replay(const std::vector<std::string>& records, LedgerReplay* replay) {
  RecordReplayer replayer(*ledger_, *replay);
  for (size_t i = 0; i < records.size(); ++i) {
    uint8_t tag = 0;
    Status applied = replayer.Apply(i, records[i], &tag);
    if (!applied.ok())
      return DataLoss(journal_->path() + ": record " + std::to_string(i) + " (" +
                      TagName(tag) + "): " + applied.message());
  }
  MutexLock lock(&mu_);
  for (const auto& [id, job] : replayer.live_jobs()) ids_[job] = id;
  next_id_ = replayer.max_id() + 1;
  replay->jobs = replayer.live_jobs().size();
  return Status::Ok();
}

uint64_t LedgerJournal::IdOf(const std::string& job) {
  auto [it, added] = ids_.try_emplace(job, next_id_);
  if (added) ++next_id_;
  return it->second;
}

void LedgerJournal::AppendLocked(const std::string& record) {
  if (!status_.ok()) return;
  if (diverting_) {
    held_.push_back(record);
    return;
  }
  Result<uint64_t> appended = journal_->Append(record);
  if (!appended.ok()) {
    Fail(appended.status());
    return;
  }
  if (options_.compact_min_bytes == 0 || compact_requested_) return;
  const uint64_t bytes = journal_->file_bytes();
  if (bytes >= options_.compact_min_bytes && bytes >= options_.compact_factor * compacted_bytes_) {
    compact_requested_ = true;
    compact_wanted_.Signal();
  }
}

void LedgerJournal::JobCreated(const std::string& job, const JobParams& params) {
  MutexLock lock(&mu_);
  if (!status_.ok()) return;
  scratch_.clear();
  EncodeJob(IdOf(job), job, params, &scratch_);
  AppendLocked(scratch_);
}

void LedgerJournal::BatchCommitted(const std::string& job, uint64_t epoch, uint64_t batch,
                                   const std::vector<uint32_t>& ranks) {
  MutexLock lock(&mu_);
  if (!status_.ok() || ranks.empty()) return;
  auto it = ids_.find(job);
  if (it == ids_.end()) {
    Fail(Internal(journal_->path() + ": a commit for job '" + job +
                  "', which was never journaled"));
    return;
  }
  scratch_.clear();
  if (ranks.size() == 1) {
    scratch_.push_back(static_cast<char>(kCommit));
    PutVarint(it->second, &scratch_);
    PutVarint(ranks[0], &scratch_);
    PutVarint(epoch, &scratch_);
    PutVarint(batch, &scratch_);
    AppendLocked(scratch_);
    return;
  }
  // Runs of consecutive ranks: a node's ranks are usually one run.
  std::vector<std::pair<uint32_t, uint32_t>> runs;  // first, count
  for (uint32_t rank : ranks) {
    if (!runs.empty() && runs.back().first + runs.back().second == rank)
      ++runs.back().second;
    else
      runs.emplace_back(rank, 1);
  }
  scratch_.push_back(static_cast<char>(kCommits));
  PutVarint(it->second, &scratch_);
  PutVarint(epoch, &scratch_);
  PutVarint(batch, &scratch_);
  PutVarint(runs.size(), &scratch_);
  for (const auto& [first, count] : runs) {
    PutVarint(first, &scratch_);
    PutVarint(count, &scratch_);
  }
  AppendLocked(scratch_);
}

void LedgerJournal::JobForgotten(const std::string& job) {
  MutexLock lock(&mu_);
  if (!status_.ok()) return;
  auto it = ids_.find(job);
  if (it == ids_.end()) return;
  scratch_.clear();
  scratch_.push_back(static_cast<char>(kForget));
  PutVarint(it->second, &scratch_);
  ids_.erase(it);
  AppendLocked(scratch_);
}

Status LedgerJournal::Compact() {
  MutexLock one_at_a_time(&compact_mu_);
  std::vector<std::string> records;
  bool diverted = false;
  ledger_->Snapshot([&](const std::vector<JobSnapshot>& jobs) {
    MutexLock lock(&mu_);
    if (!status_.ok()) return;
    const uint32_t max_bytes = options_.journal.max_record_bytes;
    // A varint takes at most 10 bytes; the fields before a list far less than 64.
    const size_t per_record = max_bytes > 74 ? (max_bytes - 64) / 10 : 1;
    records.emplace_back();
    EncodeFormat(&records.back());
    for (const JobSnapshot& s : jobs) {
      const uint64_t id = IdOf(s.job);
      records.emplace_back();
      EncodeJob(id, s.job, s.params, &records.back());
      if (s.finished_below != s.params.start_epoch || !s.finished_above.empty()) {
        std::string head;
        PutVarint(id, &head);
        PutVarint(s.finished_below, &head);
        EncodeListRecords(kFinished, head, s.finished_above, per_record, &records);
      }
      for (const JobSnapshot::Consumed& c : s.consumed) {
        std::string head;
        PutVarint(id, &head);
        PutVarint(c.epoch, &head);
        PutVarint(c.rank, &head);
        PutVarint(c.done_below, &head);
        EncodeListRecords(kConsumed, head, c.done_above, per_record, &records);
      }
    }
    // Changes from here on wait in held_ until the snapshot replaced the file.
    diverting_ = true;
    diverted = true;
  });
  Status rewritten = diverted ? journal_->Rewrite(records) : status();
  MutexLock lock(&mu_);
  compact_requested_ = false;
  if (!diverted) return rewritten;
  diverting_ = false;
  // After a failure too: the next try waits until the file has grown again.
  compacted_bytes_ = journal_->file_bytes();
  if (rewritten.ok()) {
    ++compactions_;
  } else if (!journal_->status().ok()) {
    Fail(rewritten);
  } else {
    spdlog::warn("{}: compaction failed, appending to the old file: {}", journal_->path(),
                 rewritten.ToString());
  }
  std::vector<std::string> held;
  held.swap(held_);
  for (const std::string& record : held) AppendLocked(record);
  return rewritten;
}

Status LedgerJournal::status() const {
  MutexLock lock(&mu_);
  return status_;
}

uint64_t LedgerJournal::compactions() const {
  MutexLock lock(&mu_);
  return compactions_;
}

void LedgerJournal::Fail(const Status& error) {
  if (!status_.ok()) return;
  status_ = error;
  spdlog::error("{}: job progress is no longer journaled (a restart forgets what follows): {}",
                journal_->path(), error.ToString());
}

void LedgerJournal::CompactLoop() {
  MutexLock lock(&mu_);
  while (true) {
    while (!stopping_ && !compact_requested_) compact_wanted_.Wait(&mu_);
    if (stopping_) return;
    MutexUnlock unlocked(&mu_);
    (void)Compact();  // failures are logged, or sticky in status_
  }
}

}  // namespace ember::daemon
