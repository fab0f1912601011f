// Format "tokens": a flat binary file of token ids for language-model training.
//
// spec.path is one file of little-endian unsigned token ids, uint16 or uint32, with no
// header (as written by `np.array(ids, dtype=np.uint16).tofile(path)`). spec.split is
// recorded, not interpreted: register one dataset per file. The file is memory-mapped
// (Env::MapReadOnly), never read into memory.
//
// Options come from spec.pipeline (YAML):
//   tokens:
//     seq_len: 1024       # required, 1..16777216: tokens per sample
//     dtype: uint16       # optional, uint16 (default) or uint32: the file's token width
//     vocab_size: 50257   # optional, 1..4294967296: every id must be < vocab_size,
//                         # checked by a scan of the whole file at load (not at probe);
//                         # above 65536 it requires dtype uint32
// Nothing else is accepted: unknown keys and bad values are kInvalidArgument naming the
// key and the value.
//
// Samples: with n tokens and L = seq_len, the dataset has count = (n - L) / L samples,
// the same in every epoch. Sample i of epoch (seed, epoch) is the window of L + 1 tokens
// starting at token TokenEpochOffset(seed, epoch, L) + i * L; tensors:
//   "input"  int64 [L]: window[0 .. L)
//   "target" int64 [L]: window[1 .. L]   (input shifted by one: next-token labels)
// int64 because that is what torch.nn.Embedding and cross_entropy take, and LibTorch
// 1.13 has no uint16/uint32 tensors; ids are widened (zero-extended) on copy.
// The windows of one epoch are disjoint and contiguous (window i's last target token is
// window i+1's first input token); the offset in [0, L) moves every boundary from one
// epoch to the next, so the model does not see the same cuts every epoch. The order of
// the windows is the job's epoch permutation. For any offset the last window ends at
// most at token offset + count * L + 1 <= n.
#ifndef EMBER_DAEMON_DATA_TOKENS_TOKENS_H_
#define EMBER_DAEMON_DATA_TOKENS_TOKENS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "daemon/catalog/dataset.h"
#include "common/env.h"
#include "daemon/data/source.h"
#include "ember/status.h"

namespace ember::daemon {

inline constexpr uint64_t kMaxTokensSeqLen = uint64_t{1} << 24;

enum class TokenWidth { kUInt16 = 2, kUInt32 = 4 };  // bytes per token in the file

struct TokensOptions {
  TokenWidth width = TokenWidth::kUInt16;
  uint64_t seq_len = 0;
  std::optional<uint64_t> vocab_size;
};

// Parses the pipeline YAML above. kInvalidArgument naming the place (common/strict_yaml.h),
// e.g. "pipeline: line 2, column 12: tokens.seq_len must be a whole number in
// 1..16777216, got 'abc'".
Result<TokensOptions> ParseTokensOptions(const std::string& pipeline);

// Samples in a file of `num_tokens` tokens: (num_tokens - seq_len) / seq_len, or 0 if
// num_tokens < 2 * seq_len. seq_len > 0.
uint64_t TokenWindowCount(uint64_t num_tokens, uint64_t seq_len);

// The shift in [0, seq_len) of every window start in epoch (seed, epoch): a stream seed
// of (seed, epoch) (common/random.h) drawn without bias into [0, seq_len).
// Deterministic, the same on every host. seq_len > 0.
uint64_t TokenEpochOffset(uint64_t seed, uint64_t epoch, uint64_t seq_len);

// Maps the file and checks it: it is a regular file, its size is a multiple of the
// token width (else kDataLoss naming the file and its size), and it holds at least one
// window at every offset (n >= 2 * seq_len; else kInvalidArgument naming the file, n and
// seq_len). Does not scan token ids. kNotFound if the file is missing.
Result<DatasetInfo> ProbeTokens(Env& env, const DatasetSpec& spec);

// The same checks, then, if vocab_size is given, a scan of every id (kDataLoss naming
// the file, the token index and byte offset of the first id >= vocab_size). The source
// keeps the file mapped; it is immutable and thread-safe. ParallelDecode() is false
// (a sample is a copy and a widen); Prefetch() asks the kernel to read the windows ahead.
Result<std::unique_ptr<Source>> LoadTokens(Env& env, const DatasetSpec& spec);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_TOKENS_TOKENS_H_
