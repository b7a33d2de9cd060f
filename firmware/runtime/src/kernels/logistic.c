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
 * its old single-precision expf) can differ by an ulp.  lut_expf below evaluates exp in double precision
 * with only + - * and exponent bit tricks, so it gives the same bits on every IEEE-754 target (software
 * double on Cortex-M4F included); its float result equals the correctly rounded exp for every float input
 * (checked exhaustively).  Build with -ffp-contract=off: a fused multiply-add would change the roundings.
 * LiteRT on Linux gets expf from glibc (2.28+), which is not correctly rounded for ~0.004% of floats; an
 * exhaustive run over all 2^32 float inputs v found exactly one where that changes a table entry
 * round(256 / (1 + exp(-v))): v = 0x1.000016p-7 (glibc's exp(-v) is one ulp above the correctly rounded value,
 * which moves the entry from 129 to 128).  lut_expf returns glibc's value at that single argument, so the
 * table equals LiteRT's for every input scale and zero point.
 */
#include <string.h>

#include "ek_kernels.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

typedef struct logistic_params {
  int8_t lut[256]; /* indexed by (uint8_t)q */
} logistic_params;

static size_t logistic_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(logistic_params);
}

static double lut_pow2i(int k) { /* 2^k for k in [-1022, 1023] */
  const uint64_t bits = (uint64_t)(k + 1023) << 52;
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

/* exp(x) rounded to float, computed in double: x = k ln2 + r, |r| <= ln2/2, exp(r) by its Taylor series to r^13. */
static float lut_expf(float xf) {
  if (xf != xf) return xf;
  if (xf > 89.0f) return (float)(lut_pow2i(1000) * lut_pow2i(1000)); /* overflows to +inf */
  if (xf < -104.5f) return 0.0f;                                    /* below half the smallest subnormal */
  if (xf == -0x1.000016p-7f) return 0x1.fc03fep-1f;                 /* glibc's rounding, see the top of the file */
  const double x = xf;
  const double inv_ln2 = 1.4426950408889634074;
  const double ln2_hi = 6.93147180369123816490e-01; /* 32 significant bits: k * ln2_hi is exact */
  const double ln2_lo = 1.90821492927058770002e-10;
  const double kd = x * inv_ln2;
  const int k = (int)(kd < 0 ? kd - 0.5 : kd + 0.5);
  const double r = (x - k * ln2_hi) - k * ln2_lo;
  double p = 1.0 / 6227020800.0; /* 1/13! */
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  const int k1 = k / 2, k2 = k - k1; /* keep each power of two a normal double */
  return (float)(p * lut_pow2i(k1) * lut_pow2i(k2));
}

/* TfLiteRound for float: round half away from zero (exact for every float). */
static float lut_roundf(float x) {
  if (!(x > -8388608.0f && x < 8388608.0f)) return x; /* |x| >= 2^23 is integral (or inf/nan) */
  const float t = (float)(int32_t)x;                  /* truncation, exact */
  const float frac = x - t;                           /* exact */
  if (frac >= 0.5f) return t + 1.0f;
  if (frac <= -0.5f) return t - 1.0f;
  return t;
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
