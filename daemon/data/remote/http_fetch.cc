#include "daemon/data/remote/http_fetch.h"

#include <curl/curl.h>

#include <strings.h>

#include <algorithm>
#include <cstdlib>
#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

#include "daemon/data/remote/s3_xml.h"

namespace ember::daemon {
namespace {

std::atomic<uint64_t> g_connections{0};

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct EasyCloser {
  void operator()(CURL* curl) const { curl_easy_cleanup(curl); }
};

// This thread's handle: libcurl keeps its connections open between requests.
CURL* ThreadHandle() {
  thread_local std::unique_ptr<CURL, EasyCloser> handle;
  if (!handle) {
    GlobalInit();
    handle.reset(curl_easy_init());
  }
  return handle.get();
}

struct HeaderList {
  curl_slist* list = nullptr;
  ~HeaderList() { curl_slist_free_all(list); }
};

// One try's outcome.
struct Attempt {
  CURLcode code = CURLE_OK;
  long http = 0;
  std::string reason;     // the status line's reason phrase
  Status sink_status;     // the sink's own error, which ends the request
  uint64_t received = 0;  // body bytes
  std::string etag;
  std::string refused;    // an address OnConnected refused
  std::string error_body;  // the start of a body that was not 2xx (S3's error document)
};

constexpr size_t kMaxErrorBody = 64 * 1024;

struct Transfer {
  const BodySink* sink = nullptr;
  Attempt* attempt = nullptr;
  const std::vector<std::string>* refused_addresses = nullptr;
};

// Called once a connection is up, before the request goes out (also after a redirect).
int OnConnected(void* user, char* primary_ip, char*, int, int) {
  auto* transfer = static_cast<Transfer*>(user);
  std::string ip = primary_ip != nullptr ? primary_ip : "";
  std::transform(ip.begin(), ip.end(), ip.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const std::string& prefix : *transfer->refused_addresses) {
    if (ip.rfind(prefix, 0) == 0) {
      transfer->attempt->refused = ip;
      return CURL_PREREQFUNC_ABORT;
    }
  }
  return CURL_PREREQFUNC_OK;
}

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* transfer = static_cast<Transfer*>(user);
  const size_t n = size * count;
  Attempt& attempt = *transfer->attempt;
  if (attempt.http >= 200 && attempt.http < 300) {
    if (transfer->sink != nullptr) {
      attempt.sink_status = (*transfer->sink)(attempt.received, data, n);
      if (!attempt.sink_status.ok()) return 0;  // aborts the transfer
    }
  } else if (attempt.error_body.size() < kMaxErrorBody) {
    attempt.error_body.append(data, std::min(n, kMaxErrorBody - attempt.error_body.size()));
  }
  attempt.received += n;
  return n;
}

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* transfer = static_cast<Transfer*>(user);
  const std::string line(data, size * count);
  if (line.rfind("HTTP/", 0) == 0) {  // a status line (again after a redirect or 100)
    const size_t code = line.find(' ');
    const size_t reason = code == std::string::npos ? code : line.find(' ', code + 1);
    transfer->attempt->http = code == std::string::npos ? 0 : std::atol(line.c_str() + code + 1);
    transfer->attempt->reason.clear();
    if (reason != std::string::npos) {
      std::string text = line.substr(reason + 1);
      while (!text.empty() && (text.back() == '\r' || text.back() == '\n')) text.pop_back();
      transfer->attempt->reason = text;
    }
  } else if (line.size() > 5 && strncasecmp(line.c_str(), "etag:", 5) == 0) {
    std::string value = line.substr(5);
    const size_t begin = value.find_first_not_of(" \t");
    const size_t end = value.find_last_not_of(" \t\r\n");
    transfer->attempt->etag = begin == std::string::npos ? "" : value.substr(begin, end - begin + 1);
  }
  return size * count;
}

bool Retryable(const Attempt& attempt) {
  if (!attempt.sink_status.ok()) return false;
  switch (attempt.code) {
    case CURLE_OK: return attempt.http >= 500 || attempt.http == 429;
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_COULDNT_RESOLVE_HOST: return true;
    default: return false;
  }
}

std::string S3ErrorText(const std::optional<S3Error>& error) {
  if (!error) return "";
  return " (" + error->code + (error->message.empty() ? "" : ": " + error->message) + ")";
}

// A failed S3 request's status: "WHAT: HTTP 403 (Code: Message): what it means". Names
// where the credentials came from, never the credentials.
Status S3Failure(const std::string& what, const Attempt& attempt,
                 const std::optional<S3Error>& error, const S3Config& s3, const std::string& url) {
  const std::string message =
      what + ": HTTP " + std::to_string(attempt.http) +
      (error ? S3ErrorText(error) : attempt.reason.empty() ? "" : " " + attempt.reason);
  const std::optional<S3Location> where = S3LocationOf(url);
  const std::string bucket = "bucket '" + (where ? where->bucket : "") + "'";
  const std::string key = where && !where->key.empty() ? "key '" + where->key + "'" : "";
  const std::string code = error ? error->code : "";
  const std::string from = s3.credentials_from;
  // The endpoint the URL names (a dataset's own, or emberd's configured one).
  const size_t host = url.find("://") + 3;
  const std::string endpoint = url.substr(3, url.find_first_of("/?#", host) - 3);
  const std::string endpoint_from =
      endpoint == s3.endpoint ? s3.endpoint_from : "the dataset's endpoint";
  if (code == "NoSuchKey" || (code.empty() && attempt.http == 404 && !key.empty()))
    return NotFound(message + ": " + bucket + " has no " + key);
  if (code == "NoSuchBucket") return NotFound(message + ": no " + bucket + " at " + endpoint);
  if (attempt.http == 404) return NotFound(message + ": " + bucket);
  if (code == "ExpiredToken" || code == "ExpiredTokenException" || code == "TokenRefreshRequired") {
    return PermissionDenied(message + ": the credentials from " + from +
                            " have expired; emberd reads them once, at start: renew them "
                            "there and restart emberd");
  }
  if (code == "InvalidToken")
    return PermissionDenied(message + ": S3 does not accept the session token from " + from);
  if (code == "SignatureDoesNotMatch") {
    return PermissionDenied(message + ": the secret key from " + from +
                            " does not match its access key");
  }
  if (code == "InvalidAccessKeyId")
    return PermissionDenied(message + ": S3 at " + endpoint + " knows no access key from " + from);
  if (code == "RequestTimeTooSkewed" || code == "RequestExpired")
    return PermissionDenied(message + ": this node's clock is too far from S3's");
  if (code == "PermanentRedirect" || code == "AuthorizationHeaderMalformed" ||
      (attempt.http >= 300 && attempt.http < 400)) {
    return FailedPrecondition(message + ": " + bucket + " is not served at " + endpoint +
                              " (from " + endpoint_from + ") for region " + s3.region +
                              " (from " + s3.region_from + ")");
  }
  if (attempt.http == 401 || attempt.http == 403) {
    return PermissionDenied(message + ": the credentials from " + from + " may not read " + bucket +
                            (key.empty() ? "" : " " + key));
  }
  if (attempt.http == 416) return InvalidArgument(message + " (past the object's end)");
  if (attempt.http == 400) return InvalidArgument(message);
  return Unavailable(message);
}

}  // namespace

std::string RedactUrl(const std::string& url) {
  const size_t scheme = url.find("://");
  const size_t host = scheme == std::string::npos ? 0 : scheme + 3;
  size_t path = url.find_first_of("/?#", host);
  if (path == std::string::npos) path = url.size();
  std::string authority = url.substr(host, path - host);
  if (const size_t at = authority.rfind('@'); at != std::string::npos) authority.erase(0, at + 1);
  const size_t query = url.find_first_of("?#", path);
  return url.substr(0, host) + authority +
         url.substr(path, (query == std::string::npos ? url.size() : query) - path);
}

HttpFetcher::HttpFetcher(FetchOptions options) : options_(std::move(options)) {
  options_.attempts = std::max(1, options_.attempts);
}

uint64_t HttpFetcher::connections_opened() { return g_connections.load(); }

Result<ObjectInfo> HttpFetcher::Stat(const std::string& url) const {
  ObjectInfo info;
  Status status = Perform("HEAD", url, std::nullopt, nullptr, &info);
  if (!status.ok()) return status;
  return info;
}

Status HttpFetcher::Get(const std::string& url, const std::optional<ByteRange>& range,
                        const BodySink& sink) const {
  if (range && range->length == 0) return Status::Ok();
  return Perform("GET", url, range, &sink, nullptr);
}

Status HttpFetcher::Perform(const char* method, const std::string& url,
                            const std::optional<ByteRange>& range, const BodySink* sink,
                            ObjectInfo* info) const {
  CURL* curl = ThreadHandle();
  if (curl == nullptr) return ResourceExhausted("libcurl: cannot make a handle");
  const std::string range_text =
      range ? std::to_string(range->offset) + "-" + std::to_string(range->offset + range->length - 1)
            : "";
  const std::string what =
      std::string(method) + " " + RedactUrl(url) + (range ? " (bytes " + range_text + ")" : "");
  // An S3 object: fetched at the URL without "s3+", signed.
  const S3Config* s3 = nullptr;
  if (IsS3ObjectUrl(url)) {
    s3 = options_.s3.get();
    if (s3 == nullptr) return FailedPrecondition(what + ": this emberd has no S3 configuration");
    if (!s3->unusable.ok()) return Status(s3->unusable.code(), what + ": " + s3->unusable.message());
  }
  const std::string request_url = s3 != nullptr ? url.substr(3) : url;
  const std::string sigv4 = s3 != nullptr ? "aws:amz:" + s3->region + ":s3" : "";
  HeaderList headers;
  for (const std::string& h : options_.headers) headers.list = curl_slist_append(headers.list, h.c_str());
  if (s3 != nullptr) {
    // curl 7.88 signs no payload hash of its own: without this radosgw (and S3) answer
    // SignatureDoesNotMatch.
    headers.list = curl_slist_append(headers.list, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (!s3->session_token.empty()) {
      headers.list =
          curl_slist_append(headers.list, ("x-amz-security-token: " + s3->session_token).c_str());
    }
  }
  const long stall_seconds =
      std::max<long>(1, static_cast<long>((options_.stall_timeout.count() + 999) / 1000));
  // One try: a HEAD if `head`, else a GET of `get_range` with its body to `body_sink`.
  auto run = [&](bool head, const std::string& get_range, const BodySink* body_sink,
                 Attempt& attempt) {
    Transfer transfer{body_sink, &attempt, &options_.refused_addresses};
    curl_easy_reset(curl);
    curl_easy_setopt(curl, CURLOPT_URL, request_url.c_str());
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    // S3 is never followed elsewhere: the redirect's host would get the signed headers.
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, s3 != nullptr ? 0L : 1L);
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(curl, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(options_.connect_timeout.count()));
    // Stalled: under 1 byte/s for the stall timeout.
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, stall_seconds);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers.list);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
    curl_easy_setopt(curl, CURLOPT_PREREQFUNCTION, OnConnected);
    curl_easy_setopt(curl, CURLOPT_PREREQDATA, &transfer);
    if (s3 != nullptr) {
      curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, sigv4.c_str());
      curl_easy_setopt(curl, CURLOPT_USERNAME, s3->access_key.c_str());
      curl_easy_setopt(curl, CURLOPT_PASSWORD, s3->secret_key.c_str());
    }
    if (head) curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    if (!get_range.empty()) curl_easy_setopt(curl, CURLOPT_RANGE, get_range.c_str());
    attempt.code = curl_easy_perform(curl);
    long connects = 0;
    curl_easy_getinfo(curl, CURLINFO_NUM_CONNECTS, &connects);
    g_connections += static_cast<uint64_t>(connects);
    if (s3 != nullptr) {  // nothing of the credentials stays in the handle
      curl_easy_setopt(curl, CURLOPT_USERNAME, nullptr);
      curl_easy_setopt(curl, CURLOPT_PASSWORD, nullptr);
      curl_easy_setopt(curl, CURLOPT_HTTPHEADER, nullptr);
    }
  };
  std::string failure;
  for (int attempt_no = 1; attempt_no <= options_.attempts; ++attempt_no) {
    Attempt attempt;
    run(sink == nullptr, range_text, sink, attempt);
    if (!attempt.sink_status.ok()) return attempt.sink_status;
    if (!attempt.refused.empty()) {
      return PermissionDenied(what + ": refused to connect to " + attempt.refused +
                              " (a refused address: link-local ones are, where cloud "
                              "instance metadata answers)");
    }
    if (attempt.code == CURLE_OK && attempt.http >= 200 && attempt.http < 300) {
      curl_off_t length = -1;
      curl_easy_getinfo(curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
      if (info != nullptr) {  // HEAD
        if (length < 0) return DataLoss(what + ": no Content-Length");
        info->size = static_cast<uint64_t>(length);
        info->etag = attempt.etag;
        return Status::Ok();
      }
      if (range && attempt.http != 206) {
        return DataLoss(what + ": HTTP " + std::to_string(attempt.http) +
                        " instead of 206 (the server ignored the range)");
      }
      const uint64_t expected = range ? range->length : static_cast<uint64_t>(length);
      if ((range || length >= 0) && attempt.received != expected) {
        return DataLoss(what + ": " + std::to_string(attempt.received) + " bytes, expected " +
                        std::to_string(expected));
      }
      return Status::Ok();
    }
    std::optional<S3Error> s3_error;
    if (s3 != nullptr && attempt.code == CURLE_OK) s3_error = ParseS3Error(attempt.error_body);
    if (attempt.code == CURLE_OPERATION_TIMEDOUT) {
      failure = "no data for " + std::to_string(stall_seconds) + " s (stalled)";
    } else if (attempt.code != CURLE_OK) {
      failure = curl_easy_strerror(attempt.code);
    } else {
      failure = "HTTP " + std::to_string(attempt.http) +
                (s3_error ? S3ErrorText(s3_error)
                          : attempt.reason.empty() ? "" : " " + attempt.reason);
    }
    if (!Retryable(attempt)) {
      const std::string message = what + ": " + failure;
      if (s3 != nullptr && attempt.code == CURLE_OK) {
        if (!s3_error && sink == nullptr && attempt.http >= 400 && attempt.http < 500) {
          // A HEAD's answer has no body: a one-byte GET tells S3's code.
          Attempt detail;
          run(false, "0-0", nullptr, detail);
          if (detail.code == CURLE_OK && detail.http == attempt.http)
            s3_error = ParseS3Error(detail.error_body);
        }
        return S3Failure(what, attempt, s3_error, *s3, url);
      }
      if (attempt.http == 404) return NotFound(message);
      if (attempt.http == 401 || attempt.http == 403) return PermissionDenied(message);
      if (attempt.http == 416) return InvalidArgument(message + " (past the object's end)");
      if (attempt.code == CURLE_URL_MALFORMAT || attempt.code == CURLE_UNSUPPORTED_PROTOCOL)
        return InvalidArgument(message);
      return Unavailable(message);
    }
    if (attempt_no < options_.attempts)
      std::this_thread::sleep_for(options_.first_backoff * (1 << (attempt_no - 1)));
  }
  return Unavailable(what + ": " + failure + " after " + std::to_string(options_.attempts) +
                     " attempts");
}

}  // namespace ember::daemon
