// Example Ember plugin: format "csv". Every line of the file is `f1,f2,...,fn,label`:
// n >= 1 float32 features and an int64 label, the same n on every line; a final
// newline is optional, "\r\n" line ends are accepted. A sample is tensor "features"
// (float32 [n]) and tensor "label" (int64 scalar). The file is read into memory by
// open, so read_sample is a copy, safe to call concurrently.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <string>
#include <vector>

#include "ember/plugin.h"

namespace {

struct CsvData {
  size_t features = 0;          // per sample
  std::vector<float> values;    // count * features
  std::vector<int64_t> labels;  // count
};

bool ParseFloat(const std::string& field, float* out) {
  if (field.empty() || std::isspace(static_cast<unsigned char>(field[0]))) return false;
  char* end = nullptr;
  errno = 0;
  const float v = std::strtof(field.c_str(), &end);
  if (end != field.c_str() + field.size() || errno == ERANGE || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

bool ParseLabel(const std::string& field, int64_t* out) {
  if (field.empty() || std::isspace(static_cast<unsigned char>(field[0]))) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(field.c_str(), &end, 10);
  if (end != field.c_str() + field.size() || errno == ERANGE) return false;
  *out = v;
  return true;
}

// Reads and checks the whole file; false with a message naming the file and line.
bool ParseCsv(const char* path, CsvData* data, char* err, size_t err_len) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ember_plugin_set_error(err, err_len, "%s: cannot open: %s", path, std::strerror(errno));
    return false;
  }
  std::string line;
  std::vector<std::string> fields;
  size_t line_no = 0;
  bool pending_empty = false;  // an empty line is only allowed at the very end
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (pending_empty) {
      ember_plugin_set_error(err, err_len, "%s: line %zu: empty line", path, line_no - 1);
      return false;
    }
    if (line.empty()) {
      pending_empty = true;
      continue;
    }
    fields.clear();
    size_t start = 0;
    while (true) {
      const size_t comma = line.find(',', start);
      fields.push_back(line.substr(start, comma == std::string::npos ? comma : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (data->labels.empty()) {
      if (fields.size() < 2) {
        ember_plugin_set_error(
            err, err_len, "%s: line %zu: expected at least 2 fields (features, label), got %zu",
            path, line_no, fields.size());
        return false;
      }
      data->features = fields.size() - 1;
    } else if (fields.size() != data->features + 1) {
      ember_plugin_set_error(err, err_len, "%s: line %zu: expected %zu fields like line 1, got %zu",
                             path, line_no, data->features + 1, fields.size());
      return false;
    }
    for (size_t f = 0; f < data->features; ++f) {
      float v = 0;
      if (!ParseFloat(fields[f], &v)) {
        ember_plugin_set_error(err, err_len,
                               "%s: line %zu: field %zu: expected a finite number, got '%.64s'",
                               path, line_no, f + 1, fields[f].c_str());
        return false;
      }
      data->values.push_back(v);
    }
    int64_t label = 0;
    if (!ParseLabel(fields.back(), &label)) {
      ember_plugin_set_error(err, err_len,
                             "%s: line %zu: field %zu: expected an integer label, got '%.64s'",
                             path, line_no, fields.size(), fields.back().c_str());
      return false;
    }
    data->labels.push_back(label);
  }
  if (in.bad()) {
    ember_plugin_set_error(err, err_len, "%s: read error after line %zu", path, line_no);
    return false;
  }
  if (data->labels.empty()) {
    ember_plugin_set_error(err, err_len, "%s: no samples (the file is empty)", path);
    return false;
  }
  return true;
}

bool CheckPipeline(const char* path, const char* pipeline_yaml, char* err, size_t err_len) {
  if (pipeline_yaml != nullptr && pipeline_yaml[0] != '\0') {
    ember_plugin_set_error(err, err_len, "%s: format csv takes no pipeline", path);
    return false;
  }
  return true;
}

void FillInfo(const CsvData& data, ember_dataset_info* out) {
  std::memset(out, 0, sizeof(*out));
  out->count = data.labels.size();
  out->num_tensors = 2;
  std::strcpy(out->tensors[0].name, "features");
  out->tensors[0].dtype = EMBER_DTYPE_FLOAT32;
  out->tensors[0].rank = 1;
  out->tensors[0].shape[0] = static_cast<int64_t>(data.features);
  std::strcpy(out->tensors[1].name, "label");
  out->tensors[1].dtype = EMBER_DTYPE_INT64;
  out->tensors[1].rank = 0;
}

int CsvProbe(const char* path, const char* pipeline_yaml, ember_dataset_info* out, char* err,
             size_t err_len) {
  try {
    if (!CheckPipeline(path, pipeline_yaml, err, err_len)) return 1;
    CsvData data;
    if (!ParseCsv(path, &data, err, err_len)) return 1;
    FillInfo(data, out);
    return 0;
  } catch (const std::exception& e) {
    ember_plugin_set_error(err, err_len, "%s: %s", path, e.what());
    return 1;
  }
}

void* CsvOpen(const char* path, const char* pipeline_yaml, const ember_dataset_info* info,
              char* err, size_t err_len) {
  try {
    if (!CheckPipeline(path, pipeline_yaml, err, err_len)) return nullptr;
    auto* data = new CsvData();
    if (!ParseCsv(path, data, err, err_len)) {
      delete data;
      return nullptr;
    }
    if (data->labels.size() != info->count ||
        static_cast<int64_t>(data->features) != info->tensors[0].shape[0]) {
      ember_plugin_set_error(err, err_len,
                             "%s: changed since it was probed (%zu samples of %zu features, "
                             "probed %llu of %lld)",
                             path, data->labels.size(), data->features,
                             static_cast<unsigned long long>(info->count),
                             static_cast<long long>(info->tensors[0].shape[0]));
      delete data;
      return nullptr;
    }
    return data;
  } catch (const std::exception& e) {
    ember_plugin_set_error(err, err_len, "%s: %s", path, e.what());
    return nullptr;
  }
}

int CsvReadSample(void* handle, uint64_t id, uint64_t /*seed*/, uint64_t /*epoch*/,
                  void* const* dsts, char* err, size_t err_len) {
  const auto* data = static_cast<const CsvData*>(handle);
  if (id >= data->labels.size()) {
    ember_plugin_set_error(err, err_len, "sample %llu is out of range (%zu samples)",
                           static_cast<unsigned long long>(id), data->labels.size());
    return 1;
  }
  std::memcpy(dsts[0], data->values.data() + id * data->features,
              data->features * sizeof(float));
  std::memcpy(dsts[1], &data->labels[id], sizeof(int64_t));
  return 0;
}

void CsvClose(void* handle) { delete static_cast<CsvData*>(handle); }

const ember_plugin_v1 kCsvPlugin = {
    EMBER_PLUGIN_ABI_VERSION,
    sizeof(ember_plugin_v1),
    "csv",
    /*parallel_decode=*/0,
    /*reserved=*/0,
    CsvProbe,
    CsvOpen,
    CsvReadSample,
    CsvClose,
};

}  // namespace

extern "C" EMBER_PLUGIN_EXPORT const ember_plugin_v1* ember_plugin_init(void) {
  return &kCsvPlugin;
}
