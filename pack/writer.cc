#include "pack/writer.h"

#include "common/paths.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "pack/packed_dataset.h"

namespace ember::pack {

namespace {

constexpr size_t kWriteBufferBytes = size_t{1} << 20;
// Verification asks the kernel for this many records ahead of the one it checks.
constexpr uint64_t kVerifyReadahead = 256;

std::string ParentDir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Makes a rename in `dir` durable. Best effort: it runs after the dataset is in place,
// where failing the pack could no longer undo it (every file was already fsynced).
void SyncParent(Env& env, const std::string& dir) { (void)env.SyncDir(dir); }

// Best effort: runs on the way out of a pack that failed or of one already in place.
void RemoveTree(Env& env, const std::string& path) { (void)env.RemoveAll(path); }

// True if `dir` holds a file named "manifest" that starts with the manifest magic.
bool IsPackedDataset(Env& env, const std::string& dir) {
  Result<std::string> manifest = env.ReadFile(dir + "/" + kManifestName);
  return manifest.ok() && manifest->size() >= 8 &&
         std::memcmp(manifest->data(), kManifestMagic, 8) == 0;
}

bool IsEmptyDirectory(Env& env, const std::string& dir) {
  Result<std::vector<std::string>> names = env.ListDir(dir);
  return names.ok() && names->empty();
}

}  // namespace

// A shard file being written front to back through a buffer, then finished with a
// positioned write of its header. Errors (from the Env) name the file.
class PackWriter::ShardFile {
 public:
  static Result<std::unique_ptr<ShardFile>> Create(Env& env, const std::string& path) {
    EMBER_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, env.CreateWritableFile(path));
    return std::unique_ptr<ShardFile>(new ShardFile(std::move(file)));
  }

  const std::string& path() const { return file_->path(); }
  uint64_t position() const { return position_; }

  Status Append(const void* data, size_t n) {
    if (buffer_.size() + n > kWriteBufferBytes) EMBER_RETURN_IF_ERROR(Flush());
    if (n >= kWriteBufferBytes) {
      EMBER_RETURN_IF_ERROR(WriteAt(position_, data, n));
    } else {
      buffer_.append(static_cast<const char*>(data), n);
    }
    position_ += n;
    return Status::Ok();
  }

  Status PadTo(uint64_t offset) {
    static const char kZeros[4096] = {};
    while (position_ < offset) {
      EMBER_RETURN_IF_ERROR(
          Append(kZeros, static_cast<size_t>(std::min<uint64_t>(sizeof(kZeros), offset - position_))));
    }
    return Status::Ok();
  }

  // Writes what is buffered at its place in the file.
  Status Flush() {
    if (buffer_.empty()) return Status::Ok();
    EMBER_RETURN_IF_ERROR(WriteAt(position_ - buffer_.size(), buffer_.data(), buffer_.size()));
    buffer_.clear();
    return Status::Ok();
  }

  Status WriteAt(uint64_t offset, const void* data, size_t n) {
    return file_->WriteAt(offset, data, n);
  }

  // Flushes, fsyncs, drops the file from the page cache (so that verification reads it
  // back from the disk and packing does not evict everything else) and closes.
  Status SyncAndClose() {
    EMBER_RETURN_IF_ERROR(Flush());
    EMBER_RETURN_IF_ERROR(file_->Sync());
    file_->DontNeed();
    return file_->Close();
  }

 private:
  explicit ShardFile(std::unique_ptr<WritableFile> file) : file_(std::move(file)) {
    buffer_.reserve(kWriteBufferBytes);
  }

  const std::unique_ptr<WritableFile> file_;
  uint64_t position_ = 0;  // logical end of the file, buffered bytes included
  std::string buffer_;     // bytes [position_ - buffer_.size(), position_)
};

Result<std::unique_ptr<PackWriter>> PackWriter::Create(Env& env, const std::string& out_dir,
                                                      const PackOptions& options,
                                                      const std::string& source_format,
                                                      std::vector<std::string> class_names) {
  const uint32_t alignment = options.record_alignment;
  if (alignment < kMinRecordAlignment || alignment > kMaxRecordAlignment ||
      (alignment & (alignment - 1)) != 0) {
    return InvalidArgument("record alignment " + std::to_string(alignment) +
                           " is not a power of two in " +
                           std::to_string(kMinRecordAlignment) + ".." +
                           std::to_string(kMaxRecordAlignment));
  }
  if (options.shard_bytes == 0) return InvalidArgument("shard size must be positive");
  if (class_names.size() > UINT32_MAX) return InvalidArgument("too many classes");
  EMBER_ASSIGN_OR_RETURN(std::string out, AbsolutePath(out_dir, "the output directory"));
  if (out == "/") return InvalidArgument("the output directory cannot be /");
  if (env.FileExists(out)) {
    if (!options.overwrite) {
      return AlreadyExists(out + ": already exists (remove it, or overwrite to replace it)");
    }
    if (!env.IsDirectory(out)) {
      return FailedPrecondition(out + ": exists and is not a directory; refusing to replace it");
    }
    if (!IsPackedDataset(env, out) && !IsEmptyDirectory(env, out)) {
      return FailedPrecondition(out + ": exists and is not a packed dataset (no manifest); "
                                      "refusing to replace it");
    }
  }
  const std::string temp = out + ".tmp-" + std::to_string(getpid());
  if (env.FileExists(temp)) {  // left by a crashed pack with our pid
    EMBER_RETURN_IF_ERROR(env.RemoveAll(temp));
  }
  EMBER_RETURN_IF_ERROR(env.CreateDirs(temp));

  Manifest manifest;
  manifest.source_format = source_format;
  manifest.class_names = std::move(class_names);
  std::unique_ptr<PackWriter> writer(
      new PackWriter(env, options, out, temp, std::move(manifest)));
  writer->summary_.out_dir = out;
  writer->summary_.classes = writer->manifest_.class_names.size();
  return writer;
}

PackWriter::PackWriter(Env& env, PackOptions options, std::string out_dir, std::string temp_dir,
                       Manifest manifest)
    : env_(env),
      options_(std::move(options)),
      out_dir_(std::move(out_dir)),
      temp_dir_(std::move(temp_dir)),
      manifest_(std::move(manifest)) {}

PackWriter::~PackWriter() {
  if (!done_) {
    shard_.reset();
    RemoveTree(env_, temp_dir_);
  }
}

Status PackWriter::Fail(Status status) {
  if (status_.ok()) status_ = status;
  if (!done_) {
    shard_.reset();
    RemoveTree(env_, temp_dir_);
    done_ = true;
  }
  return status_;
}

Status PackWriter::StartShard() {
  const uint32_t number = static_cast<uint32_t>(manifest_.shards.size());
  EMBER_ASSIGN_OR_RETURN(
      shard_, ShardFile::Create(env_, temp_dir_ + "/" + ShardFileName(number)));
  entries_.clear();
  paths_.clear();
  // The header is written last; until then the file starts with zeros (no valid magic).
  return shard_->PadTo(kShardHeaderBytes);
}

Status PackWriter::FinishShard() {
  ShardFile& file = *shard_;
  ShardHeader header;
  header.record_count = entries_.size();
  header.record_alignment = options_.record_alignment;
  header.shard_number = static_cast<uint32_t>(manifest_.shards.size());
  header.index_offset = AlignUp(file.position(), 8);
  EMBER_RETURN_IF_ERROR(file.PadTo(header.index_offset));

  std::string index(entries_.size() * kIndexEntryBytes, '\0');
  for (size_t i = 0; i < entries_.size(); ++i) {
    EncodeIndexEntry(entries_[i],
                             reinterpret_cast<uint8_t*>(&index[i * kIndexEntryBytes]));
  }
  index += paths_;
  header.index_bytes = index.size();
  header.index_crc = Crc32(index.data(), index.size());
  EMBER_RETURN_IF_ERROR(file.Append(index.data(), index.size()));
  EMBER_RETURN_IF_ERROR(file.Flush());

  uint8_t header_bytes[kShardHeaderBytes];
  EncodeShardHeader(header, header_bytes);
  EMBER_RETURN_IF_ERROR(file.WriteAt(0, header_bytes, sizeof(header_bytes)));
  const uint64_t file_bytes = file.position();
  EMBER_RETURN_IF_ERROR(file.SyncAndClose());

  ManifestShard entry;
  entry.file_name = ShardFileName(header.shard_number);
  entry.record_count = header.record_count;
  entry.file_bytes = file_bytes;
  entry.header_crc = Crc32(header_bytes, sizeof(header_bytes));
  manifest_.shards.push_back(std::move(entry));
  summary_.file_bytes += file_bytes;
  shard_.reset();
  entries_.clear();
  paths_.clear();
  return Status::Ok();
}

Status PackWriter::Add(const uint8_t* data, size_t size, int64_t label, const std::string& path) {
  if (done_) return status_.ok() ? FailedPrecondition("the pack was already committed") : status_;
  const size_t class_count = manifest_.class_names.size();
  if (class_count > 0 && (label < 0 || static_cast<uint64_t>(label) >= class_count)) {
    return Fail(InvalidArgument(path + ": label " + std::to_string(label) +
                                " is out of range: there are " + std::to_string(class_count) +
                                " classes"));
  }
  if (path.size() > UINT32_MAX) return Fail(InvalidArgument("a record path is too long"));

  const uint64_t alignment = options_.record_alignment;
  if (shard_ != nullptr && !entries_.empty() &&
      AlignUp(shard_->position(), alignment) + size > options_.shard_bytes) {
    Status status = FinishShard();
    if (!status.ok()) return Fail(status);
  }
  if (shard_ == nullptr) {
    Status status = StartShard();
    if (!status.ok()) return Fail(status);
  }
  IndexEntry entry;
  entry.offset = AlignUp(shard_->position(), alignment);
  entry.size = size;
  entry.label = label;
  entry.path_offset = paths_.size();
  entry.path_bytes = static_cast<uint32_t>(path.size());
  entry.crc = Crc32(data, size);
  Status status = shard_->PadTo(entry.offset);
  if (status.ok()) status = shard_->Append(data, size);
  if (!status.ok()) return Fail(status.WithContext("record " + path));
  entries_.push_back(entry);
  paths_ += path;
  ++summary_.records;
  summary_.record_bytes += size;
  return Status::Ok();
}

Status PackWriter::Verify() {
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<PackedDataset> dataset,
                         PackedDataset::Open(env_, temp_dir_));
  if (dataset->count() != summary_.records) {
    return DataLoss(temp_dir_ + ": reopened, it holds " + std::to_string(dataset->count()) +
                    " records; " + std::to_string(summary_.records) + " were written");
  }
  const uint64_t count = dataset->count();
  uint64_t prefetched = 0;
  std::vector<uint64_t> ids;
  for (uint64_t id = 0; id < count; ++id) {
    if (id == prefetched) {
      ids.clear();
      for (uint64_t i = id; i < std::min(count, id + kVerifyReadahead); ++i) ids.push_back(i);
      dataset->Prefetch(ids.data(), ids.size());
      prefetched = id + ids.size();
    }
    EMBER_RETURN_IF_ERROR(dataset->Verify(id).WithContext("verifying the pack"));
    if (options_.progress) options_.progress({PackProgress::Stage::kVerify, id + 1, count});
  }
  return Status::Ok();
}

Status PackWriter::MoveIntoPlace() {
  const std::string parent = ParentDir(out_dir_);
  const bool replace = options_.overwrite && env_.FileExists(out_dir_);
  if (!replace) {
    Status status = env_.RenameNoReplace(temp_dir_, out_dir_);
    if (status.code() == StatusCode::kAlreadyExists) {
      return AlreadyExists(out_dir_ + ": appeared while packing; left as it is");
    }
    EMBER_RETURN_IF_ERROR(status);
    SyncParent(env_, parent);
    return Status::Ok();
  }
  EMBER_ASSIGN_OR_RETURN(const bool exchanged, env_.Exchange(temp_dir_, out_dir_));
  if (exchanged) {
    SyncParent(env_, parent);
    RemoveTree(env_, temp_dir_);  // now the old dataset; the new one is in place either way
    return Status::Ok();
  }
  // No atomic exchange here: move the old dataset aside, the new one in, then drop the
  // old one. A crash in between leaves the old dataset at "<out_dir>.old-<pid>".
  const std::string old = out_dir_ + ".old-" + std::to_string(getpid());
  RemoveTree(env_, old);
  EMBER_RETURN_IF_ERROR(env_.Rename(out_dir_, old));
  Status status = env_.Rename(temp_dir_, out_dir_);
  if (!status.ok()) {
    (void)env_.Rename(old, out_dir_);
    return status;
  }
  SyncParent(env_, parent);
  RemoveTree(env_, old);
  return Status::Ok();
}

Result<PackSummary> PackWriter::Commit() {
  if (done_) return status_.ok() ? FailedPrecondition("the pack was already committed") : status_;
  if (shard_ != nullptr) {
    Status status = FinishShard();
    if (!status.ok()) return Fail(status);
  }
  manifest_.record_count = summary_.records;
  const std::string manifest = EncodeManifest(manifest_);
  Status status = env_.WriteFileAtomic(temp_dir_ + "/" + kManifestName, manifest);
  if (!status.ok()) return Fail(status);
  summary_.file_bytes += manifest.size();
  summary_.shards = manifest_.shards.size();
  status = Verify();
  if (!status.ok()) return Fail(status);
  status = MoveIntoPlace();
  if (!status.ok()) return Fail(status);
  done_ = true;
  return summary_;
}

}  // namespace ember::pack
