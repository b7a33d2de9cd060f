/* gemmlowp-style fixed-point math for the edgekit kernels (private to src/kernels).
 *
 * Each function reproduces the exact integer semantics of the gemmlowp / TFLite code that LiteRT's reference
 * kernels use (gemmlowp fixedpoint/fixedpoint.h, tflite kernels/internal/common.h), re-implemented in C99:
 * int32 Q-format helpers for SOFTMAX (exp_on_negative_values, one_over_one_plus_x_for_x_in_0_1,
 * GetReciprocal) and the int16 variants HARD_SWISH needs.  Where the original relies on wrap-around of signed
 * arithmetic, the wrap is done in unsigned arithmetic so no input is undefined behaviour.
 */
#ifndef EK_GEMMLOWP_H
#define EK_GEMMLOWP_H

#include <stdint.h>

#include "ek_fixedpoint.h"

/* ---- int32 ---------------------------------------------------------------------------------------------- */

static inline int32_t ek_gl_add(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }
static inline int32_t ek_gl_sub(int32_t a, int32_t b) { return (int32_t)((uint32_t)a - (uint32_t)b); }

/* Count leading zeros of a uint32 (32 for 0). */
static inline int ek_clz32(uint32_t x) {
  if (x == 0) return 32;
#if defined(__GNUC__)
  return __builtin_clz(x);
#else
  int n = 0;
  while (!(x & 0x80000000u)) { x <<= 1; ++n; }
  return n;
#endif
}

static inline int ek_clz64(uint64_t x) {
  if (x == 0) return 64;
#if defined(__GNUC__)
  return __builtin_clzll(x);
#else
  int n = 0;
  while (!(x & 0x8000000000000000ull)) { x <<= 1; ++n; }
  return n;
#endif
}

/* gemmlowp SaturatingRoundingMultiplyByPOT<exponent> for exponent > 0: saturating left shift. */
static inline int32_t ek_gl_sat_shl(int32_t x, int exponent) {
  const int32_t threshold = (int32_t)((1ll << (31 - exponent)) - 1);
  if (x > threshold) return INT32_MAX;
  if (x < -threshold) return INT32_MIN;
  return (int32_t)((uint32_t)x << exponent);
}

/* gemmlowp RoundingHalfSum (int32). */
static inline int32_t ek_gl_rounding_half_sum(int32_t a, int32_t b) {
  const int64_t sum = (int64_t)a + (int64_t)b;
  const int64_t sign = sum >= 0 ? 1 : -1;
  return (int32_t)((sum + sign) / 2);
}

/* gemmlowp exp_on_interval_between_negative_one_quarter_and_0_excl, Q0.31 in and out. */
static inline int32_t ek_gl_exp_on_interval(int32_t a) {
  const int32_t constant_term = 1895147668;     /* exp(-1/8) */
  const int32_t constant_1_over_3 = 715827883;
  const int32_t x = ek_gl_add(a, 1 << 28);      /* a + 1/8 */
  const int32_t x2 = ek_srdhm(x, x);
  const int32_t x3 = ek_srdhm(x2, x);
  const int32_t x4 = ek_srdhm(x2, x2);
  const int32_t x4_over_4 = ek_rdbpot(x4, 2);
  const int32_t poly = ek_rdbpot(ek_gl_add(ek_srdhm(ek_gl_add(x4_over_4, x3), constant_1_over_3), x2), 1);
  return ek_gl_add(constant_term, ek_srdhm(constant_term, ek_gl_add(x, poly)));
}

/* gemmlowp exp_on_negative_values for an input with `integer_bits` integer bits; Q0.31 out. */
static inline int32_t ek_gl_exp_on_negative_values(int32_t a, int integer_bits) {
  static const int32_t multipliers[7] = {1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242};
  const int fractional_bits = 31 - integer_bits;
  const int32_t one_quarter = (int32_t)1 << (fractional_bits - 2);
  const int32_t mask = one_quarter - 1;
  const int32_t a_mod_quarter_minus_one_quarter = (a & mask) - one_quarter;
  /* Rescale<0>: from integer_bits to 0 integer bits = saturating left shift by integer_bits */
  int32_t result = ek_gl_exp_on_interval(ek_gl_sat_shl(a_mod_quarter_minus_one_quarter, integer_bits));
  const int32_t remainder = ek_gl_sub(a_mod_quarter_minus_one_quarter, a);
  for (int exponent = -2; exponent <= 4; ++exponent) {
    if (integer_bits > exponent) {
      const int shift_amount = fractional_bits + exponent;
      if (remainder & (int32_t)((uint32_t)1 << shift_amount)) result = ek_srdhm(result, multipliers[exponent + 2]);
    }
  }
  if (integer_bits > 5) {
    const int32_t clamp = -((int32_t)1 << (36 - integer_bits)); /* -32.0 */
    if (a < clamp) result = 0;
  }
  if (a == 0) result = INT32_MAX; /* One() of a 0-integer-bit format */
  return result;
}

/* gemmlowp one_over_one_plus_x_for_x_in_0_1, Q0.31 in and out. */
static inline int32_t ek_gl_one_over_one_plus_x(int32_t a) {
  const int32_t half_denominator = ek_gl_rounding_half_sum(a, INT32_MAX);
  const int32_t constant_48_over_17 = 1515870810;   /* Q2.29 */
  const int32_t constant_neg_32_over_17 = -1010580540;
  const int32_t f2_one = (int32_t)1 << 29;
  int32_t x = ek_gl_add(constant_48_over_17, ek_srdhm(half_denominator, constant_neg_32_over_17));
  for (int i = 0; i < 3; ++i) {
    const int32_t half_denominator_times_x = ek_srdhm(half_denominator, x);
    const int32_t one_minus_half_denominator_times_x = ek_gl_sub(f2_one, half_denominator_times_x);
    x = ek_gl_add(x, ek_gl_sat_shl(ek_srdhm(x, one_minus_half_denominator_times_x), 2));
  }
  return ek_gl_sat_shl(x, 1); /* Rescale<0>(ExactMulByPot<-1>(x)) */
}

/* TFLite GetReciprocal: 1/x for a fixed-point x with x_integer_digits integer bits. */
static inline int32_t ek_gl_get_reciprocal(int32_t x, int x_integer_digits, int *num_bits_over_unit) {
  const int headroom_plus_one = ek_clz32((uint32_t)x);
  *num_bits_over_unit = x_integer_digits - headroom_plus_one;
  const uint32_t shifted = headroom_plus_one >= 32 ? 0u : ((uint32_t)x << headroom_plus_one);
  const int32_t shifted_sum_minus_one = (int32_t)(shifted - ((uint32_t)1 << 31));
  return ek_gl_one_over_one_plus_x(shifted_sum_minus_one);
}

/* ---- int16 (HARD_SWISH) ---------------------------------------------------------------------------------- */

/* gemmlowp SaturatingRoundingDoublingHighMul<int16_t>. */
static inline int16_t ek_srdhm16(int16_t a, int16_t b) {
  if (a == b && a == INT16_MIN) return INT16_MAX;
  const int32_t ab = (int32_t)a * (int32_t)b;
  const int32_t nudge = ab >= 0 ? (1 << 14) : (1 - (1 << 14));
  return (int16_t)((ab + nudge) / (1 << 15));
}

/* gemmlowp RoundingDivideByPOT<int16_t> (exponent in [0, 31]), with its int16 mask truncation. */
static inline int16_t ek_rdbpot16(int16_t x, int exponent) {
  const int16_t mask = (int16_t)(uint16_t)((1ull << exponent) - 1);
  const int16_t remainder = (int16_t)(x & mask);
  const int16_t threshold = (int16_t)((int16_t)(mask >> 1) + (x < 0 ? 1 : 0));
  return (int16_t)((int16_t)(x >> exponent) + (remainder > threshold ? 1 : 0));
}

/* TFLite reference_ops::SaturatingLeftShift (hard_swish.h), amount in [0, 30]. */
static inline int16_t ek_sat_shl16(int16_t value, int amount) {
  int64_t result = (int64_t)value * ((int64_t)1 << amount);
  if (result > INT16_MAX) result = INT16_MAX;
  if (result < INT16_MIN) result = INT16_MIN;
  return (int16_t)result;
}

/* TFLite reference_ops::SaturatingDoublingHighMul (hard_swish.h): rounds toward zero. */
static inline int16_t ek_sdhm16(int16_t a, int16_t b) {
  if (a == b && a == INT16_MIN) return INT16_MAX;
  const int32_t ab = (int32_t)a * (int32_t)b;
  return (int16_t)(ab / (1 << 15));
}

#endif
