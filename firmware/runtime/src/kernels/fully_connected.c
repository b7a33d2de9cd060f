/* FULLY_CONNECTED, int8 input/output, int8 weights [units, depth] with one scale (any zero point) or one scale
 * per unit (zero points 0), optional int32 bias, input of any rank (batches = elements / depth),
 * keep_num_dims.
 *
 * Bit-exact with LiteRT BUILTIN_REF, whose int8 reference FullyConnected(PerChannel) rescales the int32
 * accumulator with round(double(acc) * s_in * s_w / s_out), not with the fixed-point multiplier that
 * TFLite Micro uses (see ek_dround_mul in ek_conv_common.h: that is why TFLM and BUILTIN_REF disagree by
 * up to 3 LSB on the MLPerf AD autoencoder; we match BUILTIN_REF). ek_dround_fast gives the same result in
 * a few instructions for almost every accumulator.
 *
 * Paths (chosen from the model only, so host and device plan the same sizes):
 *  - packed (constant weights with zero points 0, optional constant bias): prepare folds the input offset
 *    into the bias (fold = bias + input_offset * sum of the unit's weights: exact in wrap-around int32) and
 *    re-lays the weights, once, as int16 pairs in SMLAD order, four units interleaved per 4 inputs
 *    (per-op data: 2 bytes per weight; the prepared model keeps it in flash). The Cortex-M4 loop then reads
 *    the raw int8 input straight from the arena, one word per 4 inputs (two SXTB16), and per 4 units one LDM
 *    of 4 weight words (2 units) twice and 8 SMLAD: 13 instructions per 16 multiply-accumulates, no scratch.
 *    Helium (M55) dots the raw int8 input with the original int8 weights (VMLADAVA.S8, 16 MACs each) from the
 *    same fold. The last depth % 4 inputs come from the original weights.
 *  - int8 weights (FC_PATH_INT8: EK_OPTIMIZE_INT8_WEIGHTS, i.e. --weights int8, and every Helium plan): the same folds
 *    and scales, no copy of the weights: Helium as above; Cortex-M4 SXTB16s the weights on the fly (four units per
 *    input word, 23 instructions per 16 multiply-accumulates; whole per-tensor quads in ek_fc_quad_s8_dsp), compiled
 *    where a model needs it (EK_NEED_FC_INT8; without it such an op runs on the reference loop, exactly).
 *  - reference: TFLite's loop (non-constant weights or bias, a non-zero weight zero point, huge layers).
 *  - int16 activations (16x8, below fc16_*): int16 input/output (zero points 0), int8 weights (zero point 0), int32
 *    or int64 bias; the loop of reference_integer_ops::FullyConnected(PerChannel) with an int64 accumulator
 *    (tensorflow/lite/kernels/internal/reference/integer_ops/fully_connected.h). LiteRT BUILTIN_REF rescales it with
 *    round(double(acc) * s_in * s_w / s_out), as on the int8 path (checked against it: TFLM's
 *    MultiplyByQuantizedMultiplier(int64), common.cc, differed by 1 LSB), one scale per unit when per-channel.
 *    Compiled only where a model may need it (FC_INT16 below): a firmware built for a model without a 16x8
 *    FULLY_CONNECTED (-DEK_MODEL_PATHS without -DEK_NEED_FC_INT16, written by the generator) leaves it and its
 *    double arithmetic out of flash, and rejects an int16 FULLY_CONNECTED with EK_ERR_UNSUPPORTED.
 */
/* edgekit-op: FULLY_CONNECTED | types: int8, int16 | versions: 1-12 | fast path: Cortex-M4 DSP (int8), Helium (M55, int8) */
#include <math.h>

#include "ek_conv_common.h"
#include "ek_stream.h"

enum { FC_PATH_REFERENCE = 0, FC_PATH_PACKED = 1, FC_PATH_INT16 = 2, FC_PATH_INT8 = 3 };

/* The 16x8 path: in every build except a model's own device build that does not need it (ek_kernels.h, EK_MODEL_PATHS). */
#if !defined(EK_MODEL_PATHS) || defined(EK_NEED_FC_INT16)
#define FC_INT16 1
#else
#define FC_INT16 0
#endif
#define FC_INT16_MISSING "FULLY_CONNECTED int16 (16x8) not built in (EK_NEED_FC_INT16): regenerate for this model"

/* The int8-weight path without Helium (SXTB16 of the weights on the fly): where a model's own device build needs it
   (EK_NEED_FC_INT8: a prepared model whose weights stay int8); Helium builds always have theirs. */
#if !defined(EK_MODEL_PATHS) || defined(EK_NEED_FC_INT8)
#define FC_INT8 1
#else
#define FC_INT8 0
#endif
/* Builds that run FC_PATH_INT8 as planned. One without it (a model's device build without EK_NEED_FC_INT8 given a blob
   planned for int8 weights or for Helium) runs such an op on the reference loop (its data describes that loop too:
   weight zero point 0, the scales; exact, slower) and reads the bias there, so it never skips it: ek_prepared_init
   refuses the blob if the bias was left out (EKP_UNREAD). */
#define FC_RUNS_INT8 (EK_CONV_MVE || FC_INT8)

/* Largest weight tensor the packed path re-lays (its int16 copy is twice this). */
#define FC_PACK_MAX_WEIGHTS (1 << 24)

typedef struct fc_data {
  int32_t act_min, act_max;
  int32_t input_offset, weight_offset, output_offset;
  int32_t units, depth, batches;
  int32_t path;
  int32_t num_scales; /* ek_dscale entries: 1 or units */
} fc_data;
/* followed (8-byte aligned) by ek_dscale[num_scales]; on the packed path then ek_dfast[num_scales] (the
   ek_dround_fast parameters of each scale), the folds (int32 bias + input_offset * sum of the unit's weights, per
   unit rounded up to 4, 0 for padding units) and the packed weights: per quad of units, per 4 inputs, 8 words
   (unit j: (w0,w2), (w1,w3) as int16 pairs). */

#define FC_ALIGN8(n) (((size_t)(n) + 7u) & ~(size_t)7u)

static int32_t fc_num_scales(const ek_context *ctx, const ek_op *op) {
  if (op->num_inputs < 2 || op->inputs[1] < 0 || op->inputs[1] >= ctx->num_tensors) return 0;
  const int32_t s = ctx->tensors[op->inputs[1]].num_scales;
  return s > 0 ? s : 0;
}

/* Units and depth when the packed path applies (constant int8 2-D weights, zero points 0, a bounded size,
   a constant bias or none), else 0. Decided from the model only. */
static int fc_packed_shape(const ek_context *ctx, const ek_op *op, int32_t *units, int32_t *depth) {
  if (op->num_inputs < 2 || op->inputs[1] < 0 || op->inputs[1] >= ctx->num_tensors) return 0;
  const ek_tensor *f = &ctx->tensors[op->inputs[1]];
  if (f->type != EK_INT8 || f->ndim != 2 || !f->is_constant || f->dims[0] < 1 || f->dims[1] < 1 ||
      (int64_t)f->dims[0] * f->dims[1] > FC_PACK_MAX_WEIGHTS || !ek_conv_zero_points_zero(f))
    return 0;
  if (op->num_inputs > 2 && op->inputs[2] >= 0) {
    if (op->inputs[2] >= ctx->num_tensors || !ctx->tensors[op->inputs[2]].is_constant) return 0;
  }
  *units = f->dims[0];
  *depth = f->dims[1];
  return 1;
}

/* Helium builds (and prepared models planned for them) dot the original int8 weights, and so does every target when
   the weights must stay int8 (EK_OPTIMIZE_INT8_WEIGHTS, or this op's entry of a per-op choice): no int16 copy
   (path FC_PATH_INT8). */
static int fc_keeps_packed_weights(const ek_context *ctx, const ek_op *op) {
  return !EK_CONV_MVE && !ctx->plan_mve && !ek_int8_weights(ctx, op);
}

static size_t fc_packed_bytes(int32_t units, int32_t depth, int32_t num_scales, int with_weights) {
  const size_t quads = ((size_t)units + 3u) / 4u;
  return (size_t)num_scales * sizeof(ek_dfast) + quads * 16u + (with_weights ? quads * (size_t)(depth / 4) * 32u : 0u);
}

static ek_dscale *fc_scales(void *user_data) { return (ek_dscale *)((uint8_t *)user_data + FC_ALIGN8(sizeof(fc_data))); }

static ek_dfast *fc_fast(void *user_data, int32_t num_scales) {
  return (ek_dfast *)(void *)((uint8_t *)fc_scales(user_data) + (size_t)num_scales * sizeof(ek_dscale));
}

static int fc_is_int16(const ek_context *ctx, const ek_op *op);
static size_t fc16_persistent_bytes(const ek_context *ctx, const ek_op *op);
static ek_status fc16_prepare(ek_context *ctx, ek_op *op);
#if FC_INT16
static void fc16_eval(ek_context *ctx, ek_op *op);
#endif

static size_t fc_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  if (fc_is_int16(ctx, op)) return fc16_persistent_bytes(ctx, op);
  int32_t units = 0, depth = 0;
  const size_t base = FC_ALIGN8(sizeof(fc_data)) + (size_t)fc_num_scales(ctx, op) * sizeof(ek_dscale);
  return fc_packed_shape(ctx, op, &units, &depth)
             ? base + fc_packed_bytes(units, depth, fc_num_scales(ctx, op), fc_keeps_packed_weights(ctx, op))
             : base;
}

static ek_status fc_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs < 2 || op->num_inputs > 3 || op->num_outputs != 1)
    return ek_fail(ctx, op, EK_ERR_MODEL, "FULLY_CONNECTED needs 2 or 3 inputs (input, weights, optional bias) and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0), *f = ek_input(ctx, op, 1), *bias = ek_input(ctx, op, 2);
  const ek_tensor *out = ek_output(ctx, op, 0);
  if (!in || !f || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "FULLY_CONNECTED input, weights or output missing");
  if (in->type == EK_INT16) return fc16_prepare(ctx, op);
  if (in->type != EK_INT8 || out->type != EK_INT8 || f->type != EK_INT8)
    return ek_fail(ctx, op, EK_ERR_TYPE, "FULLY_CONNECTED supports int8 input, weights and output only");
  if (!ek_conv_is_q8_activation(in) || !ek_conv_is_q8_activation(out))
    return ek_fail(ctx, op, EK_ERR_MODEL,
                   "FULLY_CONNECTED input/output need a finite positive scale, an int8 zero point and matching bytes");
  if (in->ndim < 1) return ek_fail(ctx, op, EK_ERR_SHAPE, "FULLY_CONNECTED input must have at least one dimension");
  if (f->ndim != 2 || !f->data || ek_conv_elements(f) < 1 || f->bytes != ek_conv_elements(f))
    return ek_fail(ctx, op, EK_ERR_SHAPE, "FULLY_CONNECTED weights must be a 2-D [units, depth] tensor with data");
  const ek_op_params *p = &op->params;
  if (p->weights_format != 0)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "FULLY_CONNECTED shuffled weights format is not supported");
  if (!ek_conv_activation_ok(p->activation))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED,
                   "FULLY_CONNECTED fused activation must be NONE, RELU, RELU_N1_TO_1 or RELU6");
  const int32_t units = f->dims[0], depth = f->dims[1];
  const int32_t in_elems = ek_conv_elements(in), out_elems = ek_conv_elements(out);
  if (in_elems < depth) return ek_fail(ctx, op, EK_ERR_SHAPE, "FULLY_CONNECTED input has fewer elements than the weights' depth");
  const int32_t batches = in_elems / depth;
  if (out_elems != (int64_t)batches * units || out->ndim < 1 || out->dims[out->ndim - 1] != units)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "FULLY_CONNECTED output must hold batches x units (last dimension = units)");
  if (p->keep_num_dims) {
    int same = in->ndim == out->ndim && in->dims[in->ndim - 1] == depth;
    for (int32_t i = 0; same && i + 1 < in->ndim; ++i) same = in->dims[i] == out->dims[i];
    if (!same)
      return ek_fail(ctx, op, EK_ERR_SHAPE,
                     "FULLY_CONNECTED keep_num_dims needs input [..., depth] and output [..., units]");
  }
  const int per_channel = f->num_scales > 1;
  if (!ek_conv_scales_ok(f) || (per_channel && (f->num_scales != units || !ek_conv_channel_axis_ok(f, units))))
    return ek_fail(ctx, op, EK_ERR_MODEL, "FULLY_CONNECTED weights need one scale or one per unit, finite and >= 0");
  if (per_channel && !ek_conv_zero_points_zero(f))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "FULLY_CONNECTED per-channel weight zero points must be 0");
  if (f->zero_point < -128 || f->zero_point > 127)
    return ek_fail(ctx, op, EK_ERR_MODEL, "FULLY_CONNECTED weight zero point outside int8");
  if (bias) {
    if (bias->type != EK_INT32) return ek_fail(ctx, op, EK_ERR_TYPE, "FULLY_CONNECTED bias must be int32");
    if (!bias->data || ek_conv_elements(bias) != units || bias->bytes != 4 * units || ((uintptr_t)bias->data & 3u))
      return ek_fail(ctx, op, EK_ERR_SHAPE, "FULLY_CONNECTED bias must hold one aligned int32 per unit");
    if (!per_channel) { /* GetQuantizedConvolutionMultipler's bias scale check (LiteRT refuses these models) */
      const double product = (double)in->scale * (double)f->scale;
      const double diff = product > (double)bias->scale ? product - (double)bias->scale : (double)bias->scale - product;
      if (!(diff / (double)out->scale <= 0.02))
        return ek_fail(ctx, op, EK_ERR_MODEL, "FULLY_CONNECTED bias scale differs from input scale x weight scale");
    }
  }
  fc_data *d = (fc_data *)op->user_data;
  ek_dscale *ds = fc_scales(op->user_data);
  if (!d || f->num_scales != fc_num_scales(ctx, op))
    return ek_fail(ctx, op, EK_ERR_INTERNAL, "FULLY_CONNECTED persistent data missing");
  d->input_offset = -in->zero_point;
  d->weight_offset = per_channel ? 0 : -f->zero_point;
  d->output_offset = out->zero_point;
  d->units = units;
  d->depth = depth;
  d->batches = batches;
  d->num_scales = f->num_scales;
  if (!ek_conv_activation_range(p->activation, out, &d->act_min, &d->act_max))
    return ek_fail(ctx, op, EK_ERR_MODEL, "FULLY_CONNECTED activation range does not fit the output scale");
  for (int32_t i = 0; i < f->num_scales; ++i) {
    const double eff = (double)in->scale * (double)ek_conv_scale_at(f, i) / (double)out->scale;
    ek_dscale_init(&ds[i], eff);
  }
  int32_t pu = 0, pd = 0;
  d->path = FC_PATH_REFERENCE;
  if (fc_packed_shape(ctx, op, &pu, &pd) && pu == units && pd == depth && (!bias || bias->is_constant)) {
    d->path = fc_keeps_packed_weights(ctx, op) ? FC_PATH_PACKED : FC_PATH_INT8;
    ek_dfast *fast = fc_fast(op->user_data, d->num_scales);
    const int32_t quads = (units + 3) / 4, chunks = depth / 4;
    int32_t *folds = (int32_t *)(void *)(fast + d->num_scales);
    uint32_t *packed = (uint32_t *)(void *)(folds + 4 * quads);
    const int8_t *wt = (const int8_t *)f->data;
    const int32_t *b = bias ? (const int32_t *)bias->data : (const int32_t *)0;
    int64_t fold_bound = 0;
    for (int32_t u = 0; u < 4 * quads; ++u) {
      uint32_t sum = 0;
      for (int32_t k = 0; u < units && k < depth; ++k) sum += (uint32_t)(int32_t)wt[(int64_t)u * depth + k];
      folds[u] = u < units ? (int32_t)(sum * (uint32_t)d->input_offset + (b ? (uint32_t)b[u] : 0u)) : 0;
      const int64_t m = folds[u] < 0 ? -(int64_t)folds[u] : (int64_t)folds[u];
      if (m > fold_bound) fold_bound = m;
    }
    /* the accumulator starts at the fold and adds |w * x| <= 128 * 128 per input; beyond int32 it may wrap
       (as TFLite's does), and then no pre-shift is safe: a bound of -1 disables it */
    const int64_t acc_bound = fold_bound + (int64_t)depth * 16384;
    for (int32_t i = 0; i < d->num_scales; ++i)
      ek_dfast_init(&fast[i], &ds[i], acc_bound < ((int64_t)1 << 31) ? acc_bound : -1);
    for (int32_t q = 0; q < quads && fc_keeps_packed_weights(ctx, op); ++q) {
      for (int32_t g = 0; g < chunks; ++g) {
        uint32_t *dst = packed + ((int64_t)q * chunks + g) * 8;
        for (int32_t j = 0; j < 4; ++j) {
          const int32_t u = 4 * q + j;
          dst[2 * j] = dst[2 * j + 1] = 0u; /* padding units */
          if (u >= units) continue;
          const int8_t *w = wt + (int64_t)u * depth + 4 * g;
          dst[2 * j] = (uint32_t)(uint16_t)(int16_t)w[0] | (uint32_t)(uint16_t)(int16_t)w[2] << 16;
          dst[2 * j + 1] = (uint32_t)(uint16_t)(int16_t)w[1] | (uint32_t)(uint16_t)(int16_t)w[3] << 16;
        }
      }
    }
  }
  return EK_OK;
}

static inline int8_t fc_output(const fc_data *d, const ek_dscale *ds, int32_t unit, int32_t acc) {
  const int32_t v = ek_dround_mul(acc, &ds[d->num_scales > 1 ? unit : 0]);
  return ek_conv_clamp8(ek_wrap_add(v, d->output_offset), d->act_min, d->act_max);
}

static void fc_reference(const fc_data *d, const ek_dscale *ds, const int8_t *x, const int8_t *wt, const int32_t *bias,
                         int8_t *y) {
  for (int32_t b = 0; b < d->batches; ++b) {
    const int8_t *xr = x + (int64_t)b * d->depth;
    for (int32_t u = 0; u < d->units; ++u) {
      const int8_t *wr = wt + (int64_t)u * d->depth;
      uint32_t acc = 0;
      for (int32_t k = 0; k < d->depth; ++k)
        acc += (uint32_t)((wr[k] + d->weight_offset) * (xr[k] + d->input_offset));
      if (bias) acc += (uint32_t)bias[u];
      y[(int64_t)b * d->units + u] = fc_output(d, ds, u, (int32_t)acc);
    }
  }
}

#if !EK_CONV_MVE
/* acc[j] += the packed quad's weights . the raw int8 input, over `chunks` groups of 4 inputs. */
#if EK_CONV_DSP && defined(__OPTIMIZE__) && defined(__thumb2__) && !defined(EK_CONV_NO_ASM)
#define FC_QUAD_STEP                               \
  "ldr r0, [%[px]], #4\n\t"                        \
  "sxtb16 r1, r0, ror #8\n\t"                      \
  "sxtb16 r0, r0\n\t"                              \
  "ldmia %[pw]!, {r2, r3, r4, r5}\n\t"             \
  "smlad %[a0], r0, r2, %[a0]\n\t"                 \
  "smlad %[a0], r1, r3, %[a0]\n\t"                 \
  "smlad %[a1], r0, r4, %[a1]\n\t"                 \
  "smlad %[a1], r1, r5, %[a1]\n\t"                 \
  "ldmia %[pw]!, {r2, r3, r4, r5}\n\t"             \
  "smlad %[a2], r0, r2, %[a2]\n\t"                 \
  "smlad %[a2], r1, r3, %[a2]\n\t"                 \
  "smlad %[a3], r0, r4, %[a3]\n\t"                 \
  "smlad %[a3], r1, r5, %[a3]\n\t"
static inline void fc_dot_quad(const int8_t *x, const uint32_t *w, int32_t chunks, int32_t *acc) {
  if (chunks <= 0) return;
  register int32_t a0 __asm__("r6") = acc[0], a1 __asm__("r8") = acc[1], a2 __asm__("r9") = acc[2],
                                      a3 __asm__("r10") = acc[3];
  register const int8_t *px __asm__("r11") = x;
  register const uint32_t *pw __asm__("r12") = w;
  register int32_t n __asm__("lr") = chunks & 3; /* single chunks first, then groups of four */
  __asm__ volatile(
      "cmp %[n], #0\n\t"
      "beq 2f\n\t"
      "1:\n\t"
      FC_QUAD_STEP
      "subs %[n], %[n], #1\n\t"
      "bne 1b\n\t"
      "2:\n\t"
      "lsrs %[n], %[chunks], #2\n\t"
      "beq 3f\n\t"
      "4:\n\t"
      FC_QUAD_STEP
      FC_QUAD_STEP
      FC_QUAD_STEP
      FC_QUAD_STEP
      "subs %[n], %[n], #1\n\t"
      "bne 4b\n\t"
      "3:\n\t"
      : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [px] "+r"(px), [pw] "+r"(pw), [n] "+r"(n)
      : [chunks] "r"(chunks)
      : "r0", "r1", "r2", "r3", "r4", "r5", "cc", "memory");
  acc[0] = a0;
  acc[1] = a1;
  acc[2] = a2;
  acc[3] = a3;
}
#undef FC_QUAD_STEP

/* One full quad of a per-tensor-scale layer, all in registers: the dot products as in fc_dot_quad, then per
 * output ek_dround_fast's fast path (SMULL, ADD, the edge test, ASR), + zero point, SSAT (and the activation
 * clamp when it is narrower than int8), STRB. Returns a bit per output whose value the edge test left undecided;
 * the raw accumulators are in acc[] for the caller to finish those with ek_dround_mul. */
#define FC_QUAD_ASM 1
typedef struct fc_quad_args { /* offsets used by the assembly below */
  const int8_t *x;            /*  0: input row */
  const void *w;              /*  4: packed weights (FC_PATH_INT8: int8 row 0) of this quad (advanced to the next) */
  int32_t chunks;             /*  8 */
  const int32_t *folds;       /* 12: folds of this quad (advanced to the next quad) */
  int8_t *y;                  /* 16: output of the quad's first unit */
  int32_t clamp;              /* 20: nonzero when [lo, hi] is narrower than [-128, 127] */
  int32_t m31, half;          /* 24, 28: ek_dfast */
  uint32_t mask;              /* 32 */
  int32_t sh;                 /* 36 */
  int32_t zp, lo, hi;         /* 40, 44, 48 */
  int32_t acc[4];             /* 52: raw accumulators (out) */
  int32_t pre;                /* 68: ek_dfast pre-shift */
  int32_t depth;              /* 72: FC_PATH_INT8: the weight rows' stride */
} fc_quad_args;
typedef char fc_quad_args_is_76_bytes[sizeof(fc_quad_args) == 76 ? 1 : -1];
uint32_t ek_fc_quad_dsp(fc_quad_args *args);
uint32_t ek_fc_quad_s8_dsp(fc_quad_args *args); /* the same over int8 weight rows (FC_PATH_INT8, FC_INT8 builds) */
#define FC_STEP                         \
  "  ldr r0, [r11], #4\n"               \
  "  sxtb16 r1, r0, ror #8\n"           \
  "  sxtb16 r0, r0\n"                   \
  "  ldmia r12!, {r2, r3, r4, r5}\n"    \
  "  smlad r6, r0, r2, r6\n"            \
  "  smlad r6, r1, r3, r6\n"            \
  "  smlad r8, r0, r4, r8\n"            \
  "  smlad r8, r1, r5, r8\n"            \
  "  ldmia r12!, {r2, r3, r4, r5}\n"    \
  "  smlad r9, r0, r2, r9\n"            \
  "  smlad r9, r1, r3, r9\n"            \
  "  smlad r10, r0, r4, r10\n"          \
  "  smlad r10, r1, r5, r10\n"
#define FC_OUT(ra, bit)                 \
  "  lsl r11, " ra ", lr\n"             \
  "  smull r11, r12, r11, r1\n"         \
  "  add r12, r12, r2\n"                \
  "  and r11, r12, r3\n"                \
  "  add r11, r11, #1\n"                \
  "  and r11, r11, r3\n"                \
  "  cmp r11, #1\n"                     \
  "  it ls\n"                           \
  "  orrls r7, r7, #" bit "\n"          \
  "  asr r12, r12, r4\n"                \
  "  add r12, r12, r5\n"                \
  "  ssat " ra ", #8, r12\n"
#define FC_CLAMP(ra)                    \
  "  cmp " ra ", r1\n"                  \
  "  it lt\n"                           \
  "  movlt " ra ", r1\n"                \
  "  cmp " ra ", r2\n"                  \
  "  it gt\n"                           \
  "  movgt " ra ", r2\n"
/* After the dot products (r0 = args): raw accumulators out, requantize, clamp, store; returns the undecided bits. */
#define FC_QUAD_TAIL \
    "  add r1, r0, #52\n" \
    "  stmia r1, {r6, r8, r9, r10}\n"       /* raw accumulators for the undecided outputs */ \
    "  add r1, r0, #24\n" \
    "  ldmia r1, {r1, r2, r3, r4, r5}\n"    /* m31, half, mask, sh, zp */ \
    "  ldr lr, [r0, #68]\n"                 /* pre-shift */ \
    "  movs r7, #0\n" \
    FC_OUT("r6", "1") FC_OUT("r8", "2") FC_OUT("r9", "4") FC_OUT("r10", "8") \
    "  ldr r1, [r0, #20]\n" \
    "  cbz r1, 5f\n" \
    "  ldr r1, [r0, #44]\n" \
    "  ldr r2, [r0, #48]\n" \
    FC_CLAMP("r6") FC_CLAMP("r8") FC_CLAMP("r9") FC_CLAMP("r10") \
    "5:\n" \
    "  ldr r1, [r0, #16]\n" \
    "  strb r6, [r1]\n" \
    "  strb r8, [r1, #1]\n" \
    "  strb r9, [r1, #2]\n" \
    "  strb r10, [r1, #3]\n" \
    "  mov r0, r7\n" \
    "  pop {r1, r4-r11, pc}\n"
__asm__(
    "  .syntax unified\n"
    "  .thumb\n"
    "  .section .text.ek_fc_quad_dsp, \"ax\", %progbits\n"
    "  .global ek_fc_quad_dsp\n"
    "  .type ek_fc_quad_dsp, %function\n"
    "  .thumb_func\n"
    "  .balign 4\n"
    "ek_fc_quad_dsp:\n"
    "  push {r0, r4-r11, lr}\n"
    "  ldmia r0, {r11, r12, lr}\n"          /* x, w, chunks */
    "  ldr r1, [r0, #12]\n"
    "  ldmia r1!, {r6, r8, r9, r10}\n"      /* folds */
    "  str r1, [r0, #12]\n"
    "  ands r7, lr, #3\n"
    "  beq 2f\n"
    "1:\n"
    FC_STEP
    "  subs r7, r7, #1\n"
    "  bne 1b\n"
    "2:\n"
    "  lsrs lr, lr, #2\n"
    "  beq 3f\n"
    "4:\n"
    FC_STEP FC_STEP FC_STEP FC_STEP
    "  subs lr, lr, #1\n"
    "  bne 4b\n"
    "3:\n"
    "  ldr r0, [sp]\n"
    "  str r12, [r0, #4]\n"                 /* the next quad's weights follow */
    FC_QUAD_TAIL
    "  .size ek_fc_quad_dsp, . - ek_fc_quad_dsp\n"
    "  .text\n");
#if FC_INT8
/* rows 0, 1 at [r12], [r12 + r4], rows 2, 3 at [lr], [lr + r4] (r4 = depth); accumulators r6, r8, r9, r10 */
#define FC_S8_ROW(ra, load)             \
  load                                  \
  "  sxtb16 r3, r2\n"                   \
  "  smlad " ra ", r0, r3, " ra "\n"     \
  "  sxtb16 r2, r2, ror #8\n"           \
  "  smlad " ra ", r1, r2, " ra "\n"
#define FC_S8_STEP                      \
  "  ldr r0, [r11], #4\n"               \
  "  sxtb16 r1, r0, ror #8\n"           \
  "  sxtb16 r0, r0\n"                   \
  FC_S8_ROW("r8", "  ldr r2, [r12, r4]\n") \
  FC_S8_ROW("r6", "  ldr r2, [r12], #4\n") \
  FC_S8_ROW("r10", "  ldr r2, [lr, r4]\n") \
  FC_S8_ROW("r9", "  ldr r2, [lr], #4\n")
__asm__(
    "  .syntax unified\n"
    "  .thumb\n"
    "  .section .text.ek_fc_quad_s8_dsp, \"ax\", %progbits\n"
    "  .global ek_fc_quad_s8_dsp\n"
    "  .type ek_fc_quad_s8_dsp, %function\n"
    "  .thumb_func\n"
    "  .balign 4\n"
    "ek_fc_quad_s8_dsp:\n"
    "  push {r0, r4-r11, lr}\n"
    "  ldmia r0, {r11, r12}\n"             /* x, row 0 */
    "  ldr r5, [r0, #8]\n"                 /* chunks */
    "  ldr r4, [r0, #72]\n"                /* depth */
    "  add lr, r12, r4, lsl #1\n"          /* row 2 */
    "  add r1, r12, r4, lsl #2\n"
    "  str r1, [r0, #4]\n"                 /* the next quad's rows follow */
    "  ldr r1, [r0, #12]\n"
    "  ldmia r1!, {r6, r8, r9, r10}\n"      /* folds */
    "  str r1, [r0, #12]\n"
    "1:\n"
    "  tst r5, #3\n"                       /* single groups until a multiple of 4 is left */
    "  beq 2f\n"
    FC_S8_STEP
    "  sub r5, r5, #1\n"
    "  b 1b\n"
    "2:\n"
    "  lsrs r5, r5, #2\n"
    "  beq 3f\n"
    "4:\n"
    FC_S8_STEP FC_S8_STEP FC_S8_STEP FC_S8_STEP
    "  subs r5, r5, #1\n"
    "  bne 4b\n"
    "3:\n"
    "  ldr r0, [sp]\n"
    FC_QUAD_TAIL
    "  .size ek_fc_quad_s8_dsp, . - ek_fc_quad_s8_dsp\n"
    "  .text\n");
#undef FC_S8_STEP
#undef FC_S8_ROW
#endif
#undef FC_QUAD_TAIL
#undef FC_STEP
#undef FC_OUT
#undef FC_CLAMP
#else
static inline void fc_dot_quad(const int8_t *x, const uint32_t *w, int32_t chunks, int32_t *acc) {
  int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
  for (int32_t g = 0; g < chunks; ++g, x += 4, w += 8) {
    const uint32_t v = ek_load32(x);
    const uint32_t x02 = ek_sxtb16(v), x13 = ek_sxtb16_ror8(v);
    a0 = ek_smlad(x02, w[0], a0);
    a0 = ek_smlad(x13, w[1], a0);
    a1 = ek_smlad(x02, w[2], a1);
    a1 = ek_smlad(x13, w[3], a1);
    a2 = ek_smlad(x02, w[4], a2);
    a2 = ek_smlad(x13, w[5], a2);
    a3 = ek_smlad(x02, w[6], a3);
    a3 = ek_smlad(x13, w[7], a3);
  }
  acc[0] = a0;
  acc[1] = a1;
  acc[2] = a2;
  acc[3] = a3;
}
#endif
#else
/* Helium: the raw int8 input against four int8 weight rows (VMLADAVA.S8, exact), rows clamped to the last unit. */
static inline void fc_dot_quad_mve(const int8_t *x, const int8_t *wt, int32_t u, int32_t units, int32_t depth,
                                   int32_t *acc) {
  const int8_t *rows[4];
  for (int32_t j = 0; j < 4; ++j) rows[j] = wt + (int64_t)(u + j < units ? u + j : units - 1) * depth;
  ek_mve_dot4_s8(x, rows[0], rows[1], rows[2], rows[3], depth, acc);
}
#endif

#if !EK_CONV_MVE && FC_INT8
/* FC_PATH_INT8 without Helium: acc[j] += int8 weight row j . the raw int8 input over `chunks` groups of 4 inputs. Per
 * group one input word (two SXTB16: the (x0,x2), (x1,x3) pairs of the packed path) and per row one weight word, two
 * SXTB16 and two SMLAD, as CMSIS-NN's arm_nn_vec_mat_mult_t_s8 (whose input offset we fold into the bias instead):
 * 23 instructions per 16 multiply-accumulates on Cortex-M4, no copy of the weights. */
static inline int32_t fc_dot_row_s8(const int8_t *x, const int8_t *w, int32_t chunks, int32_t acc) {
  for (int32_t g = 0; g < chunks; ++g, x += 4, w += 4) {
    const uint32_t v = ek_load32(x), wv = ek_load32(w);
    acc = ek_smlad(ek_sxtb16(v), ek_sxtb16(wv), acc);
    acc = ek_smlad(ek_sxtb16_ror8(v), ek_sxtb16_ror8(wv), acc);
  }
  return acc;
}
#if EK_CONV_DSP && defined(__OPTIMIZE__) && defined(__thumb2__) && !defined(EK_CONV_NO_ASM)
#define FC_S8_ROW(a, load)              \
  load                                  \
  "sxtb16 r3, r2\n\t"                   \
  "smlad %[" a "], r0, r3, %[" a "]\n\t" \
  "sxtb16 r2, r2, ror #8\n\t"           \
  "smlad %[" a "], r1, r2, %[" a "]\n\t"
#define FC_S8_STEP                                 \
  "ldr r0, [%[px]], #4\n\t"                        \
  "sxtb16 r1, r0, ror #8\n\t"                      \
  "sxtb16 r0, r0\n\t"                              \
  FC_S8_ROW("a1", "ldr r2, [%[p0], %[d]]\n\t")     \
  FC_S8_ROW("a0", "ldr r2, [%[p0]], #4\n\t")       \
  FC_S8_ROW("a3", "ldr r2, [%[p2], %[d]]\n\t")     \
  FC_S8_ROW("a2", "ldr r2, [%[p2]], #4\n\t")
/* rows 0, 1 at [p0], [p0 + depth], rows 2, 3 at [p2], [p2 + depth] */
static inline void fc_dot_quad_s8(const int8_t *x, const int8_t *w, int32_t depth, int32_t chunks, int32_t *acc) {
  if (chunks <= 0) return;
  register int32_t a0 __asm__("r6") = acc[0], a1 __asm__("r8") = acc[1], a2 __asm__("r9") = acc[2],
                                      a3 __asm__("r10") = acc[3];
  register const int8_t *px __asm__("r11") = x;
  register const int8_t *p0 __asm__("r12") = w;
  register const int8_t *p2 __asm__("lr") = w + 2 * (ptrdiff_t)depth;
  register int32_t dd __asm__("r4") = depth;
  register int32_t n __asm__("r5") = chunks;
  __asm__ volatile(
      "1:\n\t"
      "tst %[n], #3\n\t" /* single groups until a multiple of 4 is left, then four per pass */
      "beq 2f\n\t"
      FC_S8_STEP
      "sub %[n], %[n], #1\n\t"
      "b 1b\n\t"
      "2:\n\t"
      "lsrs %[n], %[n], #2\n\t"
      "beq 3f\n\t"
      "4:\n\t"
      FC_S8_STEP
      FC_S8_STEP
      FC_S8_STEP
      FC_S8_STEP
      "subs %[n], %[n], #1\n\t"
      "bne 4b\n\t"
      "3:\n\t"
      : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [px] "+r"(px), [p0] "+r"(p0), [p2] "+r"(p2),
        [n] "+r"(n)
      : [d] "r"(dd)
      : "r0", "r1", "r2", "r3", "cc", "memory");
  acc[0] = a0;
  acc[1] = a1;
  acc[2] = a2;
  acc[3] = a3;
}
#undef FC_S8_STEP
#undef FC_S8_ROW
#else
static inline void fc_dot_quad_s8(const int8_t *x, const int8_t *w, int32_t depth, int32_t chunks, int32_t *acc) {
  for (int32_t j = 0; j < 4; ++j) acc[j] = fc_dot_row_s8(x, w + (ptrdiff_t)j * depth, chunks, acc[j]);
}
#endif
#endif

#ifndef FC_QUAD_ASM
#define FC_QUAD_ASM 0
#endif

#if defined(__GNUC__)
#define FC_NOINLINE __attribute__((noinline))
#else
#define FC_NOINLINE
#endif

/* The rare accumulators ek_dround_fast cannot decide, out of line so the fast path keeps its registers. */
static FC_NOINLINE int32_t fc_round_exact(int32_t acc, const ek_dscale *d) { return ek_dround_mul(acc, d); }

static inline int8_t fc_out(int32_t acc, const ek_dfast *f, const ek_dscale *d, int32_t zp, int32_t lo, int32_t hi) {
  const int32_t h = (int32_t)((uint64_t)((int64_t)(int32_t)((uint32_t)acc << f->pre) * f->m31) >> 32) + f->half;
  const int32_t v = ek_dfast_edge(h, f->mask) ? fc_round_exact(acc, d) : h >> f->sh;
  return ek_conv_clamp8(ek_wrap_add(v, zp), lo, hi);
}

/* FC_PATH_PACKED and FC_PATH_INT8 (the same folds and scales; INT8 dots the tensor's int8 weights). */
static void fc_packed(const fc_data *d, const ek_dscale *ds, const ek_dfast *fast, const int8_t *x, const int8_t *wt,
                      int8_t *y) {
  const int32_t depth = d->depth, units = d->units, quads = (units + 3) / 4;
  const int32_t per_unit = d->num_scales > 1;
  const int32_t zp = d->output_offset, lo = d->act_min, hi = d->act_max;
  const int32_t *folds = (const int32_t *)(const void *)(fast + d->num_scales);
  const ek_dfast tensor_fast = fast[0]; /* per-tensor scale: kept in registers */
#if !EK_CONV_MVE
  const int32_t chunks = depth >> 2, tail = depth & 3;
  const uint32_t *packed = (const uint32_t *)(const void *)(folds + 4 * quads);
#endif
  for (int32_t b = 0; b < d->batches; ++b) {
    const int8_t *xr = x + (int64_t)b * depth;
    int8_t *yr = y + (int64_t)b * units;
#if FC_QUAD_ASM
    const int s8 = FC_INT8 && d->path == FC_PATH_INT8; /* the int8 weight rows, else the packed pairs */
    fc_quad_args qa = {xr, s8 ? (const void *)wt : (const void *)packed, chunks, folds, yr, lo > -128 || hi < 127,
                       tensor_fast.m31, tensor_fast.half, tensor_fast.mask, tensor_fast.sh, zp, lo, hi, {0, 0, 0, 0},
                       tensor_fast.pre, depth};
    const int32_t full = (!per_unit && !tail && tensor_fast.sh != 0) ? units / 4 : 0;
    for (int32_t q = 0; q < full; ++q, qa.y += 4) {
#if FC_INT8
      const uint32_t edges = s8 ? ek_fc_quad_s8_dsp(&qa) : ek_fc_quad_dsp(&qa);
#else
      const uint32_t edges = ek_fc_quad_dsp(&qa);
#endif
      for (int32_t j = 0; edges && j < 4; ++j)
        if ((edges >> j) & 1u) qa.y[j] = ek_conv_clamp8(ek_wrap_add(fc_round_exact(qa.acc[j], ds), zp), lo, hi);
    }
#else
    const int32_t full = 0;
#endif
    for (int32_t q = full; q < quads; ++q) {
      const int32_t u = 4 * q;
      int32_t acc[4] = {folds[u], folds[u + 1], folds[u + 2], folds[u + 3]};
#if EK_CONV_MVE
      fc_dot_quad_mve(xr, wt, u, units, depth, acc);
#else
#if FC_INT8
      if (d->path == FC_PATH_INT8) {
        const int8_t *wq = wt + (int64_t)u * depth;
        if (units - u >= 4) {
          fc_dot_quad_s8(xr, wq, depth, chunks, acc);
        } else {
          for (int32_t j = 0; j < units - u; ++j) acc[j] = fc_dot_row_s8(xr, wq + (int64_t)j * depth, chunks, acc[j]);
        }
      } else
#endif
      {
        fc_dot_quad(xr, packed + (int64_t)q * chunks * 8, chunks, acc);
      }
      if (tail) {
        for (int32_t k = depth - tail; k < depth; ++k) {
          const int32_t xv = xr[k];
          for (int32_t j = 0; j < 4 && u + j < units; ++j)
            acc[j] = ek_wrap_add(acc[j], wt[(int64_t)(u + j) * depth + k] * xv);
        }
      }
#endif
      int8_t *yq = yr + u;
      if (per_unit) {
        const int32_t live = units - u < 4 ? units - u : 4;
        for (int32_t j = 0; j < live; ++j) yq[j] = fc_out(acc[j], &fast[u + j], &ds[u + j], zp, lo, hi);
      } else if (units - u >= 4) {
        yq[0] = fc_out(acc[0], &tensor_fast, ds, zp, lo, hi);
        yq[1] = fc_out(acc[1], &tensor_fast, ds, zp, lo, hi);
        yq[2] = fc_out(acc[2], &tensor_fast, ds, zp, lo, hi);
        yq[3] = fc_out(acc[3], &tensor_fast, ds, zp, lo, hi);
      } else {
        for (int32_t j = 0; j < units - u; ++j) yq[j] = fc_out(acc[j], &tensor_fast, ds, zp, lo, hi);
      }
    }
  }
}

static ek_status fc_eval(ek_context *ctx, ek_op *op) {
  const fc_data *d = (const fc_data *)op->user_data;
  const ek_dscale *ds = fc_scales(op->user_data);
  const ek_tensor *in = ek_input(ctx, op, 0), *f = ek_input(ctx, op, 1), *bias = ek_input(ctx, op, 2);
  ek_tensor *out = ek_output(ctx, op, 0);
  if (d->path == FC_PATH_INT16) {
#if FC_INT16
    fc16_eval(ctx, op);
#else
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, ek_path_missing); /* a blob prepared by a full runtime */
#endif
  } else if (d->path == FC_PATH_PACKED || (FC_RUNS_INT8 && d->path == FC_PATH_INT8)) {
    fc_packed(d, ds, fc_fast(op->user_data, d->num_scales), (const int8_t *)in->data, (const int8_t *)f->data,
              (int8_t *)out->data);
  } else {
    fc_reference(d, ds, (const int8_t *)in->data, (const int8_t *)f->data, bias ? (const int32_t *)bias->data : 0,
                 (int8_t *)out->data);
  }
  return EK_OK;
}

/* Kernel access contract (firmware/runtime/README.md): every path reads the whole input row for each group of
   output units (rows live): output row b may only overlap input rows before b. */
static int fc_overlap(const ek_context *ctx, const ek_op *op, int input_index, int32_t *d_max) {
  (void)ctx;
  const fc_data *d = (const fc_data *)op->user_data;
  if (input_index != 0 || !d || d->batches < 1 || d->path == FC_PATH_INT16) return EK_OVERLAP_NONE;
  return ek_stream_rows_live(d->batches, d->depth, d->units, d_max) ? EK_OVERLAP_UPTO : EK_OVERLAP_NONE;
}

/* The folded paths read neither the bias (in the folds) nor, when packed with depth % 4 == 0, the int8 weights
   (FC_RUNS_INT8: where FC_PATH_INT8 runs on the reference loop, that reads the bias). */
int ek_fully_connected_skips_input(const void *user_data, int input_index) {
  const fc_data *d = (const fc_data *)user_data;
  const int folded = d->path == FC_PATH_PACKED || (FC_RUNS_INT8 && d->path == FC_PATH_INT8);
  return input_index == 2 ? folded : input_index == 1 && d->path == FC_PATH_PACKED && (d->depth & 3) == 0;
}

/* ---- int16 activations (16x8) ------------------------------------------------------------------------------ */

static int fc_is_int16(const ek_context *ctx, const ek_op *op) {
  return op->num_inputs >= 1 && op->inputs[0] >= 0 && op->inputs[0] < ctx->num_tensors &&
         ctx->tensors[op->inputs[0]].type == EK_INT16;
}


#if FC_INT16
/* round(double(acc) * eff) as LiteRT's reference build computes it (INT32_MIN when out of range, as its x86 build
   gives); |acc| < 2^53, so double(acc) is exact. */
static inline int32_t fc16_round(int64_t acc, double eff) {
  const double v = round((double)acc * eff);
  return v >= -2147483648.0 && v < 2147483648.0 ? (int32_t)v : INT32_MIN;
}

/* fc_data (path FC_PATH_INT16) then one double effective scale (s_in * s_w / s_out) per weight scale. */
static size_t fc16_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  const int32_t n = fc_num_scales(ctx, op);
  return FC_ALIGN8(sizeof(fc_data)) + (size_t)(n > 0 ? n : 1) * sizeof(double);
}

static ek_status fc16_prepare(ek_context *ctx, ek_op *op) {
  const ek_tensor *in = ek_input(ctx, op, 0), *f = ek_input(ctx, op, 1), *bias = ek_input(ctx, op, 2);
  const ek_tensor *out = ek_output(ctx, op, 0);
  fc_data *d = (fc_data *)op->user_data;
  if (!d) return ek_fail(ctx, op, EK_ERR_INTERNAL, "FULLY_CONNECTED has no data");
  if (out->type != EK_INT16 || f->type != EK_INT8)
    return ek_fail(ctx, op, EK_ERR_TYPE, "FULLY_CONNECTED with int16 input needs int8 weights and an int16 output (16x8)");
  if (in->num_scales != 1 || out->num_scales != 1 || in->zero_point != 0 || out->zero_point != 0 || !(in->scale > 0.0f) ||
      !(out->scale > 0.0f) || in->bytes != 2 * ek_conv_elements(in) || out->bytes != 2 * ek_conv_elements(out))
    return ek_fail(ctx, op, EK_ERR_MODEL, "int16 FULLY_CONNECTED input/output need one positive scale, zero point 0 and matching bytes");
  if (in->ndim < 1 || out->ndim < 1 || f->ndim != 2 || !f->data || !f->is_constant || ek_conv_elements(f) < 1 ||
      f->bytes != ek_conv_elements(f))
    return ek_fail(ctx, op, EK_ERR_SHAPE, "FULLY_CONNECTED weights must be a constant 2-D [units, depth] tensor");
  if (op->params.weights_format != 0 || !ek_conv_activation_ok(op->params.activation))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "FULLY_CONNECTED weights format or fused activation not supported");
  const int32_t units = f->dims[0], depth = f->dims[1], in_elems = ek_conv_elements(in);
  if (in_elems < depth || in_elems % depth != 0 || ek_conv_elements(out) != (int64_t)(in_elems / depth) * units ||
      out->dims[out->ndim - 1] != units)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "FULLY_CONNECTED output must hold batches x units (last dimension = units)");
  const int per_channel = f->num_scales > 1;
  if (!ek_conv_scales_ok(f) || (per_channel && (f->num_scales != units || !ek_conv_channel_axis_ok(f, units))) ||
      !ek_conv_zero_points_zero(f))
    return ek_fail(ctx, op, EK_ERR_MODEL, "int16 FULLY_CONNECTED weights need one scale or one per unit and zero points 0");
  if (bias && (!bias->is_constant || !bias->data || ek_conv_elements(bias) != units ||
               !((bias->type == EK_INT64 && bias->bytes == 8 * units && !((uintptr_t)bias->data & 7u)) ||
                 (bias->type == EK_INT32 && bias->bytes == 4 * units && !((uintptr_t)bias->data & 3u)))))
    return ek_fail(ctx, op, EK_ERR_SHAPE, "int16 FULLY_CONNECTED bias must be one constant int64 (or int32) per unit");
  memset(d, 0, sizeof *d);
  d->path = FC_PATH_INT16;
  d->units = units;
  d->depth = depth;
  d->batches = in_elems / depth;
  d->num_scales = per_channel ? units : 1;
  d->output_offset = bias ? (bias->type == EK_INT64 ? 64 : 32) : 0; /* int16 path: the bias width */
  ek_activation_range(op->params.activation, out->scale, 0, -32768, 32767, &d->act_min, &d->act_max);
  double *eff = (double *)(void *)((uint8_t *)op->user_data + FC_ALIGN8(sizeof(fc_data)));
  for (int32_t c = 0; c < d->num_scales; ++c) /* GetQuantizedConvolutionMultipler / per channel, in double */
    eff[c] = (double)in->scale * (per_channel ? (double)f->scales[c] : (double)f->scale) / (double)out->scale;
  return EK_OK;
}

static void fc16_eval(ek_context *ctx, ek_op *op) {
  const fc_data *d = (const fc_data *)op->user_data;
  const double *eff = (const double *)(const void *)((const uint8_t *)op->user_data + FC_ALIGN8(sizeof(fc_data)));
  const int16_t *x = (const int16_t *)ek_input(ctx, op, 0)->data;
  const int8_t *w = (const int8_t *)ek_input(ctx, op, 1)->data;
  const ek_tensor *bias = ek_input(ctx, op, 2);
  const void *bias_data = bias ? bias->data : (const void *)0;
  int16_t *y = (int16_t *)ek_output(ctx, op, 0)->data;
  for (int32_t b = 0; b < d->batches; ++b)
    for (int32_t u = 0; u < d->units; ++u) {
      const int8_t *wu = w + (size_t)u * d->depth;
      const int16_t *xb = x + (size_t)b * d->depth;
      int64_t acc = 0;
      for (int32_t k = 0; k < d->depth; ++k) acc += (int64_t)((int32_t)wu[k] * (int32_t)xb[k]);
      if (d->output_offset == 64) acc += ((const int64_t *)bias_data)[u];
      if (d->output_offset == 32) acc += ((const int32_t *)bias_data)[u];
      const int32_t v = fc16_round(acc, eff[d->num_scales > 1 ? u : 0]);
      y[(size_t)b * d->units + u] = (int16_t)ek_clamp_i32(v, d->act_min, d->act_max);
    }
}

#else /* compiled out: prepare refuses the op (never planned, never run) */
static size_t fc16_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return FC_ALIGN8(sizeof(fc_data));
}

static ek_status fc16_prepare(ek_context *ctx, ek_op *op) { return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, FC_INT16_MISSING); }
#endif

const ek_kernel ek_kernel_fully_connected = {EK_OP_FULLY_CONNECTED, "FULLY_CONNECTED", EK_HOST_FN(fc_persistent_bytes),
                                             0, EK_HOST_FN(fc_prepare), fc_eval, EK_HOST_FN(fc_overlap)};
