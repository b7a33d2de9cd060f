/* Fixed-point helpers with the exact semantics of TFLite's reference kernels
 * (tensorflow/lite/kernels/internal/common.h, quantization_util.cc, kernel_util.cc;
 * double rounding, i.e. built without TFLITE_SINGLE_ROUNDING, as LiteRT is).
 * Shared by all kernels. Every function is total: no UB for any int32 input. */
#ifndef EK_FIXEDPOINT_H
#define EK_FIXEDPOINT_H

#include <math.h>
#include <stdint.h>

#include "ek_kernels.h"

static inline int32_t ek_min_i32(int32_t a, int32_t b) { return a < b ? a : b; }
static inline int32_t ek_max_i32(int32_t a, int32_t b) { return a > b ? a : b; }
static inline int32_t ek_clamp_i32(int32_t x, int32_t lo, int32_t hi) { return x < lo ? lo : (x > hi ? hi : x); }

/* gemmlowp SaturatingRoundingDoublingHighMul */
static inline int32_t ek_srdhm(int32_t a, int32_t b) {
  if (a == b && a == INT32_MIN) return INT32_MAX;
  int64_t ab = (int64_t)a * (int64_t)b;
  int64_t nudge = ab >= 0 ? (1ll << 30) : (1 - (1ll << 30));
  return (int32_t)((ab + nudge) / (1ll << 31));
}

/* gemmlowp RoundingDivideByPOT (exponent in [0, 31]) */
static inline int32_t ek_rdbpot(int32_t x, int exponent) {
  if (exponent <= 0) return x;
  if (exponent > 31) exponent = 31;
  const int32_t mask = (int32_t)((1ll << exponent) - 1);
  const int32_t remainder = x & mask;
  const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

/* x * 2^left_shift with the wrap-around TFLite gets from int32 multiplication, without UB. */
static inline int32_t ek_shl_wrap(int32_t x, int left_shift) {
  return (int32_t)((uint32_t)x << (left_shift & 31));
}

/* TFLite MultiplyByQuantizedMultiplier (double rounding). */
static inline int32_t ek_mbqm(int32_t x, int32_t quantized_multiplier, int shift) {
  const int left_shift = shift > 0 ? shift : 0;
  const int right_shift = shift > 0 ? 0 : -shift;
  return ek_rdbpot(ek_srdhm(ek_shl_wrap(x, left_shift), quantized_multiplier), right_shift);
}

/* TFLite MultiplyByQuantizedMultiplierSmallerThanOneExp (shift <= 0). */
static inline int32_t ek_mbqm_smaller_than_one(int32_t x, int32_t quantized_multiplier, int shift) {
  return ek_rdbpot(ek_srdhm(x, quantized_multiplier), -shift);
}

/* TFLite MultiplyByQuantizedMultiplierGreaterThanOne (left_shift >= 0). */
static inline int32_t ek_mbqm_greater_than_one(int32_t x, int32_t quantized_multiplier, int left_shift) {
  return ek_srdhm(ek_shl_wrap(x, left_shift), quantized_multiplier);
}

/* TFLite QuantizeMultiplier: real multiplier -> Q31 multiplier and shift (double precision). */
static inline void ek_quantize_multiplier(double m, int32_t *quantized_multiplier, int *shift) {
  if (!(m > 0.0) || !isfinite(m)) { *quantized_multiplier = 0; *shift = 0; return; }
  int exponent = 0;
  const double q = frexp(m, &exponent);
  int64_t q_fixed = (int64_t)round(q * (double)(1ll << 31));
  if (q_fixed == (1ll << 31)) { q_fixed /= 2; ++exponent; }
  if (exponent < -31) { exponent = 0; q_fixed = 0; }
  if (exponent > 31) { exponent = 31; q_fixed = (1ll << 31) - 1; } /* TFLite CHECK-fails; we saturate */
  *quantized_multiplier = (int32_t)q_fixed;
  *shift = exponent;
}

static inline int32_t ek_quantize_bound(float f, float scale, int32_t zero_point, int32_t qmin, int32_t qmax) {
  const double q = (double)zero_point + (double)roundf(f / scale);
  if (!(q >= (double)qmin - 1.0)) return qmin - 1; /* also NaN (scale 0 is refused by the kernels' checks) */
  if (q > (double)qmax + 1.0) return qmax + 1;
  return (int32_t)q;
}

/* TFLite CalculateActivationRangeQuantized for an output tensor (int8: qmin -128, qmax 127). */
static inline void ek_activation_range(int activation, float scale, int32_t zero_point, int32_t qmin, int32_t qmax,
                                       int32_t *act_min, int32_t *act_max) {
  int32_t lo = qmin, hi = qmax;
  /* zero_point + round(f / scale), clamped to [qmin - 1, qmax + 1] before the cast: with a degenerate scale (~1e-10
   * from collapsed activations) f / scale leaves the int32 range, and a float-to-int cast out of range is UB. */
#define EK_Q(f) ek_quantize_bound((f), scale, zero_point, qmin, qmax)
  if (activation == EK_ACT_RELU) {
    lo = ek_max_i32(qmin, EK_Q(0.0f));
  } else if (activation == EK_ACT_RELU6) {
    lo = ek_max_i32(qmin, EK_Q(0.0f));
    hi = ek_min_i32(qmax, EK_Q(6.0f));
  } else if (activation == EK_ACT_RELU_N1_TO_1) {
    lo = ek_max_i32(qmin, EK_Q(-1.0f));
    hi = ek_min_i32(qmax, EK_Q(1.0f));
  }
#undef EK_Q
  *act_min = lo;
  *act_max = hi;
}

#endif
