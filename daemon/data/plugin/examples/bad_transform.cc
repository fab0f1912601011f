// Deliberately broken transform plugins for the loader's tests; BAD_TRANSFORM_MODE
// picks the fault: 1: a transform ABI version emberd does not speak; 2: a struct_size
// smaller than ember_transform_v1; 3: apply is NULL; 4: an invalid step name; 5: an
// empty array; 6: two transforms with one name.
#include "ember/plugin.h"

namespace {

void* Create(const char* const*, const char* const*, size_t, char*, size_t) { return nullptr; }
void Destroy(void*) {}
int Apply(const void*, uint8_t*, int32_t, int32_t, uint64_t, char*, size_t) { return 1; }

const ember_transform_v1 kTable = {
    BAD_TRANSFORM_MODE == 1 ? EMBER_TRANSFORM_ABI_VERSION + 1 : EMBER_TRANSFORM_ABI_VERSION,
    BAD_TRANSFORM_MODE == 2 ? sizeof(ember_transform_v1) - 8 : sizeof(ember_transform_v1),
    BAD_TRANSFORM_MODE == 4 ? "Bad-Step" : "bad",
    Create,
    Destroy,
    BAD_TRANSFORM_MODE == 3 ? nullptr : Apply,
};

#if BAD_TRANSFORM_MODE == 5
const ember_transform_v1* const kTables[] = {nullptr};
#elif BAD_TRANSFORM_MODE == 6
const ember_transform_v1* const kTables[] = {&kTable, &kTable, nullptr};
#else
const ember_transform_v1* const kTables[] = {&kTable, nullptr};
#endif

}  // namespace

extern "C" EMBER_PLUGIN_EXPORT const ember_transform_v1* const* ember_transform_init(void) {
  return kTables;
}
