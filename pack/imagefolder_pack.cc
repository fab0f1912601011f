#include "pack/imagefolder_pack.h"

#include "common/paths.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <memory>
#include <system_error>
#include <utility>

namespace ember::pack {

namespace {

constexpr int kMaxDepth = 64;

bool IsImageName(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* suffix : {".jpg", ".jpeg", ".png"}) {
    const size_t n = std::char_traits<char>::length(suffix);
    if (lower.size() >= n && lower.compare(lower.size() - n, n, suffix) == 0) return true;
  }
  return false;
}

// True if `inner` is `outer` or lies under it (both absolute and normalized).
bool IsWithin(const std::string& inner, const std::string& outer) {
  if (outer == "/") return true;
  return inner == outer ||
         (inner.size() > outer.size() && inner.compare(0, outer.size(), outer) == 0 &&
          inner[outer.size()] == '/');
}

struct DirFiles {
  std::string relative_dir;  // relative to the listing's root
  std::vector<std::string> image_names;
};

// Collects `relative_dir` (under `root`) and every directory below it.
Status Walk(Env& env, const std::string& root, const std::string& relative_dir, int depth,
            std::vector<DirFiles>& dirs, uint64_t& ignored) {
  const std::string dir = root + "/" + relative_dir;
  if (depth > kMaxDepth) {
    return InvalidArgument(dir + ": nested more than " + std::to_string(kMaxDepth) +
                           " directories deep (a symlink loop?)");
  }
  EMBER_ASSIGN_OR_RETURN(std::vector<std::string> names, env.ListDir(dir));
  DirFiles here{relative_dir, {}};
  std::vector<std::string> subdirs;
  for (std::string& name : names) {
    if (env.IsDirectory(dir + "/" + name)) {
      subdirs.push_back(relative_dir + "/" + name);
    } else if (IsImageName(name)) {
      here.image_names.push_back(std::move(name));
    } else {
      ++ignored;
    }
  }
  dirs.push_back(std::move(here));
  for (const std::string& sub : subdirs) {
    EMBER_RETURN_IF_ERROR(Walk(env, root, sub, depth + 1, dirs, ignored));
  }
  return Status::Ok();
}

}  // namespace

Result<ImageFolderListing> ListImageFolder(Env& env, const std::string& root_dir) {
  EMBER_ASSIGN_OR_RETURN(std::string root, AbsolutePath(root_dir, "the image folder path"));
  if (!env.IsDirectory(root)) {
    if (!env.FileExists(root)) return NotFound(root + ": no such directory");
    return InvalidArgument(root + ": not a directory (an image folder is a directory of "
                                  "class folders)");
  }
  ImageFolderListing listing;
  listing.root = root;
  EMBER_ASSIGN_OR_RETURN(std::vector<std::string> names, env.ListDir(root));
  for (std::string& name : names) {
    if (env.IsDirectory(root + "/" + name)) {
      listing.classes.push_back(std::move(name));
    } else {
      ++listing.ignored_files;
    }
  }
  if (listing.classes.empty()) {
    return InvalidArgument(root + ": no class folders (an image folder holds one "
                                  "sub-directory per class)");
  }
  for (size_t label = 0; label < listing.classes.size(); ++label) {
    std::vector<DirFiles> dirs;
    EMBER_RETURN_IF_ERROR(
        Walk(env, root, listing.classes[label], 1, dirs, listing.ignored_files));
    // As sorted(os.walk(...)): directories ordered by their whole path.
    std::sort(dirs.begin(), dirs.end(), [](const DirFiles& a, const DirFiles& b) {
      return a.relative_dir < b.relative_dir;
    });
    for (const DirFiles& dir : dirs) {
      for (const std::string& name : dir.image_names) {
        listing.files.push_back({dir.relative_dir + "/" + name, static_cast<int64_t>(label)});
      }
    }
  }
  if (listing.files.empty()) {
    return InvalidArgument(root + ": no .jpg, .jpeg or .png files in its " +
                           std::to_string(listing.classes.size()) + " class folders");
  }
  return listing;
}

Result<PackSummary> PackImageFolder(Env& env, const std::string& src_dir,
                                    const std::string& out_dir, const PackOptions& options) {
  EMBER_ASSIGN_OR_RETURN(std::string src, AbsolutePath(src_dir, "the source directory"));
  EMBER_ASSIGN_OR_RETURN(std::string out, AbsolutePath(out_dir, "the output directory"));
  if (IsWithin(out, src) || IsWithin(src, out)) {
    return InvalidArgument("the output directory " + out + " and the source directory " + src +
                           " must not contain one another");
  }
  EMBER_ASSIGN_OR_RETURN(ImageFolderListing listing, ListImageFolder(env, src));
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<PackWriter> writer,
                         PackWriter::Create(env, out, options, kImageFolderFormat,
                                            listing.classes));
  const uint64_t total = listing.files.size();
  for (uint64_t i = 0; i < total; ++i) {
    const ImageFolderListing::File& file = listing.files[i];
    Result<std::string> bytes = env.ReadFile(src + "/" + file.path);
    if (!bytes.ok()) return bytes.status();  // names the file; ~PackWriter cleans up
    EMBER_RETURN_IF_ERROR(writer->Add(reinterpret_cast<const uint8_t*>(bytes->data()),
                                      bytes->size(), file.label, file.path));
    if (options.progress) options.progress({PackProgress::Stage::kWrite, i + 1, total});
  }
  EMBER_ASSIGN_OR_RETURN(PackSummary summary, writer->Commit());
  summary.ignored_files = listing.ignored_files;
  return summary;
}

}  // namespace ember::pack
