// Deliberately broken plugins for the loader's tests; BAD_PLUGIN_MODE picks the fault:
// 1: an ABI version emberd does not speak; 2: read_sample is NULL;
// 3: no ember_plugin_init symbol at all.
#include <cstring>

#include "ember/plugin.h"

namespace {

int Probe(const char*, const char*, ember_dataset_info*, char*, size_t) { return 1; }
void* Open(const char*, const char*, const ember_dataset_info*, char*, size_t) {
  return nullptr;
}
int ReadSample(void*, uint64_t, uint64_t, uint64_t, void* const*, char*, size_t) { return 1; }
void Close(void*) {}

const ember_plugin_v1 kTable = {
    BAD_PLUGIN_MODE == 1 ? EMBER_PLUGIN_ABI_VERSION + 1 : EMBER_PLUGIN_ABI_VERSION,
    sizeof(ember_plugin_v1),
    "bad",
    0,
    0,
    Probe,
    Open,
    BAD_PLUGIN_MODE == 2 ? nullptr : ReadSample,
    Close,
};

}  // namespace

#if BAD_PLUGIN_MODE == 3
extern "C" EMBER_PLUGIN_EXPORT const ember_plugin_v1* not_the_init_symbol(void) {
  return &kTable;
}
#else
extern "C" EMBER_PLUGIN_EXPORT const ember_plugin_v1* ember_plugin_init(void) {
  return &kTable;
}
#endif
