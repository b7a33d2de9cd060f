/* edgekit-op: LOG_SOFTMAX | types: int8 | versions: 1-2 | fast path: none */
/* LOG_SOFTMAX over the last dimension, int8 in, int8 out (scale 16/256, zero point 127, as TFLite requires).
 *
 * Bit-exact with LiteRT BUILTIN_REF: tflite/kernels/activations.cc LogSoftmaxPrepare (beta 1,
 * PreprocessLogSoftmaxScalingExp(1, input_scale, 5): PreprocessSoftmaxScaling then the reverse scaling
 * QuantizeMultiplierSmallerThanOneExp((1 << (31 - left_shift)) / multiplier); diff_min = -CalculateInputRadius(5,
 * left_shift)) and, under kReference, reference_integer_ops::LogSoftmax (kernels/internal/reference/integer_ops/
 * log_softmax.h): a Q12.19 sum of gemmlowp exp_on_negative_values(Q5.26), its log by
 * log_x_for_x_greater_than_or_equal_to_1<5> (kernels/internal/common.h), out = RoundingDivideByPOT(diff_q5 -
 * log_sum, 22) + 127 for differences above the adjusted diff_min, -128 below.
 * A row is read whole (max, sum) before any of its outputs is written, then element c before output c (d_max = 0).
 */
#include "ek_fixedpoint.h"
#include "ek_gemmlowp.h"
#include "ek_kernels.h"

typedef struct log_softmax_params {
  int32_t input_multiplier, input_left_shift;
  int32_t reverse_multiplier, reverse_shift; /* MBQM(x, reverse_multiplier, reverse_shift): reverse_shift <= 0 */
  int32_t diff_min;
  int32_t outer, depth;
} log_softmax_params;

static size_t log_softmax_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(log_softmax_params);
}

static ek_status log_softmax_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 1 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, "LOG_SOFTMAX needs 1 input and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0), *out = ek_output(ctx, op, 0);
  if (!in || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "LOG_SOFTMAX input or output tensor missing");
  if (in->type != EK_INT8 || out->type != EK_INT8) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "LOG_SOFTMAX supports int8 only");
  if (in->num_scales != 1 || out->num_scales != 1) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "LOG_SOFTMAX needs per-tensor quantized tensors");
  if (out->scale != 16.0f / 256.0f || out->zero_point != 127)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "LOG_SOFTMAX output must have scale 16/256 and zero point 127 (as TFLite)");
  if (!(in->scale > 0.0f) || !(in->scale <= 3.4028234e38f))
    return ek_fail(ctx, op, EK_ERR_MODEL, "LOG_SOFTMAX input scale must be positive and finite");
  if (in->ndim < 1 || in->ndim > EK_MAX_DIMS) return ek_fail(ctx, op, EK_ERR_SHAPE, "LOG_SOFTMAX input needs 1 to 6 dimensions");
  if (!ek_same_shape(in, out)) return ek_fail(ctx, op, EK_ERR_SHAPE, "LOG_SOFTMAX output shape differs from the input shape");
  if (in->bytes != ek_num_elements(in) || out->bytes != in->bytes)
    return ek_fail(ctx, op, EK_ERR_MODEL, "LOG_SOFTMAX tensor size does not match its shape");
  log_softmax_params *p = (log_softmax_params *)op->user_data;
  /* PreprocessSoftmaxScaling (beta 1, 5 integer bits), QuantizeMultiplierGreaterThanOne (CHECK-fails unless > 1) */
  double real = (double)in->scale * (double)(1 << 26);
  if (real > (double)((1ll << 31) - 1)) real = (double)((1ll << 31) - 1);
  if (!(real > 1.0)) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "LOG_SOFTMAX input scale too small (TFLite rejects it too)");
  int shift = 0;
  ek_quantize_multiplier(real, &p->input_multiplier, &shift);
  if (shift < 0 || shift > 30) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "LOG_SOFTMAX input multiplier out of range");
  p->input_left_shift = shift;
  /* reverse scaling: QuantizeMultiplierSmallerThanOneExp((1 << (31 - shift)) / multiplier) */
  const double reverse = (double)(1 << (31 - shift)) / (double)p->input_multiplier;
  int rshift = 0;
  ek_quantize_multiplier(reverse, &p->reverse_multiplier, &rshift);
  if (!(reverse > 0.0 && reverse < 1.0) || rshift > 0)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "LOG_SOFTMAX input scale out of TFLite's range");
  p->reverse_shift = rshift;
  /* diff_min = -1.0 * CalculateInputRadius(5, shift, 31) = -floor(31 * 2^26 / 2^shift) */
  p->diff_min = -(int32_t)(31.0 * (double)(1ll << 26) / (double)(1ll << shift));
  p->depth = in->dims[in->ndim - 1];
  p->outer = p->depth > 0 ? in->bytes / p->depth : 0;
  return EK_OK;
}

/* TFLite SaturatingRoundingMultiplyByPOTParam for exponent >= 0 (a saturating left shift). */
static inline int32_t ls_sat_shl(int32_t x, int exponent) {
  /* a negative exponent only follows a wrapped (negative) Q12.19 sum of > 4096 exps: undefined in the reference */
  return exponent <= 0 ? x : ek_gl_sat_shl(x, exponent > 31 ? 31 : exponent);
}

static inline int32_t ls_sat_add(int32_t a, int32_t b) {
  const int64_t s = (int64_t)a + b;
  return s > INT32_MAX ? INT32_MAX : (s < INT32_MIN ? INT32_MIN : (int32_t)s);
}

static inline int32_t ls_sat_sub(int32_t a, int32_t b) {
  const int64_t s = (int64_t)a - b;
  return s > INT32_MAX ? INT32_MAX : (s < INT32_MIN ? INT32_MIN : (int32_t)s);
}

/* log_x_for_x_greater_than_or_equal_to_1_impl<5, 12>: a Q12.19 input, a Q5.26 output (raw values). */
static int32_t ls_log_q12_to_q5(int32_t z_a) {
  enum { INPUT_BITS = 12, ACCUM_BITS = 6 };
  const int32_t log_2 = 1488522236, sqrt_sqrt_half = 1805811301, sqrt_half = 1518500250;
  const int32_t alpha_n = 117049297, alpha_d = 127690142, alpha_i = 1057819769, alpha_f = 638450708;
  const int32_t shifted_quarter = ek_rdbpot(536870912, ACCUM_BITS); /* Rescale<6>(1/4) */
  const int z_a_headroom_plus_1 = ek_clz32((uint32_t)z_a);
  const int32_t r_a_tmp = ls_sat_shl(z_a, z_a_headroom_plus_1 - 1);
  const int32_t r_a_raw = ls_sat_shl(ek_srdhm(r_a_tmp, sqrt_half), 1);
  const int32_t z_a_pow_2_adj = ls_sat_add(ls_sat_shl(INPUT_BITS - z_a_headroom_plus_1, 31 - ACCUM_BITS), shifted_quarter);
  const int32_t z_b = ek_srdhm(z_a, sqrt_half);
  const int z_b_headroom = ek_clz32((uint32_t)z_b) - 1;
  const int32_t r_b_raw = ls_sat_shl(z_a, z_b_headroom);
  const int32_t z_b_pow_2_adj = ls_sat_sub(ls_sat_shl(INPUT_BITS - z_b_headroom, 31 - ACCUM_BITS), shifted_quarter);
  const int32_t r = r_a_raw < r_b_raw ? r_a_raw : r_b_raw;
  const int32_t z_pow_2_adj = z_a_pow_2_adj > z_b_pow_2_adj ? z_a_pow_2_adj : z_b_pow_2_adj;
  const int32_t p = ek_gl_rounding_half_sum(r, sqrt_sqrt_half);
  int32_t q = ek_gl_sub(r, sqrt_sqrt_half);
  q = ek_gl_add(q, q);
  const int32_t common_sq = ek_srdhm(q, q);
  const int32_t num = ek_gl_add(ek_srdhm(q, r), ek_srdhm(ek_srdhm(q, common_sq), alpha_n));
  const int32_t denom_minus_one = ek_gl_add(ek_srdhm(p, ek_gl_add(ek_gl_add(alpha_i, q), ek_srdhm(alpha_d, common_sq))),
                                            ek_srdhm(alpha_f, q));
  const int32_t recip_denom = ek_gl_one_over_one_plus_x(denom_minus_one);
  const int32_t num_scaled = ek_rdbpot(num, ACCUM_BITS); /* Rescale<6>(F0) */
  const int32_t sum = ek_gl_add(ek_srdhm(z_pow_2_adj, log_2), ek_srdhm(num_scaled, recip_denom)); /* F6 */
  return ek_gl_sat_shl(sum, 1); /* Rescale<5>(F6) */
}

static ek_status log_softmax_eval(ek_context *ctx, ek_op *op) {
  const log_softmax_params *p = (const log_softmax_params *)op->user_data;
  const int8_t *x = (const int8_t *)ek_input(ctx, op, 0)->data;
  int8_t *y = (int8_t *)ek_output(ctx, op, 0)->data;
  const int32_t depth = p->depth;
  for (int32_t o = 0; o < p->outer; ++o) {
    const int8_t *row = x + (size_t)o * (size_t)depth;
    int8_t *dst = y + (size_t)o * (size_t)depth;
    int32_t max_in_row = INT8_MIN;
    for (int32_t c = 0; c < depth; ++c) max_in_row = row[c] > max_in_row ? row[c] : max_in_row;
    int32_t sum_q12 = 0; /* wrapping add, as gemmlowp's FixedPoint operator+ */
    for (int32_t c = 0; c < depth; ++c) {
      const int32_t diff = (int32_t)row[c] - max_in_row;
      if (diff >= p->diff_min) {
        const int32_t diff_q5 = ek_mbqm(diff, p->input_multiplier, p->input_left_shift);
        sum_q12 = ek_gl_add(sum_q12, ek_rdbpot(ek_gl_exp_on_negative_values(diff_q5, 5), 12)); /* Rescale<12>(F0) */
      }
    }
    const int32_t log_sum_q5 = ls_log_q12_to_q5(sum_q12);
    const int32_t shifted_log_sum = ek_gl_add(log_sum_q5, INT32_MIN);
    const int32_t reverse = ek_mbqm(shifted_log_sum, p->reverse_multiplier, p->reverse_shift);
    const int32_t adjusted_diff_min = p->diff_min - 1 > reverse ? p->diff_min - 1 : reverse;
    for (int32_t c = 0; c < depth; ++c) {
      const int32_t diff = (int32_t)row[c] - max_in_row;
      int32_t v = INT8_MIN;
      if (diff > adjusted_diff_min) {
        const int32_t diff_q5 = ek_mbqm(diff, p->input_multiplier, p->input_left_shift);
        v = ek_clamp_i32(ek_rdbpot(ek_gl_sub(diff_q5, log_sum_q5), 31 - 5 - 4) + 127, INT8_MIN, INT8_MAX);
      }
      dst[c] = (int8_t)v;
    }
  }
  return EK_OK;
}

/* Kernel access contract: rows in order, each read whole before it is written, then elementwise. */
static int log_softmax_overlap(const ek_context *ctx, const ek_op *op, int input_index, int32_t *d_max) {
  (void)ctx;
  (void)op;
  if (input_index != 0) return EK_OVERLAP_NONE;
  *d_max = 0;
  return EK_OVERLAP_UPTO;
}

const ek_kernel ek_kernel_log_softmax = {EK_OP_LOG_SOFTMAX, "LOG_SOFTMAX", EK_HOST_FN(log_softmax_persistent_bytes), 0,
                                         EK_HOST_FN(log_softmax_prepare), log_softmax_eval, EK_HOST_FN(log_softmax_overlap)};
