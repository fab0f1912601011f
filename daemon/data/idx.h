// Format "idx": MNIST / Fashion-MNIST IDX files, gzip-compressed or raw.
//
// A dataset is a directory with one images file and one labels file per split:
//   train: train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz]
//   test:  t10k-images-idx3-ubyte[.gz],  t10k-labels-idx1-ubyte[.gz]
// (Debian's dataset-fashion-mnist installs these under /usr/share/datasets/fashion-mnist.)
// The IDX header is: two zero bytes, a type byte (0x08 uint8, 0x09 int8, 0x0B int16,
// 0x0C int32, 0x0D float32, 0x0E float64), a dimension count, then one big-endian uint32
// per dimension; the payload follows, big-endian. Samples are the first dimension.
// Tensors: "image" (the images file's element type and per-sample shape) and "label".
#ifndef EMBER_DAEMON_DATA_IDX_H_
#define EMBER_DAEMON_DATA_IDX_H_

#include <memory>

#include "daemon/catalog/dataset.h"
#include "common/env.h"
#include "daemon/data/dataset_memory.h"
#include "daemon/data/source.h"
#include "ember/status.h"

namespace ember::daemon {

// Reads and fully checks both files of the split: existence, gzip integrity (CRC and
// length), magic bytes, dimension counts, that the payload length equals what the
// header promises, and that both files hold the same number of samples.
// Errors name the file and what is wrong, e.g.
//   "/d/train-images-idx3-ubyte.gz: truncated: header promises 47040000 payload bytes, file has 1024"
// kNotFound if a file is missing; kDataLoss for corrupt or truncated content;
// kInvalidArgument for a bad split. Reads no more than the headers of raw files.
// `memory` (may be null): charged with what a load would hold while the probe runs;
// kResourceExhausted naming the file, the bytes and the limit if it would not fit.
Result<DatasetInfo> ProbeIdx(Env& env, const DatasetSpec& spec,
                             DatasetMemory::Charge* memory = nullptr);

// Loads the split into memory (decompressed, converted to native byte order) after the
// same checks as ProbeIdx, charging `memory` (may be null) with what it holds before it
// reads it; the source holds that for its life, so the charge should live as long.
// The result is immutable and thread-safe.
Result<std::unique_ptr<Source>> LoadIdx(Env& env, const DatasetSpec& spec,
                                        DatasetMemory::Charge* memory = nullptr);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_IDX_H_
