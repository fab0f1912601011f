#include "daemon/data/webdataset/shard_list.h"

#include <algorithm>
#include <charconv>
#include <cstdint>

#include "daemon/data/remote/http_fetch.h"
#include "daemon/data/remote/s3_config.h"
#include "daemon/data/remote/s3_list.h"

namespace ember::daemon {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool ParseInt(const std::string& text, int64_t& value) {
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  auto [at, error] = std::from_chars(text.data() + (text[0] == '+' ? 1 : 0), end, value);
  return error == std::errc() && at == end;
}

bool ZeroPadded(const std::string& bound) {
  const size_t digits = bound.find_first_not_of("+-");
  return bound.size() > digits + 1 && bound[digits] == '0';
}

// The alternatives of one brace body: "a,b" or "000..099" (or "0..10..5").
Result<std::vector<std::string>> Alternatives(const std::string& pattern, const std::string& body,
                                              size_t budget) {
  auto bad = [&](const std::string& what) {
    return InvalidArgument("shard pattern '" + pattern + "': {" + body + "}: " + what);
  };
  std::vector<std::string> out;
  const size_t dots = body.find("..");
  if (dots == std::string::npos || body.find(',') != std::string::npos) {
    size_t start = 0;
    while (true) {
      const size_t comma = body.find(',', start);
      out.push_back(body.substr(start, comma - start));
      if (out.size() > budget) return bad("more than " + std::to_string(kMaxShards) + " shards");
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return out;
  }
  const std::string first = body.substr(0, dots);
  std::string last = body.substr(dots + 2);
  std::string step_text = "1";
  if (const size_t second = last.find(".."); second != std::string::npos) {
    step_text = last.substr(second + 2);
    last = last.substr(0, second);
  }
  int64_t from = 0, to = 0, step = 0;
  if (!ParseInt(first, from) || !ParseInt(last, to) || !ParseInt(step_text, step)) {
    return bad("a range's bounds and step must be integers");
  }
  if (step == 0) return bad("a range's step must not be 0");
  const uint64_t magnitude = step < 0 ? 0 - static_cast<uint64_t>(step) : static_cast<uint64_t>(step);
  const uint64_t span = from <= to ? static_cast<uint64_t>(to) - static_cast<uint64_t>(from)
                                   : static_cast<uint64_t>(from) - static_cast<uint64_t>(to);
  if (span / magnitude >= budget) {  // (span / magnitude + 1 names; no overflow)
    return bad("more than " + std::to_string(kMaxShards) + " shards");
  }
  const size_t width = ZeroPadded(first) || ZeroPadded(last) ? std::max(first.size(), last.size()) : 0;
  const int64_t direction = from <= to ? 1 : -1;
  for (uint64_t k = 0; k <= span / magnitude; ++k) {
    const int64_t value = from + direction * static_cast<int64_t>(k * magnitude);
    std::string digits = std::to_string(value < 0 ? -value : value);
    const size_t sign = value < 0 ? 1 : 0;
    if (digits.size() + sign < width) digits.insert(0, width - digits.size() - sign, '0');
    out.push_back((value < 0 ? "-" : "") + digits);
  }
  return out;
}

// The S3 objects `path` (s3://...) names, as internal URLs (see ListShards).
Result<std::vector<std::string>> ListS3Shards(const std::string& path, const HttpFetcher* remote,
                                              const std::string& suffix,
                                              const std::string& endpoint) {
  if (remote == nullptr) {
    return FailedPrecondition(path + ": this emberd has no shard cache to read S3 objects through");
  }
  const S3Config* s3 = remote->options().s3.get();
  if (s3 == nullptr) return FailedPrecondition(path + ": this emberd has no S3 configuration");
  if (!s3->unusable.ok()) return Status(s3->unusable.code(), path + ": " + s3->unusable.message());
  EMBER_ASSIGN_OR_RETURN(std::vector<std::string> names, ExpandBraces(path));
  const std::string& at = endpoint.empty() ? s3->endpoint : endpoint;
  std::vector<std::string> urls;
  for (const std::string& name : names) {
    EMBER_ASSIGN_OR_RETURN(S3Location location, ParseS3Path(name));
    if (names.size() > 1 || !(location.key.empty() || EndsWith(location.key, "/"))) {
      urls.push_back(S3ObjectUrl(at, location));
      continue;
    }
    S3ListOptions options;
    options.max_objects = kMaxShards * 4;
    options.endpoint = endpoint;
    EMBER_ASSIGN_OR_RETURN(S3Listing listing, ListS3(*remote, location, options));
    std::vector<std::string> keys;  // by key, bytewise (as S3 lists them)
    for (const S3Object& object : listing.objects)
      if (EndsWith(object.key, suffix)) keys.push_back(object.key);
    std::sort(keys.begin(), keys.end());
    for (const std::string& key : keys) urls.push_back(S3ObjectUrl(at, S3Location{location.bucket, key}));
    if (urls.size() > kMaxShards) {
      return InvalidArgument(path + ": more than " + std::to_string(kMaxShards) + " shards");
    }
    if (urls.empty()) {
      std::string under;
      for (size_t i = 0; i < listing.prefixes.size() && i < 5; ++i)
        under += (i == 0 ? "" : ", ") + listing.prefixes[i];
      if (listing.prefixes.size() > 5) under += ", ...";
      return NotFound(path + ": no " + suffix + " objects directly under this prefix (" +
                      std::to_string(listing.objects.size()) + " others" +
                      (under.empty() ? "" : "; sub-prefixes " + under) + ")");
    }
  }
  return urls;
}

}  // namespace

Result<std::vector<std::string>> ExpandBraces(const std::string& pattern) {
  std::vector<std::string> names = {""};
  size_t at = 0;
  while (at < pattern.size()) {
    const size_t open = pattern.find_first_of("{}", at);
    if (open == std::string::npos) {
      for (std::string& name : names) name += pattern.substr(at);
      break;
    }
    if (pattern[open] == '}') {
      return InvalidArgument("shard pattern '" + pattern + "': '}' without '{' at offset " +
                             std::to_string(open));
    }
    const size_t close = pattern.find_first_of("{}", open + 1);
    if (close == std::string::npos || pattern[close] == '{') {
      return InvalidArgument("shard pattern '" + pattern + "': the '{' at offset " +
                             std::to_string(open) + " is " +
                             (close == std::string::npos ? "never closed" : "nested"));
    }
    const std::string prefix = pattern.substr(at, open - at);
    EMBER_ASSIGN_OR_RETURN(
        std::vector<std::string> alternatives,
        Alternatives(pattern, pattern.substr(open + 1, close - open - 1), kMaxShards / names.size()));
    if (names.size() * alternatives.size() > kMaxShards) {
      return InvalidArgument("shard pattern '" + pattern + "': more than " +
                             std::to_string(kMaxShards) + " shards");
    }
    std::vector<std::string> next;
    next.reserve(names.size() * alternatives.size());
    for (const std::string& name : names) {
      for (const std::string& alternative : alternatives) next.push_back(name + prefix + alternative);
    }
    names = std::move(next);
    at = close + 1;
  }
  return names;
}

bool IsRemoteShard(const std::string& path) {
  return path.rfind("http://", 0) == 0 || path.rfind("https://", 0) == 0 || IsS3ObjectUrl(path);
}

Result<std::vector<std::string>> ListShards(Env& env, const std::string& path,
                                            const HttpFetcher* remote, const std::string& suffix,
                                            const std::string& endpoint) {
  if (IsS3Path(path)) return ListS3Shards(path, remote, suffix, endpoint);
  if (!endpoint.empty()) {
    return InvalidArgument(RedactUrl(path) + ": endpoint is for s3:// paths");
  }
  if (UsesS3Credentials(path) && path[2] == '+') {
    return InvalidArgument(RedactUrl(path) + ": s3+http(s):// is emberd's own form of S3 "
                           "objects; name them s3://BUCKET/KEY");
  }
  if (IsRemoteShard(path)) {
    if (path.back() == '/') {
      return InvalidArgument(RedactUrl(path) + ": an HTTP(S) path names its shards (a " + suffix +
                             " URL or a brace pattern); a directory cannot be listed over HTTP");
    }
    return ExpandBraces(path);  // each is checked when it is fetched
  }
  if (const size_t scheme = path.find("://"); scheme != std::string::npos) {
    return InvalidArgument(path.substr(0, scheme + 3) + " paths are not read (local paths, "
                           "http(s):// and s3:// URLs are)");
  }
  if (path.find('{') == std::string::npos && env.IsDirectory(path)) {
    EMBER_ASSIGN_OR_RETURN(std::vector<std::string> entries, env.ListDir(path));
    std::vector<std::string> shards;
    const std::string dir = EndsWith(path, "/") ? path : path + "/";
    for (const std::string& entry : entries) {
      if (EndsWith(entry, suffix) && !env.IsDirectory(dir + entry)) shards.push_back(dir + entry);
      if (shards.size() > kMaxShards) {
        return InvalidArgument(path + ": more than " + std::to_string(kMaxShards) + " shards");
      }
    }
    if (shards.empty()) return NotFound(path + ": no " + suffix + " shards in this directory");
    return shards;
  }
  EMBER_ASSIGN_OR_RETURN(std::vector<std::string> shards, ExpandBraces(path));
  for (const std::string& shard : shards) {
    if (!env.FileExists(shard)) {
      return NotFound(shard + ": no such shard" +
                      (shards.size() > 1 ? " (of " + std::to_string(shards.size()) + " that '" +
                                               path + "' names)"
                                         : ""));
    }
  }
  return shards;
}

}  // namespace ember::daemon
