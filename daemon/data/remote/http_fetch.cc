#include "daemon/data/remote/http_fetch.h"

#include <curl/curl.h>

#include <strings.h>

#include <algorithm>
#include <cstdlib>
#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

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
};

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
  if (attempt.http >= 200 && attempt.http < 300 && transfer->sink != nullptr) {
    attempt.sink_status = (*transfer->sink)(attempt.received, data, n);
    if (!attempt.sink_status.ok()) return 0;  // aborts the transfer
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
  HeaderList headers;
  for (const std::string& h : options_.headers) headers.list = curl_slist_append(headers.list, h.c_str());
  const long stall_seconds =
      std::max<long>(1, static_cast<long>((options_.stall_timeout.count() + 999) / 1000));
  std::string failure;
  for (int attempt_no = 1; attempt_no <= options_.attempts; ++attempt_no) {
    Attempt attempt;
    Transfer transfer{sink, &attempt, &options_.refused_addresses};
    curl_easy_reset(curl);
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
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
    if (sink == nullptr) curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    if (range) curl_easy_setopt(curl, CURLOPT_RANGE, range_text.c_str());
    attempt.code = curl_easy_perform(curl);
    long connects = 0;
    curl_easy_getinfo(curl, CURLINFO_NUM_CONNECTS, &connects);
    g_connections += static_cast<uint64_t>(connects);
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
    if (attempt.code == CURLE_OPERATION_TIMEDOUT) {
      failure = "no data for " + std::to_string(stall_seconds) + " s (stalled)";
    } else if (attempt.code != CURLE_OK) {
      failure = curl_easy_strerror(attempt.code);
    } else {
      failure = "HTTP " + std::to_string(attempt.http) +
                (attempt.reason.empty() ? "" : " " + attempt.reason);
    }
    if (!Retryable(attempt)) {
      const std::string message = what + ": " + failure;
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
