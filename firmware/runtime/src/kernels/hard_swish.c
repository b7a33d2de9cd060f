/* HARD_SWISH, int8 -> int8: x * relu6(x + 3) / 6 in 16-bit fixed point.
 *
 * Bit-exact with LiteRT BUILTIN_REF: tflite/kernels/activations.cc HardSwishPrepare (float multipliers
 * hires_input_scale / output_scale and hires_input_scale / (3/32768), QuantizeMultiplier, then
 * DownScaleInt32ToInt16Multiplier; output exponent must be <= 0) and reference_ops::HardSwish
 * (kernels/internal/reference/hard_swish.h), reproduced step by step with int16 gemmlowp semantics.
 * The function of one int8 value is tabulated for all 256 inputs in prepare(); eval is a table lookup.
 */
#include "ek_fixedpoint.h"
#include "ek_gemmlowp.h"
#include "ek_kernels.h"

typedef struct hard_swish_params {
  int32_t input_zero_point;
  int32_t output_zero_point;
  int32_t reluish_multiplier_exponent;
  int32_t output_multiplier_exponent;
  int16_t reluish_multiplier_fixedpoint_int16;
  int16_t output_multiplier_fixedpoint_int16;
} hard_swish_params;

typedef struct hard_swish_data {
  int8_t lut[256]; /* indexed by (uint8_t)q */
} hard_swish_data;

static size_t hard_swish_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(hard_swish_data);
}

/* TFLite DownScaleInt32ToInt16Multiplier. */
static int16_t hard_swish_downscale(int32_t multiplier) {
  const int32_t rounding_offset = 1 << 15;
  if (multiplier >= INT32_MAX - rounding_offset) return INT16_MAX;
  return (int16_t)((multiplier + rounding_offset) >> 16);
}

static inline int8_t hard_swish_one(const hard_swish_params *p, int32_t x) {
  const int16_t input_value = (int16_t)(x - p->input_zero_point);
  const int16_t input_value_on_hires_input_scale = (int16_t)(input_value * (1 << 7));
  const int16_t input_value_on_preshift_output_scale =
      ek_srdhm16(input_value_on_hires_input_scale, p->output_multiplier_fixedpoint_int16);
  int16_t reluish_value = input_value_on_hires_input_scale;
  if (p->reluish_multiplier_exponent > 0) reluish_value = ek_sat_shl16(reluish_value, p->reluish_multiplier_exponent - 1);
  reluish_value = ek_srdhm16(reluish_value, p->reluish_multiplier_fixedpoint_int16);
  if (p->reluish_multiplier_exponent > 0) reluish_value = ek_sat_shl16(reluish_value, 1);
  if (p->reluish_multiplier_exponent < 0) reluish_value = ek_rdbpot16(reluish_value, -p->reluish_multiplier_exponent);
  reluish_value = (int16_t)((reluish_value + (1 << 15)) >> 1);
  const int16_t preshift_output_value = ek_sdhm16(reluish_value, input_value_on_preshift_output_scale);
  int16_t output_value = ek_rdbpot16(preshift_output_value, -p->output_multiplier_exponent);
  output_value = (int16_t)(output_value + p->output_zero_point); /* int16 += int: wraps like the original */
  if (output_value > INT8_MAX) output_value = INT8_MAX;
  if (output_value < INT8_MIN) output_value = INT8_MIN;
  return (int8_t)output_value;
}

static ek_status hard_swish_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 1 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, "HARD_SWISH needs 1 input and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0);
  const ek_tensor *out = ek_output(ctx, op, 0);
  if (!in || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "HARD_SWISH input or output tensor missing");
  if (in->type != EK_INT8 || out->type != EK_INT8) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "HARD_SWISH supports int8 only");
  if (in->num_scales != 1 || out->num_scales != 1)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "HARD_SWISH needs per-tensor quantized tensors");
  if (!ek_same_shape(in, out) || in->bytes != out->bytes)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "HARD_SWISH output shape differs from the input shape");
  if (!(in->scale > 0.0f) || !(in->scale <= 3.4028234e38f) || !(out->scale > 0.0f) || !(out->scale <= 3.4028234e38f))
    return ek_fail(ctx, op, EK_ERR_MODEL, "HARD_SWISH tensor scale must be positive and finite");
  if (in->zero_point < -128 || in->zero_point > 127 || out->zero_point < -128 || out->zero_point > 127)
    return ek_fail(ctx, op, EK_ERR_MODEL, "HARD_SWISH int8 zero point outside [-128, 127]");
  hard_swish_params params;
  hard_swish_params *p = &params;
  p->input_zero_point = in->zero_point;
  p->output_zero_point = out->zero_point;
  /* float arithmetic as in HardSwishPrepare */
  const float hires_input_scale = (1.0f / 128.0f) * in->scale;
  const float reluish_scale = 3.0f / 32768.0f;
  const float output_multiplier = hires_input_scale / out->scale;
  const float reluish_multiplier = hires_input_scale / reluish_scale;
  if (!(output_multiplier <= 3.4028234e38f) || !(reluish_multiplier <= 3.4028234e38f))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "HARD_SWISH scales give an infinite rescale multiplier");
  int32_t m32 = 0;
  int exponent = 0;
  ek_quantize_multiplier((double)output_multiplier, &m32, &exponent);
  p->output_multiplier_fixedpoint_int16 = hard_swish_downscale(m32);
  if (exponent > 0) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "HARD_SWISH output scale too small for the input scale (TFLite rejects it too)");
  p->output_multiplier_exponent = exponent;
  ek_quantize_multiplier((double)reluish_multiplier, &m32, &exponent);
  p->reluish_multiplier_fixedpoint_int16 = hard_swish_downscale(m32);
  if (exponent > 31) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "HARD_SWISH input scale too large");
  p->reluish_multiplier_exponent = exponent;
  hard_swish_data *d = (hard_swish_data *)op->user_data;
  for (int32_t q = -128; q <= 127; ++q) d->lut[(uint8_t)(int8_t)q] = hard_swish_one(p, q);
  return EK_OK;
}

static ek_status hard_swish_eval(ek_context *ctx, ek_op *op) {
  const hard_swish_data *d = (const hard_swish_data *)op->user_data;
  const ek_tensor *in = ek_input(ctx, op, 0);
  const uint8_t *x = (const uint8_t *)in->data;
  int8_t *y = (int8_t *)ek_output(ctx, op, 0)->data;
  for (int32_t i = 0; i < in->bytes; ++i) y[i] = d->lut[x[i]];
  return EK_OK;
}

/* edgekit-op: HARD_SWISH | types: int8 | versions: 1 | fast path: none */
const ek_kernel ek_kernel_hard_swish = {EK_OP_HARD_SWISH, "HARD_SWISH", EK_HOST_FN(hard_swish_persistent_bytes), 0, EK_HOST_FN(hard_swish_prepare), hard_swish_eval, 0};
