#include "daemon/data/image/imagefolder.h"

#include <cstring>
#include <deque>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "daemon/data/image/decode.h"
#include "daemon/data/image/pipeline.h"
#include "pack/imagefolder_pack.h"

namespace ember::daemon {

namespace {

// Bigger files are refused as corrupt samples rather than read into memory.
constexpr uint64_t kMaxFileBytes = uint64_t{1} << 30;
// A thread keeps at most this much file buffer between samples.
constexpr size_t kMaxRetainedFileBuffer = size_t{32} << 20;

// The files of a listing in one buffer of relative paths (no string per file: a
// million-file dataset stays small for the life of the source).
class CompactListing {
 public:
  explicit CompactListing(const pack::ImageFolderListing& listing) : root_(listing.root) {
    offsets_.reserve(listing.files.size() + 1);
    offsets_.push_back(0);
    labels_.reserve(listing.files.size());
    for (const pack::ImageFolderListing::File& file : listing.files) {
      names_ += file.path;
      offsets_.push_back(names_.size());
      labels_.push_back(file.label);
    }
  }

  const std::string& root() const { return root_; }
  uint64_t size() const { return labels_.size(); }
  int64_t label(uint64_t i) const { return labels_[i]; }
  std::string path(uint64_t i) const {
    std::string path;
    path.reserve(root_.size() + 1 + (offsets_[i + 1] - offsets_[i]));
    path += root_;
    path += '/';
    path.append(names_, offsets_[i], offsets_[i + 1] - offsets_[i]);
    return path;
  }

 private:
  std::string root_;
  std::string names_;
  std::vector<uint64_t> offsets_;
  std::vector<int64_t> labels_;
};

// A failure to read a sample's file: the file's own (missing, unreadable, not a regular
// file, truncated) loses the sample, kDataLoss with the Env's message, which names the
// path; running out of descriptors or memory (kResourceExhausted) is not the file's.
Status FileFailure(const Status& status) {
  if (status.code() == StatusCode::kResourceExhausted) return status;
  return DataLoss(status.message());
}

// Reads the opened `file` (at `path`) into `buffer`.
Status ReadImageFile(const ReadableFile& file, const std::string& path, PixelBuffer& buffer,
                     size_t* size) {
  const uint64_t file_size = file.Size();
  if (file_size > kMaxFileBytes) {
    return DataLoss(path + ": file is " + std::to_string(file_size) +
                    " bytes, over the limit of " + std::to_string(kMaxFileBytes) +
                    " bytes for one image");
  }
  uint8_t* data = buffer.Reserve(file_size == 0 ? 1 : file_size);
  Status status = file.ReadAt(0, static_cast<size_t>(file_size), data);
  if (!status.ok()) return FileFailure(status);
  *size = static_cast<size_t>(file_size);
  return Status::Ok();
}

struct Folder {
  DatasetInfo info;
  CompactListing listing;
  ImagePipeline pipeline;
};

Result<Folder> OpenFolder(Env& env, const DatasetSpec& spec, const PluginRegistry* plugins) {
  auto pipeline = ImagePipeline::Parse(spec.pipeline, plugins);
  if (!pipeline.ok()) return pipeline.status().WithContext("dataset '" + spec.name + "'");
  EMBER_ASSIGN_OR_RETURN(pack::ImageFolderListing listing, pack::ListImageFolder(env, spec.path));
  Folder folder{DatasetInfo{}, CompactListing(listing), std::move(pipeline).value()};
  DatasetInfo& info = folder.info;
  info.spec = spec;
  info.spec.path = folder.listing.root();
  info.count = folder.listing.size();
  info.tensors.push_back(
      TensorSpec{"image", folder.pipeline.dtype(), folder.pipeline.shape()});
  info.tensors.push_back(TensorSpec{"label", ring::DType::kInt64, {}});
  info.files = {folder.listing.root()};
  return folder;
}

class ImageFolderSource : public Source {
 public:
  ImageFolderSource(Env& env, Folder folder) : env_(env), folder_(std::move(folder)) {}

  const DatasetInfo& info() const override { return folder_.info; }

  Status ReadSample(uint64_t id, const SampleContext& context, void* const* dsts) const override {
    EMBER_RETURN_IF_ERROR(CheckInRange(id));
    thread_local PixelBuffer file;
    const std::string path = folder_.listing.path(id);
    size_t size = 0;
    // The descriptor Prefetch opened for this sample, else one opened now.
    std::unique_ptr<ReadableFile> opened = TakeKept(id);
    if (opened == nullptr) {
      Result<std::unique_ptr<ReadableFile>> now = env_.OpenForRead(path);
      if (!now.ok()) return FileFailure(now.status());
      opened = std::move(now).value();
    }
    Status status = ReadImageFile(*opened, path, file, &size);
    opened.reset();
    if (status.ok()) {
      status = folder_.pipeline.Run(path, file.Reserve(size), size, context.seed, context.epoch,
                                    id, dsts[0]);
    }
    file.ShrinkTo(kMaxRetainedFileBuffer);
    EMBER_RETURN_IF_ERROR(status);
    const int64_t label = folder_.listing.label(id);
    std::memcpy(dsts[1], &label, sizeof(label));
    return Status::Ok();
  }

  bool ParallelDecode() const override { return true; }

  // Open and hint: readahead starts in the background, and the descriptor waits for the
  // sample's ReadSample, which then opens nothing (one open per sample, and for a caller
  // read as themselves one rights check). A descriptor is kept until its sample is read
  // or kKeptOpen later prefetches, whichever comes first.
  void Prefetch(const uint64_t* ids, size_t count) const override {
    for (size_t i = 0; i < count; ++i) {
      if (ids[i] >= folder_.info.count) continue;
      Result<std::unique_ptr<ReadableFile>> file = env_.OpenForRead(folder_.listing.path(ids[i]));
      if (!file.ok()) continue;  // ReadSample reports it
      (*file)->WillNeed();
      Keep(ids[i], std::move(file).value());
    }
  }

 private:
  // A stream prefetches one batch ahead: enough for a few streams of 64-sample batches.
  static constexpr size_t kKeptOpen = 256;

  struct Kept {
    std::unique_ptr<ReadableFile> file;
    uint64_t seq = 0;  // its entry in kept_order_
  };

  void Keep(uint64_t id, std::unique_ptr<ReadableFile> file) const {
    std::unique_ptr<ReadableFile> replaced, evicted;  // closed after the lock is released
    MutexLock lock(&kept_mu_);
    Kept& kept = kept_[id];
    replaced = std::move(kept.file);
    kept.file = std::move(file);
    kept.seq = ++kept_seq_;
    kept_order_.push_back({id, kept.seq});
    if (kept_order_.size() > kKeptOpen) {
      const auto [old_id, old_seq] = kept_order_.front();
      kept_order_.pop_front();
      // An entry whose descriptor was read, or replaced by a later prefetch of its sample,
      // closes nothing.
      auto old = kept_.find(old_id);
      if (old != kept_.end() && old->second.seq == old_seq) {
        evicted = std::move(old->second.file);
        kept_.erase(old);
      }
    }
  }

  // The descriptor Prefetch kept for sample `id`, or null.
  std::unique_ptr<ReadableFile> TakeKept(uint64_t id) const {
    MutexLock lock(&kept_mu_);
    auto it = kept_.find(id);
    if (it == kept_.end()) return nullptr;
    std::unique_ptr<ReadableFile> file = std::move(it->second.file);
    kept_.erase(it);  // its kept_order_ entry closes nothing when it comes to the front
    return file;
  }

  Env& env_;
  const Folder folder_;
  mutable Mutex kept_mu_;
  mutable std::unordered_map<uint64_t, Kept> kept_ GUARDED_BY(kept_mu_);
  // (sample, seq) in the order kept, at most kKeptOpen.
  mutable std::deque<std::pair<uint64_t, uint64_t>> kept_order_ GUARDED_BY(kept_mu_);
  mutable uint64_t kept_seq_ GUARDED_BY(kept_mu_) = 0;
};

}  // namespace

Result<DatasetInfo> ProbeImageFolder(Env& env, const DatasetSpec& spec,
                                     const PluginRegistry* plugins) {
  EMBER_ASSIGN_OR_RETURN(Folder folder, OpenFolder(env, spec, plugins));
  return std::move(folder.info);
}

Result<std::unique_ptr<Source>> LoadImageFolder(Env& env, const DatasetSpec& spec,
                                                const PluginRegistry* plugins) {
  EMBER_ASSIGN_OR_RETURN(Folder folder, OpenFolder(env, spec, plugins));
  return std::unique_ptr<Source>(std::make_unique<ImageFolderSource>(env, std::move(folder)));
}

}  // namespace ember::daemon
