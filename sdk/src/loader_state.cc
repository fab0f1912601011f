#include "ember/loader_state.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace ember {
namespace {

constexpr const char* kMagic = "ember-loader-state";
constexpr const char* kVersion = "1";

Status Bad(const std::string& text, const std::string& why) {
  return InvalidArgument("loader state '" + text + "': " + why);
}

}  // namespace

std::string LoaderState::ToString() const {
  char fp[17];
  std::snprintf(fp, sizeof(fp), "%016llx", static_cast<unsigned long long>(fingerprint));
  return std::string(kMagic) + " " + kVersion + " fingerprint=" + fp +
         " seed=" + std::to_string(seed) + " epoch=" + std::to_string(epoch) +
         " position=" + std::to_string(position);
}

Result<LoaderState> LoaderState::Parse(const std::string& text) {
  std::istringstream in(text);
  std::string magic, version;
  in >> magic >> version;
  if (magic != kMagic) return Bad(text, std::string("does not start with '") + kMagic + "'");
  if (version != kVersion) return Bad(text, "version " + version + " (this SDK reads " + kVersion + ")");
  LoaderState state;
  struct Field {
    const char* name;
    uint64_t* value;
    int base;
    bool seen;
  } fields[] = {{"fingerprint", &state.fingerprint, 16, false},
                {"seed", &state.seed, 10, false},
                {"epoch", &state.epoch, 10, false},
                {"position", &state.position, 10, false}};
  std::string word;
  while (in >> word) {
    const size_t eq = word.find('=');
    const std::string key = word.substr(0, eq == std::string::npos ? word.size() : eq);
    Field* field = nullptr;
    for (Field& f : fields)
      if (key == f.name) field = &f;
    if (field == nullptr || eq == std::string::npos) return Bad(text, "unknown field '" + word + "'");
    const std::string value = word.substr(eq + 1);
    char* end = nullptr;
    errno = 0;
    *field->value = std::strtoull(value.c_str(), &end, field->base);
    if (value.empty() || value[0] == '-' || errno != 0 || end != value.c_str() + value.size())
      return Bad(text, key + ": '" + value + "' is not a number");
    if (field->seen) return Bad(text, key + " appears twice");
    field->seen = true;
  }
  for (const Field& f : fields)
    if (!f.seen) return Bad(text, std::string("no ") + f.name);
  return state;
}

}  // namespace ember
