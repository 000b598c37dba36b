/* Loads MODEL.kiln on cpu:0 with an installed Kiln, runs it on the .npy
 * input X and checks the output against the .npy Y byte for byte:
 *   kiln-consumer-load MODEL.kiln X.npy Y.npy */

#include <kiln/runtime/kiln.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The last `bytes` bytes of a .npy file (its data); NULL if shorter. */
static unsigned char *npyData(const char *path, size_t bytes) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  unsigned char *data = NULL;
  if (size >= (long)bytes && (data = malloc(bytes)) != NULL) {
    fseek(f, size - (long)bytes, SEEK_SET);
    if (fread(data, 1, bytes, f) != bytes) {
      free(data);
      data = NULL;
    }
  }
  fclose(f);
  return data;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: kiln-consumer-load MODEL.kiln X.npy Y.npy\n");
    return 2;
  }
  KilnModel *model = NULL;
  if (kiln_model_load(argv[1], "cpu:0", &model) != KILN_OK) {
    fprintf(stderr, "%s\n", kiln_last_error());
    return 1;
  }
  KilnElementType type;
  size_t rank = 0, elements = 1;
  const int64_t *shape = NULL;
  kiln_model_input(model, 0, NULL, &type, &rank, &shape);
  for (size_t i = 0; i < rank; ++i)
    elements *= (size_t)shape[i];
  unsigned char *x = npyData(argv[2], elements * 4);
  KilnTensor *input = NULL, *output = NULL;
  int ok = x && kiln_tensor_create(model, type, shape, rank, x, elements * 4, &input) == KILN_OK;
  const KilnTensor *inputs[1] = {input};
  ok = ok && kiln_model_run(model, inputs, 1, &output, 1) == KILN_OK;
  size_t bytes = ok ? kiln_tensor_bytes(output) : 0;
  unsigned char *got = ok ? malloc(bytes) : NULL, *want = ok ? npyData(argv[3], bytes) : NULL;
  ok = ok && got && want && kiln_tensor_read(output, got, bytes) == KILN_OK;
  if (!ok)
    fprintf(stderr, "failed: %s\n", kiln_last_error());
  else if (memcmp(got, want, bytes) != 0)
    ok = 0, fprintf(stderr, "the output differs from %s\n", argv[3]);
  else
    printf("Kiln %s ran %s: %zu bytes equal to %s\n", kiln_version(), argv[1], bytes, argv[3]);
  free(x);
  free(got);
  free(want);
  kiln_tensor_free(input);
  kiln_tensor_free(output);
  kiln_model_free(model);
  return ok ? 0 : 1;
}
