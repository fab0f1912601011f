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

// printf into a string.
std::string StringPrintf(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace ember::bench

#endif  // EMBER_BENCH_JSON_LINES_H_
