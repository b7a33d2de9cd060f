/* QUANTIZE: float32 -> int8/uint8 (per-tensor) and int8/uint8 -> int8/uint8 requantization.
 *
 * Bit-exact with LiteRT BUILTIN_REF (tflite/kernels/quantize.cc):
 *  - float input: reference_ops::AffineQuantize: (int32)round_half_away(value / float(scale)) (float
 *    division) + zero_point, clamped; NaN, inf and huge values as LiteRT on x86-64 (see quantize_value).
 *    Per-channel output quantization is not supported.
 *  - 8-bit input: multiplier from QuantizeMultiplier(double(input_scale) / double(output_scale)) and
 *    reference_ops::Requantize: MultiplyByQuantizedMultiplier(q - zp_in) + zp_out, clamped (its int8<->uint8
 *    "xor 0x80" fast path gives the same numbers).
 * Eval uses single-precision float only (no double), so the device needs no software double here.
 */
#include "ek_fixedpoint.h"
#include "ek_kernels.h"

typedef struct quantize_params {
  int32_t from_float;
  int32_t input_uint8, output_uint8;
  float scale;
  int32_t input_zero_point, output_zero_point;
  int32_t multiplier, shift;
  int32_t count;
} quantize_params;

static size_t quantize_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(quantize_params);
}

static ek_status quantize_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 1 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, "QUANTIZE needs 1 input and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0);
  const ek_tensor *out = ek_output(ctx, op, 0);
  if (!in || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "QUANTIZE input or output tensor missing");
  if (out->type != EK_INT8 && out->type != EK_UINT8)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "QUANTIZE supports int8 and uint8 outputs only");
  if (in->type != EK_FLOAT32 && in->type != EK_INT8 && in->type != EK_UINT8)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "QUANTIZE supports float32, int8 and uint8 inputs only");
  if (out->num_scales < 1) return ek_fail(ctx, op, EK_ERR_MODEL, "QUANTIZE output must be quantized");
  if (out->num_scales > 1) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "QUANTIZE to per-channel quantization is not supported");
  if (!ek_same_shape(in, out)) return ek_fail(ctx, op, EK_ERR_SHAPE, "QUANTIZE output shape differs from the input shape");
  const int32_t count = ek_num_elements(in);
  const int32_t in_size = in->type == EK_FLOAT32 ? 4 : 1;
  if (in->bytes != count * in_size || out->bytes != count) return ek_fail(ctx, op, EK_ERR_MODEL, "QUANTIZE tensor size does not match its shape");
  if (!(out->scale > 0.0f) || !(out->scale <= 3.4028234e38f)) return ek_fail(ctx, op, EK_ERR_MODEL, "QUANTIZE output scale must be positive and finite");
  const int32_t out_lo = out->type == EK_UINT8 ? 0 : -128, out_hi = out->type == EK_UINT8 ? 255 : 127;
  if (out->zero_point < out_lo || out->zero_point > out_hi) return ek_fail(ctx, op, EK_ERR_MODEL, "QUANTIZE output zero point outside its type's range");
  quantize_params *p = (quantize_params *)op->user_data;
  p->from_float = in->type == EK_FLOAT32;
  p->input_uint8 = in->type == EK_UINT8;
  p->output_uint8 = out->type == EK_UINT8;
  p->scale = out->scale;
  p->output_zero_point = out->zero_point;
  p->count = count;
  p->input_zero_point = 0;
  p->multiplier = 0;
  p->shift = 0;
  if (!p->from_float) {
    if (in->num_scales != 1) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "QUANTIZE 8-bit input must be per-tensor quantized");
    if (!(in->scale > 0.0f) || !(in->scale <= 3.4028234e38f)) return ek_fail(ctx, op, EK_ERR_MODEL, "QUANTIZE input scale must be positive and finite");
    const int32_t in_lo = in->type == EK_UINT8 ? 0 : -128, in_hi = in->type == EK_UINT8 ? 255 : 127;
    if (in->zero_point < in_lo || in->zero_point > in_hi) return ek_fail(ctx, op, EK_ERR_MODEL, "QUANTIZE input zero point outside its type's range");
    int shift = 0;
    ek_quantize_multiplier((double)in->scale / (double)out->scale, &p->multiplier, &shift);
    if (shift > 31) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "QUANTIZE output scale too small for the input scale");
    p->shift = shift;
    p->input_zero_point = in->zero_point;
  }
  return EK_OK;
}

/* As LiteRT's reference AffineQuantize: (int32)round(v / scale) + zero_point, clamped to [lo, hi]
 * (round = TfLiteRound, half away from zero, in float). The float -> int32 conversion is undefined in C++ for
 * NaN, infinities and |x| >= 2^31; LiteRT on x86-64 gets the SSE "integer indefinite" INT32_MIN there, and the
 * zero point is then added with wrap-around, so such inputs give hi when zero_point < 0 and lo otherwise.
 * We reproduce that explicitly (a Cortex-M VCVT would saturate instead). Checked by the tests. */
static inline int32_t quantize_value(float v, float scale, int32_t zero_point, int32_t lo, int32_t hi) {
  float q = v / scale;
  if (q > -8388608.0f && q < 8388608.0f) { /* below 2^23 floats can have a fraction: round half away */
    const float t = (float)(int32_t)q;
    const float frac = q - t; /* exact */
    q = frac >= 0.5f ? t + 1.0f : (frac <= -0.5f ? t - 1.0f : t);
  }
  const int32_t r = (q >= -2147483648.0f && q < 2147483648.0f) ? (int32_t)q : INT32_MIN;
  const int32_t unclamped = (int32_t)((uint32_t)r + (uint32_t)zero_point);
  return unclamped < lo ? lo : (unclamped > hi ? hi : unclamped);
}

static ek_status quantize_eval(ek_context *ctx, ek_op *op) {
  const quantize_params *p = (const quantize_params *)op->user_data;
  const void *x = ek_input(ctx, op, 0)->data;
  void *y = ek_output(ctx, op, 0)->data;
  const int32_t lo = p->output_uint8 ? 0 : -128, hi = p->output_uint8 ? 255 : 127;
  if (p->from_float) {
    const float *f = (const float *)x;
    if (p->output_uint8) {
      for (int32_t i = 0; i < p->count; ++i) ((uint8_t *)y)[i] = (uint8_t)quantize_value(f[i], p->scale, p->output_zero_point, lo, hi);
    } else {
      for (int32_t i = 0; i < p->count; ++i) ((int8_t *)y)[i] = (int8_t)quantize_value(f[i], p->scale, p->output_zero_point, lo, hi);
    }
    return EK_OK;
  }
  for (int32_t i = 0; i < p->count; ++i) {
    const int32_t q = p->input_uint8 ? (int32_t)((const uint8_t *)x)[i] : (int32_t)((const int8_t *)x)[i];
    const int32_t v = ek_clamp_i32(ek_mbqm(q - p->input_zero_point, p->multiplier, p->shift) + p->output_zero_point, lo, hi);
    if (p->output_uint8) ((uint8_t *)y)[i] = (uint8_t)v;
    else ((int8_t *)y)[i] = (int8_t)v;
  }
  return EK_OK;
}

/* edgekit-op: QUANTIZE | types: float32, int8, uint8 | versions: 1 | fast path: none */
const ek_kernel ek_kernel_quantize = {EK_OP_QUANTIZE, "QUANTIZE", EK_HOST_FN(quantize_persistent_bytes), 0, EK_HOST_FN(quantize_prepare), quantize_eval, 0};
