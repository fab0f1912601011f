// Catalog: the registered datasets, persisted in the state directory so that a daemon
// restart keeps them.
//
// Persistence: <state_dir>/catalog.yaml, rewritten whole with Env::WriteFileAtomic on
// every change (a crash leaves the old or the new catalog, never a torn one). An entry
// stores the spec and the probed info, so opening the catalog does not re-read data.
// The file starts with a header comment and ends with "# crc32: XXXXXXXX", the CRC-32 of
// everything before that line, so a file truncated or damaged afterwards (a disk, a
// hand edit) is refused, not half read. A catalog from before checksums (no header) is
// read as it is and gets one on its next change. Before each change the catalog as it
// was is kept as <state_dir>/catalog.yaml.prev, the previous good copy.
// Thread-safety: all methods are safe to call concurrently.
#ifndef EMBER_DAEMON_CATALOG_CATALOG_H_
#define EMBER_DAEMON_CATALOG_CATALOG_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "daemon/catalog/dataset.h"
#include "daemon/catalog/indexing_progress.h"
#include "common/env.h"
#include "ember/status.h"

namespace ember::daemon {

class Catalog {
 public:
  // Checks a spec's files, read as `owner.reads_as`, and returns what they hold
  // (ProbeDataset in production), reporting into `progress` (may be null) as it indexes.
  using Prober = std::function<Result<DatasetInfo>(const DatasetSpec&, const DatasetOwner& owner,
                                                   IndexingProgress* progress)>;

  // Creates state_dir if needed and loads catalog.yaml if present. A corrupt catalog
  // file is an error naming the file (the daemon refuses to start rather than lose it):
  // kDataLoss "<file>: damaged: checksum mismatch (...)", "<file>: truncated: ...", or a
  // YAML error with line and column; the message ends saying whether catalog.yaml.prev
  // is intact and how to restore it.
  static Result<std::unique_ptr<Catalog>> Open(Env* env, const std::string& state_dir,
                                               Prober prober);

  // Validates the name, probes the files (outside the lock), then persists the entry as
  // `owner`'s. kAlreadyExists if the name is taken (whoever owns it); the probe's error
  // (with the dataset's name as context) if the files are bad or `owner` may not read
  // them. On any error the catalog is unchanged.
  // kResourceExhausted if a non-privileged owner already has `max_owned` datasets.
  // `progress` (may be null; must outlive the call) is handed to the prober.
  Result<DatasetInfo> Add(const DatasetSpec& spec, const DatasetOwner& owner = {},
                          size_t max_owned = SIZE_MAX, IndexingProgress* progress = nullptr);

  std::vector<DatasetInfo> List() const;  // sorted by name

  // kNotFound naming the dataset.
  Result<DatasetInfo> Get(const std::string& name) const;
  // Removes the dataset if `may_remove` (null: always) returns OK for it, checked under
  // the lock; its error otherwise.
  Status Remove(const std::string& name,
                const std::function<Status(const DatasetInfo&)>& may_remove = nullptr);

 private:
  Catalog(Env* env, std::string path, Prober prober);
  Status PersistLocked() REQUIRES(mu_);

  Env* env_;
  const std::string path_;
  const Prober prober_;
  mutable Mutex mu_;
  std::map<std::string, DatasetInfo> entries_ GUARDED_BY(mu_);
  // The file's text as last read or written, kept as catalog.yaml.prev on the next change.
  std::optional<std::string> persisted_ GUARDED_BY(mu_);
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_CATALOG_CATALOG_H_
