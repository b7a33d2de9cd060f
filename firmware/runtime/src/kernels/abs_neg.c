/* ABS and NEG, int8 -> int8, tabulated over the 256 inputs in prepare().
 *
 * Bit-exact with LiteRT BUILTIN_REF:
 * - ABS (tensorflow/lite/kernels/elementwise.cc, AbsEvalQuantized): v = |q - zp_in|; when the input and output
 *   scales are equal, clamp(v + zp_out); otherwise clamp(MultiplyByQuantizedMultiplier(v, m, shift) + zp_out) with
 *   QuantizeMultiplier((double)(input_scale / output_scale)) (SetAbsOutputMultiplier, the division in float).
 * - NEG (tensorflow/lite/kernels/neg.cc, reference_ops::Negate): y = -x on the stored int8 value, quantization
 *   ignored (LiteRT does not rescale), so -(-128) wraps to -128 as the C++ int8 conversion does.
 */
#include "ek_fixedpoint.h"
#include "ek_kernels.h"
#include "ek_lut.h"

static ek_status abs_prepare(ek_context *ctx, ek_op *op) {
  const ek_tensor *in, *out;
  EK_UNARY_INT8_CHECKS(ctx, op, "ABS", 2, in, out);
  const int rescale = in->scale != out->scale;
  int32_t m = 0;
  int shift = 0;
  if (rescale) {
    ek_quantize_multiplier((double)(in->scale / out->scale), &m, &shift);
    if (shift > 30) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "ABS output scale too small for the input scale");
  }
  ek_lut8 *t = (ek_lut8 *)op->user_data;
  for (int32_t q = -128; q <= 127; ++q) {
    const int32_t v = q - in->zero_point < 0 ? in->zero_point - q : q - in->zero_point;
    t->lut[(uint8_t)(int8_t)q] = ek_lut_clamp8((rescale ? ek_mbqm(v, m, shift) : v) + out->zero_point);
  }
  return EK_OK;
}

static ek_status neg_prepare(ek_context *ctx, ek_op *op) {
  if (op->version != 1) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "NEG operator version not supported (int8 kernels only)");
  if (op->num_inputs != 1 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, "NEG needs 1 input and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0), *out = ek_output(ctx, op, 0);
  if (!in || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "NEG input or output tensor missing");
  if (in->type != EK_INT8 || out->type != EK_INT8) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "NEG supports int8 only");
  if (!ek_same_shape(in, out) || in->bytes != out->bytes)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "NEG output shape differs from the input shape");
  ek_lut8 *t = (ek_lut8 *)op->user_data;
  for (int32_t q = -128; q <= 127; ++q) t->lut[(uint8_t)(int8_t)q] = (int8_t)(uint8_t)(0u - (uint32_t)q);
  return EK_OK;
}

/* edgekit-op: ABS | types: int8 | versions: 1-2 | fast path: none */
const ek_kernel ek_kernel_abs = {EK_OP_ABS, "ABS", EK_HOST_FN(ek_lut_persistent_bytes), 0, EK_HOST_FN(abs_prepare), ek_lut_eval, EK_HOST_FN(ek_lut_overlap)};
/* edgekit-op: NEG | types: int8 | versions: 1 | fast path: none */
const ek_kernel ek_kernel_neg = {EK_OP_NEG, "NEG", EK_HOST_FN(ek_lut_persistent_bytes), 0, EK_HOST_FN(neg_prepare), ek_lut_eval, EK_HOST_FN(ek_lut_overlap)};
