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

/* act_min/act_max of QuantizedReluX (ek_quantize_bound keeps the float -> int conversion defined). */
static ek_status relu_table(ek_context *ctx, ek_op *op, float lo, float hi, int has_hi) {
  const ek_tensor *in = ek_input(ctx, op, 0), *out = ek_output(ctx, op, 0);
  int32_t m = 0;
  int shift = 0;
  ek_quantize_multiplier((double)(in->scale / out->scale), &m, &shift);
  if (shift > 30) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "RELU output scale too small for the input scale");
  const int32_t act_min = ek_max_i32(-128, ek_quantize_bound(lo, out->scale, out->zero_point, -128, 127));
  const int32_t act_max = has_hi ? ek_min_i32(127, ek_quantize_bound(hi, out->scale, out->zero_point, -128, 127)) : 127;
  ek_lut8 *t = (ek_lut8 *)op->user_data;
  for (int32_t q = -128; q <= 127; ++q) {
    int32_t v = out->zero_point + ek_mbqm(q - in->zero_point, m, shift);
    v = ek_max_i32(act_min, v);
    v = ek_min_i32(act_max, v);
    t->lut[(uint8_t)(int8_t)q] = (int8_t)v;
  }
  return EK_OK;
}

static ek_status relu_prepare(ek_context *ctx, ek_op *op) {
  const ek_tensor *in, *out;
  EK_UNARY_INT8_CHECKS(ctx, op, "RELU", 2, in, out);
  return relu_table(ctx, op, 0.0f, 0.0f, 0);
}

static ek_status relu6_prepare(ek_context *ctx, ek_op *op) {
  const ek_tensor *in, *out;
  EK_UNARY_INT8_CHECKS(ctx, op, "RELU6", 2, in, out);
  return relu_table(ctx, op, 0.0f, 6.0f, 1);
}

static ek_status relu_n1_to_1_prepare(ek_context *ctx, ek_op *op) {
  const ek_tensor *in, *out;
  EK_UNARY_INT8_CHECKS(ctx, op, "RELU_N1_TO_1", 1, in, out);
  return relu_table(ctx, op, -1.0f, 1.0f, 1);
}

static ek_status leaky_relu_prepare(ek_context *ctx, ek_op *op) {
  const ek_tensor *in, *out;
  EK_UNARY_INT8_CHECKS(ctx, op, "LEAKY_RELU", 1, in, out);
  const float alpha = op->params.alpha;
  if (!(alpha >= -3.4028234e38f && alpha <= 3.4028234e38f))
    return ek_fail(ctx, op, EK_ERR_MODEL, "LEAKY_RELU alpha must be finite");
  const float alpha_real = in->scale * alpha / out->scale;
  const float identity_real = in->scale / out->scale;
  if (!(fabsf(alpha_real) < 2147483648.0f) || !(identity_real < 2147483648.0f))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "LEAKY_RELU scales or alpha give a rescale multiplier of 2^31 or more");
  int32_t ma = 0, mi = 0;
  int sa = 0, si = 0;
  relu_quantize_signed((double)alpha_real, &ma, &sa);
  relu_quantize_signed((double)identity_real, &mi, &si);
  ek_lut8 *t = (ek_lut8 *)op->user_data;
  for (int32_t q = -128; q <= 127; ++q) {
    const int32_t v = q - in->zero_point;
    const int32_t y = out->zero_point + (v >= 0 ? ek_mbqm(v, mi, si) : ek_mbqm(v, ma, sa));
    t->lut[(uint8_t)(int8_t)q] = ek_lut_clamp8(y);
  }
  return EK_OK;
}

/* edgekit-op: RELU | types: int8 | versions: 1-2 | fast path: none */
const ek_kernel ek_kernel_relu = {EK_OP_RELU, "RELU", EK_HOST_FN(ek_lut_persistent_bytes), 0, EK_HOST_FN(relu_prepare), ek_lut_eval, EK_HOST_FN(ek_lut_overlap)};
/* edgekit-op: RELU6 | types: int8 | versions: 1-2 | fast path: none */
const ek_kernel ek_kernel_relu6 = {EK_OP_RELU6, "RELU6", EK_HOST_FN(ek_lut_persistent_bytes), 0, EK_HOST_FN(relu6_prepare), ek_lut_eval, EK_HOST_FN(ek_lut_overlap)};
/* edgekit-op: RELU_N1_TO_1 | types: int8 | versions: 1 | fast path: none */
const ek_kernel ek_kernel_relu_n1_to_1 = {EK_OP_RELU_N1_TO_1, "RELU_N1_TO_1", EK_HOST_FN(ek_lut_persistent_bytes), 0, EK_HOST_FN(relu_n1_to_1_prepare), ek_lut_eval, EK_HOST_FN(ek_lut_overlap)};
/* edgekit-op: LEAKY_RELU | types: int8 | versions: 1 | fast path: none */
const ek_kernel ek_kernel_leaky_relu = {EK_OP_LEAKY_RELU, "LEAKY_RELU", EK_HOST_FN(ek_lut_persistent_bytes), 0, EK_HOST_FN(leaky_relu_prepare), ek_lut_eval, EK_HOST_FN(ek_lut_overlap)};
