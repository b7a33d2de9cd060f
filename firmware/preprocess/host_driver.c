/* host_driver.c - runs generated preprocessing on the host (tests and the `c` implementation).
 *
 * Build: gcc -std=c99 -Wall -Wextra -Werror -ffp-contract=off -DEK_PP_CONFIG_HEADER='"ek_pp_model.h"' \
 *            -DEK_PP_CONFIG=ek_pp_model ek_preprocess.c ek_pp_model.c host_driver.c -o ek_pp_host
 * Usage: ek_pp_host INPUT.raw OUTPUT.raw
 *   INPUT.raw holds N frames of ek_pp_input_bytes(cfg) bytes each; OUTPUT.raw gets N tensors of
 *   cfg->output_bytes bytes each. Exit 0 on success, 2 on bad usage/files, 3 on a preprocessing error.
 */
#include <stdio.h>
#include <stdlib.h>

#include "ek_preprocess.h"
#include EK_PP_CONFIG_HEADER

static unsigned char *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  if (fseek(f, 0, SEEK_END) != 0) { fclose(f); return NULL; }
  const long n = ftell(f);
  if (n < 0 || fseek(f, 0, SEEK_SET) != 0) { fclose(f); return NULL; }
  unsigned char *data = malloc(n > 0 ? (size_t)n : 1u);
  if (data && n > 0 && fread(data, 1, (size_t)n, f) != (size_t)n) { free(data); data = NULL; }
  fclose(f);
  *size = (size_t)n;
  return data;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s INPUT.raw OUTPUT.raw\n", argv[0]);
    return 2;
  }
  const ek_pp_config *cfg = &EK_PP_CONFIG;
  const size_t frame = ek_pp_input_bytes(cfg);
  size_t size = 0;
  unsigned char *input = read_file(argv[1], &size);
  if (!input || frame == 0 || size % frame != 0) {
    fprintf(stderr, "%s: cannot read whole frames of %zu bytes from %s\n", argv[0], frame, argv[1]);
    free(input);
    return 2;
  }
  const size_t frames = size / frame;
  unsigned char *output = malloc(frames * cfg->output_bytes + 1u);
  uint8_t *scratch = malloc(cfg->scratch_bytes + 1u);
  FILE *out = fopen(argv[2], "wb");
  int code = 0;
  if (!output || !scratch || !out) {
    fprintf(stderr, "%s: out of memory or cannot write %s\n", argv[0], argv[2]);
    code = 2;
  }
  for (size_t i = 0; code == 0 && i < frames; i++) {
    const ek_pp_status status = ek_preprocess(cfg, input + i * frame, frame, output + i * cfg->output_bytes,
                                              cfg->output_bytes, scratch, cfg->scratch_bytes);
    if (status != EK_PP_OK) {
      fprintf(stderr, "%s: ek_preprocess failed on frame %zu with status %d\n", argv[0], i, (int)status);
      code = 3;
    }
  }
  if (code == 0 && fwrite(output, 1, frames * cfg->output_bytes, out) != frames * cfg->output_bytes) code = 2;
  if (out) fclose(out);
  free(scratch);
  free(output);
  free(input);
  return code;
}
