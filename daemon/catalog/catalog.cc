#include "daemon/catalog/catalog.h"

#include <yaml-cpp/yaml.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "daemon/access/name_scope.h"
#include "daemon/catalog/fingerprint.h"  // FingerprintHex

#include "common/strict_yaml.h"
#include "pack/format.h"  // Crc32

namespace ember::daemon {

namespace {

constexpr int kCatalogVersion = 1;
constexpr const char* kCatalogFile = "catalog.yaml";
constexpr const char* kPreviousSuffix = ".prev";
// The first line of a checksummed catalog; one without it was written before checksums.
constexpr const char* kHeader =
    "emberd dataset catalog; rewritten by the daemon on every change; CRC-32 on the last line";
// The last line: "# crc32: " and 8 hex digits, the CRC-32 of every byte before it.
constexpr const char* kTrailerPrefix = "# crc32: ";
constexpr size_t kTrailerSize = 9 + 8 + 1;

std::string Quoted(const std::string& name) { return "dataset '" + name + "'"; }

std::string Serialize(const std::map<std::string, DatasetInfo>& entries) {
  YAML::Emitter out;
  out << YAML::Comment(kHeader);
  out << YAML::BeginMap;
  out << YAML::Key << "version" << YAML::Value << kCatalogVersion;
  out << YAML::Key << "datasets" << YAML::Value << YAML::BeginSeq;
  for (const auto& [name, info] : entries) {
    out << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << info.spec.name;
    out << YAML::Key << "format" << YAML::Value << info.spec.format;
    out << YAML::Key << "path" << YAML::Value << info.spec.path;
    out << YAML::Key << "split" << YAML::Value << info.spec.split;
    if (!info.spec.pipeline.empty())
      out << YAML::Key << "pipeline" << YAML::Value << YAML::Literal << info.spec.pipeline;
    out << YAML::Key << "on_error" << YAML::Value << info.spec.on_error;
    if (info.spec.shared) out << YAML::Key << "shared" << YAML::Value << true;
    if (!info.spec.endpoint.empty())
      out << YAML::Key << "endpoint" << YAML::Value << info.spec.endpoint;
    if (info.spec.shuffle != "samples") {
      out << YAML::Key << "shuffle" << YAML::Value << info.spec.shuffle;
      out << YAML::Key << "shuffle_window" << YAML::Value << info.spec.shuffle_window;
      out << YAML::Key << "shard_starts" << YAML::Value << YAML::Flow << YAML::BeginSeq;
      for (uint64_t start : info.shard_starts) out << start;
      out << YAML::EndSeq;
    }
    const Principal& owner = info.owner.principal;
    if (owner.known()) {
      out << YAML::Key << "owner" << YAML::Value << YAML::Flow << YAML::BeginMap;
      out << YAML::Key << "uid" << YAML::Value << owner.uid;
      if (owner.team) out << YAML::Key << "team" << YAML::Value << true;
      if (owner.privileged) out << YAML::Key << "privileged" << YAML::Value << true;
      out << YAML::EndMap;
    }
    if (const auto& as = info.owner.reads_as) {
      out << YAML::Key << "reads_as" << YAML::Value << YAML::Flow << YAML::BeginMap;
      out << YAML::Key << "uid" << YAML::Value << as->uid;
      out << YAML::Key << "gid" << YAML::Value << as->gid;
      out << YAML::Key << "groups" << YAML::Value << YAML::Flow << YAML::BeginSeq;
      for (gid_t g : as->groups) out << g;
      out << YAML::EndSeq << YAML::EndMap;
    }
    out << YAML::Key << "count" << YAML::Value << info.count;
    if (info.shards != 0) out << YAML::Key << "shards" << YAML::Value << info.shards;
    if (info.index_bytes != 0)
      out << YAML::Key << "index_bytes" << YAML::Value << info.index_bytes;
    if (info.fingerprint != 0)
      out << YAML::Key << "fingerprint" << YAML::Value << FingerprintHex(info.fingerprint);
    out << YAML::Key << "tensors" << YAML::Value << YAML::BeginSeq;
    for (const TensorSpec& tensor : info.tensors) {
      out << YAML::BeginMap;
      out << YAML::Key << "name" << YAML::Value << tensor.name;
      out << YAML::Key << "dtype" << YAML::Value << DTypeName(tensor.dtype);
      out << YAML::Key << "shape" << YAML::Value << YAML::Flow << YAML::BeginSeq;
      for (int64_t dim : tensor.shape) out << dim;
      out << YAML::EndSeq;
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
    out << YAML::Key << "files" << YAML::Value << YAML::BeginSeq;
    for (const std::string& file : info.files) out << file;
    out << YAML::EndSeq;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

// Reads the catalog file's YAML; every error is kDataLoss and names the file, the line
// and column, and `where` (the entry), since the daemon wrote the file and anything
// unexpected is damage.
class Reader {
 public:
  explicit Reader(const std::string& file) : yaml_(file, StatusCode::kDataLoss) {}

  Result<std::map<std::string, DatasetInfo>> Parse(const std::string& text) const {
    return yaml_.Parse(text, [this](const YAML::Node& root) { return Catalog(root); });
  }

 private:
  Status Corrupt(const YAML::Node& at, const std::string& where, const std::string& what) const {
    return yaml_.Error(at, (where.empty() ? "" : where + ": ") + what);
  }

  Result<YAML::Node> Field(const YAML::Node& map, const char* key, const std::string& where) const {
    const YAML::Node node = map[key];
    if (!node.IsDefined()) return Corrupt(map, where, std::string("missing '") + key + "'");
    return node;
  }

  Result<std::string> String(const YAML::Node& map, const char* key,
                             const std::string& where) const {
    EMBER_ASSIGN_OR_RETURN(YAML::Node node, Field(map, key, where));
    if (!node.IsScalar()) return Corrupt(node, where, std::string("'") + key + "' is not a string");
    return node.Scalar();
  }

  Result<uint64_t> Unsigned(const YAML::Node& node, const std::string& what,
                            const std::string& where) const {
    uint64_t value = 0;
    if (!node.IsScalar() || !ParseDecimal(node.Scalar(), &value)) {
      return Corrupt(node, where, what + " is not a non-negative integer: " + DescribeYaml(node));
    }
    return value;
  }

  // A uid or gid: below 2^32 - 1 (the "unknown" id).
  Result<uint32_t> Id(const YAML::Node& node, const std::string& what,
                      const std::string& where) const {
    EMBER_ASSIGN_OR_RETURN(uint64_t value, Unsigned(node, what, where));
    if (value >= 0xffffffffu) return Corrupt(node, where, what + " is not a uid or gid: " + node.Scalar());
    return static_cast<uint32_t>(value);
  }

  // An optional boolean key: false when absent.
  Result<bool> Flag(const YAML::Node& map, const char* key, const std::string& where) const {
    const YAML::Node node = map[key];
    if (!node) return false;
    if (!node.IsScalar() || (node.Scalar() != "true" && node.Scalar() != "false"))
      return Corrupt(node, where, std::string("'") + key + "' is not true or false");
    return node.Scalar() == "true";
  }

  Result<YAML::Node> Sequence(const YAML::Node& map, const char* key,
                              const std::string& where) const {
    EMBER_ASSIGN_OR_RETURN(YAML::Node node, Field(map, key, where));
    if (!node.IsSequence()) return Corrupt(node, where, std::string("'") + key + "' is not a list");
    return node;
  }

  Result<TensorSpec> Tensor(const YAML::Node& node, const std::string& where) const {
    if (!node.IsMap()) return Corrupt(node, where, "not a map");
    TensorSpec tensor;
    EMBER_ASSIGN_OR_RETURN(tensor.name, String(node, "name", where));
    EMBER_ASSIGN_OR_RETURN(std::string dtype_name, String(node, "dtype", where));
    Result<ring::DType> dtype = ParseDType(dtype_name);
    if (!dtype.ok()) return Corrupt(node["dtype"], where, dtype.status().message());
    tensor.dtype = *dtype;
    EMBER_ASSIGN_OR_RETURN(YAML::Node shape, Sequence(node, "shape", where));
    for (const YAML::Node& dim : shape) {
      EMBER_ASSIGN_OR_RETURN(uint64_t value, Unsigned(dim, "a shape dimension", where));
      tensor.shape.push_back(static_cast<int64_t>(value));
    }
    return tensor;
  }

  Result<DatasetInfo> Entry(const YAML::Node& node, size_t index) const {
    std::string where = "entry " + std::to_string(index);
    if (!node.IsMap()) return Corrupt(node, where, "not a map");
    DatasetInfo info;
    EMBER_ASSIGN_OR_RETURN(info.spec.name, String(node, "name", where));
    Status name_ok = ValidateDatasetName(UnscopedName(info.spec.name));
    if (!name_ok.ok()) return Corrupt(node["name"], where, name_ok.message());
    where = Quoted(info.spec.name);
    EMBER_ASSIGN_OR_RETURN(info.spec.format, String(node, "format", where));
    EMBER_ASSIGN_OR_RETURN(info.spec.path, String(node, "path", where));
    EMBER_ASSIGN_OR_RETURN(info.spec.split, String(node, "split", where));
    // Optional keys (catalogs written before they existed lack them).
    for (auto [key, field] : {std::pair{"pipeline", &info.spec.pipeline},
                              std::pair{"on_error", &info.spec.on_error},
                              std::pair{"shuffle", &info.spec.shuffle},
                              std::pair{"endpoint", &info.spec.endpoint}}) {
      if (!node[key]) continue;
      if (!node[key].IsScalar()) {
        return Corrupt(node[key], where, std::string("'") + key + "' is not a string");
      }
      *field = node[key].Scalar();
    }
    Status on_error_ok = ValidateOnError(info.spec.on_error);
    if (!on_error_ok.ok()) return Corrupt(node, where, on_error_ok.message());
    Status endpoint_ok = info.spec.endpoint.size() > kMaxEndpointBytes
                             ? InvalidArgument("'endpoint' is over " +
                                               std::to_string(kMaxEndpointBytes) + " bytes")
                             : ValidateEndpoint(info.spec);
    if (!endpoint_ok.ok()) return Corrupt(node, where, endpoint_ok.message());
    if (const YAML::Node window = node["shuffle_window"]) {
      EMBER_ASSIGN_OR_RETURN(uint64_t value, Unsigned(window, "'shuffle_window'", where));
      if (value > kMaxShuffleWindow)
        return Corrupt(window, where, "'shuffle_window' is over " + std::to_string(kMaxShuffleWindow));
      info.spec.shuffle_window = static_cast<uint32_t>(value);
    }
    if (node["shard_starts"]) {
      EMBER_ASSIGN_OR_RETURN(YAML::Node starts, Sequence(node, "shard_starts", where));
      for (const YAML::Node& start : starts) {
        EMBER_ASSIGN_OR_RETURN(uint64_t value, Unsigned(start, "a 'shard_starts' entry", where));
        if (!info.shard_starts.empty() && value < info.shard_starts.back())
          return Corrupt(start, where, "'shard_starts' is not ascending");
        info.shard_starts.push_back(value);
      }
    }
    Status shuffle_ok = ValidateShuffle(info.spec);
    if (!shuffle_ok.ok()) return Corrupt(node, where, shuffle_ok.message());
    // Optional: absent in catalogs written before owners were kept (the entry is then
    // open to all, read with the daemon's rights).
    EMBER_ASSIGN_OR_RETURN(info.spec.shared, Flag(node, "shared", where));
    if (const YAML::Node owner = node["owner"]) {
      if (!owner.IsMap()) return Corrupt(owner, where, "'owner' is not a map");
      EMBER_ASSIGN_OR_RETURN(YAML::Node uid, Field(owner, "uid", where + ": owner"));
      EMBER_ASSIGN_OR_RETURN(info.owner.principal.uid, Id(uid, "'owner: uid'", where));
      EMBER_ASSIGN_OR_RETURN(info.owner.principal.team, Flag(owner, "team", where + ": owner"));
      EMBER_ASSIGN_OR_RETURN(info.owner.principal.privileged,
                             Flag(owner, "privileged", where + ": owner"));
    }
    if (const YAML::Node as = node["reads_as"]) {
      if (!as.IsMap()) return Corrupt(as, where, "'reads_as' is not a map");
      Credentials creds;
      EMBER_ASSIGN_OR_RETURN(YAML::Node uid, Field(as, "uid", where + ": reads_as"));
      EMBER_ASSIGN_OR_RETURN(creds.uid, Id(uid, "'reads_as: uid'", where));
      EMBER_ASSIGN_OR_RETURN(YAML::Node gid, Field(as, "gid", where + ": reads_as"));
      EMBER_ASSIGN_OR_RETURN(creds.gid, Id(gid, "'reads_as: gid'", where));
      EMBER_ASSIGN_OR_RETURN(YAML::Node groups, Sequence(as, "groups", where + ": reads_as"));
      for (const YAML::Node& g : groups) {
        EMBER_ASSIGN_OR_RETURN(gid_t group, Id(g, "a 'reads_as' group", where));
        creds.groups.push_back(group);
      }
      info.owner.reads_as = std::move(creds);
    }
    EMBER_ASSIGN_OR_RETURN(YAML::Node count, Field(node, "count", where));
    EMBER_ASSIGN_OR_RETURN(info.count, Unsigned(count, "'count'", where));
    // Optional: catalogs written before they were kept lack them (0: not known).
    if (const YAML::Node shards = node["shards"]) {
      EMBER_ASSIGN_OR_RETURN(info.shards, Unsigned(shards, "'shards'", where));
    }
    if (const YAML::Node index_bytes = node["index_bytes"]) {
      EMBER_ASSIGN_OR_RETURN(info.index_bytes, Unsigned(index_bytes, "'index_bytes'", where));
    }
    if (node["fingerprint"]) {  // optional: catalogs written before it lack it
      const YAML::Node& fp = node["fingerprint"];
      char* end = nullptr;
      const std::string text = fp.IsScalar() ? fp.Scalar() : "";
      info.fingerprint = std::strtoull(text.c_str(), &end, 16);
      if (text.size() != 16 || end != text.c_str() + text.size())
        return Corrupt(fp, where, "'fingerprint' is not 16 hex digits");
    }
    EMBER_ASSIGN_OR_RETURN(YAML::Node tensors, Sequence(node, "tensors", where));
    size_t tensor_index = 0;
    for (const YAML::Node& tensor : tensors) {
      EMBER_ASSIGN_OR_RETURN(TensorSpec spec,
                             Tensor(tensor, where + ": tensor " + std::to_string(tensor_index++)));
      info.tensors.push_back(std::move(spec));
    }
    EMBER_ASSIGN_OR_RETURN(YAML::Node files, Sequence(node, "files", where));
    for (const YAML::Node& file : files) {
      if (!file.IsScalar()) return Corrupt(file, where, "an entry of 'files' is not a string");
      info.files.push_back(file.Scalar());
    }
    return info;
  }

  Result<std::map<std::string, DatasetInfo>> Catalog(const YAML::Node& root) const {
    if (!root.IsMap()) return Corrupt(root, "", "expected a map with 'version' and 'datasets'");
    EMBER_ASSIGN_OR_RETURN(YAML::Node version_node, Field(root, "version", ""));
    EMBER_ASSIGN_OR_RETURN(uint64_t version, Unsigned(version_node, "'version'", ""));
    if (version != kCatalogVersion) {
      return Corrupt(version_node, "",
                     "unsupported version " + std::to_string(version) + " (this emberd reads " +
                         std::to_string(kCatalogVersion) + ")");
    }
    EMBER_ASSIGN_OR_RETURN(YAML::Node datasets, Sequence(root, "datasets", ""));
    std::map<std::string, DatasetInfo> entries;
    size_t index = 0;
    for (const YAML::Node& node : datasets) {
      EMBER_ASSIGN_OR_RETURN(DatasetInfo info, Entry(node, index++));
      std::string name = info.spec.name;
      if (!entries.emplace(name, std::move(info)).second) {
        return Corrupt(node, Quoted(name), "listed more than once");
      }
    }
    return entries;
  }

  const StrictYaml yaml_;
};

// `yaml` with the checksum line after it.
std::string Seal(const std::string& yaml) {
  char trailer[kTrailerSize + 1];
  std::snprintf(trailer, sizeof(trailer), "%s%08" PRIx32 "\n", kTrailerPrefix,
                pack::Crc32(yaml.data(), yaml.size()));
  return yaml + trailer;
}

// The YAML of a catalog file's text, its checksum verified: kDataLoss naming `file` when
// the checksum line is missing from a checksummed catalog (truncated) or does not match
// (damaged). A catalog written before checksums (no header line) is taken as it is.
Result<std::string> Unseal(const std::string& text, const std::string& file) {
  const std::string header = std::string("# ") + kHeader + "\n";
  const bool sealed = text.compare(0, header.size(), header) == 0;
  if (text.size() >= kTrailerSize && text.back() == '\n' &&
      text.compare(text.size() - kTrailerSize, 9, kTrailerPrefix) == 0) {
    const std::string yaml = text.substr(0, text.size() - kTrailerSize);
    const std::string hex = text.substr(text.size() - kTrailerSize + 9, 8);
    char* end = nullptr;
    const uint32_t stored = static_cast<uint32_t>(std::strtoul(hex.c_str(), &end, 16));
    const uint32_t actual = pack::Crc32(yaml.data(), yaml.size());
    if (end != hex.c_str() + hex.size() || stored != actual) {
      char detail[96];
      std::snprintf(detail, sizeof(detail), "stored %s, content has %08" PRIx32, hex.c_str(),
                    actual);
      return DataLoss(file + ": damaged: checksum mismatch (" + detail + ")");
    }
    return yaml;
  }
  if (sealed) {
    return DataLoss(file + ": truncated: its last line, the checksum, is missing (" +
                    std::to_string(text.size()) + " bytes)");
  }
  return text;
}

Result<std::map<std::string, DatasetInfo>> ParseCatalog(const std::string& text,
                                                        const std::string& file) {
  EMBER_ASSIGN_OR_RETURN(std::string yaml, Unseal(text, file));
  return Reader(file).Parse(yaml);
}

// What to do about the damaged catalog `path`, for the error that refuses it: restore the
// previous good copy, if there is one and it is intact.
std::string RestoreHint(Env* env, const std::string& path) {
  const std::string previous = path + kPreviousSuffix;
  if (!env->FileExists(previous))
    return "; there is no previous copy (" + previous +
           "): move the file away to start with an empty catalog";
  Result<std::string> text = env->ReadFile(previous);
  Status previous_ok = text.ok() ? ParseCatalog(*text, previous).status() : text.status();
  if (!previous_ok.ok())
    return "; the previous copy is damaged too (" + previous_ok.message() + ")";
  return "; the previous good copy (before the last change) is " + previous +
         ": stop emberd, cp " + previous + " " + path + ", start it again";
}

}  // namespace

Catalog::Catalog(Env* env, std::string path, Prober prober)
    : env_(env), path_(std::move(path)), prober_(std::move(prober)) {}

Result<std::unique_ptr<Catalog>> Catalog::Open(Env* env, const std::string& state_dir,
                                               Prober prober) {
  if (env == nullptr || !prober)
    return InvalidArgument("Catalog::Open: env and prober are required");
  if (state_dir.empty()) return InvalidArgument("Catalog::Open: empty state directory");
  EMBER_RETURN_IF_ERROR(env->CreateDirs(state_dir).WithContext("catalog state directory"));
  std::string dir = state_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  std::string path = (dir == "/" ? "" : dir) + "/" + kCatalogFile;

  std::unique_ptr<Catalog> catalog(new Catalog(env, path, std::move(prober)));
  if (env->FileExists(path)) {
    EMBER_ASSIGN_OR_RETURN(std::string text, env->ReadFile(path));
    Result<std::map<std::string, DatasetInfo>> entries = ParseCatalog(text, path);
    if (!entries.ok())
      return Status(entries.status().code(),
                    entries.status().message() + RestoreHint(env, path));
    MutexLock lock(&catalog->mu_);  // no other thread yet; taken for the analysis
    catalog->entries_ = std::move(entries).value();
    catalog->persisted_ = std::move(text);
  } else if (env->FileExists(path + kPreviousSuffix)) {
    // Only a change writes .prev, and it writes the catalog too: the catalog was removed
    // since. Starting empty would drop every dataset without a word.
    return FailedPrecondition(path + " is missing, but its previous copy " + path +
                              kPreviousSuffix + " is there: to keep its datasets, cp " + path +
                              kPreviousSuffix + " " + path + "; to start with an empty "
                              "catalog, remove " + path + kPreviousSuffix + "; then start "
                              "emberd again");
  }
  return catalog;
}

Result<DatasetInfo> Catalog::Add(const DatasetSpec& spec, const DatasetOwner& owner,
                                 size_t max_owned, IndexingProgress* progress) {
  EMBER_RETURN_IF_ERROR(ValidateDatasetName(UnscopedName(spec.name)));
  const std::string context = Quoted(spec.name);
  Status sizes = ValidateSpecSizes(spec);
  if (!sizes.ok()) return sizes.WithContext(context);
  Status on_error_ok = ValidateOnError(spec.on_error);
  if (!on_error_ok.ok()) return on_error_ok.WithContext(context);
  Status shuffle_ok = ValidateShuffle(spec);
  if (!shuffle_ok.ok()) return shuffle_ok.WithContext(context);
  Status endpoint_ok = ValidateEndpoint(spec);
  if (!endpoint_ok.ok()) return endpoint_ok.WithContext(context);
  {
    MutexLock lock(&mu_);
    if (entries_.count(spec.name) != 0) return AlreadyExists(context + " already exists");
  }
  // Probing reads data files and may take seconds: never under the lock.
  Result<DatasetInfo> probed = prober_(spec, owner, progress);
  if (!probed.ok()) return probed.status().WithContext(context);
  DatasetInfo info = std::move(probed).value();
  info.spec.name = spec.name;
  info.spec.pipeline = spec.pipeline;
  info.spec.on_error = spec.on_error;
  info.spec.shared = spec.shared;
  info.spec.shuffle = spec.shuffle;
  info.spec.shuffle_window = spec.shuffle_window;
  info.spec.endpoint = spec.endpoint;
  info.owner = owner;

  MutexLock lock(&mu_);
  if (entries_.count(spec.name) != 0) return AlreadyExists(context + " already exists");
  if (!owner.principal.privileged) {
    size_t owned = 0;
    for (const auto& [name, entry] : entries_)
      owned += entry.owner.principal.known() && entry.owner.principal.uid == owner.principal.uid;
    if (owned >= max_owned)
      return ResourceExhausted(context + ": uid " + std::to_string(owner.principal.uid) +
                               " already has " + std::to_string(owned) +
                               " datasets, the most one user may register (user_limits.datasets)");
  }
  entries_.emplace(spec.name, info);
  Status persisted = PersistLocked();
  if (!persisted.ok()) {
    entries_.erase(spec.name);
    return persisted.WithContext("adding " + context);
  }
  return info;
}

std::vector<DatasetInfo> Catalog::List() const {
  MutexLock lock(&mu_);
  std::vector<DatasetInfo> infos;
  infos.reserve(entries_.size());
  for (const auto& entry : entries_) infos.push_back(entry.second);
  return infos;
}

Result<DatasetInfo> Catalog::Get(const std::string& name) const {
  MutexLock lock(&mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return DatasetNotFound(name);
  return it->second;
}

Status Catalog::Remove(const std::string& name,
                       const std::function<Status(const DatasetInfo&)>& may_remove) {
  MutexLock lock(&mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return DatasetNotFound(name);
  if (may_remove) EMBER_RETURN_IF_ERROR(may_remove(it->second));
  auto node = entries_.extract(it);
  Status persisted = PersistLocked();
  if (!persisted.ok()) {
    entries_.insert(std::move(node));
    return persisted.WithContext("removing " + Quoted(name));
  }
  return Status::Ok();
}

Status Catalog::PersistLocked() {
  // Both files name every user's paths and uids: the owner's only, whatever the umask.
  if (persisted_) {
    EMBER_RETURN_IF_ERROR(env_->WriteFileAtomic(path_ + kPreviousSuffix, *persisted_)
                              .WithContext("keeping the previous catalog"));
    EMBER_RETURN_IF_ERROR(env_->RestrictToOwner(path_ + kPreviousSuffix));
  }
  std::string text = Seal(Serialize(entries_));
  EMBER_RETURN_IF_ERROR(env_->WriteFileAtomic(path_, text));
  EMBER_RETURN_IF_ERROR(env_->RestrictToOwner(path_));
  persisted_ = std::move(text);
  return Status::Ok();
}

}  // namespace ember::daemon
