/* edgekit model firmware: initialise the runtime from the embedded model, then serve the UART protocol.
 *
 * Generated inputs (edgekit.firmware, H5's generator):
 *   model_data.h / model_data.c: const uint8_t ek_model_data[] __attribute__((aligned(16))); ek_model_size
 *   prepared_data.h / .c (with EK_PREPARED 1 in ek_config.h): the prepared model (ek_prepared.c), run without the
 *                flatbuffer reader and planner; the mutable state is then sizeof(ek_prepared) + EK_STATE_BYTES
 *   ek_config.h: EK_ARENA_BYTES, EK_STATE_BYTES (from the host-side plan), optionally EK_MODEL_NAME,
 *                EK_ARENA_SECTION (e.g. ".dtcm" to put the arena in an extra memory region),
 *                EK_MAX_OP_CYCLES (per-op cycle slots reported on cores with DWT; default 256)
 *
 * Per inference the firmware calls ek_marker_infer_begin/end around ek_invoke and, through the runtime's
 * op hook, ek_marker_op_begin/end around every operator: the QEMU plugin counts instructions between
 * them. On real cores the DWT cycle counter is read at the same points.
 */
#include <stdint.h>
#include <string.h>

#include "ek_board.h"
#include "ek_config.h"
#ifndef EK_PREPARED
#define EK_PREPARED 0 /* 1: run the prepared model (generated prepared_data.c) */
#endif
#include "ek_proto.h"
#include "ek_runtime.h"
#include "ek_serve.h"
#include "model_data.h"
#if EK_PREPARED
#include "prepared_data.h"
#endif
#ifdef EK_PIPELINE
#include "ek_pipeline.h" /* raw frame in, top-k out (edgekit run --pipeline on qemu:/serial:) */
#endif

#ifndef EK_MODEL_NAME
#define EK_MODEL_NAME ""
#endif
#ifndef EK_MAX_OP_CYCLES
#define EK_MAX_OP_CYCLES 256
#endif
#define EK_STR2(x) #x
#define EK_STR(x) EK_STR2(x)

#ifdef EK_ARENA_SECTION
#define EK_ARENA_PLACEMENT __attribute__((section(EK_ARENA_SECTION), aligned(EK_ARENA_ALIGN)))
#else
#define EK_ARENA_PLACEMENT __attribute__((aligned(EK_ARENA_ALIGN)))
#endif

#if EK_PREPARED
static ek_prepared g_rt;
#define EK_RT_INVOKE ek_prepared_invoke
#define EK_RT_RESET ek_prepared_reset
#define EK_RT_ERROR ek_prepared_last_error
#else
static ek_runtime g_rt;
#define EK_RT_INVOKE ek_invoke
#define EK_RT_RESET ek_reset_variables
#define EK_RT_ERROR ek_last_error
#endif
static uint8_t g_state[EK_STATE_BYTES > 0 ? EK_STATE_BYTES : 1] __attribute__((aligned(16)));
static uint8_t g_arena[EK_ARENA_BYTES > 0 ? EK_ARENA_BYTES : 1] EK_ARENA_PLACEMENT;
static uint32_t g_op_cycles[EK_MAX_OP_CYCLES];
static uint32_t g_op_start;

static void op_hook(void *user, int32_t op_index, int32_t opcode, int phase) {
  (void)user;
  (void)opcode;
  if (phase == 0) {
    g_op_start = ek_cycles();
    ek_marker_op_begin();
  } else {
    ek_marker_op_end();
    uint32_t now = ek_cycles();
    if (op_index >= 0 && op_index < EK_MAX_OP_CYCLES) g_op_cycles[op_index] = now - g_op_start;
  }
}

static int32_t model_infer(ek_app *app, int32_t *op_index, const char **message) {
  uint32_t start = ek_cycles();
  ek_marker_infer_begin();
  ek_status status = EK_RT_INVOKE(&g_rt);
  ek_marker_infer_end();
  app->cycles = ek_cycles() - start;
  if (status != EK_OK) {
    ek_error error = EK_RT_ERROR(&g_rt);
    *op_index = error.op_index;
    *message = error.message;
    return (int32_t)status;
  }
  return 0;
}

/* RESET: resource variables (streaming state) start again from their initial values at the next inference. */
static void model_reset(ek_app *app) {
  (void)app;
  EK_RT_RESET(&g_rt);
}

int main(void) {
  static ek_app app;
  memset(&app, 0, sizeof app);
  app.runtime = "edgekit-rt " EK_STR(EK_RUNTIME_VERSION);
  app.model_name = EK_MODEL_NAME;
  app.model_bytes = (uint32_t)ek_model_size;
  app.model_crc32 = ek_crc32(0, ek_model_data, (size_t)ek_model_size);
  app.arena_bytes = (uint32_t)EK_ARENA_BYTES;
  app.state_bytes = (uint32_t)EK_STATE_BYTES;
  app.infer = model_infer;
  app.reset = model_reset;
  app.op_cycles = g_op_cycles;

#if EK_PREPARED
  /* mutable state: the ek_prepared object + the tensor records decoded on demand */
  app.state_bytes = (uint32_t)(EK_STATE_BYTES + sizeof g_rt);
  ek_status status = ek_prepared_init(&g_rt, ek_model_data, (size_t)ek_model_size, ek_prepared_data,
                                      (size_t)ek_prepared_size, g_state, sizeof g_state, g_arena, sizeof g_arena);
  app.state_used = (uint32_t)(ek_prepared_state_bytes(ek_prepared_data, (size_t)ek_prepared_size) + sizeof g_rt);
  app.arena_used = g_rt.arena_bytes;
#else
  ek_status status = ek_init(&g_rt, ek_model_data, (size_t)ek_model_size, g_state, sizeof g_state, g_arena,
                             sizeof g_arena);
  app.state_used = (uint32_t)g_rt.state_required;
  app.arena_used = (uint32_t)g_rt.arena_required;
#endif
  app.init_status = (int32_t)status;
  if (status != EK_OK) {
    ek_error error = EK_RT_ERROR(&g_rt);
    app.init_message = error.message;
    ek_semihost_write("edgekit: runtime initialisation failed: ");
    ek_semihost_write(error.message);
    ek_semihost_write("\n");
  } else {
    app.init_message = "";
    app.op_count = g_rt.num_ops;
    app.n_op_cycles = (uint16_t)(g_rt.num_ops < EK_MAX_OP_CYCLES ? g_rt.num_ops : EK_MAX_OP_CYCLES);
#if EK_PREPARED
    app.num_inputs = g_rt.num_inputs < EK_APP_MAX_IO ? g_rt.num_inputs : EK_APP_MAX_IO;
    app.num_outputs = g_rt.num_outputs < EK_APP_MAX_IO ? g_rt.num_outputs : EK_APP_MAX_IO;
    for (int32_t i = 0; i < app.num_inputs; ++i) app.inputs[i] = ek_prepared_input(&g_rt, i);
    for (int32_t i = 0; i < app.num_outputs; ++i) app.outputs[i] = ek_prepared_output(&g_rt, i);
    ek_prepared_set_op_hook(&g_rt, op_hook, NULL);
#else
    app.num_inputs = ek_num_inputs(&g_rt) < EK_APP_MAX_IO ? ek_num_inputs(&g_rt) : EK_APP_MAX_IO;
    app.num_outputs = ek_num_outputs(&g_rt) < EK_APP_MAX_IO ? ek_num_outputs(&g_rt) : EK_APP_MAX_IO;
    for (int32_t i = 0; i < app.num_inputs; ++i) app.inputs[i] = ek_get_input(&g_rt, i);
    for (int32_t i = 0; i < app.num_outputs; ++i) app.outputs[i] = ek_get_output(&g_rt, i);
    ek_set_op_hook(&g_rt, op_hook, NULL);
#endif
#ifdef EK_PIPELINE
    ek_pipeline_attach(&app, &g_rt); /* after the op hook: the pipeline's phase markers replace it */
#endif
  }
  ek_serve(&app);
}
