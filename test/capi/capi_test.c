/* The runtime's C API from C: load the example's mlp.kiln from a file and
 * from memory, list its signature, run it on cpu:0 (and vulkan:0 where
 * there is one) and compare with the JIT's output byte for byte; then the
 * errors: a missing file, a damaged file, a wrong byte count, wrong
 * counts of inputs and outputs. Run in a folder where kiln-example-aot
 * wrote mlp.kiln, x.npy, y_jit.npy and y_jit_cpu.npy. */

#include "kiln/runtime/kiln.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond, ...)                                                                   \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      fprintf(stderr, "FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond);                  \
      fprintf(stderr, __VA_ARGS__);                                                        \
      fprintf(stderr, "\n");                                                               \
      ++failures;                                                                          \
    }                                                                                      \
  } while (0)

/* The whole file in a malloc'd buffer; *size its length. */
static unsigned char *readFile(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *data = malloc((size_t)n);
  if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
    free(data);
    data = NULL;
  }
  fclose(f);
  *size = (size_t)n;
  return data;
}

/* A .npy file's last `bytes` bytes: its data, after the header. */
static unsigned char *npyData(const char *path, size_t bytes) {
  size_t size = 0;
  unsigned char *file = readFile(path, &size);
  if (!file || size < bytes)
    return NULL;
  unsigned char *data = malloc(bytes);
  memcpy(data, file + size - bytes, bytes);
  free(file);
  return data;
}

/* Runs `model` on x.npy and compares its output with `expected`. */
static void runAndCompare(KilnModel *model, const char *expected) {
  KilnElementType type;
  size_t rank = 0;
  const int64_t *shape = NULL;
  CHECK(kiln_model_input(model, 0, NULL, &type, &rank, &shape) == KILN_OK, "%s",
        kiln_last_error());
  size_t elements = 1;
  for (size_t i = 0; i < rank; ++i)
    elements *= (size_t)shape[i];
  unsigned char *x = npyData("x.npy", elements * 4);
  CHECK(x != NULL, "cannot read x.npy");
  if (!x)
    return;
  KilnTensor *input = NULL;
  CHECK(kiln_tensor_create(model, type, shape, rank, x, elements * 4, &input) == KILN_OK, "%s",
        kiln_last_error());
  /* One byte short: refused, naming the sizes. */
  KilnTensor *shortOne = NULL;
  CHECK(kiln_tensor_create(model, type, shape, rank, x, elements * 4 - 1, &shortOne) ==
            KILN_INVALID_ARGUMENT,
        "a short buffer was accepted");
  CHECK(strstr(kiln_last_error(), "bytes for") != NULL, "%s", kiln_last_error());
  CHECK(shortOne == NULL, "an output set on failure");

  KilnTensor *y = NULL;
  const KilnTensor *inputs[1] = {input};
  CHECK(kiln_model_run(model, inputs, 1, &y, 1) == KILN_OK, "%s", kiln_last_error());
  CHECK(kiln_model_run(model, inputs, 0, &y, 1) == KILN_INVALID_ARGUMENT, "no inputs accepted");
  CHECK(strstr(kiln_last_error(), "the model takes 1") != NULL, "%s", kiln_last_error());
  if (y) {
    size_t bytes = kiln_tensor_bytes(y);
    unsigned char *got = malloc(bytes), *want = npyData(expected, bytes);
    CHECK(kiln_tensor_read(y, got, bytes) == KILN_OK, "%s", kiln_last_error());
    CHECK(want && memcmp(got, want, bytes) == 0, "output differs from %s", expected);
    CHECK(kiln_tensor_read(y, got, bytes + 4) == KILN_INVALID_ARGUMENT, "a wrong size read");
    free(got);
    free(want);
    kiln_tensor_free(y);
  }
  kiln_tensor_free(input);
  free(x);
}

int main(void) {
  CHECK(strlen(kiln_version()) >= 5, "version '%s'", kiln_version());

  KilnModel *model = NULL;
  CHECK(kiln_model_load("no-such.kiln", "cpu:0", &model) != KILN_OK, "a missing file loaded");
  CHECK(strstr(kiln_last_error(), "no-such.kiln") != NULL, "%s", kiln_last_error());
  CHECK(kiln_model_load("mlp.kiln", "cpu:7", &model) != KILN_OK, "cpu:7 opened");
  CHECK(strstr(kiln_last_error(), "unknown device 'cpu:7'") != NULL, "%s", kiln_last_error());
  CHECK(model == NULL, "a model set on failure");

  /* From the file, on cpu:0: the signature, then a run. */
  CHECK(kiln_model_load("mlp.kiln", "cpu:0", &model) == KILN_OK, "%s", kiln_last_error());
  if (!model)
    return 1;
  CHECK(strcmp(kiln_model_device(model), "cpu:0") == 0, "device %s", kiln_model_device(model));
  CHECK(kiln_model_input_count(model) == 1 && kiln_model_output_count(model) == 1,
        "%zu inputs, %zu outputs", kiln_model_input_count(model), kiln_model_output_count(model));
  const char *name = NULL;
  size_t rank = 0;
  const int64_t *shape = NULL;
  KilnElementType type;
  CHECK(kiln_model_input(model, 0, &name, &type, &rank, &shape) == KILN_OK, "%s",
        kiln_last_error());
  CHECK(type == KILN_F32 && rank == 2, "input type %d, rank %zu", (int)type, rank);
  printf("input '%s' [%lld, %lld], %zu output(s)\n", name, (long long)shape[0],
         (long long)shape[1], kiln_model_output_count(model));
  CHECK(kiln_model_output(model, 5, &name, NULL, NULL, NULL) == KILN_INVALID_ARGUMENT,
        "output 5 of 1");
  runAndCompare(model, "y_jit_cpu.npy");
  kiln_model_free(model);

  /* From memory, freed before the run; then a damaged copy. */
  size_t size = 0;
  unsigned char *bytes = readFile("mlp.kiln", &size);
  CHECK(bytes != NULL, "cannot read mlp.kiln");
  model = NULL;
  CHECK(kiln_model_load_from_memory(bytes, size, "cpu:0", &model) == KILN_OK, "%s",
        kiln_last_error());
  bytes[size / 2] ^= 0x40;
  KilnModel *damaged = NULL;
  CHECK(kiln_model_load_from_memory(bytes, size, "cpu:0", &damaged) == KILN_INVALID_ARGUMENT,
        "a damaged file loaded");
  printf("damaged: %s\n", kiln_last_error());
  free(bytes);
  if (model) {
    runAndCompare(model, "y_jit_cpu.npy");
    kiln_model_free(model);
  }

  /* The default device, where the JIT wrote y_jit.npy. */
  model = NULL;
  if (kiln_model_load("mlp.kiln", NULL, &model) == KILN_OK) {
    printf("default device: %s\n", kiln_model_device(model));
    runAndCompare(model, "y_jit.npy");
    kiln_model_free(model);
  } else {
    CHECK(0, "the default device: %s", kiln_last_error());
  }

  if (failures)
    return 1;
  printf("the C API loaded, described and ran mlp.kiln\n");
  return 0;
}
