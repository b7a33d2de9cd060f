/* edgekit on-device input pipeline: see ek_pipeline.h. */
#include "ek_pipeline.h"

#include <string.h>

#include "ek_board.h"
#include "edgekit_model.h"
#include "ek_pipeline_config.h"
#include "ek_pp_pipeline.h"
#include "ek_preprocess.h"

#if EK_PIPE_FRAME_FORMAT == EK_PIPE_RGB565
#define EK_PIPE_BPP 2
#elif EK_PIPE_FRAME_FORMAT == EK_PIPE_RGB888
#define EK_PIPE_BPP 3
#else
#define EK_PIPE_BPP 1
#endif
#define EK_PIPE_FRAME_BYTES ((uint32_t)EK_PIPE_FRAME_WIDTH * EK_PIPE_FRAME_HEIGHT * EK_PIPE_BPP)

static uint8_t g_frame[EK_PIPE_FRAME_BYTES] __attribute__((aligned(4)));
#if EK_PIPE_FRAME_FORMAT == EK_PIPE_RGB565
static uint8_t g_rgb[(uint32_t)EK_PIPE_FRAME_WIDTH * EK_PIPE_FRAME_HEIGHT * 3];
#endif
static uint8_t g_scratch[EK_PP_PIPELINE_SCRATCH_BYTES > 0 ? EK_PP_PIPELINE_SCRATCH_BYTES : 1];
static int32_t g_topk[EK_PIPE_TOPK * 2];
static uint32_t g_phase_cycles[3];
static ek_tensor g_frame_tensor, g_topk_tensor;

#if EK_PIPE_FRAME_FORMAT == EK_PIPE_RGB565
/* Little-endian RGB565 -> RGB888, each field's bits replicated into the low bits (r << 3 | r >> 2). */
static void rgb565_to_rgb888(const uint8_t *in, uint8_t *out, uint32_t pixels) {
  for (uint32_t i = 0; i < pixels; ++i) {
    const uint32_t v = (uint32_t)in[2 * i] | ((uint32_t)in[2 * i + 1] << 8);
    const uint32_t r = (v >> 11) & 31u, g = (v >> 5) & 63u, b = v & 31u;
    out[3 * i] = (uint8_t)((r << 3) | (r >> 2));
    out[3 * i + 1] = (uint8_t)((g << 2) | (g >> 4));
    out[3 * i + 2] = (uint8_t)((b << 3) | (b >> 2));
  }
}
#endif

static int32_t element(const edgekit_model_tensor *t, int32_t i) {
  return t->type == EDGEKIT_MODEL_UINT8 ? (int32_t)((const uint8_t *)t->data)[i] : (int32_t)((const int8_t *)t->data)[i];
}

/* Top-k by selection: k passes, each taking the best element ordered after the previous pick
   (value descending, index ascending); no extra memory. */
static void top_k(const edgekit_model_tensor *out) {
  const int32_t n = (int32_t)out->bytes;
  int32_t prev_v = 0, prev_i = -1;
  for (int32_t j = 0; j < EK_PIPE_TOPK; ++j) {
    int32_t best_i = -1, best_v = 0;
    for (int32_t i = 0; i < n; ++i) {
      const int32_t v = element(out, i);
      if (prev_i >= 0 && !(v < prev_v || (v == prev_v && i > prev_i))) continue;
      if (best_i < 0 || v > best_v) {
        best_i = i;
        best_v = v;
      }
    }
    g_topk[2 * j] = best_i;
    g_topk[2 * j + 1] = best_v;
    prev_i = best_i;
    prev_v = best_v;
  }
}

static int32_t pipeline_infer(ek_app *app, int32_t *op_index, const char **message) {
  const edgekit_model_tensor *in = edgekit_model_input(0);
  const edgekit_model_tensor *out = edgekit_model_output(0);
  const uint32_t start = ek_cycles();
  ek_marker_infer_begin();

  ek_marker_op_begin(); /* phase 1: preprocess */
#if EK_PIPE_FRAME_FORMAT == EK_PIPE_RGB565
  rgb565_to_rgb888(g_frame, g_rgb, (uint32_t)EK_PIPE_FRAME_WIDTH * EK_PIPE_FRAME_HEIGHT);
  const ek_pp_status pp = ek_preprocess(&ek_pp_pipeline, g_rgb, sizeof g_rgb, in->data, (size_t)in->bytes, g_scratch,
                                        sizeof g_scratch);
#else
  const ek_pp_status pp = ek_preprocess(&ek_pp_pipeline, g_frame, sizeof g_frame, in->data, (size_t)in->bytes,
                                        g_scratch, sizeof g_scratch);
#endif
  ek_marker_op_end();
  const uint32_t t1 = ek_cycles();
  if (pp != EK_PP_OK) {
    ek_marker_infer_end();
    *op_index = (int32_t)pp;
    *message = "the generated preprocessing failed (ek_pp_status in detail)";
    return 100;
  }

  ek_marker_op_begin(); /* phase 2: inference */
  const edgekit_model_status status = edgekit_model_invoke();
  ek_marker_op_end();
  const uint32_t t2 = ek_cycles();
  if (status != EDGEKIT_MODEL_OK) {
    ek_marker_infer_end();
    *op_index = edgekit_model_error_op();
    *message = edgekit_model_message();
    return (int32_t)status;
  }

  ek_marker_op_begin(); /* phase 3: post-process */
  top_k(out);
  ek_marker_op_end();
  const uint32_t t3 = ek_cycles();
  ek_marker_infer_end();

  g_phase_cycles[0] = t1 - start;
  g_phase_cycles[1] = t2 - t1;
  g_phase_cycles[2] = t3 - t2;
  app->cycles = t3 - start;
  return 0;
}

void ek_pipeline_attach(ek_app *app) {
  edgekit_model_set_op_hook(NULL, NULL); /* the op markers delimit phases now */
  memset(&g_frame_tensor, 0, sizeof g_frame_tensor);
  g_frame_tensor.data = g_frame;
  g_frame_tensor.ndim = 3;
  g_frame_tensor.dims[0] = EK_PIPE_FRAME_HEIGHT;
  g_frame_tensor.dims[1] = EK_PIPE_FRAME_WIDTH;
  g_frame_tensor.dims[2] = EK_PIPE_BPP;
  g_frame_tensor.bytes = (int32_t)EK_PIPE_FRAME_BYTES;
  g_frame_tensor.type = EK_UINT8;
  memset(&g_topk_tensor, 0, sizeof g_topk_tensor);
  g_topk_tensor.data = g_topk;
  g_topk_tensor.ndim = 2;
  g_topk_tensor.dims[0] = EK_PIPE_TOPK;
  g_topk_tensor.dims[1] = 2;
  g_topk_tensor.bytes = (int32_t)sizeof g_topk;
  g_topk_tensor.type = EK_INT32;
  app->num_inputs = 1;
  app->inputs[0] = &g_frame_tensor;
  app->num_outputs = 1;
  app->outputs[0] = &g_topk_tensor;
  app->infer = pipeline_infer;
  app->op_cycles = g_phase_cycles;
  app->n_op_cycles = 3;
}
