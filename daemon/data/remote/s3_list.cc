#include "daemon/data/remote/s3_list.h"

#include <algorithm>

namespace ember::daemon {
namespace {

constexpr size_t kMaxPageBytes = 16 << 20;  // 1000 keys of 1 KiB each, and then some

}  // namespace

Result<S3Listing> ListS3(const HttpFetcher& fetcher, const S3Location& location,
                         const S3ListOptions& options) {
  const std::string listing = "listing s3://" + location.bucket + "/" + location.key;
  const S3Config* s3 = fetcher.options().s3.get();
  if (s3 == nullptr) return FailedPrecondition(listing + ": this emberd has no S3 configuration");
  if (!s3->unusable.ok()) return Status(s3->unusable.code(), listing + ": " + s3->unusable.message());
  S3Listing result;
  std::string token;
  while (true) {
    // The query's parameters sorted by name and encoded as SigV4's canonical form wants.
    std::string query;
    if (!token.empty()) query += "continuation-token=" + S3UriEncode(token, false) + "&";
    if (!options.delimiter.empty()) query += "delimiter=" + S3UriEncode(options.delimiter, false) + "&";
    query += "list-type=2&max-keys=" + std::to_string(std::clamp(options.page_size, 1, 1000));
    if (!location.key.empty()) query += "&prefix=" + S3UriEncode(location.key, false);
    std::string url = S3ObjectUrl(options.endpoint.empty() ? s3->endpoint : options.endpoint,
                                  S3Location{location.bucket, ""});
    url.back() = '?';  // "s3+ENDPOINT/BUCKET?QUERY"
    url += query;
    std::string body;
    Status got = fetcher.Get(url, std::nullopt, [&](uint64_t offset, const char* data, size_t n) {
      if (offset + n > kMaxPageBytes) {
        return DataLoss("a page of the listing over " + std::to_string(kMaxPageBytes) + " bytes");
      }
      body.resize(offset);  // a retry starts again at 0
      body.append(data, n);
      return Status::Ok();
    });
    ++result.pages;
    if (!got.ok()) return got.WithContext(listing);
    EMBER_ASSIGN_OR_RETURN(S3ListPage page, ParseListObjectsV2(listing, body));
    for (S3Object& object : page.objects) result.objects.push_back(std::move(object));
    for (std::string& prefix : page.prefixes) result.prefixes.push_back(std::move(prefix));
    if (result.objects.size() > options.max_objects) {
      return ResourceExhausted(listing + ": more than " + std::to_string(options.max_objects) +
                               " objects");
    }
    if (!page.truncated) break;
    if (page.next_token.empty() || page.next_token == token) {
      return DataLoss(listing + ": page " + std::to_string(result.pages) +
                      " is truncated but gives no new continuation token");
    }
    token = page.next_token;
  }
  return result;
}

}  // namespace ember::daemon
