// Example Ember transform plugin: image pipeline steps "solarize" and "grayscale".
//
//   - solarize: {threshold: 128, p: 0.5}
//       Inverts (255 - v) every channel value v >= threshold, with probability p.
//       threshold: an integer in 0..255, default 128; p: a number in [0, 1], default 1.
//       As torchvision's RandomSolarize.
//   - grayscale: {p: 0.2}
//       Replaces R, G and B by the luma L = (19595 R + 38470 G + 7471 B + 32768) >> 16
//       (ITU-R 601-2, as PIL's convert("L")), with probability p (default 1). The image
//       stays 3-channel.
//
// Whether a step applies to a sample is decided by `random` alone, so runs are
// reproducible. The states are read-only after create: apply is safe to call
// concurrently.
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>

#include "ember/plugin.h"

namespace {

bool ParseInt(const char* text, long* out) {
  if (text[0] == '\0' || std::isspace(static_cast<unsigned char>(text[0]))) return false;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text, &end, 10);
  if (*end != '\0' || errno == ERANGE) return false;
  *out = v;
  return true;
}

bool ParseDouble(const char* text, double* out) {
  if (text[0] == '\0' || std::isspace(static_cast<unsigned char>(text[0]))) return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text, &end);
  if (*end != '\0' || errno == ERANGE || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

// Parses "p": a probability in [0, 1].
bool ParseProbability(const char* value, double* p, char* err, size_t err_len) {
  if (!ParseDouble(value, p) || *p < 0 || *p > 1) {
    ember_plugin_set_error(err, err_len, "p: expected a probability in [0, 1], got '%.64s'", value);
    return false;
  }
  return true;
}

// Whether a step with probability p applies, from the pipeline's random value: a
// uniform number in [0, 1) from its top 53 bits, below p. p = 0 never, p = 1 always.
bool Happens(double p, uint64_t random) {
  return static_cast<double>(random >> 11) * 0x1.0p-53 < p;
}

// ---- solarize ----

struct Solarize {
  double p = 1;
  uint8_t map[256];  // v -> v < threshold ? v : 255 - v
};

void* SolarizeCreate(const char* const* keys, const char* const* values, size_t count,
                     char* err, size_t err_len) {
  try {
    long threshold = 128;
    double p = 1;
    for (size_t i = 0; i < count; ++i) {
      if (std::strcmp(keys[i], "threshold") == 0) {
        if (!ParseInt(values[i], &threshold) || threshold < 0 || threshold > 255) {
          ember_plugin_set_error(
              err, err_len, "threshold: expected an integer in 0..255, got '%.64s'", values[i]);
          return nullptr;
        }
      } else if (std::strcmp(keys[i], "p") == 0) {
        if (!ParseProbability(values[i], &p, err, err_len)) return nullptr;
      } else {
        ember_plugin_set_error(err, err_len, "unknown key '%.64s' (known: threshold, p)", keys[i]);
        return nullptr;
      }
    }
    auto* state = new Solarize();
    state->p = p;
    for (int v = 0; v < 256; ++v) {
      state->map[v] = static_cast<uint8_t>(v < threshold ? v : 255 - v);
    }
    return state;
  } catch (const std::exception& e) {
    ember_plugin_set_error(err, err_len, "%s", e.what());
    return nullptr;
  }
}

void SolarizeDestroy(void* state) { delete static_cast<Solarize*>(state); }

int SolarizeApply(const void* state, uint8_t* pixels, int32_t width, int32_t height,
                  uint64_t random, char* /*err*/, size_t /*err_len*/) {
  const auto& s = *static_cast<const Solarize*>(state);
  if (!Happens(s.p, random)) return 0;
  const size_t bytes = static_cast<size_t>(width) * static_cast<size_t>(height) * 3;
  for (size_t i = 0; i < bytes; ++i) pixels[i] = s.map[pixels[i]];
  return 0;
}

// ---- grayscale ----

struct Grayscale {
  double p = 1;
};

void* GrayscaleCreate(const char* const* keys, const char* const* values, size_t count,
                      char* err, size_t err_len) {
  try {
    double p = 1;
    for (size_t i = 0; i < count; ++i) {
      if (std::strcmp(keys[i], "p") == 0) {
        if (!ParseProbability(values[i], &p, err, err_len)) return nullptr;
      } else {
        ember_plugin_set_error(err, err_len, "unknown key '%.64s' (known: p)", keys[i]);
        return nullptr;
      }
    }
    return new Grayscale{p};
  } catch (const std::exception& e) {
    ember_plugin_set_error(err, err_len, "%s", e.what());
    return nullptr;
  }
}

void GrayscaleDestroy(void* state) { delete static_cast<Grayscale*>(state); }

int GrayscaleApply(const void* state, uint8_t* pixels, int32_t width, int32_t height,
                   uint64_t random, char* /*err*/, size_t /*err_len*/) {
  if (!Happens(static_cast<const Grayscale*>(state)->p, random)) return 0;
  const size_t count = static_cast<size_t>(width) * static_cast<size_t>(height);
  for (size_t i = 0; i < count; ++i) {
    uint8_t* rgb = pixels + 3 * i;
    const uint8_t luma =
        static_cast<uint8_t>((19595u * rgb[0] + 38470u * rgb[1] + 7471u * rgb[2] + 32768u) >> 16);
    rgb[0] = rgb[1] = rgb[2] = luma;
  }
  return 0;
}

const ember_transform_v1 kSolarize = {
    EMBER_TRANSFORM_ABI_VERSION,
    sizeof(ember_transform_v1),
    "solarize",
    SolarizeCreate,
    SolarizeDestroy,
    SolarizeApply,
};

const ember_transform_v1 kGrayscale = {
    EMBER_TRANSFORM_ABI_VERSION,
    sizeof(ember_transform_v1),
    "grayscale",
    GrayscaleCreate,
    GrayscaleDestroy,
    GrayscaleApply,
};

const ember_transform_v1* const kTransforms[] = {&kSolarize, &kGrayscale, nullptr};

}  // namespace

extern "C" EMBER_PLUGIN_EXPORT const ember_transform_v1* const* ember_transform_init(void) {
  return kTransforms;
}
