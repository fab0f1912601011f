#include "daemon/data/webdataset/tar_testing.h"

#include <archive.h>
#include <archive_entry.h>

#include <catch2/catch.hpp>

namespace ember::daemon {
namespace {

la_ssize_t Append(archive*, void* out, const void* data, size_t size) {
  static_cast<std::string*>(out)->append(static_cast<const char*>(data), size);
  return static_cast<la_ssize_t>(size);
}

}  // namespace

std::string TarBytes(const TarMembers& members) {
  std::string out;
  archive* a = archive_write_new();
  REQUIRE(a != nullptr);
  REQUIRE(archive_write_set_format_pax_restricted(a) == ARCHIVE_OK);
  REQUIRE(archive_write_set_bytes_in_last_block(a, 1) == ARCHIVE_OK);
  REQUIRE(archive_write_open(a, &out, nullptr, Append, nullptr) == ARCHIVE_OK);
  for (const auto& [name, bytes] : members) {
    archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, name.c_str());
    const bool directory = !name.empty() && name.back() == '/';
    archive_entry_set_filetype(entry, directory ? AE_IFDIR : AE_IFREG);
    archive_entry_set_perm(entry, directory ? 0755 : 0644);
    archive_entry_set_size(entry, directory ? 0 : static_cast<la_int64_t>(bytes.size()));
    INFO(name << ": " << (archive_error_string(a) ? archive_error_string(a) : ""));
    REQUIRE(archive_write_header(a, entry) == ARCHIVE_OK);
    if (!directory && !bytes.empty())
      REQUIRE(archive_write_data(a, bytes.data(), bytes.size()) ==
              static_cast<la_ssize_t>(bytes.size()));
    archive_entry_free(entry);
  }
  REQUIRE(archive_write_close(a) == ARCHIVE_OK);
  archive_write_free(a);
  return out;
}

}  // namespace ember::daemon
