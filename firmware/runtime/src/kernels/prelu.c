/* PRELU, int8 -> int8: y = x >= 0 ? x : alpha * x, alpha a tensor broadcast against x (NumPy rules; MediaPipe's
 * detectors use per-channel alpha constants of shape [1, 1, C] or [C]).
 *
 * Bit-exact with LiteRT BUILTIN_REF (tensorflow/lite/kernels/activations.cc PreluPrepare/PreluEval,
 * reference_ops::BroadcastPrelu4DSlow in kernels/internal/reference/prelu.h): multipliers
 * QuantizeMultiplier((double)(input_scale / output_scale)) and QuantizeMultiplier((double)(input_scale * alpha_scale /
 * output_scale)) (float arithmetic); per element v = q - zp_in,
 *   v >= 0: MultiplyByQuantizedMultiplier(v, m1, s1), else MultiplyByQuantizedMultiplier(v * (a - zp_alpha), m2, s2),
 * plus zp_out, clamped to int8. Ranks up to 4 as LiteRT. The positive branch is a 256-entry table; the negative one
 * is computed per element. In a row-streamed group (ctx->row_end > 0, 4-D input, alpha one value per channel or
 * one value) it computes only output rows [row_begin, row_end), with the same per-element arithmetic. The output has the input's shape; it is written in increasing order after reading the
 * same element of the input (elementwise contract for input 0; alpha never shares memory with the output).
 */
#include "ek_broadcast.h"
#include "ek_fixedpoint.h"
#include "ek_kernels.h"
#include "ek_lut.h"

typedef struct prelu_params {
  ek_broadcast_plan plan;
  int8_t positive[256]; /* indexed by (uint8_t)q: the result when q >= zp_in */
  int32_t input_zero_point, alpha_zero_point, output_zero_point;
  int32_t multiplier, shift; /* the alpha branch */
  int32_t row_channels;      /* > 0: 4-D input whose alpha is one value per channel (or one): rows can run alone */
  int32_t alpha_step;        /* then 1 (per channel) or 0 (one alpha) */
} prelu_params;

static size_t prelu_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(prelu_params);
}

static ek_status prelu_prepare(ek_context *ctx, ek_op *op) {
  if (op->version != 1) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "PRELU operator version not supported by this kernel");
  if (op->num_inputs != 2 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, "PRELU needs 2 inputs and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0), *alpha = ek_input(ctx, op, 1), *out = ek_output(ctx, op, 0);
  if (!in || !alpha || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "PRELU input, alpha or output tensor missing");
  if (in->type != EK_INT8 || alpha->type != EK_INT8 || out->type != EK_INT8)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "PRELU supports int8 only");
  if (in->num_scales != 1 || alpha->num_scales != 1 || out->num_scales != 1)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "PRELU needs per-tensor quantized tensors (alpha too)");
  if (in->ndim > 4 || alpha->ndim > 4) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "PRELU supports at most 4 dimensions");
  if (!ek_same_shape(in, out) || in->bytes != out->bytes)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "PRELU output shape differs from the input shape");
  if (!(in->scale > 0.0f) || !(in->scale <= 3.4028234e38f) || !(out->scale > 0.0f) || !(out->scale <= 3.4028234e38f) ||
      !(alpha->scale > 0.0f) || !(alpha->scale <= 3.4028234e38f))
    return ek_fail(ctx, op, EK_ERR_MODEL, "PRELU tensor scale must be positive and finite");
  if (in->zero_point < -128 || in->zero_point > 127 || out->zero_point < -128 || out->zero_point > 127 ||
      alpha->zero_point < -128 || alpha->zero_point > 127)
    return ek_fail(ctx, op, EK_ERR_MODEL, "PRELU int8 zero point outside [-128, 127]");
  prelu_params *p = (prelu_params *)op->user_data;
  switch (ek_broadcast_prepare(in, alpha, out, &p->plan)) {
    case EK_BCAST_OK: break;
    case EK_BCAST_OUTPUT_SHAPE: return ek_fail(ctx, op, EK_ERR_SHAPE, "PRELU alpha does not broadcast to the input shape");
    default: return ek_fail(ctx, op, EK_ERR_SHAPE, "PRELU input and alpha shapes do not broadcast");
  }
  int32_t m1 = 0;
  int s1 = 0, s2 = 0;
  ek_quantize_multiplier((double)(in->scale / out->scale), &m1, &s1);
  ek_quantize_multiplier((double)(in->scale * alpha->scale / out->scale), &p->multiplier, &s2);
  if (s1 > 30 || s2 > 30) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "PRELU output scale too small for the input scale");
  p->shift = s2;
  p->input_zero_point = in->zero_point;
  p->alpha_zero_point = alpha->zero_point;
  p->output_zero_point = out->zero_point;
  p->row_channels = 0;
  p->alpha_step = 0;
  if (in->ndim == 4 && alpha->ndim >= 1) { /* the row contract (row-streamed groups): alpha [.., 1, C] or [.., 1, 1] */
    int lead_ones = 1;
    for (int32_t d = 0; d + 1 < alpha->ndim; ++d) lead_ones &= alpha->dims[d] == 1;
    const int32_t c = alpha->dims[alpha->ndim - 1];
    if (lead_ones && (c == in->dims[3] || c == 1)) {
      p->row_channels = in->dims[3];
      p->alpha_step = c == 1 ? 0 : 1;
    }
  }
  for (int32_t q = -128; q <= 127; ++q)
    p->positive[(uint8_t)(int8_t)q] = ek_lut_clamp8(ek_mbqm(q - in->zero_point, m1, s1) + out->zero_point);
  return EK_OK;
}

static void prelu_row(const void *params, const int8_t *x, int32_t x_step, const int8_t *a, int32_t a_step, int8_t *y,
                      int32_t n) {
  const prelu_params *p = (const prelu_params *)params;
  for (int32_t i = 0; i < n; ++i, x += x_step, a += a_step) {
    const int32_t v = *x - p->input_zero_point;
    /* |v| <= 255 and |a - zp| <= 255: the product fits easily */
    y[i] = v >= 0 ? p->positive[(uint8_t)*x]
                  : ek_lut_clamp8(ek_mbqm(v * (*a - p->alpha_zero_point), p->multiplier, p->shift) + p->output_zero_point);
  }
}

static ek_status prelu_eval(ek_context *ctx, ek_op *op) {
  const prelu_params *p = (const prelu_params *)op->user_data;
  if (ctx->row_end > 0) { /* output rows [row_begin, row_end) only (row-streamed group): pixel by pixel, same rows */
    if (p->row_channels <= 0) return ek_fail(ctx, op, EK_ERR_INTERNAL, "PRELU row range without a per-channel alpha");
    const ek_tensor *out = ek_output(ctx, op, 0);
    const int32_t C = p->row_channels, pixels = (ctx->row_end - ctx->row_begin) * out->dims[2];
    const int32_t at = ctx->row_begin * out->dims[2] * C;
    const int8_t *x = (const int8_t *)ek_input(ctx, op, 0)->data + at, *a = (const int8_t *)ek_input(ctx, op, 1)->data;
    int8_t *y = (int8_t *)out->data + at;
    for (int32_t i = 0; i < pixels; ++i, x += C, y += C) prelu_row(p, x, 1, a, p->alpha_step, y, C);
    return EK_OK;
  }
  ek_broadcast_run(&p->plan, p, (const int8_t *)ek_input(ctx, op, 0)->data, (const int8_t *)ek_input(ctx, op, 1)->data,
                   (int8_t *)ek_output(ctx, op, 0)->data, prelu_row);
  return EK_OK;
}

/* Elementwise on input 0 (its shape is the output's); alpha (usually a constant) never overlaps the output. */
static int prelu_overlap(const ek_context *ctx, const ek_op *op, int input_index, int32_t *d_max) {
  (void)ctx;
  (void)op;
  if (input_index != 0) return EK_OVERLAP_NONE;
  *d_max = 0;
  return EK_OVERLAP_UPTO;
}

/* edgekit-op: PRELU | types: int8 | versions: 1 | fast path: none */
const ek_kernel ek_kernel_prelu = {EK_OP_PRELU, "PRELU", EK_HOST_FN(prelu_persistent_bytes), 0, EK_HOST_FN(prelu_prepare), prelu_eval, EK_HOST_FN(prelu_overlap)};
