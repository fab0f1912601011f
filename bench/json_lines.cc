#include "bench/json_lines.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <stdexcept>
#include <utility>

namespace ember::bench {

Status AppendJsonLine(const std::string& path, const std::string& tool,
                      const std::string& fields) {
  char stamp[32];
  const time_t now = time(nullptr);
  strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S%z", localtime(&now));
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  FILE* out = std::fopen(path.c_str(), "a");
  if (out == nullptr) return Unavailable("cannot open '" + path + "' for appending");
  std::fprintf(out, "{\"tool\": \"%s\", \"time\": \"%s\", \"host\": \"%s\", %s}\n", tool.c_str(),
               stamp, host, fields.c_str());
  const bool failed = std::ferror(out) != 0;
  if (std::fclose(out) != 0 || failed) return Unavailable("cannot write '" + path + "'");
  return Status::Ok();
}

JsonLines::JsonLines(std::string path, std::string tool)
    : path_(std::move(path)), tool_(std::move(tool)) {}

void JsonLines::Append(const std::string& fields) const {
  if (path_.empty()) return;
  const Status written = AppendJsonLine(path_, tool_, fields);
  if (!written.ok()) throw std::runtime_error("--json: " + written.message());
}

std::string StringPrintf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  const int length = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string text(length > 0 ? static_cast<size_t>(length) : 0, '\0');
  if (length > 0) std::vsnprintf(text.data(), text.size() + 1, format, again);
  va_end(again);
  return text;
}

}  // namespace ember::bench
