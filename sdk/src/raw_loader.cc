#include "ember/raw_loader.h"

#include <algorithm>
#include <cstdio>
#include <thread>

namespace ember {

Result<std::unique_ptr<RawLoader>> RawLoader::Open(Client& client, const StreamOptions& options,
                                                   const std::optional<LoaderState>& resume,
                                                   std::chrono::milliseconds reconnect_timeout) {
  std::unique_ptr<RawLoader> loader(new RawLoader(client, reconnect_timeout));
  EMBER_RETURN_IF_ERROR(loader->Init(options, resume));
  return loader;
}

Status RawLoader::Init(const StreamOptions& options, const std::optional<LoaderState>& resume) {
  StreamOptions opened = options;
  if (resume) {
    if (resume->seed != options.seed)
      return InvalidArgument("the loader state is of seed " + std::to_string(resume->seed) +
                             ", the loader's seed is " + std::to_string(options.seed) + " (" +
                             resume->ToString() + ")");
    if (resume->epoch > UINT32_MAX)
      return InvalidArgument("loader state epoch " + std::to_string(resume->epoch) +
                             " is out of range");
    opened.start_epoch = static_cast<uint32_t>(resume->epoch);
    opened.start_position = resume->position;
    opened.fingerprint = resume->fingerprint;
  }
  auto reader = client_.OpenStream(opened);
  if (!reader.ok())
    return reader.status().WithContext("opening stream of dataset '" + options.dataset +
                                       "' for job '" + options.job + "' rank " +
                                       std::to_string(options.rank));
  reader_ = std::move(reader).value();
  if (!resume && reader_->info().start_epoch > opened.start_epoch) {
    // A new job that joined its share group late: its epochs are the group's from here.
    std::fprintf(stderr,
                 "ember: job '%s' rank %u: joined share group '%s' after its first epoch began; "
                 "starting at its epoch %u\n",
                 options.job.c_str(), options.rank, options.share.c_str(),
                 reader_->info().start_epoch);
    opened.start_epoch = reader_->info().start_epoch;
    opened.epochs = reader_->info().epochs;
  }
  opened_ = opened;
  batches_per_epoch_ = reader_->info().batches_per_epoch;
  received_epoch_ = opened.start_epoch;
  state_.fingerprint = reader_->info().fingerprint;
  state_.seed = options.seed;
  state_.epoch = opened.start_epoch;
  state_.position = opened.start_position;
  return Status::Ok();
}

std::chrono::nanoseconds RawLoader::wait_time() const {
  return earlier_wait_ + (reader_ ? reader_->wait_time() : std::chrono::nanoseconds(0));
}

uint64_t RawLoader::batches_read() const {
  return earlier_batches_ + (reader_ ? reader_->batches_read() : 0);
}

Result<std::optional<RawBatch>> RawLoader::Reconnect(const Status& why, const WaitCheck& check) {
  const auto deadline = std::chrono::steady_clock::now() + reconnect_timeout_;
  std::chrono::milliseconds backoff(100);
  Status last = why;
  if (reader_ != nullptr) {
    std::fprintf(stderr, "ember: job '%s' rank %u: %s; reconnecting to %s\n",
                 opened_.job.c_str(), opened_.rank, why.ToString().c_str(),
                 client_.socket_path().c_str());
    earlier_wait_ += reader_->wait_time();
    earlier_batches_ += reader_->batches_read();
    reader_.reset();
  }
  reconnecting_ = why;
  while (std::chrono::steady_clock::now() + backoff < deadline) {
    // Sleeps in steps of at most 100 ms, checking between them.
    for (auto slept = std::chrono::milliseconds(0); slept < backoff;) {
      const auto step = std::min(backoff - slept, std::chrono::milliseconds(100));
      std::this_thread::sleep_for(step);
      slept += step;
      if (check) EMBER_RETURN_IF_ERROR(check());
    }
    backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
    Status connected = client_.Reconnect(std::chrono::milliseconds(1000));
    if (!connected.ok()) {
      last = connected;
      continue;
    }
    StreamOptions again = opened_;
    again.rejoin = true;
    again.rejoin_epoch = received_epoch_;
    again.rejoin_received = received_;
    auto reader = client_.OpenStream(again);
    if (!reader.ok()) {
      last = reader.status();
      // A daemon still starting up (its catalog loading) or already gone again.
      if (last.code() == StatusCode::kUnavailable || last.code() == StatusCode::kNotFound)
        continue;
      reconnecting_.reset();
      return last.WithContext("opening the stream again");
    }
    reader_ = std::move(reader).value();
    reconnecting_.reset();
    ++reconnects_;
    std::fprintf(stderr, "ember: job '%s' rank %u: reconnected; continuing at batch %llu of epoch %llu\n",
                 opened_.job.c_str(), opened_.rank, static_cast<unsigned long long>(received_),
                 static_cast<unsigned long long>(received_epoch_));
    return reader_->Next(check);
  }
  reconnecting_.reset();
  return Unavailable("gave up reconnecting to emberd at " + client_.socket_path() + " after " +
                     std::to_string(reconnect_timeout_.count() / 1000) + " s: " + last.ToString());
}

Result<std::optional<RawBatch>> RawLoader::TryNext(const WaitCheck& check) {
  Result<std::optional<RawBatch>> next = std::optional<RawBatch>();
  if (reader_ != nullptr) {
    bool interrupted = false;  // the check's Status is returned as it is
    WaitCheck checking;
    if (check) {
      checking = [&check, &interrupted] {
        Status checked = check();
        interrupted = !checked.ok();
        return checked;
      };
    }
    next = reader_->Next(checking);
    if (!next.ok() && !interrupted && reconnect_timeout_.count() > 0 &&
        (next.status().code() == StatusCode::kUnavailable ||
         next.status().code() == StatusCode::kCancelled))
      next = Reconnect(next.status(), check);
  } else if (reconnecting_) {
    next = Reconnect(*reconnecting_, check);  // an interrupted reconnect goes on
  } else {
    return FailedPrecondition("the stream is broken (an earlier Next failed)");
  }
  if (!next.ok()) return next.status();
  if (!next->has_value()) return next;
  const RawBatch& raw = **next;
  received_epoch_ = raw.last_in_epoch ? raw.epoch + 1 : raw.epoch;
  received_ = raw.last_in_epoch ? 0 : raw.index_in_epoch + 1;
  state_.epoch = raw.last_in_epoch ? raw.epoch + 1 : raw.epoch;
  state_.position = raw.last_in_epoch ? 0 : raw.position;
  return next;
}

}  // namespace ember
