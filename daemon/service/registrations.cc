#include "daemon/service/registrations.h"

#include <utility>

#include "daemon/access/name_scope.h"

namespace ember::daemon {

Registrations::Registration::~Registration() { table_->End(id_); }

std::unique_ptr<Registrations::Registration> Registrations::Begin(const Principal& owner,
                                                                  const std::string& key) {
  const uint64_t now = env_->NowMicros();
  MutexLock lock(&mu_);
  if (records_.size() >= kMaxFollowed) return nullptr;
  const uint64_t id = next_id_++;
  std::unique_ptr<Registration> registration(new Registration(shared_from_this(), id));
  records_.emplace(id, Record{owner, key, now, registration->progress()});
  return registration;
}

void Registrations::End(uint64_t id) {
  MutexLock lock(&mu_);
  records_.erase(id);
}

Result<::ember::RegistrationProgress> Registrations::Find(const Principal& caller,
                                                          const std::string& name) const {
  const std::string own = ScopedKey(caller, name);
  const uint64_t now = env_->NowMicros();
  MutexLock lock(&mu_);
  for (const auto& [id, record] : records_) {
    if (!caller.known() || record.owner.uid != caller.uid) continue;
    if (record.key != own && record.key != name) continue;
    ::ember::RegistrationProgress out;
    out.dataset = name;
    out.shards_total = record.progress->shards_total();
    out.shards_done = record.progress->shards_done();
    out.bytes_done = record.progress->bytes_done();
    out.elapsed_seconds = now > record.start_micros ? (now - record.start_micros) / 1e6 : 0;
    return out;
  }
  return NotFound("no registration of dataset '" + name + "' in progress");
}

size_t Registrations::size() const {
  MutexLock lock(&mu_);
  return records_.size();
}

}  // namespace ember::daemon
