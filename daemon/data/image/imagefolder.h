// Format "imagefolder": a directory of class sub-folders of JPEG and PNG files, as
// torchvision's ImageFolder:
//   ROOT/cat/001.jpg, ROOT/cat/x/002.png, ROOT/dog/003.JPEG, ...
// ROOT is the spec's path (its split is not used). The files and labels are those of
// pack::ListImageFolder (pack/imagefolder_pack.h), so a folder and its packed
// copy serve the same samples: label = index of the class folder among ROOT's
// sub-folders in sorted order (an empty class folder keeps its index), files found
// recursively and kept if their name ends in .jpg, .jpeg or .png (any case); other files
// and files directly in ROOT are ignored. Sample ids follow class order, then file order.
//
// Tensors per sample: "image" (the pipeline's dtype and shape, see pipeline.h) and
// "label" (int64 scalar, as torch's cross-entropy targets). The pipeline is the spec's
// YAML text (empty: resize 256, center_crop 224, uint8 CHW).
//
// Registration checks the pipeline and the directory structure only: image headers are
// not read (probing a million files would take minutes). A corrupt file surfaces when
// its sample is read: ReadSample fails with kDataLoss "<path>: <reason>", also when the
// file cannot be read (missing, an I/O error, truncated); running out of descriptors or
// memory is kResourceExhausted instead. All file access goes through the Env.
#ifndef EMBER_DAEMON_DATA_IMAGE_IMAGEFOLDER_H_
#define EMBER_DAEMON_DATA_IMAGE_IMAGEFOLDER_H_

#include <memory>

#include "daemon/catalog/dataset.h"
#include "common/env.h"
#include "daemon/data/plugin/plugin_registry.h"
#include "daemon/data/source.h"
#include "ember/status.h"

namespace ember::daemon {

// Parses the pipeline and lists the folder. kInvalidArgument for a bad pipeline ("dataset
// 'NAME': pipeline: line L, column C: ..." naming the key or step and the value) or a bad
// folder, and kNotFound for a missing one (as pack::ListImageFolder). Pipeline steps that are
// not built in come from `plugins` (transform plugins; none if null).
Result<DatasetInfo> ProbeImageFolder(Env& env, const DatasetSpec& spec,
                                     const PluginRegistry* plugins = nullptr);

// As ProbeImageFolder, returning a Source that decodes on demand: ParallelDecode() is
// true; Prefetch() opens the files and asks the kernel to read them ahead
// (ReadableFile::WillNeed), keeping the descriptors (at most 256) for ReadSample, which
// reads the file through its prefetched descriptor (else Env::OpenForRead: one open per
// sample either way), decodes it and writes the pipeline's output into dsts[0] and the
// label into dsts[1]. Thread-safe. The source reads through `env`, which must outlive it.
Result<std::unique_ptr<Source>> LoadImageFolder(Env& env, const DatasetSpec& spec,
                                                const PluginRegistry* plugins = nullptr);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_IMAGE_IMAGEFOLDER_H_
