/* libFuzzer target over the edgekit runtime: reader + planner + prepare + one invoke with zeroed inputs.
 *
 * Build: make -C firmware/runtime fuzz   (clang -fsanitize=fuzzer,address,undefined)
 * Run:   build/host_runtime/ekrt_fuzz -dict=firmware/fuzz/tflite.dict -max_len=300000 CORPUS_DIR
 *
 * The model, state and arena are heap copies of exactly the size the runtime asks for, so AddressSanitizer
 * reports any read past the end of the model or any access outside the state or arena. Models whose
 * state or arena exceed EK_FUZZ_MAX_BYTES are skipped after planning (they are valid, just too big to
 * run thousands of times a second).
 *
 * Prepared path (ek_prepared.c): every model that runs is also re-planned with overlaps (ek_plan_overlapped),
 * exported (ek_export_prepared) into an exact-size buffer, validated and run by ek_prepared_init/_invoke on an
 * exact-size state and arena; its outputs must equal the in-place run's (the overlaps must not change a bit).
 * Then one byte of the blob chosen by the input is flipped, and the blob truncated: both must be rejected.
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

/* The prepared twin of an initialised, invoked runtime: same outputs; a corrupt or truncated blob is rejected. */
static void prepared_check(const ek_runtime *ran, const uint8_t *model, size_t size, uint8_t salt) {
  ek_runtime rt;
  uint8_t *state = NULL, *arena = NULL, *work = NULL, *blob = NULL, *pstate = NULL, *parena = NULL;
  size_t state_len = ran->state_with_plan;
  const size_t arena_len = ran->arena_required;
  /* prepared for export: kernels may keep more per-op data (e.g. CONV_2D's expanded weights), so the state is sized
     again (one failing init reports the exact size) */
  const int32_t mode = (int32_t)(salt % 3u) | EK_OPTIMIZE_FOR_EXPORT | ((salt & 4u) ? EK_OPTIMIZE_INT8_WEIGHTS : 0);
  if (state_len > EK_FUZZ_MAX_BYTES) return;
  if (arena_len && posix_memalign((void **)&arena, 16, arena_len) != 0) goto out;
  for (int attempt = 0; attempt < 3; ++attempt) {
    free(state);
    state = (uint8_t *)malloc(state_len ? state_len : 1);
    if (!state) goto out;
    const ek_status st = ek_init_opt(&rt, model, size, state, state_len, arena, arena_len, mode);
    if (st == EK_OK && state_len >= rt.state_with_plan) break; /* the plan stays readable for the overlapped plan */
    if ((st != EK_OK && st != EK_ERR_MEMORY) || attempt == 2 || rt.state_with_plan <= state_len ||
        rt.state_with_plan > EK_FUZZ_MAX_BYTES)
      goto out;
    state_len = rt.state_with_plan;
  }
  const size_t work_len = ek_plan_overlapped_work_bytes(&rt);
  if (work_len > EK_FUZZ_MAX_BYTES || posix_memalign((void **)&work, 16, work_len ? work_len : 16) != 0) goto out;
  if (ek_plan_overlapped(&rt, work, work_len, NULL, 0) != EK_OK) abort(); /* same model: must plan */
  if (rt.arena_required > arena_len) abort();                            /* never worse than the plain plan */
  size_t blob_len = 0;
  ek_export_prepared(&rt, NULL, 0, &blob_len);
  if (blob_len == 0 || blob_len > EK_FUZZ_MAX_BYTES || posix_memalign((void **)&blob, 16, blob_len) != 0) goto out;
  if (ek_export_prepared(&rt, blob, blob_len, &blob_len) != EK_OK) abort();
  const size_t ps_len = ek_prepared_state_bytes(blob, blob_len), pa_len = rt.arena_required;
  pstate = (uint8_t *)malloc(ps_len ? ps_len : 1);
  if (!pstate || (pa_len && posix_memalign((void **)&parena, 16, pa_len) != 0)) goto out;
  ek_prepared p;
  if (ek_prepared_init(&p, model, size, blob, blob_len, pstate, ps_len, parena, pa_len) != EK_OK) abort();
  for (int32_t i = 0; i < p.num_inputs; ++i) {
    ek_tensor *t = ek_prepared_input(&p, i);
    if (t->bytes) memset(t->data, 0, (size_t)t->bytes);
  }
  if (ek_prepared_invoke(&p) == EK_OK) {
    for (int32_t i = 0; i < p.num_outputs; ++i) {
      const ek_tensor *a = ek_prepared_output(&p, i), *b = ek_get_output((ek_runtime *)ran, i);
      if (a->bytes != b->bytes || (a->bytes && memcmp(a->data, b->data, (size_t)a->bytes) != 0)) abort();
    }
  }
  /* a flipped byte (checksum) and a truncated blob are rejected before anything runs */
  const size_t at = ((size_t)salt * 2654435761u) % blob_len;
  blob[at] ^= (uint8_t)(1u << (salt & 7u));
  if (ek_prepared_init(&p, model, size, blob, blob_len, pstate, ps_len, parena, pa_len) == EK_OK) abort();
  blob[at] ^= (uint8_t)(1u << (salt & 7u));
  if (ek_prepared_init(&p, model, size, blob, blob_len - 16, pstate, ps_len, parena, pa_len) == EK_OK) abort();
out:
  free(parena);
  free(pstate);
  free(blob);
  free(work);
  free(arena);
  free(state);
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
  const ek_status invoked = ek_invoke(&rt);
  if (invoked == EK_OK && (hc.begins != rt.num_ops || hc.ends != rt.num_ops)) abort();
  for (int32_t i = 0; i < ek_num_outputs(&rt); ++i) {
    const ek_tensor *t = ek_get_output(&rt, i);
    volatile uint8_t sink = 0;
    for (int32_t b = 0; b < t->bytes; ++b) sink ^= ((const uint8_t *)t->data)[b]; /* outputs must be readable */
    (void)sink;
  }
  if (invoked == EK_OK) prepared_check(&rt, model, size, size ? data[size / 2] : 0);
done:
  free(arena);
  free(state);
  free(model);
  return 0;
}
