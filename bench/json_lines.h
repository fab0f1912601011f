// The benchmarks' machine-readable output: one JSON object per line, appended to the file
// given with --json, each starting with the tool, the local time and the host.
#ifndef EMBER_BENCH_JSON_LINES_H_
#define EMBER_BENCH_JSON_LINES_H_

#include <string>

#include "ember/status.h"

namespace ember::bench {

// Appends {"tool": TOOL, "time": "<ISO 8601 local time>", "host": "<hostname>", FIELDS}
// and a newline to `path`; `fields` is the rest of the object ("\"a\": 1, \"b\": 2").
// kUnavailable "cannot open '<path>' for appending" or "cannot write '<path>'".
Status AppendJsonLine(const std::string& path, const std::string& tool, const std::string& fields);

// The --json file of one benchmark (`tool`); nothing is written when `path` is empty.
class JsonLines {
 public:
  JsonLines(std::string path, std::string tool);

  // Appends a line of `fields` as AppendJsonLine does; throws std::runtime_error
  // "--json: <AppendJsonLine's message>" if it cannot.
  void Append(const std::string& fields) const;

 private:
  const std::string path_;
  const std::string tool_;
};

// printf into a string.
std::string StringPrintf(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace ember::bench

#endif  // EMBER_BENCH_JSON_LINES_H_
