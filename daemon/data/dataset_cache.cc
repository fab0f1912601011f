#include "daemon/data/dataset_cache.h"

#include <boost/asio/post.hpp>

#include "daemon/data/formats.h"

namespace ember::daemon {
namespace {

// A dataset removed and registered again under the same name may point elsewhere.
std::string Key(const DatasetSpec& spec) {
  return spec.name + '\n' + spec.format + '\n' + spec.path + '\n' + spec.split;
}

// What a load of `owner`'s dataset holds, charged to it (null: nothing is counted).
std::shared_ptr<DatasetMemory::Charge> ChargeFor(DatasetMemory* memory, const DatasetOwner& owner) {
  if (memory == nullptr) return nullptr;
  return memory->For(owner.principal);
}

}  // namespace

DatasetCache::DatasetCache(Env* env, unsigned io_threads, const FormatDeps& deps,
                           DatasetMemory* memory)
    : env_(env), deps_(deps), memory_(memory), pool_(io_threads == 0 ? 1 : io_threads) {}


DatasetCache::~DatasetCache() { pool_.join(); }

DatasetCache::SourceFuture DatasetCache::Get(const DatasetInfo& info) {
  using R = Result<std::shared_ptr<const Source>>;
  MutexLock lock(&mu_);
  Entry& entry = entries_[Key(info.spec)];
  if (auto loaded = entry.loaded.lock()) {
    std::promise<R> ready;
    ready.set_value(R(std::move(loaded)));
    return ready.get_future().share();
  }
  if (entry.pending.valid()) return entry.pending;

  auto promise = std::make_shared<std::promise<R>>();
  entry.pending = promise->get_future().share();
  boost::asio::post(pool_, [this, promise, spec = info.spec, reads_as = info.owner.reads_as,
                            charge = ChargeFor(memory_, info.owner)] {
    std::shared_ptr<Env> reader = EnvReadingAs(env_, reads_as);
    auto loaded = LoadDataset(*reader, spec, deps_, charge.get());
    MutexLock lock(&mu_);
    Entry& e = entries_[Key(spec)];
    e.pending = SourceFuture();
    if (!loaded.ok()) {
      promise->set_value(R(loaded.status().WithContext("loading dataset '" + spec.name + "'")));
      return;
    }
    // The source reads through `reader`, and holds what `charge` counts, for as long as
    // it lives.
    std::shared_ptr<const Source> source(std::move(loaded).value().release(),
                                         [reader, charge](const Source* s) { delete s; });
    e.loaded = source;
    promise->set_value(R(std::move(source)));
  });
  return entry.pending;
}

size_t DatasetCache::NumLoaded() const {
  MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [name, entry] : entries_)
    if (!entry.loaded.expired()) ++n;
  return n;
}

}  // namespace ember::daemon
