/* LOGISTIC (sigmoid), int8 -> int8, through a 256-entry lookup table built in prepare().
 *
 * Bit-exact with LiteRT BUILTIN_REF: under kReference tflite/kernels/activations.cc SigmoidPrepare requires
 * output scale == 1/256 (exactly) and fills the table with LUTPopulate<int8_t> (kernels/internal/common.h):
 *   dequantized = input_scale * (q - input_zero_point)          (float)
 *   transformed = 1.0f / (1.0f + expf(-dequantized))             (float)
 *   lut[q] = clamp((int32)(round(transformed * (1 / output_scale)) + output_zero_point))
 * and SigmoidEval is a plain table lookup.
 *
 * expf: LiteRT calls the host libm; a microcontroller libm (newlib without double-precision hardware uses
 * its old single-precision expf) can differ by an ulp.  lut_expf (kernels/ek_lut.h) evaluates exp in double precision
 * with only + - * and exponent bit tricks, so it gives the same bits on every IEEE-754 target (software
 * double on Cortex-M4F included); its float result equals the correctly rounded exp for every float input
 * (checked exhaustively).  Build with -ffp-contract=off: a fused multiply-add would change the roundings.
 * LiteRT on Linux gets expf from glibc (2.28+), which is not correctly rounded for ~0.004% of floats; an
 * exhaustive run over all 2^32 float inputs v found exactly one where that changes a table entry
 * round(256 / (1 + exp(-v))): v = 0x1.000016p-7 (glibc's exp(-v) is one ulp above the correctly rounded value,
 * which moves the entry from 129 to 128).  lut_expf returns glibc's value at that single argument, so the
 * table equals LiteRT's for every input scale and zero point.
 */
#include "ek_kernels.h"
#include "ek_lut.h"

typedef struct logistic_params {
  int8_t lut[256]; /* indexed by (uint8_t)q */
} logistic_params;

static size_t logistic_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(logistic_params);
}

static ek_status logistic_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 1 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, "LOGISTIC needs 1 input and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0);
  const ek_tensor *out = ek_output(ctx, op, 0);
  if (!in || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "LOGISTIC input or output tensor missing");
  if (in->type != EK_INT8 || out->type != EK_INT8) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "LOGISTIC supports int8 only");
  if (in->num_scales != 1 || out->num_scales != 1)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "LOGISTIC needs per-tensor quantized tensors");
  if (!ek_same_shape(in, out) || in->bytes != out->bytes)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "LOGISTIC output shape differs from the input shape");
  if (!(in->scale > 0.0f) || !(in->scale <= 3.4028234e38f))
    return ek_fail(ctx, op, EK_ERR_MODEL, "LOGISTIC input scale must be positive and finite");
  if ((double)out->scale != 1.0 / 256)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "LOGISTIC int8 output scale must be exactly 1/256");
  if (in->zero_point < -128 || in->zero_point > 127 || out->zero_point < -128 || out->zero_point > 127)
    return ek_fail(ctx, op, EK_ERR_MODEL, "LOGISTIC int8 zero point outside [-128, 127]");
  logistic_params *p = (logistic_params *)op->user_data;
  const float inverse_scale = 1.0f / out->scale;
  for (int32_t q = -128; q <= 127; ++q) {
    const float dequantized = in->scale * (float)(q - in->zero_point);
    const float transformed = 1.0f / (1.0f + lut_expf(-dequantized));
    const float rescaled = lut_roundf(transformed * inverse_scale);
    int32_t quantized = (int32_t)(rescaled + (float)out->zero_point); /* rescaled is in [0, 256]: exact */
    quantized = quantized < -128 ? -128 : (quantized > 127 ? 127 : quantized);
    p->lut[(uint8_t)(int8_t)q] = (int8_t)quantized;
  }
  return EK_OK;
}

static ek_status logistic_eval(ek_context *ctx, ek_op *op) {
  const logistic_params *p = (const logistic_params *)op->user_data;
  const ek_tensor *in = ek_input(ctx, op, 0);
  const uint8_t *x = (const uint8_t *)in->data;
  int8_t *y = (int8_t *)ek_output(ctx, op, 0)->data;
  for (int32_t i = 0; i < in->bytes; ++i) y[i] = p->lut[x[i]];
  return EK_OK;
}

/* edgekit-op: LOGISTIC | types: int8 | versions: 1-2 | fast path: none */
const ek_kernel ek_kernel_logistic = {EK_OP_LOGISTIC, "LOGISTIC", EK_HOST_FN(logistic_persistent_bytes), 0, EK_HOST_FN(logistic_prepare), logistic_eval, 0};
