/* The runtime handle the apps share (main.c's protocol server, ek_pipeline.c, mlperf_harness.c): the prepared
 * model when the generator emitted one (EK_PREPARED 1 in ek_config.h, prepared_data.c in flash: no flatbuffer
 * reader or planner on the device), else the in-place .tflite path (ek_init). One set of names for both, so an
 * app never branches on how the model was prepared. */
#ifndef EK_APP_RUNTIME_H
#define EK_APP_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "ek_config.h"
#include "ek_runtime.h"
#include "model_data.h"

#ifndef EK_PREPARED
#define EK_PREPARED 0
#endif

#if EK_PREPARED
#include "prepared_data.h"

typedef ek_prepared ek_app_runtime;

static inline ek_status ek_app_init(ek_app_runtime *rt, void *state, size_t state_len, void *arena, size_t arena_len) {
  return ek_prepared_init(rt, ek_model_data, (size_t)ek_model_size, ek_prepared_data, (size_t)ek_prepared_size, state,
                          state_len, arena, arena_len);
}
static inline ek_status ek_app_invoke(ek_app_runtime *rt) { return ek_prepared_invoke(rt); }
static inline ek_error ek_app_last_error(const ek_app_runtime *rt) { return ek_prepared_last_error(rt); }
static inline int32_t ek_app_num_inputs(const ek_app_runtime *rt) { return rt->num_inputs; }
static inline int32_t ek_app_num_outputs(const ek_app_runtime *rt) { return rt->num_outputs; }
static inline ek_tensor *ek_app_input(ek_app_runtime *rt, int32_t i) { return ek_prepared_input(rt, i); }
static inline ek_tensor *ek_app_output(ek_app_runtime *rt, int32_t i) { return ek_prepared_output(rt, i); }
static inline void ek_app_set_op_hook(ek_app_runtime *rt, ek_op_hook hook, void *user) {
  ek_prepared_set_op_hook(rt, hook, user);
}
#else
typedef ek_runtime ek_app_runtime;

static inline ek_status ek_app_init(ek_app_runtime *rt, void *state, size_t state_len, void *arena, size_t arena_len) {
  return ek_init(rt, ek_model_data, (size_t)ek_model_size, state, state_len, arena, arena_len);
}
static inline ek_status ek_app_invoke(ek_app_runtime *rt) { return ek_invoke(rt); }
static inline ek_error ek_app_last_error(const ek_app_runtime *rt) { return ek_last_error(rt); }
static inline int32_t ek_app_num_inputs(const ek_app_runtime *rt) { return ek_num_inputs(rt); }
static inline int32_t ek_app_num_outputs(const ek_app_runtime *rt) { return ek_num_outputs(rt); }
static inline ek_tensor *ek_app_input(ek_app_runtime *rt, int32_t i) { return ek_get_input(rt, i); }
static inline ek_tensor *ek_app_output(ek_app_runtime *rt, int32_t i) { return ek_get_output(rt, i); }
static inline void ek_app_set_op_hook(ek_app_runtime *rt, ek_op_hook hook, void *user) { ek_set_op_hook(rt, hook, user); }
#endif

#endif
