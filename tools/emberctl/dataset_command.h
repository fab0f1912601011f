// `emberctl dataset add`'s progress and `emberctl dataset inspect`'s details.
//
// Progress: while the registration call waits, another thread polls the daemon for how far
// it has got (Client::GetRegistrationProgress, on the same client) every `interval`, and
// draws a line: the shards indexed of those listed, their bytes, the rate and the time
// left, e.g. "indexing web: 3/10 shards, 12.0 MiB, 4.0 MiB/s, ETA 2 s". On a terminal the
// line is redrawn in place and erased at the end; elsewhere (a log, a pipe) a plain line
// is written when it changed, at most every `plain_every`, or none with `quiet`. A daemon
// that does not follow the registration (an older one, or one following many) draws
// nothing.
#ifndef EMBER_TOOLS_EMBERCTL_DATASET_COMMAND_H_
#define EMBER_TOOLS_EMBERCTL_DATASET_COMMAND_H_

#include <chrono>
#include <cstdio>
#include <string>

#include "ember/client.h"

namespace ember::emberctl {

// "12.0 MiB", "512 B", "1.5 GiB".
std::string Bytes(uint64_t bytes);

// The progress line, without a newline. Shards (of the total once listed) only when the
// format reports them; the rate once bytes were read; the time left once a shard is done.
std::string RenderProgress(const RegistrationProgress& progress);

// The lines `dataset inspect` adds to a dataset's: its source, shards, index memory,
// endpoint (an S3 dataset's own), shuffle mode and, for a remote one, what the node's
// shard cache holds of it.
std::string RenderDetails(const DatasetDetails& details);

struct ProgressOptions {
  std::chrono::milliseconds interval{250};
  bool terminal = false;  // redraw in place (else plain lines)
  std::chrono::milliseconds plain_every{1000};
  bool quiet = false;     // no progress at all
};

// client.AddDataset(spec), drawing its progress on `out` meanwhile (see above). Blocks.
Result<DatasetInfo> AddWithProgress(Client& client, const DatasetSpec& spec,
                                    const ProgressOptions& options, std::FILE* out);

}  // namespace ember::emberctl

#endif  // EMBER_TOOLS_EMBERCTL_DATASET_COMMAND_H_
