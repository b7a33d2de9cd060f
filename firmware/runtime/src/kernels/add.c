/* edgekit-op: SUB | types: int8, int16 | versions: 1-5 | fast path: Cortex-M4 DSP */
/* ADD and SUB, int8, with broadcasting up to EK_MAX_DIMS dimensions.
 *
 * SUB is ADD with the second input's multiplier negated: tflite/kernels/sub.cc PrepareGeneralSubOp (op_sign -1,
 * same left_shift 20 and multipliers) then, for int8, reference_integer_ops::Add / BroadcastAdd4DSlow ("we are
 * using the add kernels ... the second value's multiplier is negated"). SRDHM(a, -m) is not -SRDHM(a, m) at ties,
 * so the negation happens on the multiplier, exactly as there, before the tables are built.
 *
 * int16 (16x8 models), ADD and SUB: the general int16 path of add.cc / sub.cc (left_shift 15, the same multipliers,
 * reference_ops::Add / BroadcastAdd6DSlow / BroadcastSubSlow per element, clamped to the int16 activation range),
 * element by element (no tables); zero points must be 0 (as there). The power-of-two path TFLite takes when pot_scale_int16 is set and every scale is
 * a power of two (zero points 0) is refused. The broadcast plan's strides are then in bytes.
 *
 * Bit-exact with LiteRT BUILTIN_REF: tflite/kernels/add.cc Prepare (8-bit general path, left_shift 20,
 * multipliers from QuantizeMultiplierSmallerThanOneExp in double) and reference_integer_ops::AddFunc
 * (tflite/kernels/internal/reference/integer_ops/add.h).  Same-shape and broadcast paths compute the same
 * per-element function, so one broadcast walker serves both.
 *
 * Fast path (every int8 ADD whose output rescale shift is in [1, 22], i.e. all real models): the same
 * arithmetic re-expressed with 32-bit operations, exact because the operands are small (ek_broadcast.h):
 *   scaled_i = RoundingDivideByPOT(SRDHM((x_i - zp_i) << 20, m_i), e_i) = rdbpot(SMMULR((x_i - zp_i) << 21, m_i), e_i)
 *     with |(x_i - zp_i) << 21| < 2^29, so |scaled_i| < 2^28;
 *   out = rdbpot(SRDHM(s, m_o), e_o) + zp_o = (SMMULR(2s, m_o) + 2^(e_o-1) + zp_o*2^e_o + sign) >> e_o
 *     with s = scaled_1 + scaled_2, |2s| < 2^30 and the bias below 2^30 for e_o <= 22.
 * A broadcast operand that stays fixed along a row is rescaled once per row.
 * scaled_i depends on x_i alone, so prepare tabulates 2 * scaled_i for the 256 int8 values of each input (2 KB of
 * per-op data, fixed once the model is known); an element is then two table loads, an add and the output step
 * (SMMLAR with the bias and sign folded in, ASR, SSAT): about 11 instructions instead of 26 on Cortex-M4.
 * out may alias an input exactly (in-place ADD): element i is read before it is written.
 */
#include <math.h>

#include "ek_broadcast.h"
#include "ek_fixedpoint.h"
#include "ek_kernels.h"

typedef struct add_params {
  int32_t input1_offset, input2_offset, output_offset;
  int32_t input1_multiplier, input2_multiplier, output_multiplier;
  int32_t input1_shift, input2_shift, output_shift;
  int32_t left_shift;
  int32_t act_min, act_max;
  /* fast path (fast != 0): 2(x - zp_i) << 20 = x * 2^21 + base_i; bias_i = 2^(e_i - 1) (0 if e_i == 0);
     bias_o = 2^(e_o - 1) + zp_o * 2^e_o */
  int32_t fast;
  int32_t base1, base2, bias1, bias2, bias_o;
  int32_t e1, e2, e_o;
  int32_t clamp; /* act range narrower than int8 */
  ek_broadcast_plan plan;
  int32_t table1[256], table2[256]; /* fast path: 2 * scaled_i for x = -128 .. 127 (index x + 128) */
  int32_t int16;                    /* int16 general path (left_shift 15) */
} add_params;

static size_t add_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(add_params);
}

#if defined(__ARM_FEATURE_DSP) && defined(__GNUC__)
static inline int32_t add_smmlar(int32_t a, int32_t b, int32_t acc) {
  int32_t r;
  __asm__("smmlar %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(b), "r"(acc));
  return r;
}
static inline int32_t add_ssat8(int32_t v) {
  int32_t r;
  __asm__("ssat %0, #8, %1" : "=r"(r) : "r"(v));
  return r;
}
#else
static inline int32_t add_smmlar(int32_t a, int32_t b, int32_t acc) {
  return (int32_t)((uint32_t)acc + (uint32_t)(int32_t)(((int64_t)a * b + ((int64_t)1 << 31)) >> 32));
}
static inline int32_t add_ssat8(int32_t v) { return v < -128 ? -128 : (v > 127 ? 127 : v); }
#endif

/* QuantizeMultiplierSmallerThanOneExp: TFLite CHECK-fails (aborts) outside [0, 1); we refuse the model. */
static int add_quantize_smaller_than_one(double m, int32_t *multiplier, int32_t *shift) {
  if (!(m >= 0.0 && m < 1.0)) return 0;
  int s = 0;
  ek_quantize_multiplier(m, multiplier, &s);
  if (s > 0) return 0;
  *shift = s;
  return 1;
}

static int add_valid_scale(float s) { return s > 0.0f && s <= 3.4028234e38f; }

/* TFLite CheckedLog2: |log2(s) - round(log2(s))| < 1e-3 in float. */
static int add_is_pot(float s) {
  const float l = logf(s) * (1.0f / logf(2.0f));
  const float f = l - roundf(l);
  return (f < 0.0f ? -f : f) < 1e-3f;
}

/* "ADD ..." or "SUB ..." (static strings for ek_fail). */
#define ADDSUB_MSG(op, tail) ((op)->opcode == EK_OP_SUB ? "SUB " tail : "ADD " tail)

/* Fast path: an input's scaled value (exactly the reference's scaled_input). `round` is e != 0. */
static inline int32_t add_scale_input(int32_t x, int32_t base, int32_t multiplier, int32_t bias, int32_t e,
                                      const int round) {
  const int32_t z = ek_smmulr(base + x * (1 << 21), multiplier);
  return round ? ek_rdbpot_biased(z, bias, (int)e) : z;
}

static ek_status add_prepare(ek_context *ctx, ek_op *op) {
  const int32_t sign = op->opcode == EK_OP_SUB ? -1 : 1; /* sub.cc: input2_multiplier *= op_sign */
  if (op->num_inputs != 2 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, ADDSUB_MSG(op, "needs 2 inputs and 1 output"));
  const ek_tensor *in1 = ek_input(ctx, op, 0), *in2 = ek_input(ctx, op, 1);
  const ek_tensor *out = ek_output(ctx, op, 0);
  if (!in1 || !in2 || !out) return ek_fail(ctx, op, EK_ERR_MODEL, ADDSUB_MSG(op, "input or output tensor missing"));
  const int int16 = in1->type == EK_INT16 && in2->type == EK_INT16 && out->type == EK_INT16;
  if (!int16 && (in1->type != EK_INT8 || in2->type != EK_INT8 || out->type != EK_INT8))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, ADDSUB_MSG(op, "supports int8 inputs and output only"));
  if (in1->num_scales != 1 || in2->num_scales != 1 || out->num_scales != 1)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, ADDSUB_MSG(op, "needs per-tensor quantized int8 tensors"));
  if (!add_valid_scale(in1->scale) || !add_valid_scale(in2->scale) || !add_valid_scale(out->scale))
    return ek_fail(ctx, op, EK_ERR_MODEL, ADDSUB_MSG(op, "tensor scale must be positive and finite"));
  const int32_t qmin = int16 ? INT16_MIN : -128, qmax = int16 ? INT16_MAX : 127, esize = int16 ? 2 : 1;
  if (in1->zero_point < qmin || in1->zero_point > qmax || in2->zero_point < qmin || in2->zero_point > qmax ||
      out->zero_point < qmin || out->zero_point > qmax)
    return ek_fail(ctx, op, EK_ERR_MODEL, int16 ? ADDSUB_MSG(op, "int16 zero point outside the int16 range")
                                                : ADDSUB_MSG(op, "int8 zero point outside [-128, 127]"));
  if (int16 && (in1->zero_point != 0 || in2->zero_point != 0 || out->zero_point != 0))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, ADDSUB_MSG(op, "int16 zero points must be 0 (TFLite checks it too)"));
  if (int16 && op->params.pot_scale_int16 && add_is_pot(in1->scale) && add_is_pot(in2->scale) && add_is_pot(out->scale))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, ADDSUB_MSG(op, "int16 with power-of-two scales (TFLite's POT path) is not supported"));
  if (in1->bytes != ek_num_elements(in1) * esize || in2->bytes != ek_num_elements(in2) * esize ||
      out->bytes != ek_num_elements(out) * esize)
    return ek_fail(ctx, op, EK_ERR_MODEL, ADDSUB_MSG(op, "tensor size does not match its shape"));
  const int32_t act = op->params.activation;
  if (act != EK_ACT_NONE && act != EK_ACT_RELU && act != EK_ACT_RELU6 && act != EK_ACT_RELU_N1_TO_1)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, ADDSUB_MSG(op, "fused activation must be NONE, RELU, RELU6 or RELU_N1_TO_1"));

  add_params *p = (add_params *)op->user_data;
  switch (ek_broadcast_prepare(in1, in2, out, &p->plan)) {
    case EK_BCAST_OK: break;
    case EK_BCAST_INCOMPATIBLE: return ek_fail(ctx, op, EK_ERR_SHAPE, ADDSUB_MSG(op, "input shapes do not broadcast"));
    case EK_BCAST_RANK: return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, ADDSUB_MSG(op, "supports at most 6 dimensions and 2^31 elements"));
    default: return ek_fail(ctx, op, EK_ERR_SHAPE, ADDSUB_MSG(op, "output shape is not the broadcast of the input shapes"));
  }

  p->input1_offset = -in1->zero_point;
  p->input2_offset = -in2->zero_point;
  p->output_offset = out->zero_point;
  p->left_shift = int16 ? 15 : 20;
  p->int16 = int16;
  /* as add.cc: float max, then double arithmetic */
  const double twice_max_input_scale = 2.0 * (double)(in1->scale > in2->scale ? in1->scale : in2->scale);
  const double real_input1_multiplier = (double)in1->scale / twice_max_input_scale;
  const double real_input2_multiplier = (double)in2->scale / twice_max_input_scale;
  const double real_output_multiplier = twice_max_input_scale / ((double)(1 << p->left_shift) * (double)out->scale);
  if (!add_quantize_smaller_than_one(real_input1_multiplier, &p->input1_multiplier, &p->input1_shift) ||
      !add_quantize_smaller_than_one(real_input2_multiplier, &p->input2_multiplier, &p->input2_shift) ||
      !add_quantize_smaller_than_one(real_output_multiplier, &p->output_multiplier, &p->output_shift))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, ADDSUB_MSG(op, "output scale too small for the input scales (TFLite rejects it too)"));
  p->input2_multiplier *= sign;
  ek_activation_range(act, out->scale, out->zero_point, qmin, qmax, &p->act_min, &p->act_max);
  if (int16) { /* element by element; byte strides */
    p->fast = 0;
    for (int32_t d = 0; d < p->plan.rank; ++d) {
      p->plan.a_stride[d] *= 2;
      p->plan.b_stride[d] *= 2;
      p->plan.o_stride[d] *= 2;
    }
    return EK_OK;
  }

  p->e1 = -p->input1_shift;
  p->e2 = -p->input2_shift;
  p->e_o = -p->output_shift;
  p->fast = p->e1 >= 0 && p->e1 <= 31 && p->e2 >= 0 && p->e2 <= 31 && p->e_o >= 1 && p->e_o <= 22;
  if (p->fast) {
    p->base1 = p->input1_offset * (1 << 21);
    p->base2 = p->input2_offset * (1 << 21);
    p->bias1 = p->e1 > 0 ? (int32_t)1 << (p->e1 - 1) : 0;
    p->bias2 = p->e2 > 0 ? (int32_t)1 << (p->e2 - 1) : 0;
    p->bias_o = ((int32_t)1 << (p->e_o - 1)) + p->output_offset * ((int32_t)1 << p->e_o);
  }
  p->clamp = p->act_min > -128 || p->act_max < 127;
  for (int32_t x = -128; x < 128 && p->fast; ++x) {
    p->table1[x + 128] = 2 * add_scale_input(x, p->base1, p->input1_multiplier, p->bias1, p->e1, p->e1 != 0);
    p->table2[x + 128] = 2 * add_scale_input(x, p->base2, p->input2_multiplier, p->bias2, p->e2, p->e2 != 0);
  }
  return EK_OK;
}

/* out from the sum of two tabulated (doubled) scaled inputs: rdbpot(SMMULR(2s, m_o), e_o) + zp_o with the bias and
   the sign folded into SMMLAR's addend ([2s < 0] may replace [SMMULR < 0]: they differ only where the product
   rounds to 0, and both then give zp_o); |2s| < 2^30. */
static inline int8_t add_table_output(int32_t s2, int32_t m, int32_t bias, int32_t e, int32_t lo, int32_t hi,
                                      const int clamp) {
  const int32_t v = add_ssat8(add_smmlar(s2, m, bias - (int32_t)((uint32_t)s2 >> 31)) >> e);
  return (int8_t)(clamp ? ek_clamp_i32(v, lo, hi) : v);
}

static inline void add_table_loop2(const add_params *p, const int8_t *a, const int8_t *b, int8_t *out, int32_t n,
                                   const int clamp) {
  const int32_t *t1 = p->table1 + 128, *t2 = p->table2 + 128;
  const int32_t m = p->output_multiplier, bias = p->bias_o, e = p->e_o, lo = p->act_min, hi = p->act_max;
  for (int32_t i = 0; i < n; ++i) out[i] = add_table_output(t1[a[i]] + t2[b[i]], m, bias, e, lo, hi, clamp);
}

static inline void add_table_loop1(const add_params *p, int32_t fixed, const int8_t *v, const int32_t *t, int8_t *out,
                                   int32_t n, const int clamp) {
  const int32_t m = p->output_multiplier, bias = p->bias_o, e = p->e_o, lo = p->act_min, hi = p->act_max;
  for (int32_t i = 0; i < n; ++i) out[i] = add_table_output(fixed + t[v[i]], m, bias, e, lo, hi, clamp);
}

static void add_fast_row(const add_params *p, const int8_t *a, int32_t a_step, const int8_t *b, int32_t b_step,
                         int8_t *out, int32_t n) {
  const int32_t *t1 = p->table1 + 128, *t2 = p->table2 + 128;
  if (a_step && b_step) {
    if (p->clamp) add_table_loop2(p, a, b, out, n, 1);
    else add_table_loop2(p, a, b, out, n, 0);
  } else if (b_step) {
    if (p->clamp) add_table_loop1(p, t1[a[0]], b, t2, out, n, 1);
    else add_table_loop1(p, t1[a[0]], b, t2, out, n, 0);
  } else if (a_step) {
    if (p->clamp) add_table_loop1(p, t2[b[0]], a, t1, out, n, 1);
    else add_table_loop1(p, t2[b[0]], a, t1, out, n, 0);
  } else {
    const int8_t v = add_table_output(t1[a[0]] + t2[b[0]], p->output_multiplier, p->bias_o, p->e_o, p->act_min,
                                      p->act_max, 1);
    for (int32_t i = 0; i < n; ++i) out[i] = v;
  }
}

static inline int8_t add_one(const add_params *p, int32_t x, int32_t y) {
  const int32_t shifted1 = (p->input1_offset + x) * (1 << 20); /* |offset + x| <= 255: no overflow */
  const int32_t shifted2 = (p->input2_offset + y) * (1 << 20);
  const int32_t scaled1 = ek_mbqm_smaller_than_one(shifted1, p->input1_multiplier, p->input1_shift);
  const int32_t scaled2 = ek_mbqm_smaller_than_one(shifted2, p->input2_multiplier, p->input2_shift);
  const int32_t raw = ek_mbqm_smaller_than_one(scaled1 + scaled2, p->output_multiplier, p->output_shift) + p->output_offset;
  return (int8_t)ek_clamp_i32(raw, p->act_min, p->act_max);
}

/* int16 general path: the same function with left_shift 15 (|offset + x| <= 65535: no overflow) and int16 limits. */
static void add_row16(const void *params, const int8_t *a, int32_t a_step, const int8_t *b, int32_t b_step, int8_t *out,
                      int32_t n) {
  const add_params *p = (const add_params *)params;
  int16_t *o = (int16_t *)(void *)out;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t x = *(const int16_t *)(const void *)(a + i * a_step), y = *(const int16_t *)(const void *)(b + i * b_step);
    const int32_t scaled1 = ek_mbqm_smaller_than_one((p->input1_offset + x) * (1 << 15), p->input1_multiplier, p->input1_shift);
    const int32_t scaled2 = ek_mbqm_smaller_than_one((p->input2_offset + y) * (1 << 15), p->input2_multiplier, p->input2_shift);
    const int32_t raw = ek_mbqm_smaller_than_one(scaled1 + scaled2, p->output_multiplier, p->output_shift) + p->output_offset;
    o[i] = (int16_t)ek_clamp_i32(raw, p->act_min, p->act_max);
  }
}

static void add_row(const void *params, const int8_t *a, int32_t a_step, const int8_t *b, int32_t b_step, int8_t *out,
                    int32_t n) {
  const add_params *p = (const add_params *)params;
  if (p->fast) {
    add_fast_row(p, a, a_step, b, b_step, out, n);
    return;
  }
  if (a_step && b_step) {
    for (int32_t i = 0; i < n; ++i) out[i] = add_one(p, a[i], b[i]);
  } else if (b_step) {
    const int32_t x = a[0];
    for (int32_t i = 0; i < n; ++i) out[i] = add_one(p, x, b[i]);
  } else if (a_step) {
    const int32_t y = b[0];
    for (int32_t i = 0; i < n; ++i) out[i] = add_one(p, a[i], y);
  } else {
    const int8_t v = add_one(p, a[0], b[0]);
    for (int32_t i = 0; i < n; ++i) out[i] = v;
  }
}

static ek_status add_eval(ek_context *ctx, ek_op *op) {
  const add_params *p = (const add_params *)op->user_data;
  if (ctx->row_end > 0) { /* a row range of a same-shape ADD (row-streamed group): elementwise over those rows */
    const ek_tensor *out = ek_output(ctx, op, 0);
    const int32_t row = out->dims[1] > 0 ? out->bytes / out->dims[1] : 0;
    const int32_t at = ctx->row_begin * row;
    add_row(p, (const int8_t *)ek_input(ctx, op, 0)->data + at, 1, (const int8_t *)ek_input(ctx, op, 1)->data + at, 1,
            (int8_t *)out->data + at, (ctx->row_end - ctx->row_begin) * row);
    return EK_OK;
  }
  ek_broadcast_run(&p->plan, p, (const int8_t *)ek_input(ctx, op, 0)->data, (const int8_t *)ek_input(ctx, op, 1)->data,
                   (int8_t *)ek_output(ctx, op, 0)->data, p->int16 ? add_row16 : add_row);
  return EK_OK;
}

/* Kernel access contract (firmware/runtime/README.md): elementwise in increasing order when nothing broadcasts. */
static int add_overlap(const ek_context *ctx, const ek_op *op, int input_index, int32_t *d_max) {
  const ek_tensor *a = ek_input((ek_context *)ctx, op, 0), *b = ek_input((ek_context *)ctx, op, 1);
  const ek_tensor *out = ek_output((ek_context *)ctx, op, 0);
  if (input_index > 1 || !a || !b || !out || !ek_same_shape(a, out) || !ek_same_shape(b, out)) return EK_OVERLAP_NONE;
  *d_max = 0;
  return EK_OVERLAP_UPTO;
}

/* edgekit-op: ADD | types: int8 | versions: 1-2 | fast path: Cortex-M4 DSP (SMMLAR) */
const ek_kernel ek_kernel_add = {EK_OP_ADD, "ADD", EK_HOST_FN(add_persistent_bytes), 0, EK_HOST_FN(add_prepare), add_eval, EK_HOST_FN(add_overlap)};
const ek_kernel ek_kernel_sub = {EK_OP_SUB, "SUB", EK_HOST_FN(add_persistent_bytes), 0, EK_HOST_FN(add_prepare), add_eval, EK_HOST_FN(add_overlap)};
