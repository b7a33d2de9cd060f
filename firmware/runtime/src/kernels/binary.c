/* edgekit-op: SQUARED_DIFFERENCE | types: int8 | versions: 1-2 | fast path: none */
/* edgekit-op: MAXIMUM | types: int8, int16 | versions: 1-4 | fast path: none */
/* edgekit-op: MINIMUM | types: int8, int16 | versions: 1-4 | fast path: none */
/* edgekit-op: EQUAL | types: int8 | versions: 1-4 | fast path: none */
/* edgekit-op: NOT_EQUAL | types: int8 | versions: 1-3 | fast path: none */
/* edgekit-op: LESS | types: int8, int16 | versions: 1-3 | fast path: none */
/* edgekit-op: LESS_EQUAL | types: int8, int16 | versions: 1-3 | fast path: none */
/* edgekit-op: GREATER | types: int8, int16 | versions: 1-3 | fast path: none */
/* edgekit-op: GREATER_EQUAL | types: int8, int16 | versions: 1-3 | fast path: none */
/* edgekit-op: DIV | types: int8 | versions: 1-3 | fast path: none */
/* edgekit-op: LOGICAL_AND | types: bool | versions: 1 | fast path: none */
/* edgekit-op: LOGICAL_OR | types: bool | versions: 1 | fast path: none */
/* Binary elementwise ops without their own file, broadcasting through ek_broadcast.h (as ADD/MUL).
 *
 * Bit-exact with LiteRT BUILTIN_REF:
 * - SQUARED_DIFFERENCE (tflite/kernels/squared_difference.cc, int8): left_shift 7, input multipliers
 *   QuantizeMultiplierSmallerThanOneExp(scale_i / (2 max scale)), output multiplier of (2 max scale)^2 /
 *   (2^14 out_scale); per element scaled_i = MBQMSmallerThanOneExp((x_i - zp_i) << 7), out = MBQMSmallerThanOneExp(
 *   (scaled_1 - scaled_2)^2) + zp_out clamped to int8 (no fused activation).
 * - MAXIMUM / MINIMUM (tflite/kernels/maximum_minimum.cc, reference MaximumMinimumBroadcastSlow): the raw int8
 *   values are compared, no requantization (the converter gives inputs and output one scale).
 * - EQUAL ... GREATER_EQUAL (tflite/kernels/comparisons.cc ComparisonQuantized, reference/comparisons.h
 *   ComparisonWithScaling): left_shift 8, multipliers QuantizeMultiplier(scale_i) (scale < 1: a right shift),
 *   the comparison of MBQMSmallerThanOneExp((x_i - zp_i) << 8) values. Output BOOL (one byte, 0 or 1).
 * - DIV (tflite/kernels/div.cc, int8: output multiplier QuantizeMultiplier((double)(s1 / (s2 * s_out)), the
 *   quotient in float first as there); reference_ops::DivElementwise / BroadcastDivSlowQuantized
 *   (kernels/internal/reference/div.h): v1 = x1 - zp1, v2 = x2 - zp2 (both negated when v2 < 0),
 *   q = MBQMGreaterThanOne(v1, GetReciprocal(v2, 31, &rs), CountLeadingSignBits(v1)), out = zp_out +
 *   MBQMSmallerThanOneExp(q, m_out, shift_out - rs - headroom), clamped to the fused activation. prepare tabulates
 *   GetReciprocal and rs for the 256 divisors. LiteRT refuses (at invoke) a divisor equal to its zero point (a
 *   real 0); the kernel has no error path in eval and gives the formula's value there (GetReciprocal(0)).
 * - LOGICAL_AND / LOGICAL_OR (tflite/kernels/logical.cc): bool inputs, bool output.
 * - int16 (16x8 models): MAXIMUM / MINIMUM compare raw int16 values; LESS, LESS_EQUAL, GREATER, GREATER_EQUAL
 *   compare raw int16 values too (comparisons.cc sends int16 to Comparison<int16_t>, no rescaling, whatever the
 *   scales). EQUAL / NOT_EQUAL on int16 are refused: LiteRT 2.3's BUILTIN_REF returns values that are not the raw
 *   comparison (e.g. 3 == 2 true), and TFLM has no int16 EQUAL, so there is no oracle. The broadcast plan's
 *   strides are then in bytes (ek_broadcast_prepare's element strides times 2), the row functions step in bytes.
 * A rescaled value depends on x_i alone, so prepare tabulates it for the 256 int8 values of each input
 * (2 KB of per-op data); an element is then two table loads and the op.
 * Same-shape operands: element i of every input is read before element i of the output is written, in
 * increasing i (the output may sit on a dying input: ek_stream elementwise contract, d_max = 0).
 */
#include "ek_broadcast.h"
#include "ek_fixedpoint.h"
#include "ek_gemmlowp.h"
#include "ek_kernels.h"

typedef struct binary_params {
  ek_broadcast_plan plan;
  int32_t output_multiplier, output_shift, output_offset; /* SQUARED_DIFFERENCE, DIV */
  int32_t input1_zero_point, act_min, act_max;            /* DIV */
  int32_t table1[256], table2[256];                       /* rescaled input values (index x + 128); DIV: table2 =
                                                             GetReciprocal(|x - zp2|) */
  int8_t recip_shift[256];                                /* DIV: GetReciprocal's shift; bit 6 set: x - zp2 < 0 */
  int32_t int16;                                          /* MAXIMUM/MINIMUM/comparisons on int16 (raw values) */
} binary_params;

static size_t binary_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(binary_params);
}

/* The op's name for messages: "<OP> tail" as one static string. */
#define BIN_MSG(op, tail)                                                                                             \
  ((op)->opcode == EK_OP_SQUARED_DIFFERENCE ? "SQUARED_DIFFERENCE " tail                                             \
   : (op)->opcode == EK_OP_MAXIMUM          ? "MAXIMUM " tail                                                        \
   : (op)->opcode == EK_OP_MINIMUM          ? "MINIMUM " tail                                                        \
   : (op)->opcode == EK_OP_LOGICAL_AND      ? "LOGICAL_AND " tail                                                    \
   : (op)->opcode == EK_OP_LOGICAL_OR       ? "LOGICAL_OR " tail                                                     \
   : (op)->opcode == EK_OP_DIV              ? "DIV " tail                                                            \
                                            : "comparison " tail)

static int binary_valid_scale(float s) { return s > 0.0f && s <= 3.4028234e38f; }

/* QuantizeMultiplierSmallerThanOneExp (TFLite CHECK-fails outside (0, 1)): 0 if refused. */
static int binary_smaller_than_one(double m, int32_t *multiplier, int32_t *shift) {
  if (!(m > 0.0 && m < 1.0)) return 0;
  int s = 0;
  ek_quantize_multiplier(m, multiplier, &s);
  if (s > 0) return 0;
  *shift = s;
  return 1;
}

/* table[x + 128] = MBQMSmallerThanOneExp((x - zp) << left_shift, multiplier, shift) for every int8 x. */
static void binary_tabulate(int32_t *table, int32_t zero_point, int left_shift, int32_t multiplier, int32_t shift) {
  for (int32_t x = -128; x < 128; ++x)
    table[x + 128] = ek_mbqm_smaller_than_one((x - zero_point) * (1 << left_shift), multiplier, shift);
}

static int binary_is_comparison(int32_t opcode) {
  return opcode == EK_OP_EQUAL || opcode == EK_OP_NOT_EQUAL || opcode == EK_OP_LESS || opcode == EK_OP_LESS_EQUAL ||
         opcode == EK_OP_GREATER || opcode == EK_OP_GREATER_EQUAL;
}

static ek_status binary_prepare_div(ek_context *ctx, ek_op *op, const ek_tensor *in1, const ek_tensor *in2,
                                    const ek_tensor *out, binary_params *p) {
  const int32_t act = op->params.activation;
  if (act != EK_ACT_NONE && act != EK_ACT_RELU && act != EK_ACT_RELU6 && act != EK_ACT_RELU_N1_TO_1)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "DIV fused activation must be NONE, RELU, RELU6 or RELU_N1_TO_1");
  const float real = in1->scale / (in2->scale * out->scale); /* float, as div.cc */
  int shift = 0;
  ek_quantize_multiplier((double)real, &p->output_multiplier, &shift);
  /* outside [2^-25, 2^22) the reference's RoundingDivideByPOT exponent leaves 0..62 (a negative one, or a 64-bit
     shift past its width: undefined there, no value to match) */
  if (!(real > 0.0f) || shift > 22 || shift < -24)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "DIV input scale / (divisor scale * output scale) must be in [2^-25, 2^22)");
  p->output_shift = shift;
  p->output_offset = out->zero_point;
  p->input1_zero_point = in1->zero_point;
  ek_activation_range(act, out->scale, out->zero_point, -128, 127, &p->act_min, &p->act_max);
  for (int32_t y = -128; y < 128; ++y) {
    const int32_t v = y - in2->zero_point;
    int rs = 0;
    p->table2[y + 128] = ek_gl_get_reciprocal(v < 0 ? -v : v, 31, &rs);
    p->recip_shift[y + 128] = (int8_t)((rs & 0x3f) | (v < 0 ? 0x40 : 0)); /* rs in [-1, 31] */
  }
  return EK_OK;
}

static ek_status binary_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 2 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, BIN_MSG(op, "needs 2 inputs and 1 output"));
  const ek_tensor *in1 = ek_input(ctx, op, 0), *in2 = ek_input(ctx, op, 1), *out = ek_output(ctx, op, 0);
  if (!in1 || !in2 || !out) return ek_fail(ctx, op, EK_ERR_MODEL, BIN_MSG(op, "input or output tensor missing"));
  const int32_t code = op->opcode;
  const int logical = code == EK_OP_LOGICAL_AND || code == EK_OP_LOGICAL_OR;
  const int compare = binary_is_comparison(code);
  if (logical) {
    if (in1->type != EK_BOOL || in2->type != EK_BOOL || out->type != EK_BOOL)
      return ek_fail(ctx, op, EK_ERR_TYPE, BIN_MSG(op, "needs bool inputs and a bool output"));
  } else if (compare) {
    if (!((in1->type == EK_INT8 && in2->type == EK_INT8) || (in1->type == EK_INT16 && in2->type == EK_INT16)))
      return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, BIN_MSG(op, "supports two int8 or two int16 inputs only"));
    if (out->type != EK_BOOL) return ek_fail(ctx, op, EK_ERR_TYPE, BIN_MSG(op, "output must be bool"));
    if (in1->type == EK_INT16 && (code == EK_OP_EQUAL || code == EK_OP_NOT_EQUAL))
      return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "EQUAL / NOT_EQUAL on int16 are not supported (no reference to match)");
  } else if ((code == EK_OP_MAXIMUM || code == EK_OP_MINIMUM) && in1->type == EK_INT16) {
    if (in2->type != EK_INT16 || out->type != EK_INT16)
      return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, BIN_MSG(op, "int16 needs int16 inputs and output"));
  } else if (in1->type != EK_INT8 || in2->type != EK_INT8 || out->type != EK_INT8) {
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, BIN_MSG(op, "supports int8 inputs and output only"));
  }
  const int32_t in_size = ek_type_size(in1->type), out_size = ek_type_size(out->type);
  if (in1->bytes != ek_num_elements(in1) * in_size || in2->bytes != ek_num_elements(in2) * in_size ||
      out->bytes != ek_num_elements(out) * out_size)
    return ek_fail(ctx, op, EK_ERR_MODEL, BIN_MSG(op, "tensor size does not match its shape"));
  binary_params *p = (binary_params *)op->user_data;
  p->int16 = in_size == 2;
  switch (ek_broadcast_prepare(in1, in2, out, &p->plan)) {
    case EK_BCAST_OK: break;
    case EK_BCAST_INCOMPATIBLE: return ek_fail(ctx, op, EK_ERR_SHAPE, BIN_MSG(op, "input shapes do not broadcast"));
    case EK_BCAST_RANK: return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, BIN_MSG(op, "supports at most 6 dimensions and 2^31 elements"));
    default: return ek_fail(ctx, op, EK_ERR_SHAPE, BIN_MSG(op, "output shape is not the broadcast of the input shapes"));
  }
  if (p->int16) { /* byte strides (element offsets < 2^31 elements; the tensors' bytes fit int32 too) */
    for (int32_t d = 0; d < p->plan.rank; ++d) {
      p->plan.a_stride[d] *= 2;
      p->plan.b_stride[d] *= 2;
      p->plan.o_stride[d] *= out_size;
    }
    return EK_OK; /* raw values */
  }
  if (logical || code == EK_OP_MAXIMUM || code == EK_OP_MINIMUM) return EK_OK; /* raw values */

  if (in1->num_scales != 1 || in2->num_scales != 1 || (!compare && out->num_scales != 1))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, BIN_MSG(op, "needs per-tensor quantized int8 tensors"));
  if (!binary_valid_scale(in1->scale) || !binary_valid_scale(in2->scale) || (!compare && !binary_valid_scale(out->scale)))
    return ek_fail(ctx, op, EK_ERR_MODEL, BIN_MSG(op, "tensor scale must be positive and finite"));
  if (in1->zero_point < -128 || in1->zero_point > 127 || in2->zero_point < -128 || in2->zero_point > 127 ||
      (!compare && (out->zero_point < -128 || out->zero_point > 127)))
    return ek_fail(ctx, op, EK_ERR_MODEL, BIN_MSG(op, "int8 zero point outside [-128, 127]"));
  int32_t m1, s1, m2, s2;
  if (compare) { /* comparisons.cc: QuantizeMultiplier(scale); a scale >= 1 gives a left shift the reference's
                    RoundingDivideByPOT cannot take (undefined there), so it is refused */
    if (!binary_smaller_than_one((double)in1->scale, &m1, &s1) || !binary_smaller_than_one((double)in2->scale, &m2, &s2))
      return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, BIN_MSG(op, "input scale must be below 1 (TFLite's int8 comparison is undefined above)"));
    binary_tabulate(p->table1, in1->zero_point, 8, m1, s1);
    binary_tabulate(p->table2, in2->zero_point, 8, m2, s2);
    return EK_OK;
  }
  if (code == EK_OP_DIV) return binary_prepare_div(ctx, op, in1, in2, out, p);
  /* SQUARED_DIFFERENCE, as squared_difference.cc: float max, double arithmetic */
  const double twice_max = 2.0 * (double)(in1->scale > in2->scale ? in1->scale : in2->scale);
  if (!binary_smaller_than_one((double)in1->scale / twice_max, &m1, &s1) ||
      !binary_smaller_than_one((double)in2->scale / twice_max, &m2, &s2) ||
      !binary_smaller_than_one(twice_max * twice_max / ((double)(1 << 14) * (double)out->scale), &p->output_multiplier,
                               &p->output_shift))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, BIN_MSG(op, "output scale too small for the input scales (TFLite rejects it too)"));
  p->output_offset = out->zero_point;
  binary_tabulate(p->table1, in1->zero_point, 7, m1, s1);
  binary_tabulate(p->table2, in2->zero_point, 7, m2, s2);
  return EK_OK;
}

/* One loop per op over a row: element i of a is a[i * as] (as = 0 or 1), likewise b. */
#define BIN_ROW(name, type_out, expr)                                                                                 \
  static void name(const void *params, const int8_t *a, int32_t as, const int8_t *b, int32_t bs, int8_t *out,         \
                   int32_t n) {                                                                                       \
    const binary_params *p = (const binary_params *)params;                                                           \
    const int32_t *t1 = p->table1 + 128, *t2 = p->table2 + 128;                                                       \
    (void)p;                                                                                                          \
    (void)t1;                                                                                                         \
    (void)t2;                                                                                                         \
    for (int32_t i = 0; i < n; ++i) {                                                                                 \
      const int32_t x = a[i * as], y = b[i * bs];                                                                     \
      out[i] = (type_out)(expr);                                                                                      \
    }                                                                                                                 \
  }

/* CountLeadingSignBits of an int32 (31 for 0 and -1). */
static inline int binary_clrsb(int32_t v) { return ek_clz32((uint32_t)(v < 0 ? ~v : v)) - 1; }

/* gemmlowp RoundingDivideByPOT as LiteRT's x86-64 build evaluates it for every exponent DIV can produce (0..62):
   mask = (1ll << e) - 1 truncated to int32 (-1 from e = 32 on) and `x >> e` with the shift count taken mod 32
   (the reference's int32 shift by >= 32 is undefined in C++; x86 masks the count). */
static inline int32_t binary_rdbpot_wide(int32_t x, int e) {
  if (e <= 31) return ek_rdbpot(x, e);
  const int32_t threshold = -1 + (x < 0 ? 1 : 0); /* (mask >> 1) + (x < 0) with mask = -1 */
  return (x >> (e & 31)) + (x > threshold ? 1 : 0);  /* remainder = x & -1 = x */
}

static inline int8_t binary_div(const binary_params *p, int32_t x, int32_t y) {
  const int32_t flags = p->recip_shift[y + 128];
  const int32_t rs = (flags & 0x20) ? (flags & 0x3f) - 64 : (flags & 0x3f); /* sign-extend the 6-bit shift */
  int32_t v1 = x - p->input1_zero_point;
  if (flags & 0x40) v1 = -v1;
  const int headroom = binary_clrsb(v1);
  const int32_t q = ek_srdhm(ek_shl_wrap(v1, headroom), p->table2[y + 128]);
  const int32_t total_shift = p->output_shift - rs - headroom;
  /* MBQMSmallerThanOneExp(q, m, total_shift), total_shift in [-62, 0] (prepare bounds the output shift) */
  const int32_t v = p->output_offset + binary_rdbpot_wide(ek_srdhm(q, p->output_multiplier), -total_shift);
  return (int8_t)ek_clamp_i32(v, p->act_min, p->act_max);
}

static inline int8_t binary_sqdiff(const binary_params *p, int32_t d) {
  /* |d| <= 2 * 255 * 2^7 * 0.5: d * d < 2^31 (the reference's bound) */
  const int32_t v = ek_mbqm_smaller_than_one(d * d, p->output_multiplier, p->output_shift) + p->output_offset;
  return (int8_t)ek_clamp_i32(v, -128, 127);
}

BIN_ROW(row_sqdiff, int8_t, binary_sqdiff(p, t1[x] - t2[y]))
BIN_ROW(row_div, int8_t, binary_div(p, x, y))
BIN_ROW(row_maximum, int8_t, x > y ? x : y)
BIN_ROW(row_minimum, int8_t, x < y ? x : y)
BIN_ROW(row_equal, uint8_t, t1[x] == t2[y])
BIN_ROW(row_not_equal, uint8_t, t1[x] != t2[y])
BIN_ROW(row_less, uint8_t, t1[x] < t2[y])
BIN_ROW(row_less_equal, uint8_t, t1[x] <= t2[y])
BIN_ROW(row_greater, uint8_t, t1[x] > t2[y])
BIN_ROW(row_greater_equal, uint8_t, t1[x] >= t2[y])
BIN_ROW(row_logical_and, uint8_t, x != 0 && y != 0)
BIN_ROW(row_logical_or, uint8_t, x != 0 || y != 0)

/* int16 rows: a and b step by as / bs bytes (0 or 2); `out_t` elements written contiguously. */
#define BIN_ROW16(name, out_t, expr)                                                                                  \
  static void name(const void *params, const int8_t *a, int32_t as, const int8_t *b, int32_t bs, int8_t *out,         \
                   int32_t n) {                                                                                       \
    (void)params;                                                                                                     \
    out_t *o = (out_t *)(void *)out;                                                                                  \
    for (int32_t i = 0; i < n; ++i) {                                                                                 \
      const int32_t x = *(const int16_t *)(const void *)(a + i * as), y = *(const int16_t *)(const void *)(b + i * bs); \
      o[i] = (out_t)(expr);                                                                                           \
    }                                                                                                                 \
  }

BIN_ROW16(row16_maximum, int16_t, x > y ? x : y)
BIN_ROW16(row16_minimum, int16_t, x < y ? x : y)
BIN_ROW16(row16_less, uint8_t, x < y)
BIN_ROW16(row16_less_equal, uint8_t, x <= y)
BIN_ROW16(row16_greater, uint8_t, x > y)
BIN_ROW16(row16_greater_equal, uint8_t, x >= y)

static ek_broadcast_row_fn binary_row16(int32_t opcode) {
  switch (opcode) {
    case EK_OP_MAXIMUM: return row16_maximum;
    case EK_OP_MINIMUM: return row16_minimum;
    case EK_OP_LESS: return row16_less;
    case EK_OP_LESS_EQUAL: return row16_less_equal;
    case EK_OP_GREATER: return row16_greater;
    default: return row16_greater_equal;
  }
}

static ek_status binary_eval(ek_context *ctx, ek_op *op) {
  ek_broadcast_row_fn row;
  switch (op->opcode) {
    case EK_OP_SQUARED_DIFFERENCE: row = row_sqdiff; break;
    case EK_OP_DIV: row = row_div; break;
    case EK_OP_MAXIMUM: row = row_maximum; break;
    case EK_OP_MINIMUM: row = row_minimum; break;
    case EK_OP_EQUAL: row = row_equal; break;
    case EK_OP_NOT_EQUAL: row = row_not_equal; break;
    case EK_OP_LESS: row = row_less; break;
    case EK_OP_LESS_EQUAL: row = row_less_equal; break;
    case EK_OP_GREATER: row = row_greater; break;
    case EK_OP_GREATER_EQUAL: row = row_greater_equal; break;
    case EK_OP_LOGICAL_AND: row = row_logical_and; break;
    default: row = row_logical_or; break;
  }
  const binary_params *p = (const binary_params *)op->user_data;
  if (p->int16) row = binary_row16(op->opcode);
  ek_broadcast_run(&p->plan, p, (const int8_t *)ek_input(ctx, op, 0)->data, (const int8_t *)ek_input(ctx, op, 1)->data,
                   (int8_t *)ek_output(ctx, op, 0)->data, row);
  return EK_OK;
}

/* Kernel access contract (firmware/runtime/README.md): elementwise in increasing order when nothing broadcasts.
   An int16 comparison writes output byte i after reading input element i (bytes 2i, 2i + 1): byte i belongs to
   input element i / 2 <= i, already read, so d_max = 0 holds there too. */
static int binary_overlap(const ek_context *ctx, const ek_op *op, int input_index, int32_t *d_max) {
  const ek_tensor *a = ek_input((ek_context *)ctx, op, 0), *b = ek_input((ek_context *)ctx, op, 1);
  const ek_tensor *out = ek_output((ek_context *)ctx, op, 0);
  if (input_index > 1 || !a || !b || !out || !ek_same_shape(a, out) || !ek_same_shape(b, out)) return EK_OVERLAP_NONE;
  *d_max = 0;
  return EK_OVERLAP_UPTO;
}

/* The kernel table's function members, shared by every op of this file. */
#define BIN_FNS EK_HOST_FN(binary_persistent_bytes), 0, EK_HOST_FN(binary_prepare), binary_eval, EK_HOST_FN(binary_overlap)

const ek_kernel ek_kernel_squared_difference = {EK_OP_SQUARED_DIFFERENCE, "SQUARED_DIFFERENCE", BIN_FNS};
const ek_kernel ek_kernel_div = {EK_OP_DIV, "DIV", BIN_FNS};
const ek_kernel ek_kernel_maximum = {EK_OP_MAXIMUM, "MAXIMUM", BIN_FNS};
const ek_kernel ek_kernel_minimum = {EK_OP_MINIMUM, "MINIMUM", BIN_FNS};
const ek_kernel ek_kernel_equal = {EK_OP_EQUAL, "EQUAL", BIN_FNS};
const ek_kernel ek_kernel_not_equal = {EK_OP_NOT_EQUAL, "NOT_EQUAL", BIN_FNS};
const ek_kernel ek_kernel_less = {EK_OP_LESS, "LESS", BIN_FNS};
const ek_kernel ek_kernel_less_equal = {EK_OP_LESS_EQUAL, "LESS_EQUAL", BIN_FNS};
const ek_kernel ek_kernel_greater = {EK_OP_GREATER, "GREATER", BIN_FNS};
const ek_kernel ek_kernel_greater_equal = {EK_OP_GREATER_EQUAL, "GREATER_EQUAL", BIN_FNS};
const ek_kernel ek_kernel_logical_and = {EK_OP_LOGICAL_AND, "LOGICAL_AND", BIN_FNS};
const ek_kernel ek_kernel_logical_or = {EK_OP_LOGICAL_OR, "LOGICAL_OR", BIN_FNS};
