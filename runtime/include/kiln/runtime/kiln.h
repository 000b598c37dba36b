/*===- kiln.h - Kiln's runtime as a C API -------------------------*- C -*-===*
 *
 * Loads a .kiln file, runs it on a device and reads its outputs, from C or
 * any language with a C foreign-function interface. Every object is an
 * opaque handle that the caller frees with its kiln_*_free function; no C++
 * type crosses this boundary.
 *
 * Every function that can fail returns a KilnStatus. KILN_OK is 0; any other
 * value leaves the out-parameters untouched, and kiln_last_error() returns
 * the message of the last failure on the calling thread (valid until that
 * thread's next failing call).
 *
 *   KilnModel *model;
 *   if (kiln_model_load("mlp.kiln", "cpu:0", &model) != KILN_OK)
 *     fprintf(stderr, "%s\n", kiln_last_error());
 *
 * Threads: a model may be run from several threads at once; a tensor is
 * used by one thread at a time.
 *
 *===----------------------------------------------------------------------===*/

#ifndef KILN_RUNTIME_KILN_H
#define KILN_RUNTIME_KILN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum KilnStatus {
  KILN_OK = 0,
  /* A bad argument: a null handle, a wrong shape, type or size, an input
   * outside its declared range, a damaged file. */
  KILN_INVALID_ARGUMENT = 1,
  /* A file or device that does not exist. */
  KILN_NOT_FOUND = 2,
  /* The device cannot run it (no code for its api, a driver failure). */
  KILN_UNAVAILABLE = 3,
  KILN_OUT_OF_MEMORY = 4,
  /* A fault of Kiln's own. */
  KILN_INTERNAL = 5
} KilnStatus;

/* Element types, as a .kiln signature stores them. KILN_BF16 is the upper
 * half of an f32; KILN_BOOL is one byte per element. */
typedef enum KilnElementType {
  KILN_F32 = 0,
  KILN_F16 = 1,
  KILN_I32 = 2,
  KILN_BOOL = 3,
  KILN_BF16 = 4
} KilnElementType;

typedef struct KilnModel KilnModel;
typedef struct KilnTensor KilnTensor;

/* "0.6.0": the release this library is. */
const char *kiln_version(void);
/* The message of the calling thread's last failure ("" if none). */
const char *kiln_last_error(void);

/* Loads a .kiln file (mapped read-only, its seal checked) for `device`
 * ("cpu:0", "vulkan:0"; NULL for the first Vulkan device, else cpu:0). */
KilnStatus kiln_model_load(const char *path, const char *device, KilnModel **model);
/* The same from `size` bytes at `data`, which it copies: the caller may
 * free them once it returns. */
KilnStatus kiln_model_load_from_memory(const void *data, size_t size, const char *device,
                                       KilnModel **model);
void kiln_model_free(KilnModel *model);

/* The name of the device the model runs on ("cpu:0"). */
const char *kiln_model_device(const KilnModel *model);
size_t kiln_model_input_count(const KilnModel *model);
size_t kiln_model_output_count(const KilnModel *model);
/* Input or output `index`: its name, element type, rank and dimensions
 * (owned by the model, valid while it lives). Any out-pointer may be NULL. */
KilnStatus kiln_model_input(const KilnModel *model, size_t index, const char **name,
                            KilnElementType *type, size_t *rank, const int64_t **shape);
KilnStatus kiln_model_output(const KilnModel *model, size_t index, const char **name,
                             KilnElementType *type, size_t *rank, const int64_t **shape);

/* A tensor on the model's device holding a copy of `bytes` bytes at
 * `data`, which must be exactly the shape's elements of the type. */
KilnStatus kiln_tensor_create(const KilnModel *model, KilnElementType type, const int64_t *shape,
                              size_t rank, const void *data, size_t bytes, KilnTensor **tensor);
void kiln_tensor_free(KilnTensor *tensor);
KilnStatus kiln_tensor_info(const KilnTensor *tensor, KilnElementType *type, size_t *rank,
                            const int64_t **shape);
/* Its bytes in the tensor's element count times the type's size. */
size_t kiln_tensor_bytes(const KilnTensor *tensor);
/* Copies the tensor to host memory; `bytes` must be kiln_tensor_bytes(). */
KilnStatus kiln_tensor_read(const KilnTensor *tensor, void *data, size_t bytes);

/* Runs the model on `inputs` (one per model input, in order) and stores
 * one new tensor per output in `outputs` (the caller frees each). Inputs
 * are checked against the signature before anything runs; on failure no
 * output is stored. */
KilnStatus kiln_model_run(KilnModel *model, const KilnTensor *const *inputs, size_t input_count,
                          KilnTensor **outputs, size_t output_count);

#ifdef __cplusplus
}
#endif

#endif /* KILN_RUNTIME_KILN_H */
