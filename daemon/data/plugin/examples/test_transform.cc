// A valid transform plugin for the tests, with one step whose name TEST_TRANSFORM_MODE
// picks (1: "failing"; 2: "resize", a built-in step's; 3: "solarize", the color
// example's), whose create refuses the key "refuse" without a message and
// accepts any other, and whose apply always fails. It exports
// ember_test_live_states(), the number of states created and not yet destroyed.
#include <atomic>
#include <cstdio>
#include <cstring>

#include "ember/plugin.h"

namespace {

std::atomic<int> live_states{0};
int state_token;  // every state points here

void* Create(const char* const* keys, const char* const*, size_t count, char*, size_t) {
  for (size_t i = 0; i < count; ++i) {
    if (std::strcmp(keys[i], "refuse") == 0) return nullptr;
  }
  ++live_states;
  return &state_token;
}

void Destroy(void*) { --live_states; }

int Apply(const void*, uint8_t*, int32_t width, int32_t height, uint64_t, char* err,
          size_t err_len) {
  std::snprintf(err, err_len, "cannot transform a %dx%d image", static_cast<int>(width),
                static_cast<int>(height));
  return 1;
}

const ember_transform_v1 kTable = {
    EMBER_TRANSFORM_ABI_VERSION,
    sizeof(ember_transform_v1),
    TEST_TRANSFORM_MODE == 1   ? "failing"
    : TEST_TRANSFORM_MODE == 2 ? "resize"
                               : "solarize",
    Create,
    Destroy,
    Apply,
};

const ember_transform_v1* const kTables[] = {&kTable, nullptr};

}  // namespace

extern "C" EMBER_PLUGIN_EXPORT const ember_transform_v1* const* ember_transform_init(void) {
  return kTables;
}

extern "C" EMBER_PLUGIN_EXPORT int ember_test_live_states(void) { return live_states.load(); }
