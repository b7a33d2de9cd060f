/* Host driver of the edgekit runtime (used for the sanitizer builds and by hand):
 *
 *   ekrt_run MODEL.tflite info                      JSON: sizes, inputs/outputs, ops, memory plan
 *   ekrt_run MODEL.tflite run OUT_DIR IN0.bin ...   raw input bytes in, OUT_DIR/output_<i>.bin out
 *
 * State and arena are malloc'd with exactly the required sizes, so a sanitizer build (make host-asan)
 * catches any access outside them. Exit status: 0 ok, 1 usage or I/O error, 2 runtime error (message on stderr).
 */
#define _POSIX_C_SOURCE 200112L /* posix_memalign */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ek_runtime.h"

/* Exactly n bytes (so ASan sees any access past them), 16-byte aligned. */
static void *alloc16(size_t n) {
  void *p = NULL;
  return posix_memalign(&p, 16, n ? n : 1) == 0 ? p : NULL;
}

static unsigned char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  unsigned char *buf = NULL;
  if (fseek(f, 0, SEEK_END) == 0) {
    const long n = ftell(f);
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0) {
      buf = alloc16((size_t)n);
      if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
      }
      *len = (size_t)n;
    }
  }
  fclose(f);
  return buf;
}

static int report(const ek_runtime *rt) {
  const ek_error e = ek_last_error(rt);
  fprintf(stderr, "error: %s op %d: %s\n", ek_status_name(e.status), (int)e.op_index, e.message);
  return 2;
}

static void print_tensor(const ek_tensor *t, int32_t index) {
  printf("{\"index\": %d, \"type\": %d, \"bytes\": %d, \"scale\": %.9g, \"zero_point\": %d, \"shape\": [", (int)index,
         (int)t->type, (int)t->bytes, (double)t->scale, (int)t->zero_point);
  for (int32_t d = 0; d < t->ndim; ++d) printf("%s%d", d ? ", " : "", (int)t->dims[d]);
  printf("]}");
}

static void print_plan(const char *key, const ek_plan_entry *p, int32_t n) {
  printf(", \"%s\": [", key);
  for (int32_t i = 0; i < n; ++i) {
    printf("%s[%d, %d, %d, %d, %d]", i ? ", " : "", (int)p[i].offset, (int)p[i].bytes, (int)p[i].first_op,
           (int)p[i].last_op, (int)p[i].alias_of);
  }
  printf("]");
}

static int info(ek_runtime *rt, size_t state_len, size_t arena_len) {
  printf("{\"state_bytes\": %zu, \"arena_bytes\": %zu, \"persistent_bytes\": %zu, \"variables_bytes\": %zu, \"inputs\": [",
         state_len, arena_len, rt->persistent_bytes, ek_variables_bytes(rt));
  for (int32_t i = 0; i < ek_num_inputs(rt); ++i) {
    if (i) printf(", ");
    print_tensor(ek_get_input(rt, i), rt->inputs[i]);
  }
  printf("], \"outputs\": [");
  for (int32_t i = 0; i < ek_num_outputs(rt); ++i) {
    if (i) printf(", ");
    print_tensor(ek_get_output(rt, i), rt->outputs[i]);
  }
  printf("], \"ops\": [");
  for (int32_t i = 0; i < rt->num_ops; ++i) printf("%s\"%s\"", i ? ", " : "", ek_op_name(rt->ops[i].opcode));
  printf("]");
  print_plan("tensor_plan", rt->tensor_plan, rt->ctx.num_tensors);
  print_plan("scratch_plan", rt->scratch_plan, rt->num_ops);
  printf("}\n");
  return 0;
}

/* Invokes once per group of num_inputs files (a sequence: resource variables carry over), writes the last outputs. */
static int run(ek_runtime *rt, const char *out_dir, int n_inputs, char **input_paths) {
  const int per = (int)ek_num_inputs(rt);
  if (per <= 0 || n_inputs < per || n_inputs % per != 0) {
    fprintf(stderr, "error: model has %d inputs, %d given (give a multiple for a sequence)\n", per, n_inputs);
    return 1;
  }
  for (int i = 0; i < n_inputs; ++i) {
    size_t len = 0;
    unsigned char *data = read_file(input_paths[i], &len);
    ek_tensor *t = ek_get_input(rt, i % per);
    if (!data || len != (size_t)t->bytes) {
      fprintf(stderr, "error: input %d (%s): cannot read or not %d bytes\n", i, input_paths[i], (int)t->bytes);
      free(data);
      return 1;
    }
    memcpy(t->data, data, len);
    free(data);
    if (i % per == per - 1 && ek_invoke(rt) != EK_OK) return report(rt);
  }
  for (int32_t i = 0; i < ek_num_outputs(rt); ++i) {
    char path[4096];
    const ek_tensor *t = ek_get_output(rt, i);
    snprintf(path, sizeof path, "%s/output_%d.bin", out_dir, (int)i);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(t->data, 1, (size_t)t->bytes, f) != (size_t)t->bytes) {
      fprintf(stderr, "error: cannot write %s\n", path);
      if (f) fclose(f);
      return 1;
    }
    fclose(f);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3 || (strcmp(argv[2], "info") != 0 && (strcmp(argv[2], "run") != 0 || argc < 4))) {
    fprintf(stderr, "usage: %s MODEL.tflite info | run OUT_DIR IN0.bin ... (k x the inputs: k invocations)\n", argv[0]);
    return 1;
  }
  size_t model_len = 0;
  unsigned char *model = read_file(argv[1], &model_len);
  if (!model) {
    fprintf(stderr, "error: cannot read %s\n", argv[1]);
    return 1;
  }
  ek_runtime rt;
  size_t state_len = 0, arena_len = 0;
  void *state = NULL, *arena = NULL;
  int rc = 0;
  /* Grow the state until planning runs (at most a few rounds), then allocate the exact state and arena. */
  for (int round = 0; round < 4; ++round) {
    const ek_status st = ek_init(&rt, model, model_len, state, state_len, NULL, 0);
    if (st == EK_OK || (st == EK_ERR_MEMORY && rt.state_required <= state_len)) break;
    if (st != EK_ERR_MEMORY) {
      rc = report(&rt);
      goto done;
    }
    free(state);
    state_len = rt.state_required;
    state = alloc16(state_len);
  }
  /* Planning without an arena needed more state than the final init (which plans in the arena) does: reallocate
     exactly state_required, or state_with_plan to keep the plan readable for printing. */
  const size_t exact = strcmp(argv[2], "info") == 0 && rt.state_with_plan > rt.state_required ? rt.state_with_plan
                                                                                               : rt.state_required;
  if (exact != state_len) {
    free(state);
    state_len = exact;
    state = alloc16(state_len);
  }
  arena_len = rt.arena_required;
  arena = arena_len ? alloc16(arena_len) : NULL;
  if (ek_init(&rt, model, model_len, state, state_len, arena, arena_len) != EK_OK) {
    rc = report(&rt);
    goto done;
  }
  rc = strcmp(argv[2], "info") == 0 ? info(&rt, rt.state_required, arena_len) : run(&rt, argv[3], argc - 4, argv + 4);
done:
  free(arena);
  free(state);
  free(model);
  return rc;
}
