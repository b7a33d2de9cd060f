/* ABS and NEG: int8 -> int8 tabulated over the 256 inputs in prepare(); int16 -> int16 per element in eval.
 *
 * Bit-exact with LiteRT BUILTIN_REF:
 * - ABS (tensorflow/lite/kernels/elementwise.cc, AbsEvalQuantized): v = |q - zp_in|; when the input and output
 *   scales are equal, clamp(v + zp_out); otherwise clamp(MultiplyByQuantizedMultiplier(v, m, shift) + zp_out) with
 *   QuantizeMultiplier((double)(input_scale / output_scale)) (SetAbsOutputMultiplier, the division in float); int16
 *   (quantized) the same with zero points 0 (GenericPrepare requires them) and an int16 clamp.
 * - NEG (tensorflow/lite/kernels/neg.cc, reference_ops::Negate): y = -x on the stored int8 value, quantization
 *   ignored (LiteRT does not rescale), so -(-128) wraps to -128 as the C++ int8 conversion does (int16 likewise).
 */
#include "ek_fixedpoint.h"
#include "ek_kernels.h"
#include "ek_lut.h"

/* Per-op data: the int8 table, or (int16 tensors) the rescale eval applies per element. */
typedef struct abs_neg_data {
  ek_lut8 t; /* first: ek_lut_eval reads it */
  int32_t wide, rescale, in_zp, out_zp, multiplier, shift;
} abs_neg_data;

static size_t abs_neg_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(abs_neg_data);
}

static inline int32_t abs_one(const abs_neg_data *d, int32_t q) {
  const int32_t v = q - d->in_zp < 0 ? d->in_zp - q : q - d->in_zp;
  return (d->rescale ? ek_mbqm(v, d->multiplier, d->shift) : v) + d->out_zp;
}

static ek_status abs_prepare(ek_context *ctx, ek_op *op) {
  const ek_tensor *in, *out;
  EK_UNARY_CHECKS(ctx, op, "ABS", 2, 1, 3, in, out);
  abs_neg_data *d = (abs_neg_data *)op->user_data;
  d->wide = in->type == EK_INT16;
  d->rescale = in->scale != out->scale;
  d->in_zp = in->zero_point;
  d->out_zp = out->zero_point;
  d->multiplier = 0;
  d->shift = 0;
  if (d->rescale) {
    int shift = 0;
    ek_quantize_multiplier((double)(in->scale / out->scale), &d->multiplier, &shift);
    if (shift > 30) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "ABS output scale too small for the input scale");
    d->shift = shift;
  }
  if (!d->wide)
    for (int32_t q = -128; q <= 127; ++q) d->t.lut[(uint8_t)(int8_t)q] = ek_lut_clamp8(abs_one(d, q));
  return EK_OK;
}

static ek_status neg_prepare(ek_context *ctx, ek_op *op) {
  if (op->version != 1) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "NEG operator version not supported by this kernel");
  if (op->num_inputs != 1 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, "NEG needs 1 input and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0), *out = ek_output(ctx, op, 0);
  if (!in || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "NEG input or output tensor missing");
  if (!(in->type == EK_INT8 && out->type == EK_INT8) && !(in->type == EK_INT16 && out->type == EK_INT16))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "NEG supports int8 and int16 only");
  if (!ek_same_shape(in, out) || in->bytes != out->bytes)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "NEG output shape differs from the input shape");
  abs_neg_data *d = (abs_neg_data *)op->user_data;
  d->wide = in->type == EK_INT16;
  for (int32_t q = -128; q <= 127; ++q) d->t.lut[(uint8_t)(int8_t)q] = (int8_t)(uint8_t)(0u - (uint32_t)q);
  return EK_OK;
}

static ek_status abs_eval(ek_context *ctx, ek_op *op) {
  const abs_neg_data *d = (const abs_neg_data *)op->user_data;
  if (!d->wide) return ek_lut_eval(ctx, op);
  const ek_tensor *in = ek_input(ctx, op, 0);
  const int16_t *x = (const int16_t *)in->data;
  int16_t *y = (int16_t *)ek_output(ctx, op, 0)->data;
  const int32_t n = in->bytes / 2;
  for (int32_t i = 0; i < n; ++i) y[i] = (int16_t)ek_clamp_i32(abs_one(d, x[i]), -32768, 32767);
  return EK_OK;
}

static ek_status neg_eval(ek_context *ctx, ek_op *op) {
  const abs_neg_data *d = (const abs_neg_data *)op->user_data;
  if (!d->wide) return ek_lut_eval(ctx, op);
  const ek_tensor *in = ek_input(ctx, op, 0);
  const int16_t *x = (const int16_t *)in->data;
  int16_t *y = (int16_t *)ek_output(ctx, op, 0)->data;
  const int32_t n = in->bytes / 2;
  for (int32_t i = 0; i < n; ++i) y[i] = (int16_t)(uint16_t)(0u - (uint32_t)x[i]); /* -(-32768) wraps as in C++ */
  return EK_OK;
}

/* edgekit-op: ABS | types: int8, int16 | versions: 1-3 | fast path: none */
const ek_kernel ek_kernel_abs = {EK_OP_ABS, "ABS", EK_HOST_FN(abs_neg_persistent_bytes), 0, EK_HOST_FN(abs_prepare), abs_eval, EK_HOST_FN(ek_lut_overlap)};
/* edgekit-op: NEG | types: int8, int16 | versions: 1 | fast path: none */
const ek_kernel ek_kernel_neg = {EK_OP_NEG, "NEG", EK_HOST_FN(abs_neg_persistent_bytes), 0, EK_HOST_FN(neg_prepare), neg_eval, EK_HOST_FN(ek_lut_overlap)};
