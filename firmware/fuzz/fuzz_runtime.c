/* libFuzzer target over the edgekit runtime: reader + planner + prepare + one invoke with zeroed inputs.
 *
 * Build: make -C firmware/runtime fuzz   (clang -fsanitize=fuzzer,address,undefined)
 * Run:   build/host_runtime/ekrt_fuzz -dict=firmware/fuzz/tflite.dict -max_len=300000 CORPUS_DIR
 *
 * The model, state and arena are heap copies of exactly the size the runtime asks for, so AddressSanitizer
 * reports any read past the end of the model or any access outside the state or arena. Models whose
 * state or arena exceed EK_FUZZ_MAX_BYTES are skipped after planning (they are valid, just too big to
 * run thousands of times a second).
 */
#define _POSIX_C_SOURCE 200112L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ek_runtime.h"

#define EK_FUZZ_MAX_BYTES ((size_t)4 << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void *copy_exact(const uint8_t *data, size_t size) {
  void *p = NULL;
  if (posix_memalign(&p, 16, size ? size : 1) != 0) return NULL;
  if (size) memcpy(p, data, size);
  return p;
}

/* Counts hook calls so the hook path is exercised and checked. */
typedef struct hook_count {
  int32_t begins, ends, last_op;
} hook_count;

static void count_hook(void *user, int32_t op_index, int32_t opcode, int phase) {
  hook_count *c = (hook_count *)user;
  (void)opcode;
  if (phase == 0) {
    if (op_index != c->last_op + 1) abort(); /* ops must run in order, each once */
    c->begins++;
  } else {
    c->ends++;
    c->last_op = op_index;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *model = (uint8_t *)copy_exact(data, size);
  if (!model) return 0;

  int32_t codes[64];
  ek_error err;
  (void)ek_model_opcodes(model, size, codes, 64, &err);

  ek_runtime rt;
  void *state = NULL, *arena = NULL;
  size_t state_len = 0;
  ek_status st = EK_ERR_MEMORY;
  for (int round = 0; round < 4; ++round) {
    st = ek_init(&rt, model, size, state, state_len, NULL, 0);
    if (st != EK_ERR_MEMORY || rt.state_required <= state_len) break;
    if (rt.state_required > EK_FUZZ_MAX_BYTES) goto done;
    free(state);
    state_len = rt.state_required;
    state = malloc(state_len);
    if (!state) goto done;
  }
  if (st != EK_OK && st != EK_ERR_MEMORY) goto done;
  if (st == EK_ERR_MEMORY && rt.state_required > state_len) goto done;
  const size_t arena_len = rt.arena_required;
  if (arena_len > EK_FUZZ_MAX_BYTES) goto done;
  if (arena_len && posix_memalign(&arena, 16, arena_len) != 0) {
    arena = NULL;
    goto done;
  }
  if (ek_init(&rt, model, size, state, state_len, arena, arena_len) != EK_OK) goto done;
  /* With an arena the planner works there, so the final state can be smaller than the discovered one:
     run again on a buffer of exactly the reported size (ASan bounds it); the reported sizes must suffice. */
  if (rt.state_required < state_len) {
    free(state);
    state_len = rt.state_required;
    state = malloc(state_len ? state_len : 1);
    if (!state) goto done;
    if (ek_init(&rt, model, size, state, state_len, arena, arena_len) != EK_OK) abort();
  }

  for (int32_t i = 0; i < ek_num_inputs(&rt); ++i) {
    ek_tensor *t = ek_get_input(&rt, i);
    if (t->bytes) memset(t->data, 0, (size_t)t->bytes);
  }
  hook_count hc = {0, 0, -1};
  ek_set_op_hook(&rt, count_hook, &hc);
  if (ek_invoke(&rt) == EK_OK && (hc.begins != rt.num_ops || hc.ends != rt.num_ops)) abort();
  for (int32_t i = 0; i < ek_num_outputs(&rt); ++i) {
    const ek_tensor *t = ek_get_output(&rt, i);
    volatile uint8_t sink = 0;
    for (int32_t b = 0; b < t->bytes; ++b) sink ^= ((const uint8_t *)t->data)[b]; /* outputs must be readable */
    (void)sink;
  }
done:
  free(arena);
  free(state);
  free(model);
  return 0;
}
