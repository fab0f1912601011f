// Packing an image folder (the layout of torchvision's ImageFolder) into a packed
// dataset: the files' bytes are copied as they are (not decoded), so the packed dataset
// serves exactly the samples of the folder, in the same order, with the same labels.
#ifndef EMBER_PACK_IMAGEFOLDER_PACK_H_
#define EMBER_PACK_IMAGEFOLDER_PACK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/env.h"
#include "pack/writer.h"
#include "ember/status.h"

namespace ember::pack {

// The source format name recorded in the manifest of a packed image folder.
inline constexpr const char* kImageFolderFormat = "imagefolder";

struct ImageFolderListing {
  std::string root;                 // absolute
  std::vector<std::string> classes; // label i's folder name
  struct File {
    std::string path;  // relative to root, e.g. "cat/0001.jpg"
    int64_t label = 0;
  };
  std::vector<File> files;  // in sample-id order
  uint64_t ignored_files = 0;
};

// Lists `root` as torchvision's ImageFolder does: the classes are root's sub-directories
// in sorted (byte) order, label = position (a class folder with no images keeps its
// label); each class folder is walked recursively, following symlinks, directories in
// sorted order of their full path, files sorted within each directory; a file is a
// sample if its name ends in .jpg, .jpeg or .png, case-insensitively; others are counted
// in ignored_files. Plain files directly in root are ignored. kNotFound if root does not
// exist; kInvalidArgument if it is not a directory, has no class folder or no image file,
// or nests deeper than 64 directories (a symlink loop?); listing errors name the directory.
Result<ImageFolderListing> ListImageFolder(Env& env, const std::string& root);

// Packs the image folder `src_dir` into `out_dir` (see PackWriter for atomicity and
// verification, and PackOptions). Each file is read whole through env.ReadFile (memory
// is bounded by the largest file, not the dataset). Errors name the file; a failure
// leaves neither out_dir nor the temporary directory. kInvalidArgument if out_dir is
// inside src_dir or src_dir inside out_dir.
Result<PackSummary> PackImageFolder(Env& env, const std::string& src_dir,
                                    const std::string& out_dir, const PackOptions& options);

}  // namespace ember::pack

#endif  // EMBER_PACK_IMAGEFOLDER_PACK_H_
