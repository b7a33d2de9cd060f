/* RSQRT, int8 -> int8 (1 / sqrt(x)), tabulated over the 256 inputs in prepare().
 *
 * Bit-exact with LiteRT BUILTIN_REF (tensorflow/lite/kernels/elementwise.cc RsqrtEvalQuantizedInt8 with
 * SetRsqrtOutputMultiplier, and GetInvSqrtQuantizedMultiplierExp of tensorflow/lite/kernels/internal/common.h, a
 * gemmlowp Newton-Raphson iteration in Q3.28, reproduced step by step): multiplier
 * QuantizeMultiplier(1. / (sqrtf(input_scale) * output_scale)); per value v = q - zp_in: v == 0 gives 127, otherwise
 * data = MultiplyByQuantizedMultiplier(1, inv_sqrt(v), inv_shift + 20) and
 * y = clamp(MultiplyByQuantizedMultiplier(data, multiplier, shift - 20) + zp_out). LiteRT fails the invoke for
 * q < zp_in ("Rsqrt is only defined for positive values"); eval cannot fail, so those inputs give 127 here (the
 * value the kernel gives the smallest positive input's neighbour 0).
 */
#include <math.h>

#include "ek_fixedpoint.h"
#include "ek_gemmlowp.h"
#include "ek_kernels.h"
#include "ek_lut.h"

/* GetInvSqrtQuantizedMultiplierExp(input, kReverseShift = -1, ...) for input >= 0. */
static void rsqrt_inv_sqrt(int32_t input, int32_t *output_inv_sqrt, int *output_shift) {
  if (input <= 1) {
    *output_inv_sqrt = INT32_MAX;
    *output_shift = 0;
    return;
  }
  int shift = 11;
  while (input >= (1 << 29)) {
    input /= 4;
    ++shift;
  }
  const unsigned max_left_shift_bits = (unsigned)ek_clz32((uint32_t)input) - 1u;
  const unsigned left_shift_bit_pairs = max_left_shift_bits / 2u - 1u;
  shift -= (int)left_shift_bit_pairs;
  input = (int32_t)((uint32_t)input << (2u * left_shift_bit_pairs));
  /* F3 = FixedPoint<int32, 3>: raw / 2^28. F3 * F3 is an F6 (SaturatingRoundingDoublingHighMul of the raws). */
  const int32_t fixedpoint_input = input >> 1;
  const int32_t fixedpoint_half_input = ek_rdbpot(fixedpoint_input, 1); /* SaturatingRoundingMultiplyByPOT<-1> */
  const int32_t fixedpoint_half_three = (1 << 28) + (1 << 27);            /* 1.5 */
  int32_t x = 1 << 28;                                                    /* F3::One() */
  for (int i = 0; i < 5; i++) {
    const int32_t x3 = ek_gl_sat_shl(ek_srdhm(ek_srdhm(x, x), x), 6); /* Rescale<3>(F9) */
    x = ek_gl_sat_shl(ek_gl_sub(ek_srdhm(fixedpoint_half_three, x), ek_srdhm(fixedpoint_half_input, x3)), 3);
  }
  x = ek_srdhm(x, 1518500250); /* * sqrt(2) / 2 in Q0.31 */
  if (shift < 0) {
    x = (int32_t)((uint32_t)x << -shift);
    shift = 0;
  }
  *output_inv_sqrt = x;
  *output_shift = -shift; /* reverse_shift = -1 */
}

static ek_status rsqrt_prepare(ek_context *ctx, ek_op *op) {
  const ek_tensor *in, *out;
  EK_UNARY_INT8_CHECKS(ctx, op, "RSQRT", 2, in, out);
  const double real = 1. / (double)(sqrtf(in->scale) * out->scale);
  int32_t m = 0;
  int shift = 0;
  ek_quantize_multiplier(real, &m, &shift);
  if (m == 0 || shift > 30) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "RSQRT scales give a rescale multiplier out of range");
  ek_lut8 *t = (ek_lut8 *)op->user_data;
  for (int32_t q = -128; q <= 127; ++q) {
    const int32_t value = q - in->zero_point;
    int32_t y = 127;
    if (value > 0) {
      int32_t inv = 0;
      int inv_shift = 0;
      rsqrt_inv_sqrt(value, &inv, &inv_shift);
      const int32_t data = ek_mbqm(1, inv, inv_shift + 20);
      y = ek_mbqm(data, m, shift - 20) + out->zero_point;
    }
    t->lut[(uint8_t)(int8_t)q] = ek_lut_clamp8(y);
  }
  return EK_OK;
}

/* edgekit-op: RSQRT | types: int8 | versions: 1-2 | fast path: none */
const ek_kernel ek_kernel_rsqrt = {EK_OP_RSQRT, "RSQRT", EK_HOST_FN(ek_lut_persistent_bytes), 0, EK_HOST_FN(rsqrt_prepare), ek_lut_eval, EK_HOST_FN(ek_lut_overlap)};
