#include "daemon/data/webdataset/tar_index.h"

#include <archive.h>
#include <archive_entry.h>

#include <cstring>
#include <memory>

namespace ember::daemon {
namespace {

struct ArchiveCloser {
  void operator()(archive* a) const { archive_read_free(a); }
};

// The compression `data` starts with (its magic number), or null.
const char* Compression(const void* data, size_t size) {
  struct Magic {
    const char* name;
    const char* bytes;
    size_t size;
  };
  static constexpr Magic kMagics[] = {{"gzip", "\x1f\x8b", 2},
                                      {"zstd", "\x28\xb5\x2f\xfd", 4},
                                      {"bzip2", "BZh", 3},
                                      {"xz", "\xfd" "7zXZ", 5},
                                      {"lz4", "\x04\x22\x4d\x18", 4}};
  for (const Magic& magic : kMagics) {
    if (size >= magic.size && std::memcmp(data, magic.bytes, magic.size) == 0) return magic.name;
  }
  return nullptr;
}

}  // namespace

Result<std::vector<TarMember>> IndexTar(const std::string& name, const void* data, size_t size) {
  std::unique_ptr<archive, ArchiveCloser> reader(archive_read_new());
  if (reader == nullptr) return ResourceExhausted(name + ": libarchive: out of memory");
  archive* a = reader.get();
  // Plain tar only (filter "none" is always on): a member's bytes must lie in the file.
  archive_read_support_format_tar(a);
  std::vector<TarMember> members;
  std::string last = "(the first member)";
  auto damaged = [&](const std::string& what) {
    return DataLoss(name + ": not a readable tar archive at " + last + ": " + what);
  };
  if (size == 0) return DataLoss(name + ": empty file, not a tar archive");
  if (const char* compression = Compression(data, size)) {
    return DataLoss(name + ": a " + compression +
                    "-compressed archive; Ember reads shards in place: store them as plain tar");
  }
  if (archive_read_open_memory(a, data, size) != ARCHIVE_OK) {
    const char* why = archive_error_string(a);
    return damaged(why != nullptr ? why : "unknown error");
  }
  const auto* base = static_cast<const uint8_t*>(data);
  while (true) {
    archive_entry* entry = nullptr;
    int rc = archive_read_next_header(a, &entry);
    if (rc == ARCHIVE_EOF) break;
    if (rc < ARCHIVE_WARN) {
      const char* why = archive_error_string(a);
      return damaged(why != nullptr ? why : "unknown error");
    }
    const char* path = archive_entry_pathname(entry);
    last = "member '" + std::string(path != nullptr ? path : "?") + "'";
    if (archive_entry_filetype(entry) != AE_IFREG) continue;
    if (archive_entry_sparse_count(entry) > 0) return damaged("a sparse member");
    if (members.size() >= kMaxTarMembers) {
      return DataLoss(name + ": more than " + std::to_string(kMaxTarMembers) + " members");
    }
    TarMember member;
    member.name = path != nullptr ? path : "";
    const la_int64_t entry_size = archive_entry_size(entry);
    if (entry_size < 0) return damaged("no size");
    member.size = static_cast<uint64_t>(entry_size);
    if (member.size > 0) {
      // From memory, libarchive hands out the member's bytes where they lie in `data`.
      const void* block = nullptr;
      size_t block_size = 0;
      la_int64_t block_offset = 0;
      rc = archive_read_data_block(a, &block, &block_size, &block_offset);
      if (rc < ARCHIVE_WARN || block == nullptr) {
        const char* why = archive_error_string(a);
        return damaged(why != nullptr ? why : "truncated member");
      }
      const auto* at = static_cast<const uint8_t*>(block);
      if (block_offset != 0 || at < base || at >= base + size) {
        return damaged("libarchive did not read the member in place");
      }
      member.offset = static_cast<uint64_t>(at - base);
      if (member.offset + member.size > size) {
        return damaged("truncated: the member needs " + std::to_string(member.size) +
                       " bytes from offset " + std::to_string(member.offset) + ", the file has " +
                       std::to_string(size));
      }
    }
    members.push_back(std::move(member));
  }
  return members;
}

namespace {

void PutU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

bool GetU64(const std::string& in, size_t& at, uint64_t& v) {
  if (in.size() - at < 8) return false;
  v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(in[at + i])) << (8 * i);
  at += 8;
  return true;
}

}  // namespace

std::string EncodeTarIndex(const std::vector<TarMember>& members) {
  std::string out = "ember-tar-index-1\n";
  PutU64(out, members.size());
  for (const TarMember& m : members) {
    PutU64(out, m.name.size());
    out += m.name;
    PutU64(out, m.offset);
    PutU64(out, m.size);
  }
  return out;
}

std::optional<std::vector<TarMember>> DecodeTarIndex(const std::string& bytes, uint64_t size) {
  const std::string magic = "ember-tar-index-1\n";
  if (bytes.compare(0, magic.size(), magic) != 0) return std::nullopt;
  size_t at = magic.size();
  uint64_t count = 0;
  if (!GetU64(bytes, at, count) || count > kMaxTarMembers) return std::nullopt;
  std::vector<TarMember> members;
  members.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    TarMember m;
    uint64_t name_size = 0;
    if (!GetU64(bytes, at, name_size) || name_size > bytes.size() - at) return std::nullopt;
    m.name = bytes.substr(at, name_size);
    at += name_size;
    if (!GetU64(bytes, at, m.offset) || !GetU64(bytes, at, m.size)) return std::nullopt;
    if (m.offset > size || m.size > size - m.offset) return std::nullopt;
    members.push_back(std::move(m));
  }
  if (at != bytes.size()) return std::nullopt;
  return members;
}

}  // namespace ember::daemon
