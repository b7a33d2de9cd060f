/* 256-entry lookup tables for int8 -> int8 functions of one value; private to src/kernels.
 *
 * Many TFLite int8 activations are, in LiteRT's reference kernels, a table over the 256 input values built in
 * Prepare (LUTPopulate, tensorflow/lite/kernels/internal/reference/integer_ops/lut.h, and activations.cc
 * PopulateLookupTable):
 *   dequantized = input_scale * (q - input_zero_point)           (float)
 *   transformed = f(dequantized)                                   (float)
 *   rescaled    = TfLiteRound(transformed * (1 / output_scale))    (float, half away from zero)
 *   lut[q]      = clamp((int32)(rescaled + output_zero_point), -128, 127)
 * ek_lut_populate does exactly that, except where the C++ conversion of a float outside the int32 range is undefined:
 * LiteRT's table saturates there (measured against BUILTIN_REF: EXP entries whose rescaled value is above 2^31, +inf
 * included, are 127), so ek_lut_populate clamps in float before converting. (SQRT's per-element formula, which LiteRT
 * does not tabulate, uses ek_lut_f2i: the x86-64 CVTTSS2SI result, INT32_MIN out of range.)
 *
 * Kernels whose function is fixed-point (RELU, LEAKY_RELU, ABS, NEG, HARD_SWISH) tabulate their exact integer
 * formula instead. Either way eval is one table look-up per element (ek_lut_eval), reading element i before
 * writing element i in increasing i: the "elementwise" access contract, so the output may sit exactly on its dying
 * input (ek_lut_overlap). Prepared models compute the table on the host at generation time; the device reads it
 * from flash.
 *
 * libm: f for TANH, LOG and GELU is the C library's tanhf / logf / erfcf, as LiteRT's std::tanh / std::log /
 * std::erfc on float. On the host (glibc, where LiteRT runs) the table is therefore LiteRT's bit for bit; a device
 * that prepares the in-place .tflite path itself uses newlib's functions, which may differ by an ulp and move an
 * entry that sits next to a rounding tie (a prepared model, which the generator always builds, does not depend on
 * the device's libm). Measured (tests/firmware/test_kernels_unary.py, device_built_tables): on 2,000 seeded
 * scale/zero-point sets per op, the tables Cortex-M4 builds with newlib (arm-none-eabi-gcc 12.2, QEMU mps2-an386)
 * equal the host's for TANH, EXP, LOG, SQRT, both GELUs, RSQRT, LEAKY_RELU, RELU6 and ABS; not a proof for every
 * scale, as glibc and newlib tanhf/logf/erfcf are different implementations. EXP uses lut_expf below (libm-independent, equal to glibc's expf on every float, see
 * logistic.c), SQRT the correctly rounded sqrtf (IEEE-754: the same bits everywhere).
 */
#ifndef EK_LUT_H
#define EK_LUT_H

#include <stdint.h>
#include <string.h>

#include "ek_kernels.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

typedef struct ek_lut8 {
  int8_t lut[256]; /* indexed by (uint8_t)q */
} ek_lut8;

static inline double lut_pow2i(int k) { /* 2^k for k in [-1022, 1023] */
  const uint64_t bits = (uint64_t)(k + 1023) << 52;
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

/* exp(x) rounded to float, computed in double: x = k ln2 + r, |r| <= ln2/2, exp(r) by its Taylor series to r^13. */
static inline float lut_expf(float xf) {
  if (xf != xf) return xf;
  if (xf > 89.0f) return (float)(lut_pow2i(1000) * lut_pow2i(1000)); /* overflows to +inf */
  if (xf < -104.5f) return 0.0f;                                    /* below half the smallest subnormal */
  if (xf == -0x1.000016p-7f) return 0x1.fc03fep-1f;                 /* glibc's rounding, see logistic.c */
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
static inline float lut_roundf(float x) {
  if (!(x > -8388608.0f && x < 8388608.0f)) return x; /* |x| >= 2^23 is integral (or inf/nan) */
  const float t = (float)(int32_t)x;                  /* truncation, exact */
  const float frac = x - t;                           /* exact */
  if (frac >= 0.5f) return t + 1.0f;
  if (frac <= -0.5f) return t - 1.0f;
  return t;
}

/* static_cast<int32_t>(float) as LiteRT gets it on x86-64: truncation toward zero, INT32_MIN outside the int32 range
   and for NaN. */
static inline int32_t ek_lut_f2i(float v) {
  if (v >= -2147483648.0f && v < 2147483648.0f) return (int32_t)v;
  return INT32_MIN;
}

static inline int8_t ek_lut_clamp8(int32_t v) { return (int8_t)(v < -128 ? -128 : (v > 127 ? 127 : v)); }

/* LUTPopulate<int8_t>: f gets the dequantized input and `arg` (e.g. a float the function needs). */
static inline void ek_lut_populate(float input_scale, int32_t input_zero_point, float output_scale,
                                   int32_t output_zero_point, float (*f)(float, const void *), const void *arg,
                                   int8_t *lut) {
  const float inverse_scale = 1.0f / output_scale;
  for (int32_t q = -128; q <= 127; ++q) {
    const float dequantized = input_scale * (float)(q - input_zero_point);
    const float transformed = f(dequantized, arg);
    int8_t y = -128; /* NaN (no op here produces one from a finite input) */
    if (transformed == transformed) { /* +-inf (exp overflow) saturate like any large value, as LiteRT's table */
      const float rescaled = lut_roundf(transformed * inverse_scale) + (float)output_zero_point;
      y = (int8_t)(rescaled < -128.0f ? -128 : (rescaled > 127.0f ? 127 : (int32_t)rescaled)); /* clamped as a float */
    }
    lut[(uint8_t)(int8_t)q] = y;
  }
}

static inline size_t ek_lut_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(ek_lut8);
}

/* Shared by every table kernel: y[i] = lut[x[i]] in increasing i. */
static inline ek_status ek_lut_eval(ek_context *ctx, ek_op *op) {
  const ek_lut8 *t = (const ek_lut8 *)op->user_data;
  const ek_tensor *in = ek_input(ctx, op, 0);
  const uint8_t *x = (const uint8_t *)in->data;
  int8_t *y = (int8_t *)ek_output(ctx, op, 0)->data;
  const int32_t n = in->bytes;
  for (int32_t i = 0; i < n; ++i) y[i] = t->lut[x[i]];
  return EK_OK;
}

/* Elementwise access contract (firmware/runtime/README.md): the output may start at (or below) its dying input. */
static inline int ek_lut_overlap(const ek_context *ctx, const ek_op *op, int input_index, int32_t *d_max) {
  (void)ctx;
  (void)op;
  if (input_index != 0) return EK_OVERLAP_NONE;
  *d_max = 0;
  return EK_OVERLAP_UPTO;
}

/* The checks every unary kernel makes in prepare (NAME: the op's name as a string literal): 1 input, 1 output of the
   same shape and type, int8 (or int16 with zero points 0 when `allow_int16`; version limits max_version /
   max_version16), per-tensor
   quantization, positive finite scales, zero points in the type's range. Returns from the calling prepare with the
   failure. */
#define EK_UNARY_CHECKS(ctx, op, NAME, max_version, allow_int16, max_version16, in, out)                           \
  do {                                                                                                             \
    if ((op)->num_inputs != 1 || (op)->num_outputs != 1)                                                           \
      return ek_fail(ctx, op, EK_ERR_MODEL, NAME " needs 1 input and 1 output");                                   \
    in = ek_input(ctx, op, 0);                                                                                     \
    out = ek_output(ctx, op, 0);                                                                                   \
    if (!(in) || !(out)) return ek_fail(ctx, op, EK_ERR_MODEL, NAME " input or output tensor missing");            \
    const int ek_wide_ = (allow_int16) && (in)->type == EK_INT16 && (out)->type == EK_INT16;                        \
    if (!ek_wide_ && ((in)->type != EK_INT8 || (out)->type != EK_INT8))                                            \
      return ek_fail(ctx, op, EK_ERR_UNSUPPORTED,                                                                  \
                     (allow_int16) ? NAME " supports int8 and int16 (16x8) only" : NAME " supports int8 only");     \
    if ((op)->version < 1 || (op)->version > (ek_wide_ ? (max_version16) : (max_version)))                         \
      return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, NAME " operator version not supported by this kernel");          \
    if ((in)->num_scales != 1 || (out)->num_scales != 1)                                                           \
      return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, NAME " needs per-tensor quantized tensors");                     \
    if (!ek_same_shape(in, out) || (in)->bytes != (out)->bytes)                                                    \
      return ek_fail(ctx, op, EK_ERR_SHAPE, NAME " output shape differs from the input shape");                    \
    if (!((in)->scale > 0.0f) || !((in)->scale <= 3.4028234e38f) || !((out)->scale > 0.0f) ||                      \
        !((out)->scale <= 3.4028234e38f))                                                                          \
      return ek_fail(ctx, op, EK_ERR_MODEL, NAME " tensor scale must be positive and finite");                     \
    const int32_t ek_lo_ = ek_wide_ ? -32768 : -128, ek_hi_ = ek_wide_ ? 32767 : 127;                              \
    if ((in)->zero_point < ek_lo_ || (in)->zero_point > ek_hi_ || (out)->zero_point < ek_lo_ ||                    \
        (out)->zero_point > ek_hi_)                                                                                \
      return ek_fail(ctx, op, EK_ERR_MODEL, NAME " zero point outside its type's range");                          \
    if (ek_wide_ && ((in)->zero_point != 0 || (out)->zero_point != 0))                                             \
      return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, NAME " int16 needs zero points 0 (as LiteRT's 16x8 kernels)");   \
  } while (0)

#define EK_UNARY_INT8_CHECKS(ctx, op, NAME, max_version, in, out) EK_UNARY_CHECKS(ctx, op, NAME, max_version, 0, 0, in, out)

#endif
