/* Ember plugins: the stable C ABI between emberd and a shared library that adds a
 * dataset format emberd does not know (a reader) or image pipeline steps it does not
 * have (transforms), or both.
 *
 * A plugin is a shared library listed under `plugins:` in emberd's config (only listed
 * paths are ever loaded). It exports one or both of these functions (at least one):
 *
 *   EMBER_PLUGIN_EXPORT const ember_plugin_v1* ember_plugin_init(void);
 *   EMBER_PLUGIN_EXPORT const ember_transform_v1* const* ember_transform_init(void);
 *
 * Each returns what the plugin owns and keeps valid and unchanged until it is unloaded
 * (static const objects); emberd calls each once, at start-up. A library that fails any
 * check below is refused as a whole, and emberd does not start.
 *
 * Only C types cross the boundary. No C++ exception may escape a plugin function (it
 * would unwind through emberd's C frames: undefined behaviour); report errors through
 * the return value and `err`.
 *
 * Errors: a function that fails writes a NUL-terminated message of at most err_len
 * bytes (including the NUL) into `err`, naming what is wrong (ember_plugin_set_error,
 * below, does that); emberd adds the plugin's file and the format or step name. `err` is
 * owned by emberd and only valid during the call.
 *
 * ---- Readers (ember_plugin_init, EMBER_PLUGIN_INIT_SYMBOL) ----
 *
 * ember_plugin_init returns a reader table. emberd checks abi_version ==
 * EMBER_PLUGIN_ABI_VERSION, struct_size >= sizeof(ember_plugin_v1), the format name and
 * that every function pointer is set. A dataset registered with `--format
 * <format_name>` is then probed and read through the table. Error messages name the
 * data file and what is wrong (for example "/data/x.csv: line 7: expected 5 fields,
 * got 4"); emberd adds the format name and the dataset.
 *
 * Thread-safety: probe and open may be called from any thread, concurrently with each
 * other and with read_sample on other handles. read_sample is called concurrently, by
 * many decode threads, on the same handle: it must be safe for that (read-only state,
 * or its own locking). close is called once per handle, after every read_sample on it
 * has returned.
 *
 * ---- Transforms (ember_transform_init, EMBER_TRANSFORM_INIT_SYMBOL) ----
 *
 * ember_transform_init returns a NULL-terminated array of 1..EMBER_TRANSFORM_MAX_STEPS
 * transform tables, one per pipeline step the library adds. For each, emberd checks
 * abi_version == EMBER_TRANSFORM_ABI_VERSION, struct_size >= sizeof(ember_transform_v1),
 * the step name (see the struct) and that every function pointer is set.
 *
 * A step is used in an image pipeline's YAML like a built-in one, by its name, with a
 * map of settings (or none):
 *
 *   steps:
 *     - random_resized_crop: {size: 224}
 *     - solarize: {threshold: 128, p: 0.5}
 *     - grayscale
 *
 * Each time emberd parses a pipeline that uses the step, it calls create with the
 * step's settings: keys[i] and values[i] are the i-th key and its value, both as the
 * YAML scalar's text without quotes ("128", "0.5", "true"); no key repeats; the plugin
 * parses the values. Settings that are not
 * scalars (lists, maps) are refused by emberd before create. A step written without
 * settings gets count 0 (keys and values still point to valid, empty arrays). create
 * must refuse every key it does not know and every value out of range, with a message
 * naming the key and the value (for example "threshold: expected an integer in 0..255,
 * got '300'"); emberd adds the step name, the plugin's file and the YAML line. The
 * arrays and strings are only valid during the call.
 *
 * The state create returns is owned by emberd until it passes it to destroy. While a
 * dataset is read, apply transforms each sample's image in place: `pixels` is an
 * 8-bit RGB image, `height` rows of `width` * 3 bytes (R, G, B interleaved), no
 * padding between rows, width and height >= 1; apply must leave the shape as it is and
 * touch no byte outside the image. The image is the pipeline's output size, after the
 * geometric steps (crops, resizes, flips) and before the conversion to the output
 * dtype, layout and normalize.
 *
 * Randomness: a step may only use `random`, a 64-bit value emberd derives from (job
 * seed, epoch, sample id, step index), so a run is reproducible; a plugin needing more
 * random numbers expands it itself (for example with splitmix64). The same
 * (state, image, random) must give the same bytes on any thread.
 *
 * apply returns 0 on success, nonzero with a message in err if the sample cannot be
 * transformed (emberd reports it like a corrupt sample, naming the step and the
 * plugin's file).
 *
 * Thread-safety: create may be called from any thread, concurrently with create,
 * apply and destroy on other states. apply is called concurrently, by many decode
 * threads, on the same state: it must be safe for that (read-only state, or its own
 * locking). destroy is called once per state, after every apply on it has returned.
 */
#ifndef EMBER_PLUGIN_H_
#define EMBER_PLUGIN_H_

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any incompatible change of ember_plugin_v1 and the structs it uses. */
#define EMBER_PLUGIN_ABI_VERSION 1u

#define EMBER_PLUGIN_INIT_SYMBOL "ember_plugin_init"

/* Bumped on any incompatible change of ember_transform_v1; independent of the above. */
#define EMBER_TRANSFORM_ABI_VERSION 1u

#define EMBER_TRANSFORM_INIT_SYMBOL "ember_transform_init"

/* The most transform tables one library may return. */
#define EMBER_TRANSFORM_MAX_STEPS 64

#if defined(__GNUC__)
#define EMBER_PLUGIN_EXPORT __attribute__((visibility("default")))
#define EMBER_PLUGIN_PRINTF(format_index, first_arg) \
  __attribute__((format(printf, format_index, first_arg)))
#else
#define EMBER_PLUGIN_EXPORT
#define EMBER_PLUGIN_PRINTF(format_index, first_arg)
#endif

/* Writes a printf-style message into a plugin function's `err` (see Errors above): at
 * most err_len bytes including the NUL, cut short if longer. Does nothing if err is NULL
 * or err_len is 0. A helper for plugins, not part of the ABI. */
static inline void ember_plugin_set_error(char* err, size_t err_len, const char* format, ...)
    EMBER_PLUGIN_PRINTF(3, 4);
static inline void ember_plugin_set_error(char* err, size_t err_len, const char* format, ...) {
  va_list args;
  if (err == NULL || err_len == 0) return;
  va_start(args, format);
  vsnprintf(err, err_len, format, args);
  va_end(args);
}

#define EMBER_PLUGIN_MAX_TENSORS 4
#define EMBER_PLUGIN_MAX_RANK 8
/* A tensor name is at most 15 bytes plus the NUL (the ring's name field). */
#define EMBER_PLUGIN_NAME_BYTES 16

/* Element types; the values are those of ember::ring::DType (ember/ring_layout.h). */
#define EMBER_DTYPE_UINT8 0u
#define EMBER_DTYPE_INT8 1u
#define EMBER_DTYPE_INT16 2u
#define EMBER_DTYPE_INT32 3u
#define EMBER_DTYPE_INT64 4u
#define EMBER_DTYPE_FLOAT32 5u
#define EMBER_DTYPE_FLOAT64 6u
#define EMBER_DTYPE_UINT16 7u

/* One tensor of every sample: name ("image", "label"; NUL-terminated), dtype (an
 * EMBER_DTYPE_* value) and per-sample shape (rank dimensions, each >= 1; rank 0 is a
 * scalar). A sample's tensor is product(shape) * dtype size bytes, dense, row-major. */
typedef struct ember_tensor_info {
  char name[EMBER_PLUGIN_NAME_BYTES];
  uint32_t dtype;
  uint32_t rank;
  int64_t shape[EMBER_PLUGIN_MAX_RANK];
} ember_tensor_info;

/* What probe finds: `count` samples (ids 0..count-1), each made of num_tensors
 * (1..EMBER_PLUGIN_MAX_TENSORS) tensors. */
typedef struct ember_dataset_info {
  uint64_t count;
  uint32_t num_tensors;
  uint32_t reserved; /* zero */
  ember_tensor_info tensors[EMBER_PLUGIN_MAX_TENSORS];
} ember_dataset_info;

typedef struct ember_plugin_v1 {
  uint32_t abi_version; /* EMBER_PLUGIN_ABI_VERSION */
  uint32_t struct_size; /* sizeof(ember_plugin_v1) */
  /* The dataset format this plugin reads: 1..32 bytes of [a-z0-9_-], NUL-terminated,
   * different from every built-in format and from every other loaded plugin. */
  const char* format_name;
  /* Nonzero if read_sample does enough work (decoding) that a batch's samples should be
   * spread over emberd's decode pool; zero for cheap copies. */
  int32_t parallel_decode;
  int32_t reserved; /* zero */

  /* Checks the dataset at `path` (a file or directory, as registered) with pipeline
   * YAML text `pipeline_yaml` ("" for the format's default) and fills *out (which emberd
   * zeroes first). Returns 0 on success, nonzero with a message in err otherwise. */
  int (*probe)(const char* path, const char* pipeline_yaml, ember_dataset_info* out,
               char* err, size_t err_len);

  /* Opens the dataset for reading. `info` is what probe returned for the same
   * arguments; open fails if the data no longer matches it. Returns a handle owned by
   * emberd until it passes it to close, or NULL with a message in err. */
  void* (*open)(const char* path, const char* pipeline_yaml, const ember_dataset_info* info,
                char* err, size_t err_len);

  /* Writes sample `id` (< info.count, checked by emberd): tensor t goes to dsts[t],
   * exactly its sample bytes. Augmentation randomness must derive only from (seed,
   * epoch, id), so a run is reproducible. Called concurrently on one handle (see the
   * thread-safety note above). Returns 0 on success, nonzero with a message in err for
   * corrupt data (emberd reports it as data loss). */
  int (*read_sample)(void* handle, uint64_t id, uint64_t seed, uint64_t epoch,
                     void* const* dsts, char* err, size_t err_len);

  /* Frees a handle returned by open. */
  void (*close)(void* handle);
} ember_plugin_v1;

typedef const ember_plugin_v1* (*ember_plugin_init_fn)(void);

typedef struct ember_transform_v1 {
  uint32_t abi_version; /* EMBER_TRANSFORM_ABI_VERSION */
  uint32_t struct_size; /* sizeof(ember_transform_v1) */
  /* The pipeline step this table implements: 1..32 bytes of [a-z0-9_], NUL-terminated,
   * different from every built-in step (random_resized_crop, resize, center_crop,
   * horizontal_flip, normalize) and from every step of every other loaded plugin. */
  const char* step_name;

  /* Checks the step's `count` settings (see above) and returns the step's state, owned
   * by emberd until it passes it to destroy, or NULL with a message in err. */
  void* (*create)(const char* const* keys, const char* const* values, size_t count,
                  char* err, size_t err_len);

  /* Frees a state returned by create. */
  void (*destroy)(void* state);

  /* Transforms the width x height RGB image at `pixels` in place, drawing randomness
   * only from `random` (see above). Called concurrently on one state. Returns 0 on
   * success, nonzero with a message in err otherwise. */
  int (*apply)(const void* state, uint8_t* pixels, int32_t width, int32_t height,
               uint64_t random, char* err, size_t err_len);
} ember_transform_v1;

typedef const ember_transform_v1* const* (*ember_transform_init_fn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* EMBER_PLUGIN_H_ */
