// Registrations: the dataset registrations in progress, each with the IndexingProgress its
// format reports into, so that the user who registers one can watch it
// (Daemon.registrationProgress, emberctl dataset add). A record lives as long as its
// registration: from DaemonService::AddDataset taking it to the catalog's answer.
//
// Bounded: at most kMaxFollowed records at a time; a registration begun past them runs
// unfollowed (Begin returns null, and its progress is never found).
// Only the uid that registers a dataset sees its progress: to anyone else, as to a name
// nobody registers, there is none (kNotFound, which tells nothing of other users).
//
// Thread-safe: records are begun on the event loop, reported into and ended on the
// blocking pool, read on the loop. Made with std::make_shared: a Registration holds its
// table, so that a registration outliving the service ends its record safely.
#ifndef EMBER_DAEMON_SERVICE_REGISTRATIONS_H_
#define EMBER_DAEMON_SERVICE_REGISTRATIONS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "common/env.h"
#include "common/mutex.h"
#include "daemon/access/principal.h"
#include "daemon/catalog/indexing_progress.h"
#include "ember/daemon_status.h"
#include "ember/status.h"

namespace ember::daemon {

class Registrations : public std::enable_shared_from_this<Registrations> {
 public:
  static constexpr size_t kMaxFollowed = 64;

  // `env` (not owned, outlives this) is the clock of the records' elapsed time.
  explicit Registrations(Env* env) : env_(env) {}
  Registrations(const Registrations&) = delete;
  Registrations& operator=(const Registrations&) = delete;

  // A followed registration: what its probe reports into. Destroying it ends the record.
  class Registration {
   public:
    ~Registration();
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;
    IndexingProgress* progress() { return &progress_; }

   private:
    friend class Registrations;
    Registration(std::shared_ptr<Registrations> table, uint64_t id)
        : table_(std::move(table)), id_(id) {}
    const std::shared_ptr<Registrations> table_;
    const uint64_t id_;
    IndexingProgress progress_;
  };

  // Follows `owner`'s registration of the dataset keyed `key` (name_scope.h's DatasetKey);
  // null past kMaxFollowed.
  std::unique_ptr<Registration> Begin(const Principal& owner, const std::string& key);

  // How far `caller`'s registration of its dataset `name` (keyed in the caller's scope, or
  // the common one) has got, named `name`. kNotFound "no registration of dataset 'NAME'
  // in progress" if none of the caller's is followed.
  Result<::ember::RegistrationProgress> Find(const Principal& caller,
                                             const std::string& name) const;

  size_t size() const;

 private:
  struct Record {
    Principal owner;
    std::string key;
    uint64_t start_micros = 0;
    const IndexingProgress* progress = nullptr;  // its Registration's, alive while recorded
  };
  void End(uint64_t id);

  Env* const env_;
  mutable Mutex mu_;
  std::map<uint64_t, Record> records_ GUARDED_BY(mu_);  // by id, in the order begun
  uint64_t next_id_ GUARDED_BY(mu_) = 0;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_SERVICE_REGISTRATIONS_H_
