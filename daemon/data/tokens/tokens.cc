#include "daemon/data/tokens/tokens.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "common/paths.h"
#include "common/random.h"
#include "common/strict_yaml.h"
#include "ember/ring_layout.h"

namespace ember::daemon {

namespace {

constexpr const char* kKnownKeys = "seq_len, dtype, vocab_size";
constexpr const char* kExample = "tokens: {seq_len: 1024, dtype: uint16}";
constexpr uint64_t kMaxVocabSize = uint64_t{1} << 32;
// Ids per chunk of the vocab scan: a chunk's maximum vectorizes; only a chunk holding a
// bad id is searched again for the first one.
constexpr uint64_t kScanChunk = uint64_t{1} << 16;

const char* WidthName(TokenWidth width) {
  return width == TokenWidth::kUInt16 ? "uint16" : "uint32";
}

uint64_t WidthBytes(TokenWidth width) { return static_cast<uint64_t>(width); }

Result<TokensOptions> ParseTokensMap(const StrictYaml& yaml, const YAML::Node& map) {
  TokensOptions options;
  if (!map.IsNull()) {
    if (!map.IsMap()) {
      return yaml.Error(map, "tokens must be a map of options (" + std::string(kKnownKeys) +
                                 "), got " + DescribeYaml(map));
    }
    EMBER_RETURN_IF_ERROR(yaml.CheckKeys(map, "tokens", {"seq_len", "dtype", "vocab_size"}));
    if (const YAML::Node seq_len = map["seq_len"]) {
      EMBER_ASSIGN_OR_RETURN(options.seq_len,
                             yaml.Unsigned(seq_len, "tokens.seq_len", 1, kMaxTokensSeqLen));
    }
    if (const YAML::Node dtype = map["dtype"]) {
      EMBER_ASSIGN_OR_RETURN(const size_t index,
                             yaml.OneOf(dtype, "tokens.dtype", {"uint16", "uint32"}));
      options.width = index == 0 ? TokenWidth::kUInt16 : TokenWidth::kUInt32;
    }
    if (const YAML::Node vocab_size = map["vocab_size"]) {
      EMBER_ASSIGN_OR_RETURN(options.vocab_size,
                             yaml.Unsigned(vocab_size, "tokens.vocab_size", 1, kMaxVocabSize));
    }
  }
  if (options.seq_len == 0) {
    return yaml.Error(map, std::string("tokens.seq_len is required, e.g. ") + kExample);
  }
  if (options.width == TokenWidth::kUInt16 && options.vocab_size &&
      *options.vocab_size > uint64_t{1} << 16) {
    return yaml.Error(map["vocab_size"],
                      "tokens.vocab_size " + std::to_string(*options.vocab_size) +
                          " has ids that do not fit dtype uint16 (at most 65536 ids); use "
                          "dtype: uint32");
  }
  return options;
}

Result<TokensOptions> ParseRoot(const StrictYaml& yaml, const YAML::Node& root) {
  if (root.IsNull()) return ParseTokensMap(yaml, root);
  if (!root.IsMap()) {
    return yaml.Error(root, "expected a map with the key 'tokens' (e.g. " + std::string(kExample) +
                                "), got " + DescribeYaml(root));
  }
  EMBER_RETURN_IF_ERROR(yaml.CheckKeys(root, "", {"tokens"}));
  return ParseTokensMap(yaml, root["tokens"]);
}

// Reads token `i` (little-endian in the file) as a host integer.
template <typename Word>
inline Word LoadToken(const char* data, uint64_t i) {
  Word word;
  std::memcpy(&word, data + i * sizeof(Word), sizeof(Word));
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  if constexpr (sizeof(Word) == 2) word = __builtin_bswap16(word);
  if constexpr (sizeof(Word) == 4) word = __builtin_bswap32(word);
#endif
  return word;
}

// Writes tokens [first, first + n) of `data` to `dst` as int64 (dst need not be aligned).
template <typename Word>
void Widen(const char* data, uint64_t first, uint64_t n, char* dst) {
  for (uint64_t i = 0; i < n; ++i) {
    const int64_t id = LoadToken<Word>(data, first + i);
    std::memcpy(dst + i * sizeof(int64_t), &id, sizeof(int64_t));
  }
}

// The index of the first of `n` tokens that is >= bound, or n if none is.
template <typename Word>
uint64_t FirstAtLeast(const char* data, uint64_t n, uint64_t bound) {
  for (uint64_t start = 0; start < n; start += kScanChunk) {
    const uint64_t end = std::min(n, start + kScanChunk);
    Word max = 0;
    for (uint64_t i = start; i < end; ++i) max = std::max(max, LoadToken<Word>(data, i));
    if (max < bound) continue;
    for (uint64_t i = start; i < end; ++i) {
      if (LoadToken<Word>(data, i) >= bound) return i;
    }
  }
  return n;
}

struct TokensFile {
  DatasetInfo info;
  TokensOptions options;
  std::unique_ptr<MappedFile> file;
  uint64_t num_tokens = 0;
};

Result<TokensFile> OpenTokens(Env& env, const DatasetSpec& spec) {
  TokensFile tokens;
  EMBER_ASSIGN_OR_RETURN(tokens.options, ParseTokensOptions(spec.pipeline));
  const TokensOptions& options = tokens.options;

  EMBER_ASSIGN_OR_RETURN(const std::string path, AbsolutePath(spec.path, "the dataset path"));
  if (env.IsDirectory(path)) {
    return InvalidArgument(path + ": is a directory (a tokens dataset is one file)");
  }
  EMBER_ASSIGN_OR_RETURN(tokens.file, env.MapReadOnly(path));

  const uint64_t size = tokens.file->size();
  const uint64_t width = WidthBytes(options.width);
  if (size % width != 0) {
    return DataLoss(path + ": size " + std::to_string(size) + " bytes is not a multiple of " +
                    std::to_string(width) + " (the width of a " + WidthName(options.width) +
                    " token): truncated, or not a " + WidthName(options.width) +
                    " token file?");
  }
  tokens.num_tokens = size / width;
  const uint64_t count = TokenWindowCount(tokens.num_tokens, options.seq_len);
  if (count == 0) {
    return InvalidArgument(path + ": " + std::to_string(tokens.num_tokens) + " " +
                           WidthName(options.width) + " tokens are too few for seq_len " +
                           std::to_string(options.seq_len) + ": a window of seq_len + 1 "
                           "tokens at every epoch offset needs at least 2 * seq_len = " +
                           std::to_string(2 * options.seq_len));
  }

  DatasetInfo& info = tokens.info;
  info.spec = spec;
  info.spec.path = path;
  info.count = count;
  const std::vector<int64_t> shape = {static_cast<int64_t>(options.seq_len)};
  info.tensors.push_back(TensorSpec{"input", ring::DType::kInt64, shape});
  info.tensors.push_back(TensorSpec{"target", ring::DType::kInt64, shape});
  info.files = {path};
  return tokens;
}

Status CheckVocab(const TokensFile& tokens) {
  const TokensOptions& options = tokens.options;
  if (!options.vocab_size) return Status::Ok();
  const uint64_t bound = *options.vocab_size;
  const uint64_t width = WidthBytes(options.width);
  if (bound > (uint64_t{1} << (8 * width)) - 1) return Status::Ok();  // every id fits
  const MappedFile& file = *tokens.file;
  EMBER_RETURN_IF_ERROR(file.Advise(MappedFile::Access::kSequential));
  const uint64_t bad = options.width == TokenWidth::kUInt16
                           ? FirstAtLeast<uint16_t>(file.data(), tokens.num_tokens, bound)
                           : FirstAtLeast<uint32_t>(file.data(), tokens.num_tokens, bound);
  if (file.shrunk()) return file.ShrunkError();
  if (bad < tokens.num_tokens) {
    const uint64_t id = options.width == TokenWidth::kUInt16
                            ? LoadToken<uint16_t>(file.data(), bad)
                            : LoadToken<uint32_t>(file.data(), bad);
    return DataLoss(file.path() + ": token " + std::to_string(bad) + " (byte offset " +
                    std::to_string(bad * width) + ") is " + std::to_string(id) +
                    ", not below vocab_size " + std::to_string(bound));
  }
  return Status::Ok();
}

// The mapped file and its windows: immutable after construction, so ReadSample needs no
// lock.
class TokensSource : public Source {
 public:
  explicit TokensSource(TokensFile tokens)
      : tokens_(std::move(tokens)), seq_len_(tokens_.options.seq_len) {}

  const DatasetInfo& info() const override { return tokens_.info; }

  Status ReadSample(uint64_t id, const SampleContext& context, void* const* dsts) const override {
    EMBER_RETURN_IF_ERROR(CheckInRange(id));
    const uint64_t start = TokenEpochOffset(context.seed, context.epoch, seq_len_) + id * seq_len_;
    const char* data = tokens_.file->data();
    char* input = static_cast<char*>(dsts[0]);
    char* target = static_cast<char*>(dsts[1]);
    if (tokens_.options.width == TokenWidth::kUInt16) {
      Widen<uint16_t>(data, start, seq_len_, input);
      Widen<uint16_t>(data, start + 1, seq_len_, target);
    } else {
      Widen<uint32_t>(data, start, seq_len_, input);
      Widen<uint32_t>(data, start + 1, seq_len_, target);
    }
    if (tokens_.file->shrunk()) return tokens_.file->ShrunkError();  // it read zeros
    return Status::Ok();
  }

  // The epoch's offset is unknown here, so this reads [id * L, (id + 2) * L), which holds
  // window `id` at every offset.
  void Prefetch(const uint64_t* ids, size_t count) const override {
    const uint64_t width = WidthBytes(tokens_.options.width);
    for (size_t i = 0; i < count; ++i) {
      if (ids[i] >= tokens_.info.count) continue;
      tokens_.file->WillNeed(ids[i] * seq_len_ * width, 2 * seq_len_ * width);
    }
  }

 private:
  const TokensFile tokens_;
  const uint64_t seq_len_;
};

}  // namespace

Result<TokensOptions> ParseTokensOptions(const std::string& pipeline) {
  const StrictYaml yaml("pipeline");
  return yaml.Parse(pipeline, [&yaml](const YAML::Node& root) { return ParseRoot(yaml, root); });
}

uint64_t TokenWindowCount(uint64_t num_tokens, uint64_t seq_len) {
  if (num_tokens < seq_len || num_tokens - seq_len < seq_len) return 0;
  return (num_tokens - seq_len) / seq_len;
}

uint64_t TokenEpochOffset(uint64_t seed, uint64_t epoch, uint64_t seq_len) {
  // Its own salt, so the offset is unrelated to the epoch plan's permutation stream.
  const uint64_t z = StreamSeed(seed, epoch, 0xD1B54A32D192ED03ULL);
  SplitMix64 more(z);
  return more.Below(z, seq_len);
}

Result<DatasetInfo> ProbeTokens(Env& env, const DatasetSpec& spec) {
  EMBER_ASSIGN_OR_RETURN(TokensFile tokens, OpenTokens(env, spec));
  return std::move(tokens.info);
}

Result<std::unique_ptr<Source>> LoadTokens(Env& env, const DatasetSpec& spec) {
  EMBER_ASSIGN_OR_RETURN(TokensFile tokens, OpenTokens(env, spec));
  EMBER_RETURN_IF_ERROR(CheckVocab(tokens));
  // Windows are read in the epoch permutation's order: random, a window at a time.
  EMBER_RETURN_IF_ERROR(tokens.file->Advise(MappedFile::Access::kRandom));
  return std::unique_ptr<Source>(std::make_unique<TokensSource>(std::move(tokens)));
}

}  // namespace ember::daemon
