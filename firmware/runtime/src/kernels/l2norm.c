/* edgekit-op: L2_NORMALIZATION | types: int8 | versions: 1-2 | fast path: none */
/* L2_NORMALIZATION, int8, along the last dimension (rank 1..4, no fused activation, output scale 1/128, zero
 * point 0, as tflite/kernels/l2norm.cc Prepare requires).
 *
 * Bit-exact with LiteRT BUILTIN_REF: l2norm.cc sends every int8 input to reference_integer_ops::L2Normalization
 * (kernels/internal/reference/integer_ops/l2normalization.h): per row acc = sum (x - zp)^2 (int32), then
 * GetInvSqrtQuantizedMultiplierExp(acc, reverse_shift -1) (kernels/internal/common.h: five gemmlowp Newton-Raphson
 * steps in Q3.28, times sqrt(2)/2), out = MultiplyByQuantizedMultiplier(x - zp, inv, shift + 7) clamped to int8.
 * A row is read whole (the sum) before any of its outputs is written, then element c is read before output c:
 * the output may start at or before its dying input (d_max = 0).
 */
#include "ek_fixedpoint.h"
#include "ek_gemmlowp.h"
#include "ek_kernels.h"

typedef struct l2norm_params {
  int32_t outer, depth;
  int32_t input_zero_point;
} l2norm_params;

static size_t l2norm_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(l2norm_params);
}

static ek_status l2norm_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 1 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, "L2_NORMALIZATION needs 1 input and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0), *out = ek_output(ctx, op, 0);
  if (!in || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "L2_NORMALIZATION input or output tensor missing");
  if (in->type != EK_INT8 || out->type != EK_INT8)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "L2_NORMALIZATION supports int8 input and output only");
  if (in->num_scales != 1 || out->num_scales != 1)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "L2_NORMALIZATION needs per-tensor quantized tensors");
  if (out->scale != 1.0f / 128.0f || out->zero_point != 0)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "L2_NORMALIZATION output must have scale 1/128 and zero point 0 (as TFLite)");
  if (in->zero_point < -128 || in->zero_point > 127)
    return ek_fail(ctx, op, EK_ERR_MODEL, "L2_NORMALIZATION int8 zero point outside [-128, 127]");
  if (op->params.activation != EK_ACT_NONE)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "L2_NORMALIZATION fused activation must be NONE (as TFLite)");
  if (in->ndim < 1 || in->ndim > 4) return ek_fail(ctx, op, EK_ERR_SHAPE, "L2_NORMALIZATION input must have 1 to 4 dimensions");
  if (!ek_same_shape(in, out)) return ek_fail(ctx, op, EK_ERR_SHAPE, "L2_NORMALIZATION output shape must equal the input's");
  if (in->bytes != ek_num_elements(in) || out->bytes != in->bytes)
    return ek_fail(ctx, op, EK_ERR_MODEL, "L2_NORMALIZATION tensor size does not match its shape");
  l2norm_params *p = (l2norm_params *)op->user_data;
  p->depth = in->dims[in->ndim - 1];
  p->outer = p->depth > 0 ? in->bytes / p->depth : 0;
  p->input_zero_point = in->zero_point;
  return EK_OK;
}

/* TFLite GetInvSqrtQuantizedMultiplierExp(input, reverse_shift = -1). */
static void l2norm_inv_sqrt(int32_t input, int32_t *inv, int *shift) {
  if (input <= 1) { /* also a wrapped (negative) sum, as the reference's <= 1 test */
    *inv = INT32_MAX;
    *shift = 0;
    return;
  }
  int s = 11;
  while (input >= (1 << 29)) {
    input /= 4;
    ++s;
  }
  const int left_pairs = (ek_clz32((uint32_t)input) - 1) / 2 - 1;
  s -= left_pairs;
  input <<= 2 * left_pairs;
  const int32_t fixed_input = input >> 1;               /* F3 (Q3.28) */
  const int32_t half_input = ek_rdbpot(fixed_input, 1); /* SaturatingRoundingMultiplyByPOT<-1> */
  const int32_t half_three = (1 << 28) + (1 << 27);     /* 1.5 in F3 */
  int32_t x = 1 << 28;                                  /* F3::One() */
  for (int i = 0; i < 5; ++i) {
    const int32_t x3 = ek_gl_sat_shl(ek_srdhm(ek_srdhm(x, x), x), 6); /* Rescale<3>(F9) */
    x = ek_gl_sat_shl(ek_gl_sub(ek_srdhm(half_three, x), ek_srdhm(half_input, x3)), 3); /* Rescale<3>(F6) */
  }
  x = ek_srdhm(x, 1518500250); /* times sqrt(2)/2 in F0: stays F3 */
  if (s < 0) {
    x = ek_shl_wrap(x, -s);
    s = 0;
  }
  *inv = x;
  *shift = -s; /* reverse_shift -1: a right shift of s */
}

static ek_status l2norm_eval(ek_context *ctx, ek_op *op) {
  const l2norm_params *p = (const l2norm_params *)op->user_data;
  const int8_t *x = (const int8_t *)ek_input(ctx, op, 0)->data;
  int8_t *y = (int8_t *)ek_output(ctx, op, 0)->data;
  const int32_t zp = p->input_zero_point, depth = p->depth;
  for (int32_t o = 0; o < p->outer; ++o) {
    const int8_t *row = x + (size_t)o * (size_t)depth;
    int8_t *dst = y + (size_t)o * (size_t)depth;
    uint32_t acc = 0; /* int32 in the reference; wraps past 2^31 only for rows of > 33,000 elements */
    for (int32_t c = 0; c < depth; ++c) {
      const int32_t v = row[c] - zp;
      acc += (uint32_t)(v * v);
    }
    int32_t inv;
    int shift;
    l2norm_inv_sqrt((int32_t)acc, &inv, &shift);
    for (int32_t c = 0; c < depth; ++c)
      dst[c] = (int8_t)ek_clamp_i32(ek_mbqm(row[c] - zp, inv, shift + 7), INT8_MIN, INT8_MAX);
  }
  return EK_OK;
}

/* Kernel access contract: rows in order, each read whole before it is written, then elementwise. */
static int l2norm_overlap(const ek_context *ctx, const ek_op *op, int input_index, int32_t *d_max) {
  (void)ctx;
  (void)op;
  if (input_index != 0) return EK_OVERLAP_NONE;
  *d_max = 0;
  return EK_OVERLAP_UPTO;
}

const ek_kernel ek_kernel_l2_normalization = {EK_OP_L2_NORMALIZATION, "L2_NORMALIZATION", EK_HOST_FN(l2norm_persistent_bytes), 0,
                                              EK_HOST_FN(l2norm_prepare), l2norm_eval, EK_HOST_FN(l2norm_overlap)};
