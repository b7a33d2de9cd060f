/* RELU, RELU6, RELU_N1_TO_1 and LEAKY_RELU, int8 -> int8, tabulated over the 256 inputs in prepare().
 *
 * Bit-exact with LiteRT BUILTIN_REF (tensorflow/lite/kernels/activations.cc):
 * - ReluPrepare: QuantizeMultiplier((double)(input_scale / output_scale)) (the division in float);
 *   QuantizedReluX: act_min = max(-128, zp_out + (int32)roundf(lo / output_scale)), act_max likewise (127 for
 *   RELU), then per element zp_out + MultiplyByQuantizedMultiplier(q - zp_in, m, shift) clamped to
 *   [act_min, act_max] (reference ReluX, kernels/internal/reference/...; lo/hi = 0/inf, 0/6, -1/1).
 * - LeakyReluPrepare: QuantizeMultiplier of (double)(input_scale * alpha / output_scale) and of
 *   (double)(input_scale / output_scale) (float arithmetic); reference_ops::QuantizeLeakyRelu: v = q - zp_in,
 *   zp_out + MultiplyByQuantizedMultiplier(v, v >= 0 ? identity : alpha) clamped to int8. QuantizeMultiplier
 *   keeps the sign of a negative alpha multiplier (frexp of a negative value), as relu_quantize_signed does.
 */
#include <math.h>

#include "ek_fixedpoint.h"
#include "ek_kernels.h"
#include "ek_lut.h"

/* TFLite QuantizeMultiplier for any finite real (negative included): q = frexp(m), q_fixed = round(q * 2^31). */
static void relu_quantize_signed(double m, int32_t *quantized_multiplier, int *shift) {
  if (m == 0.0 || !isfinite(m)) {
    *quantized_multiplier = 0;
    *shift = 0;
    return;
  }
  int exponent = 0;
  const double q = frexp(m, &exponent);
  int64_t q_fixed = (int64_t)round(q * (double)(1ll << 31));
  if (q_fixed == (1ll << 31)) {
    q_fixed /= 2;
    ++exponent;
  }
  if (exponent < -31) {
    exponent = 0;
    q_fixed = 0;
  }
  if (exponent > 31) exponent = 31; /* |m| >= 2^31: TFLite's shift would overflow int32 math; refused in prepare */
  *quantized_multiplier = (int32_t)q_fixed;
  *shift = exponent;
}

/* Per-op data: the int8 table, or (int16 tensors) the parameters eval applies per element. */
typedef struct relu_data {
  ek_lut8 t; /* first: ek_lut_eval reads it */
  int32_t wide;
  int32_t in_zp, out_zp, act_min, act_max;
  int32_t m_pos, s_pos, m_neg, s_neg; /* multiplier and shift for q - zp_in >= 0 and < 0 (RELU: the same) */
} relu_data;

static size_t relu_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(relu_data);
}

/* zp_out + MultiplyByQuantizedMultiplier(q - zp_in), then max(act_min), then min(act_max) (ReluX's order). */
static inline int32_t relu_one(const relu_data *d, int32_t q) {
  const int32_t v = q - d->in_zp;
  int32_t y = d->out_zp + (v >= 0 ? ek_mbqm(v, d->m_pos, d->s_pos) : ek_mbqm(v, d->m_neg, d->s_neg));
  y = ek_max_i32(d->act_min, y);
  return ek_min_i32(d->act_max, y);
}

static void relu_fill(relu_data *d, const ek_tensor *in, const ek_tensor *out) {
  d->wide = in->type == EK_INT16;
  d->in_zp = in->zero_point;
  d->out_zp = out->zero_point;
  if (!d->wide)
    for (int32_t q = -128; q <= 127; ++q) d->t.lut[(uint8_t)(int8_t)q] = (int8_t)relu_one(d, q);
}

/* act_min/act_max of QuantizedReluX (ek_quantize_bound keeps the float -> int conversion defined). */
static ek_status relu_table(ek_context *ctx, ek_op *op, float lo, float hi, int has_hi) {
  const ek_tensor *in = ek_input(ctx, op, 0), *out = ek_output(ctx, op, 0);
  relu_data *d = (relu_data *)op->user_data;
  const int32_t qmin = in->type == EK_INT16 ? -32768 : -128, qmax = in->type == EK_INT16 ? 32767 : 127;
  int shift = 0;
  ek_quantize_multiplier((double)(in->scale / out->scale), &d->m_pos, &shift);
  if (shift > 30) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "RELU output scale too small for the input scale");
  d->s_pos = shift;
  d->m_neg = d->m_pos;
  d->s_neg = d->s_pos;
  d->act_min = ek_max_i32(qmin, ek_quantize_bound(lo, out->scale, out->zero_point, qmin, qmax));
  d->act_max = has_hi ? ek_min_i32(qmax, ek_quantize_bound(hi, out->scale, out->zero_point, qmin, qmax)) : qmax;
  relu_fill(d, in, out);
  return EK_OK;
}

static ek_status relu_prepare(ek_context *ctx, ek_op *op) {
  const ek_tensor *in, *out;
  EK_UNARY_CHECKS(ctx, op, "RELU", 2, 1, 3, in, out);
  return relu_table(ctx, op, 0.0f, 0.0f, 0);
}

static ek_status relu6_prepare(ek_context *ctx, ek_op *op) {
  const ek_tensor *in, *out;
  EK_UNARY_CHECKS(ctx, op, "RELU6", 2, 1, 3, in, out);
  return relu_table(ctx, op, 0.0f, 6.0f, 1);
}

static ek_status relu_n1_to_1_prepare(ek_context *ctx, ek_op *op) {
  const ek_tensor *in, *out;
  EK_UNARY_INT8_CHECKS(ctx, op, "RELU_N1_TO_1", 1, in, out);
  return relu_table(ctx, op, -1.0f, 1.0f, 1);
}

static ek_status leaky_relu_prepare(ek_context *ctx, ek_op *op) {
  const ek_tensor *in, *out;
  EK_UNARY_CHECKS(ctx, op, "LEAKY_RELU", 1, 1, 2, in, out);
  const float alpha = op->params.alpha;
  if (!(alpha >= -3.4028234e38f && alpha <= 3.4028234e38f))
    return ek_fail(ctx, op, EK_ERR_MODEL, "LEAKY_RELU alpha must be finite");
  const float alpha_real = in->scale * alpha / out->scale;
  const float identity_real = in->scale / out->scale;
  if (!(fabsf(alpha_real) < 2147483648.0f) || !(identity_real < 2147483648.0f))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "LEAKY_RELU scales or alpha give a rescale multiplier of 2^31 or more");
  relu_data *d = (relu_data *)op->user_data;
  int sa = 0, si = 0;
  relu_quantize_signed((double)alpha_real, &d->m_neg, &sa);
  relu_quantize_signed((double)identity_real, &d->m_pos, &si);
  d->s_neg = sa;
  d->s_pos = si;
  d->act_min = in->type == EK_INT16 ? -32768 : -128;
  d->act_max = in->type == EK_INT16 ? 32767 : 127;
  relu_fill(d, in, out);
  return EK_OK;
}

static ek_status relu_eval(ek_context *ctx, ek_op *op) {
  const relu_data *d = (const relu_data *)op->user_data;
  if (!d->wide) return ek_lut_eval(ctx, op);
  const ek_tensor *in = ek_input(ctx, op, 0);
  const int16_t *x = (const int16_t *)in->data;
  int16_t *y = (int16_t *)ek_output(ctx, op, 0)->data;
  const int32_t n = in->bytes / 2;
  for (int32_t i = 0; i < n; ++i) y[i] = (int16_t)relu_one(d, x[i]);
  return EK_OK;
}

/* edgekit-op: RELU | types: int8, int16 | versions: 1-3 | fast path: none */
const ek_kernel ek_kernel_relu = {EK_OP_RELU, "RELU", EK_HOST_FN(relu_persistent_bytes), 0, EK_HOST_FN(relu_prepare), relu_eval, EK_HOST_FN(ek_lut_overlap)};
/* edgekit-op: RELU6 | types: int8, int16 | versions: 1-3 | fast path: none */
const ek_kernel ek_kernel_relu6 = {EK_OP_RELU6, "RELU6", EK_HOST_FN(relu_persistent_bytes), 0, EK_HOST_FN(relu6_prepare), relu_eval, EK_HOST_FN(ek_lut_overlap)};
/* edgekit-op: RELU_N1_TO_1 | types: int8 | versions: 1 | fast path: none */
const ek_kernel ek_kernel_relu_n1_to_1 = {EK_OP_RELU_N1_TO_1, "RELU_N1_TO_1", EK_HOST_FN(relu_persistent_bytes), 0, EK_HOST_FN(relu_n1_to_1_prepare), relu_eval, EK_HOST_FN(ek_lut_overlap)};
/* edgekit-op: LEAKY_RELU | types: int8, int16 | versions: 1-2 | fast path: none */
const ek_kernel ek_kernel_leaky_relu = {EK_OP_LEAKY_RELU, "LEAKY_RELU", EK_HOST_FN(relu_persistent_bytes), 0, EK_HOST_FN(leaky_relu_prepare), relu_eval, EK_HOST_FN(ek_lut_overlap)};
