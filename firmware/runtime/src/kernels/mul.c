/* MUL, int8, with broadcasting up to EK_MAX_DIMS dimensions.
 *
 * Bit-exact with LiteRT BUILTIN_REF: tflite/kernels/mul.cc Prepare computes the real multiplier
 * input1_scale * input2_scale / output_scale in *float* (all three operands are float) and then
 * QuantizeMultiplier (any shift); reference_integer_ops::MulElementwise / BroadcastMul6DSlow apply
 * MultiplyByQuantizedMultiplier((x - zp1) * (y - zp2)) + zp_out with the fused-activation clamp.
 *
 * Fast path (left shift <= 13, right shift <= 22: all real models): |product| <= 255 * 255 < 2^16, so
 * SRDHM(product << left, m) = SMMULR(product << (left + 1), m) and the rounding right shift folds the output
 * zero point in (ek_broadcast.h); exact, not an approximation.
 */
#include "ek_broadcast.h"
#include "ek_fixedpoint.h"
#include "ek_kernels.h"

typedef struct mul_params {
  int32_t input1_offset, input2_offset, output_offset;
  int32_t output_multiplier, output_shift;
  int32_t act_min, act_max;
  int32_t fast;         /* fast path usable */
  int32_t fast_left;    /* left shift + 1 (the SMMULR doubling) */
  int32_t fast_right;   /* rounding right shift, 0..22 */
  int32_t fast_bias;    /* 2^(right-1) + zp_out * 2^right, or zp_out when right == 0 */
  ek_broadcast_plan plan;
} mul_params;

static size_t mul_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(mul_params);
}

static int mul_valid_scale(float s) { return s > 0.0f && s <= 3.4028234e38f; }

static ek_status mul_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 2 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, "MUL needs 2 inputs and 1 output");
  const ek_tensor *in1 = ek_input(ctx, op, 0), *in2 = ek_input(ctx, op, 1);
  const ek_tensor *out = ek_output(ctx, op, 0);
  if (!in1 || !in2 || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "MUL input or output tensor missing");
  if (in1->type != EK_INT8 || in2->type != EK_INT8 || out->type != EK_INT8)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "MUL supports int8 inputs and output only");
  if (in1->num_scales != 1 || in2->num_scales != 1 || out->num_scales != 1)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "MUL needs per-tensor quantized int8 tensors");
  if (!mul_valid_scale(in1->scale) || !mul_valid_scale(in2->scale) || !mul_valid_scale(out->scale))
    return ek_fail(ctx, op, EK_ERR_MODEL, "MUL tensor scale must be positive and finite");
  if (in1->zero_point < -128 || in1->zero_point > 127 || in2->zero_point < -128 || in2->zero_point > 127 ||
      out->zero_point < -128 || out->zero_point > 127)
    return ek_fail(ctx, op, EK_ERR_MODEL, "MUL int8 zero point outside [-128, 127]");
  if (in1->bytes != ek_num_elements(in1) || in2->bytes != ek_num_elements(in2) || out->bytes != ek_num_elements(out))
    return ek_fail(ctx, op, EK_ERR_MODEL, "MUL tensor size does not match its shape");
  const int32_t act = op->params.activation;
  if (act != EK_ACT_NONE && act != EK_ACT_RELU && act != EK_ACT_RELU6 && act != EK_ACT_RELU_N1_TO_1)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "MUL fused activation must be NONE, RELU, RELU6 or RELU_N1_TO_1");

  mul_params *p = (mul_params *)op->user_data;
  switch (ek_broadcast_prepare(in1, in2, out, &p->plan)) {
    case EK_BCAST_OK: break;
    case EK_BCAST_INCOMPATIBLE: return ek_fail(ctx, op, EK_ERR_SHAPE, "MUL input shapes do not broadcast");
    case EK_BCAST_RANK: return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "MUL supports at most 6 dimensions and 2^31 elements");
    default: return ek_fail(ctx, op, EK_ERR_SHAPE, "MUL output shape is not the broadcast of the input shapes");
  }
  p->input1_offset = -in1->zero_point;
  p->input2_offset = -in2->zero_point;
  p->output_offset = out->zero_point;
  /* float arithmetic, exactly as mul.cc: `input1->params.scale * input2->params.scale / output->params.scale` */
  const float product = in1->scale * in2->scale;
  const float real_multiplier = product / out->scale;
  if (!(real_multiplier <= 3.4028234e38f)) /* inf: TFLite's QuantizeMultiplier has no defined result */
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "MUL scales give an infinite rescale multiplier");
  int shift = 0;
  ek_quantize_multiplier((double)real_multiplier, &p->output_multiplier, &shift);
  if (shift > 31) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "MUL output scale too small for the input scales");
  p->output_shift = shift;
  ek_activation_range(act, out->scale, out->zero_point, -128, 127, &p->act_min, &p->act_max);
  p->fast = shift <= 13 && shift >= -22;
  if (p->fast) {
    p->fast_left = (shift > 0 ? shift : 0) + 1;
    p->fast_right = shift < 0 ? -shift : 0;
    p->fast_bias = p->fast_right > 0
                       ? ((int32_t)1 << (p->fast_right - 1)) + p->output_offset * ((int32_t)1 << p->fast_right)
                       : p->output_offset;
  }
  return EK_OK;
}

/* Fast path: one output from the zero-point-corrected operands u = x - zp1, w = y - zp2. */
static inline int8_t mul_fast_one(const mul_params *p, int32_t u, int32_t w, const int round) {
  const int32_t z = ek_smmulr((u * w) * (1 << p->fast_left), p->output_multiplier);
  const int32_t raw = round ? ek_rdbpot_biased(z, p->fast_bias, (int)p->fast_right) : z + p->fast_bias;
  return (int8_t)ek_clamp_i32(raw, p->act_min, p->act_max);
}

static inline void mul_fast_loop(const mul_params *p, const int8_t *a, int32_t a_step, const int8_t *b,
                                 int32_t b_step, int8_t *out, int32_t n, const int round) {
  const int32_t o1 = p->input1_offset, o2 = p->input2_offset;
  if (a_step && b_step) {
    for (int32_t i = 0; i < n; ++i) out[i] = mul_fast_one(p, a[i] + o1, b[i] + o2, round);
  } else if (b_step || a_step) { /* multiplication is commutative: hoist the fixed operand */
    const int32_t fixed = b_step ? a[0] + o1 : b[0] + o2;
    const int8_t *v = b_step ? b : a;
    const int32_t ov = b_step ? o2 : o1;
    for (int32_t i = 0; i < n; ++i) out[i] = mul_fast_one(p, fixed, v[i] + ov, round);
  } else {
    const int8_t r = mul_fast_one(p, a[0] + o1, b[0] + o2, round);
    for (int32_t i = 0; i < n; ++i) out[i] = r;
  }
}

static inline int8_t mul_one(const mul_params *p, int32_t x, int32_t y) {
  const int32_t prod = (p->input1_offset + x) * (p->input2_offset + y); /* |.| <= 255 * 255 */
  const int32_t raw = ek_mbqm(prod, p->output_multiplier, p->output_shift) + p->output_offset;
  return (int8_t)ek_clamp_i32(raw, p->act_min, p->act_max);
}

static void mul_row(const void *params, const int8_t *a, int32_t a_step, const int8_t *b, int32_t b_step, int8_t *out,
                    int32_t n) {
  const mul_params *p = (const mul_params *)params;
  if (p->fast) {
    if (p->fast_right > 0) mul_fast_loop(p, a, a_step, b, b_step, out, n, 1);
    else mul_fast_loop(p, a, a_step, b, b_step, out, n, 0);
    return;
  }
  if (a_step && b_step) {
    for (int32_t i = 0; i < n; ++i) out[i] = mul_one(p, a[i], b[i]);
  } else if (b_step) {
    const int32_t x = a[0];
    for (int32_t i = 0; i < n; ++i) out[i] = mul_one(p, x, b[i]);
  } else if (a_step) {
    const int32_t y = b[0];
    for (int32_t i = 0; i < n; ++i) out[i] = mul_one(p, a[i], y);
  } else {
    const int8_t v = mul_one(p, a[0], b[0]);
    for (int32_t i = 0; i < n; ++i) out[i] = v;
  }
}

static ek_status mul_eval(ek_context *ctx, ek_op *op) {
  const mul_params *p = (const mul_params *)op->user_data;
  ek_broadcast_run(&p->plan, p, (const int8_t *)ek_input(ctx, op, 0)->data, (const int8_t *)ek_input(ctx, op, 1)->data,
                   (int8_t *)ek_output(ctx, op, 0)->data, mul_row);
  return EK_OK;
}

/* edgekit-op: MUL | types: int8 | versions: 1-3 | fast path: Cortex-M4 DSP (SMMULR) */
const ek_kernel ek_kernel_mul = {EK_OP_MUL, "MUL", EK_HOST_FN(mul_persistent_bytes), 0, EK_HOST_FN(mul_prepare), mul_eval, 0};
