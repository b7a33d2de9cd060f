/* edgekit model firmware: the model's generated C API (the same one `edgekit firmware --emit library` emits) + a
 * startup (board/) + the UART protocol server (ek_serve.c). One code path with the library: this file calls only
 * edgekit_model_* (model/edgekit_model.h), never the runtime's internals.
 *
 * Generated inputs (edgekit.firmware.generate / app_api):
 *   model/edgekit_model.h, .c, _config.h, _memory.c: the library's API (templates/library), over the arrays below;
 *                the arena/state are edgekit_model_arena / edgekit_model_state (the arena in EK_ARENA_SECTION
 *                when ek_config.h defines one)
 *   model_data.h / model_data.c, prepared_data.h / .c: the constants the prepared model reads and the prepared
 *                model (ek_model_data, ek_prepared_data), in flash
 *   ek_config.h: EK_MODEL_NAME, optionally EK_MAX_OP_CYCLES (per-op cycle slots reported on cores with DWT;
 *                default 256)
 *
 * Per inference the firmware calls ek_marker_infer_begin/end around edgekit_model_invoke and, through the API's
 * op hook, ek_marker_op_begin/end around every operator: the QEMU plugin counts instructions between them. On
 * real cores the DWT cycle counter is read at the same points.
 */
#include <stdint.h>
#include <string.h>

#include "ek_board.h"
#include "ek_config.h"
#include "ek_proto.h"
#include "ek_serve.h"
#include "edgekit_model.h"
#include "model_data.h"
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
#define N_IN (EDGEKIT_MODEL_NUM_INPUTS < EK_APP_MAX_IO ? EDGEKIT_MODEL_NUM_INPUTS : EK_APP_MAX_IO)
#define N_OUT (EDGEKIT_MODEL_NUM_OUTPUTS < EK_APP_MAX_IO ? EDGEKIT_MODEL_NUM_OUTPUTS : EK_APP_MAX_IO)

static uint32_t g_op_cycles[EK_MAX_OP_CYCLES];
static uint32_t g_op_start;
/* the protocol server's view of the API's inputs/outputs (same data pointers, shapes and quantization) */
static ek_tensor g_inputs[N_IN > 0 ? N_IN : 1], g_outputs[N_OUT > 0 ? N_OUT : 1];

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
  edgekit_model_status status = edgekit_model_invoke();
  ek_marker_infer_end();
  app->cycles = ek_cycles() - start;
  if (status != EDGEKIT_MODEL_OK) {
    *op_index = edgekit_model_error_op();
    *message = edgekit_model_message();
    return (int32_t)status;
  }
  return 0;
}

/* RESET: resource variables (streaming state) start again from their initial values at the next inference. */
static void model_reset(ek_app *app) {
  (void)app;
  edgekit_model_reset();
}

static ek_tensor *describe(ek_tensor *out, const edgekit_model_tensor *t) {
  memset(out, 0, sizeof *out);
  out->data = t->data;
  out->bytes = (int32_t)t->bytes;
  out->type = t->type;
  out->ndim = t->ndim < EK_MAX_DIMS ? t->ndim : EK_MAX_DIMS;
  for (int32_t d = 0; d < out->ndim; ++d) out->dims[d] = t->shape[d];
  out->scale = t->scale;
  out->zero_point = t->zero_point;
  return out;
}

int main(void) {
  static ek_app app;
  memset(&app, 0, sizeof app);
  app.runtime = "edgekit-rt " EK_STR(EDGEKIT_MODEL_RUNTIME_VERSION);
  app.model_name = EK_MODEL_NAME;
  app.model_bytes = (uint32_t)ek_model_size;
  app.model_crc32 = ek_crc32(0, ek_model_data, (size_t)ek_model_size);
  app.arena_bytes = (uint32_t)EDGEKIT_MODEL_ARENA_BYTES;
  app.state_bytes = (uint32_t)EDGEKIT_MODEL_STATE_BYTES;
  app.infer = model_infer;
  app.reset = model_reset;
  app.op_cycles = g_op_cycles;

  edgekit_model_status status = edgekit_model_init();
  app.init_status = (int32_t)status;
  if (status != EDGEKIT_MODEL_OK) {
    app.init_message = edgekit_model_message();
    ek_semihost_write("edgekit: runtime initialisation failed: ");
    ek_semihost_write(app.init_message);
    ek_semihost_write("\n");
  } else {
    app.init_message = "";
    app.state_used = (uint32_t)edgekit_model_state_used();
    app.arena_used = (uint32_t)edgekit_model_arena_used();
    app.op_count = edgekit_model_num_ops();
    app.n_op_cycles = (uint16_t)(app.op_count < EK_MAX_OP_CYCLES ? app.op_count : EK_MAX_OP_CYCLES);
    app.num_inputs = N_IN;
    app.num_outputs = N_OUT;
    for (int32_t i = 0; i < N_IN; ++i) app.inputs[i] = describe(&g_inputs[i], edgekit_model_input(i));
    for (int32_t i = 0; i < N_OUT; ++i) app.outputs[i] = describe(&g_outputs[i], edgekit_model_output(i));
    edgekit_model_set_op_hook(op_hook, NULL);
#ifdef EK_PIPELINE
    ek_pipeline_attach(&app); /* after the op hook: the pipeline's phase markers replace it */
#endif
  }
  ek_serve(&app);
}
