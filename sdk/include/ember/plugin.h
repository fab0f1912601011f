/* Ember dataset-format plugins: the stable C ABI between emberd and a shared library
 * that reads a dataset format emberd does not know.
 *
 * A plugin is a shared library listed under `plugins:` in emberd's config (only listed
 * paths are ever loaded). It exports one function, named by EMBER_PLUGIN_INIT_SYMBOL:
 *
 *   EMBER_PLUGIN_EXPORT const ember_plugin_v1* ember_plugin_init(void);
 *
 * which returns a pointer to a table the plugin owns and keeps valid until it is
 * unloaded (a static const object). emberd checks abi_version == EMBER_PLUGIN_ABI_VERSION,
 * struct_size >= sizeof(ember_plugin_v1), the format name and that every function
 * pointer is set, and refuses the library otherwise. A dataset registered with
 * `--format <format_name>` is then probed and read through the table.
 *
 * Only C types cross the boundary. No C++ exception may escape a plugin function (it
 * would unwind through emberd's C frames: undefined behaviour); report errors through
 * the return value and `err`.
 *
 * Errors: a function that fails writes a NUL-terminated message of at most err_len
 * bytes (including the NUL) into `err`, naming the file and what is wrong (for example
 * "/data/x.csv: line 7: expected 5 fields, got 4"); emberd adds the format name and
 * the dataset. `err` is owned by emberd and only valid during the call.
 *
 * Thread-safety: probe and open may be called from any thread, concurrently with each
 * other and with read_sample on other handles. read_sample is called concurrently, by
 * many decode threads, on the same handle: it must be safe for that (read-only state,
 * or its own locking). close is called once per handle, after every read_sample on it
 * has returned.
 */
#ifndef EMBER_PLUGIN_H_
#define EMBER_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any incompatible change of the structs or functions below. */
#define EMBER_PLUGIN_ABI_VERSION 1u

#define EMBER_PLUGIN_INIT_SYMBOL "ember_plugin_init"

#if defined(__GNUC__)
#define EMBER_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define EMBER_PLUGIN_EXPORT
#endif

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

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* EMBER_PLUGIN_H_ */
