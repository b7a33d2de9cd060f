/* CONV_2D, int8 activations, int8 weights (per-channel or per-tensor scales), optional int32 bias.
 *
 * Bit-exact with LiteRT's reference_integer_ops::ConvPerChannel (BUILTIN_REF), including grouped
 * convolution (input channels a multiple of the filter's), SAME/VALID padding, strides and dilation.
 *
 * Two evaluation paths, chosen in prepare from the model only:
 *  - reference: TFLite's loop nest, used for grouped convolution, non-constant weights or bias, and layers
 *    whose im2col block would need more than EK_CONV_SCRATCH_MAX bytes of scratch;
 *  - blocked (constant weights and bias): four output pixels at a time. The input offset is folded into
 *    the bias at prepare time (bias + off * sum(w): exact in wrap-around int32), so the receptive fields
 *    are copied once into a small scratch block as raw int16 (the input zero point where the window
 *    leaves the image: its contribution w * zp cancels against the fold), laid out so that each output
 *    channel's weights are read once per 4 pixels and every SMLAD does two multiply-accumulates. On
 *    Cortex-M with the DSP extension the building blocks are SXTB16/SMLAD/SMMLAR (and the channel loop is
 *    assembly); elsewhere the same loop runs on exact C equivalents, so the host tests exercise the
 *    layout and border logic the device runs. For a prepared model (per-op data in flash, not for Helium) the
 *    weights are re-laid out at generation time as one record per output channel with doubled int16 pairs
 *    (conv_data.expanded): one LDRD per 4 weights, the accumulators already doubled for the requantization.
 * Requantization: MultiplyByQuantizedMultiplier (double rounding, as LiteRT), via the branch-free
 * equivalent of ek_conv_common.h when every channel's shift is a right shift.
 * Channels whose output is one value for every input (dead filters of trained networks: ek_conv_constant_channels)
 * are computed in prepare, left out of the range checks (so the rest of the layer keeps the fast paths) and of the
 * expanded records (not computed at all there), and written by ek_conv_fill_constant after the op's rows.
 */
#include "ek_conv_common.h"
#include "ek_stream.h"

enum { CONV_PATH_REFERENCE = 0, CONV_PATH_BLOCKED = 1 };
#define CONV_COLUMNS 4

typedef struct conv_data {
  int32_t pad_h, pad_w;
  int32_t act_min, act_max;
  int32_t input_offset, output_offset;
  int32_t groups;
  int32_t path;
  int32_t fast_requant; /* right shifts only and a bounded accumulator: ek_conv_requant_fast is exact */
  int32_t channels;
  int32_t zp_fold;      /* every channel's exponent <= EK_CONV_ZP_FOLD_MAX_E: the assembly folds the output zero
                           point into the rounding constant */
  int32_t padded;       /* blocked path, depth % 4 != 0: weight rows copied, zero-padded to whole groups of 4,
                           after the channels (so the assembly runs every channel without reading past a row) */
  int32_t expanded;     /* blocked path of a prepared model (flash) on a non-Helium target, fast requantization with
                           the zero point folded: every weight row re-laid out after the channels as doubled int16
                           pairs, two words per group of 4 ((2w0,2w2), (2w1,2w3); a partial last group zero-padded),
                           so the inner loop loads them with one LDRD instead of LDR + 2 SXTB16 and the accumulators
                           hold 2 * acc, what ek_conv_requant_zp2 wants */
  int32_t constants;    /* channels with a constant output, listed after the channel table */
  int32_t records;      /* conv_data.expanded: records (the channels that are not constant) */
} conv_data; /* followed by ek_conv_channel[channels] (8-byte aligned: sizeof is a multiple of 8) */

static ek_conv_channel *conv_channels(void *user_data) {
  return (ek_conv_channel *)((uint8_t *)user_data + ((sizeof(conv_data) + 7u) & ~(size_t)7u));
}

/* Constant channels' list (ek_conv_constant_channels), after the channel table; 8-byte padded. */
static inline uint32_t *conv_constant_list(const conv_data *d) {
  return (uint32_t *)(void *)(conv_channels((void *)(uintptr_t)d) + d->channels);
}
#define CONV_LIST_WORDS(count) (((count) + 1) & ~1)

/* conv_data.expanded: per output channel that is not constant [2 * fold, 2 words per group of 4 depth elements,
   multiplier, half + zp << e, e | channel << 8 (the ASR reads the low byte; the stores add the channel)], after
   the list; the zero-padded weight copy (conv_data.padded) lives there too. */
#define CONV_RECORD_WORDS(groups) (2 * (groups) + 4)
static inline const uint32_t *conv_records(const conv_data *d) {
  return conv_constant_list(d) + CONV_LIST_WORDS(d->constants);
}

/* Output channels as the model states them (bounded by the filter's byte size, checked by the reader). */
static int32_t conv_out_channels(const ek_context *ctx, const ek_op *op) {
  if (op->num_inputs < 2 || op->inputs[1] < 0 || op->inputs[1] >= ctx->num_tensors) return 0;
  const ek_tensor *f = &ctx->tensors[op->inputs[1]];
  return (f->ndim == 4 && f->dims[0] > 0) ? f->dims[0] : 0;
}

static int32_t conv_blocked_depth(const ek_context *ctx, const ek_op *op);


/* Bytes of the zero-padded weight copy (blocked path with depth % 4 != 0 and constant weights), else 0. */
static size_t conv_padded_bytes(const ek_context *ctx, const ek_op *op) {
  const int32_t depth = conv_blocked_depth(ctx, op), oc = conv_out_channels(ctx, op);
  if (depth <= 0 || (depth & 3) == 0 || !ctx->tensors[op->inputs[1]].is_constant) return 0;
  return (size_t)oc * (size_t)((depth + 3) & ~3);
}

/* Bytes of the expanded int16 weight copy (conv_data.expanded): only for a prepared model's blob (flash), never for
   a Helium target (its path dots the int8 weights), else 0. */
static size_t conv_expanded_bytes(const ek_context *ctx, const ek_op *op) {
  const int32_t depth = conv_blocked_depth(ctx, op), oc = conv_out_channels(ctx, op);
  if (EK_CONV_MVE || ctx->plan_mve || !ek_for_export(ctx) || ek_int8_weights(ctx, op) || depth <= 0 ||
      !ctx->tensors[op->inputs[1]].is_constant)
    return 0;
  return (size_t)(oc - ek_conv_op_constant_count(ctx, op, 0)) * (size_t)CONV_RECORD_WORDS((depth + 3) >> 2) * 4u;
}

static size_t conv_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  const size_t padded = conv_padded_bytes(ctx, op), expanded = conv_expanded_bytes(ctx, op);
  return ((sizeof(conv_data) + 7u) & ~(size_t)7u) + (size_t)conv_out_channels(ctx, op) * sizeof(ek_conv_channel) +
         (size_t)CONV_LIST_WORDS(ek_conv_op_constant_count(ctx, op, 0)) * 4u + (expanded > padded ? expanded : padded);
}

/* Depth of one im2col column (KH*KW*IC_filter) if the blocked path applies, else 0. */
static int32_t conv_blocked_depth(const ek_context *ctx, const ek_op *op) {
  if (op->num_inputs < 2 || op->inputs[0] < 0 || op->inputs[1] < 0 || op->inputs[0] >= ctx->num_tensors ||
      op->inputs[1] >= ctx->num_tensors)
    return 0;
  const ek_tensor *in = &ctx->tensors[op->inputs[0]];
  const ek_tensor *f = &ctx->tensors[op->inputs[1]];
  if (in->ndim != 4 || f->ndim != 4 || f->dims[1] < 1 || f->dims[2] < 1 || f->dims[3] < 1) return 0;
  if (in->dims[3] != f->dims[3]) return 0; /* grouped: reference path */
  if (f->dims[1] > EK_CONV_SCRATCH_MAX || f->dims[2] > EK_CONV_SCRATCH_MAX || f->dims[3] > EK_CONV_SCRATCH_MAX) return 0;
  const int64_t k = (int64_t)f->dims[1] * f->dims[2] * f->dims[3]; /* < 2^63: each factor is bounded above */
  if ((k + 3) / 4 * (8 * CONV_COLUMNS + 4) > EK_CONV_SCRATCH_MAX) return 0;
  return (int32_t)k;
}

/* Scratch: the 4-column block (8 bytes per column per group of 4 depth elements, the last group
   zero-padded), then a staging row of the groups' int8 elements for im2col of unaligned layouts. */
static size_t conv_scratch_bytes(const ek_context *ctx, const ek_op *op) {
  const int32_t k = conv_blocked_depth(ctx, op);
  return k ? (size_t)((k + 3) / 4) * (8u * CONV_COLUMNS + 4u) : 0;
}

static ek_status conv_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs < 2 || op->num_inputs > 3 || op->num_outputs != 1)
    return ek_fail(ctx, op, EK_ERR_MODEL, "CONV_2D needs 2 or 3 inputs (input, filter, optional bias) and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0), *f = ek_input(ctx, op, 1), *bias = ek_input(ctx, op, 2);
  const ek_tensor *out = ek_output(ctx, op, 0);
  if (!in || !f || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "CONV_2D input, filter or output tensor missing");
  if (in->type != EK_INT8 || out->type != EK_INT8 || f->type != EK_INT8)
    return ek_fail(ctx, op, EK_ERR_TYPE, "CONV_2D supports int8 input, filter and output only");
  if (in->ndim != 4 || f->ndim != 4 || out->ndim != 4)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "CONV_2D input, filter and output must be 4-D (NHWC, OHWI)");
  if (!ek_conv_is_q8_activation(in) || !ek_conv_is_q8_activation(out))
    return ek_fail(ctx, op, EK_ERR_MODEL,
                   "CONV_2D input/output need a finite positive scale, an int8 zero point and matching bytes");
  if (!f->data || ek_conv_elements(f) < 1 || f->bytes != ek_conv_elements(f))
    return ek_fail(ctx, op, EK_ERR_MODEL, "CONV_2D filter has no data or an inconsistent size");
  const int32_t c = in->dims[3];
  const int32_t oc = f->dims[0], kh = f->dims[1], kw = f->dims[2], fc = f->dims[3];
  if (c % fc != 0) return ek_fail(ctx, op, EK_ERR_SHAPE, "CONV_2D input channels must be a multiple of the filter's");
  const int32_t groups = c / fc;
  if (oc % groups != 0)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "CONV_2D output channels must be a multiple of the group count");
  int32_t oh = 0, ow = 0, pad_h = 0, pad_w = 0;
  const ek_status common = ek_conv_check_common(ctx, op, in, f, bias, out, oc, kh, kw, &oh, &ow, &pad_h, &pad_w);
  if (common != EK_OK) return common;
  const ek_op_params *p = &op->params;

  conv_data *d = (conv_data *)op->user_data;
  ek_conv_channel *ch = conv_channels(op->user_data);
  if (!d || oc != conv_out_channels(ctx, op)) return ek_fail(ctx, op, EK_ERR_INTERNAL, "CONV_2D persistent data missing");
  d->pad_h = pad_h;
  d->pad_w = pad_w;
  d->input_offset = -in->zero_point;
  d->output_offset = out->zero_point;
  d->groups = groups;
  d->channels = oc;
  if (!ek_conv_activation_range(p->activation, out, &d->act_min, &d->act_max))
    return ek_fail(ctx, op, EK_ERR_MODEL, "CONV_2D activation range does not fit the output scale");
  const int32_t constants = ek_conv_constant_channels(in, f, bias, out, p->activation, 0, (uint32_t *)0);
  d->constants = constants > 0 ? constants : 0;
  if (d->constants != ek_conv_op_constant_count(ctx, op, 0))
    return ek_fail(ctx, op, EK_ERR_INTERNAL, "CONV_2D persistent data sized for other tensors");
  int fast = 1;
  for (int32_t i = 0; i < oc; ++i) {
    /* PopulateConvolutionQuantizationParams: double(input_scale) * double(filter_scale) / double(output_scale) */
    const double eff = (double)in->scale * (double)ek_conv_scale_at(f, i) / (double)out->scale;
    int channel_fast = 1;
    if (!ek_conv_channel_init(&ch[i], eff, &channel_fast))
      return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "CONV_2D effective output scale too large (>= 2^30)");
    fast = fast && channel_fast;
  }
  if (d->constants > 0) { /* constant channels: exponent 1, no left shift, out of every range check below */
    ek_conv_constant_channels(in, f, bias, out, p->activation, 0, conv_constant_list(d));
    ek_conv_mark_constant(ch, conv_constant_list(d), d->constants);
    fast = 1;
    for (int32_t i = 0; i < oc; ++i) {
      const int32_t e = ek_conv_exponent(&ch[i]);
      fast = fast && e >= 1 && e <= 31;
    }
  }
  /* per-channel accumulator bounds from the constant weights and bias (-1: not constant, or leaving int32) */
  int64_t live_bound = constants >= 0 ? 0 : -1, live_bias = 0;
  for (int32_t o = 0; o < oc; ++o) {
    if (ek_conv_is_constant(&ch[o])) continue;
    if (bias) {
      const int64_t bv = bias->is_constant ? (int64_t)((const int32_t *)bias->data)[o] : INT64_MAX;
      const int64_t mag = bv < 0 ? -bv : bv;
      if (mag > live_bias) live_bias = mag;
    }
    if (live_bound >= 0) {
      int64_t lo, hi;
      ek_conv_acc_range((const int8_t *)f->data + (ptrdiff_t)o * kh * kw * fc, 1, kh * kw * fc,
                        bias ? ((const int32_t *)bias->data)[o] : 0, d->input_offset, &lo, &hi);
      const int64_t bound = ek_conv_acc_bound(lo, hi);
      live_bound = bound < 0 ? -1 : (bound > live_bound ? bound : live_bound);
    }
  }
  const int bounded = live_bound >= 0 && live_bound < EK_CONV_FAST_ACC_LIMIT;
  /* |w * (x + input_offset)| <= 128 * 255 */
  d->fast_requant = fast && (bounded || ek_conv_acc_fits(live_bias, (int64_t)kh * kw * fc, 128 * 255));
  const int32_t depth = conv_blocked_depth(ctx, op);
  d->path = (depth > 0 && op->scratch && depth == kh * kw * fc && f->is_constant && (!bias || bias->is_constant))
                ? CONV_PATH_BLOCKED : CONV_PATH_REFERENCE;
  if (d->path == CONV_PATH_BLOCKED) { /* fold = bias + input_offset * sum of the channel's weights */
    const int8_t *wt = (const int8_t *)f->data;
    const int32_t *b = bias ? (const int32_t *)bias->data : (const int32_t *)0;
    int64_t fold_bound = 0;
    for (int32_t o = 0; o < oc; ++o) {
      if (ek_conv_is_constant(&ch[o])) continue; /* fold 0 */
      uint32_t sum = 0;
      for (int32_t k = 0; k < depth; ++k) sum += (uint32_t)(int32_t)wt[(int64_t)o * depth + k];
      ch[o].fold = (int32_t)(sum * (uint32_t)d->input_offset + (b ? (uint32_t)b[o] : 0u));
      const int64_t magnitude = ch[o].fold < 0 ? -(int64_t)ch[o].fold : (int64_t)ch[o].fold;
      if (magnitude > fold_bound) fold_bound = magnitude;
    }
    /* the blocked accumulator starts at fold and adds |w * x| <= 128 * 128 per depth element; it ends at the
       true accumulator (wrap-around sums), so the per-channel bounds hold for it too */
    d->fast_requant = fast && (bounded || ek_conv_acc_fits(fold_bound, depth, 128 * 128));
  }
  d->zp_fold = 1;
  for (int32_t o = 0; o < oc && d->zp_fold; ++o) {
    int64_t bound = -1;
    if (ek_conv_exponent(&ch[o]) > EK_CONV_ZP_FOLD_MAX_E && constants >= 0) {
      int64_t lo, hi;
      ek_conv_acc_range((const int8_t *)f->data + (ptrdiff_t)o * kh * kw * fc, 1, kh * kw * fc,
                        bias ? ((const int32_t *)bias->data)[o] : 0, d->input_offset, &lo, &hi);
      bound = ek_conv_acc_bound(lo, hi);
    }
    d->zp_fold = ek_conv_zp_fold_ok(&ch[o], d->output_offset, bound);
  }
  for (int32_t o = 0; o < oc; ++o) ch[o].half_zp = d->zp_fold ? ek_conv_half_zp(&ch[o], d->output_offset) : 0;
  d->padded = 0;
  d->expanded = 0;
  d->records = 0;
  const size_t padded_bytes = conv_padded_bytes(ctx, op);
  if (d->path == CONV_PATH_BLOCKED && d->fast_requant && d->zp_fold && conv_expanded_bytes(ctx, op) > 0) {
    const int32_t groups = (depth + 3) >> 2;
    const int8_t *wt = (const int8_t *)f->data;
    uint32_t *ew = (uint32_t *)(uintptr_t)conv_records(d);
    d->records = oc - d->constants;
    for (int32_t o = 0; o < oc; ++o) {
      if (ek_conv_is_constant(&ch[o])) continue;
      const int8_t *row = wt + (int64_t)o * depth;
      *ew++ = (uint32_t)ch[o].fold * 2u; /* |fold| < 2^30 (fast requantization) */
      for (int32_t g = 0; g < groups; ++g, ew += 2) {
        int32_t v[4];
        for (int32_t k = 0; k < 4; ++k) v[k] = 4 * g + k < depth ? 2 * row[4 * g + k] : 0; /* |2w| <= 256 */
        ew[0] = ((uint32_t)v[0] & 0xFFFFu) | ((uint32_t)v[2] << 16);
        ew[1] = ((uint32_t)v[1] & 0xFFFFu) | ((uint32_t)v[3] << 16);
      }
      *ew++ = (uint32_t)ch[o].multiplier;
      *ew++ = (uint32_t)ch[o].half_zp;
      *ew++ = (uint32_t)ek_conv_exponent(&ch[o]) | ((uint32_t)o << 8);
    }
    d->expanded = 1;
  } else if (d->path == CONV_PATH_BLOCKED && padded_bytes > 0) {
    const int32_t stride = (depth + 3) & ~3;
    int8_t *pw = (int8_t *)(uintptr_t)conv_records(d);
    const int8_t *wt = (const int8_t *)f->data;
    for (int32_t o = 0; o < oc; ++o)
      for (int32_t k = 0; k < stride; ++k) pw[(int64_t)o * stride + k] = k < depth ? wt[(int64_t)o * depth + k] : 0;
    d->padded = 1;
  }
  return EK_OK;
}

static inline int32_t conv_requant(const conv_data *d, const ek_conv_channel *ch, int32_t acc) {
  const int32_t v =
      d->fast_requant ? ek_conv_requant_fast(acc, ch) : ek_mbqm(acc, ch->multiplier, ek_conv_shift(ch));
  return ek_wrap_add(v, d->output_offset);
}

/* TFLite's reference loop nest (ConvPerChannel), with wrap-around int32 accumulation. Only for layers the blocked
   path does not take (grouped, non-constant weights, huge windows): compiled for size (the firmware's code budget). */
#if defined(__GNUC__)
__attribute__((noinline, cold))
#endif
static void conv_reference(const conv_data *d, const ek_conv_channel *ch, const ek_op_params *p, const ek_tensor *in,
                           const ek_tensor *f, const int32_t *bias, ek_tensor *out, int32_t row0, int32_t row1) {
  const int32_t n = in->dims[0], h = in->dims[1], w = in->dims[2], c = in->dims[3];
  const int32_t oc = f->dims[0], kh = f->dims[1], kw = f->dims[2], fc = f->dims[3];
  const int32_t oh = out->dims[1], ow = out->dims[2];
  const int32_t per_group = oc / d->groups;
  const int8_t *x = (const int8_t *)in->data, *wt = (const int8_t *)f->data;
  int8_t *y = (int8_t *)out->data;
  for (int32_t b = 0; b < n; ++b) {
    for (int32_t oy = row0; oy < row1; ++oy) {
      const int32_t iy0 = oy * p->stride_h - d->pad_h;
      for (int32_t ox = 0; ox < ow; ++ox) {
        const int32_t ix0 = ox * p->stride_w - d->pad_w;
        for (int32_t o = 0; o < oc; ++o) {
          const int32_t g = o / per_group;
          uint32_t acc = 0;
          for (int32_t ky = 0; ky < kh; ++ky) {
            const int32_t iy = iy0 + p->dilation_h * ky;
            if (iy < 0 || iy >= h) continue;
            for (int32_t kx = 0; kx < kw; ++kx) {
              const int32_t ix = ix0 + p->dilation_w * kx;
              if (ix < 0 || ix >= w) continue;
              const int8_t *xp = x + (((int64_t)b * h + iy) * w + ix) * c + (int64_t)g * fc;
              const int8_t *wp = wt + (((int64_t)o * kh + ky) * kw + kx) * fc;
              for (int32_t i = 0; i < fc; ++i) acc += (uint32_t)(wp[i] * (xp[i] + d->input_offset));
            }
          }
          if (bias) acc += (uint32_t)bias[o];
          y[(((int64_t)b * oh + oy) * ow + ox) * oc + o] =
              ek_conv_clamp8(conv_requant(d, &ch[o], (int32_t)acc), d->act_min, d->act_max);
        }
      }
    }
  }
}

#if defined(__GNUC__)
#define CONV_NOINLINE __attribute__((noinline))
#else
#define CONV_NOINLINE
#endif

#if !EK_CONV_MVE /* the DSP (and portable) blocked path; Helium builds use conv_blocked_mve */
/* `groups` groups of 4 raw int8 values from src into one column of the block: words (x0,x2), (x1,x3), then
   the next group 8 words further. */
#if EK_CONV_DSP && defined(__OPTIMIZE__) && !defined(EK_CONV_NO_ASM)
static inline void conv_expand_run(const int8_t *src, uint32_t *dst, int32_t groups) {
  if (groups <= 0) return;
  uint32_t v, lo;
  __asm__ volatile(
      "1:\n\t"
      "ldr %[v], [%[src]], #4\n\t"
      "sxtb16 %[lo], %[v]\n\t"
      "sxtb16 %[v], %[v], ror #8\n\t"
      "strd %[lo], %[v], [%[dst]], #32\n\t"
      "subs %[n], %[n], #1\n\t"
      "bne 1b\n\t"
      : [src] "+r"(src), [dst] "+r"(dst), [n] "+r"(groups), [v] "=&r"(v), [lo] "=&r"(lo)
      :
      : "cc", "memory");
}
#else
static inline void conv_expand_run(const int8_t *src, uint32_t *dst, int32_t groups) {
  for (int32_t g = 0; g < groups; ++g, src += 4, dst += 8) {
    const uint32_t v = ek_load32(src);
    dst[0] = ek_sxtb16(v);
    dst[1] = ek_sxtb16_ror8(v);
  }
}
#endif

/* A window of three 9-byte runs (kh = 3, kw * c = 9, dilation_w = 1: a 3x3 window on 3 channels, an RGB first layer)
 * inside the image, r0 = its first run, rs = bytes between the runs: the 7 groups straight from the runs (the 28th
 * byte is 0; its weight is 0), unrolled (one LDR or LDR + byte merge per group, two SXTB16, one STRD). */
static inline void conv_run9x3_column(const uint8_t *r0, ptrdiff_t rs, uint32_t *dst) {
  const uint8_t *r1 = r0 + rs, *r2 = r1 + rs;
  const uint32_t g0 = ek_load32(r0), g1 = ek_load32(r0 + 4), g2 = (uint32_t)r0[8] | ek_load32(r1) << 8;
  const uint32_t g3 = ek_load32(r1 + 3), g4 = (uint32_t)r1[7] | (uint32_t)r1[8] << 8 | ek_load32(r2) << 16;
  const uint32_t g5 = ek_load32(r2 + 2), g6 = ek_load32(r2 + 5) >> 8;
  dst[0] = ek_sxtb16(g0);
  dst[1] = ek_sxtb16_ror8(g0);
  dst[8] = ek_sxtb16(g1);
  dst[9] = ek_sxtb16_ror8(g1);
  dst[16] = ek_sxtb16(g2);
  dst[17] = ek_sxtb16_ror8(g2);
  dst[24] = ek_sxtb16(g3);
  dst[25] = ek_sxtb16_ror8(g3);
  dst[32] = ek_sxtb16(g4);
  dst[33] = ek_sxtb16_ror8(g4);
  dst[40] = ek_sxtb16(g5);
  dst[41] = ek_sxtb16_ror8(g5);
  dst[48] = ek_sxtb16(g6);
  dst[49] = ek_sxtb16_ror8(g6);
}

/* A window of three 9-byte runs (see conv_run9x3_column) that leaves the image: gathered into a 27-byte copy (taps
   outside the image hold the input zero point), then built as an interior one. */
static CONV_NOINLINE void conv_run9x3_border(const int8_t *x, int32_t h, int32_t w, int32_t c, int32_t dilation_h,
                                             int32_t iy0, int32_t ix0, int8_t zp, uint32_t *dst) {
  uint8_t win[28];
  const int32_t kw = 9 / c; /* c is 1, 3 or 9 */
  const int cols_inside = ix0 >= 0 && ix0 + kw <= w;
  uint8_t *s = win;
  for (int32_t ky = 0; ky < 3; ++ky) {
    const int32_t iy = iy0 + dilation_h * ky;
    if (iy < 0 || iy >= h) { /* a row outside the image */
      for (int32_t i = 0; i < 9; ++i) *s++ = (uint8_t)zp;
      continue;
    }
    const int8_t *row = x + (ptrdiff_t)iy * w * c;
    if (cols_inside) {
      for (int32_t i = 0; i < 9; ++i) *s++ = (uint8_t)row[(ptrdiff_t)ix0 * c + i];
      continue;
    }
    for (int32_t kx = 0; kx < kw; ++kx) {
      const int32_t ix = ix0 + kx;
      const int inside = ix >= 0 && ix < w;
      const int8_t *src = inside ? row + (ptrdiff_t)ix * c : row;
      for (int32_t i = 0; i < c; ++i) *s++ = (uint8_t)(inside ? src[i] : zp);
    }
  }
  win[27] = 0;
  conv_run9x3_column(win, 9, dst);
}

/* Four columns of three 9-byte runs each, all inside the image on one output row (the first run of column j at
   r0 + j * step): the block of an RGB first layer's interior pixels without per-pixel window checks. On Cortex-M
   with DSP in assembly (the groups that straddle two runs are one word load and a byte-field insert: the bytes
   before a run are inside the input tensor, their values are replaced), else the C column builder. */
#if EK_CONV_DSP && defined(__thumb2__) && !defined(EK_CONV_NO_ASM)
void ek_conv_run9x3_block_dsp(const uint8_t *r0, ptrdiff_t rs, ptrdiff_t step, uint32_t *block);
#define CONV_RUN9X3_GROUP(offset) \
    "  sxtb16 r8, r6\n" \
    "  sxtb16 r9, r6, ror #8\n" \
    "  strd r8, r9, [r3, #" offset "]\n"
__asm__(
    "  .syntax unified\n"
    "  .thumb\n"
    "  .section .text.ek_conv_run9x3_block_dsp, \"ax\", %progbits\n"
    "  .global ek_conv_run9x3_block_dsp\n"
    "  .type ek_conv_run9x3_block_dsp, %function\n"
    "  .thumb_func\n"
    "  .balign 4\n"
    "ek_conv_run9x3_block_dsp:\n"
    "  push {r4-r9, lr}\n"
    "  mov r12, #4\n"
    ".Lek_r9_column:\n"
    "  add r4, r0, r1\n"                    /* second run */
    "  add r5, r4, r1\n"                    /* third run */
    "  ldr r6, [r0]\n"                      /* unaligned: LDR (LDRD would fault) */
    "  ldr r7, [r0, #4]\n"
    CONV_RUN9X3_GROUP("0")
    "  mov r6, r7\n"
    CONV_RUN9X3_GROUP("32")
    "  ldr r6, [r4, #-1]\n"                 /* run0[8], run1[0..2] */
    "  ldrb r7, [r0, #8]\n"
    "  bfi r6, r7, #0, #8\n"
    CONV_RUN9X3_GROUP("64")
    "  ldr r6, [r4, #3]\n"
    CONV_RUN9X3_GROUP("96")
    "  ldr r6, [r5, #-2]\n"                 /* run1[7..8], run2[0..1] */
    "  ldrh r7, [r4, #7]\n"
    "  bfi r6, r7, #0, #16\n"
    CONV_RUN9X3_GROUP("128")
    "  ldr r6, [r5, #2]\n"
    CONV_RUN9X3_GROUP("160")
    "  ldr r6, [r5, #5]\n"
    "  lsrs r6, r6, #8\n"                   /* run2[6..8], 0 */
    CONV_RUN9X3_GROUP("192")
    "  add r0, r0, r2\n"
    "  adds r3, r3, #8\n"
    "  subs r12, r12, #1\n"
    "  bne .Lek_r9_column\n"
    "  pop {r4-r9, pc}\n"
    "  .size ek_conv_run9x3_block_dsp, . - ek_conv_run9x3_block_dsp\n"
    "  .text\n");
#undef CONV_RUN9X3_GROUP
static inline void conv_run9x3_block(const uint8_t *r0, ptrdiff_t rs, ptrdiff_t step, uint32_t *block) {
  ek_conv_run9x3_block_dsp(r0, rs, step, block);
}
#else
static CONV_NOINLINE void conv_run9x3_block(const uint8_t *r0, ptrdiff_t rs, ptrdiff_t step, uint32_t *block) {
  for (int32_t col = 0; col < CONV_COLUMNS; ++col, r0 += step) conv_run9x3_column(r0, rs, block + 2 * col);
}
#endif

/* One im2col column (one output pixel) into dst (stride 8 words per group). Raw input values (the input
 * offset is in the fold); taps outside the image hold the input zero point (w * zp + the fold's w * off
 * = 0); the zero padding of a partial last group holds 0. When every window row lies inside the image
 * horizontally and is a whole number of groups, rows are expanded straight from the input; otherwise the
 * column is first gathered as int8 into `staging`. Kept out of line: inlined into the block loop it
 * competes for registers. */
static CONV_NOINLINE void conv_im2col(const ek_op_params *p, const ek_tensor *in, const ek_tensor *f,
                                      const int8_t *x, int32_t iy0, int32_t ix0, int8_t zp, uint32_t *dst,
                                      int8_t *staging) {
  const int32_t h = in->dims[1], w = in->dims[2], c = in->dims[3];
  const int32_t kh = f->dims[1], kw = f->dims[2];
  const int32_t row_len = kw * c;
  if ((row_len & 3) == 0 && p->dilation_w == 1 && ix0 >= 0 && ix0 + kw <= w) {
    const uint32_t zp_word = ek_sxtb16((uint32_t)(uint8_t)zp * 0x01010101u);
    for (int32_t ky = 0; ky < kh; ++ky, dst += 2 * row_len) { /* 8 words per group of 4 */
      const int32_t iy = iy0 + p->dilation_h * ky;
      if (iy >= 0 && iy < h) {
        conv_expand_run(x + ((ptrdiff_t)iy * w + ix0) * c, dst, row_len >> 2);
      } else {
        for (int32_t i = 0; i < 2 * row_len; i += 8) dst[i] = dst[i + 1] = zp_word;
      }
    }
    return;
  }
  int8_t *s = staging;
  const int cols_inside = p->dilation_w == 1 && ix0 >= 0 && ix0 + kw <= w;
  for (int32_t ky = 0; ky < kh; ++ky) {
    const int32_t iy = iy0 + p->dilation_h * ky;
    const int inside_row = iy >= 0 && iy < h;
    if (inside_row && cols_inside) { /* one contiguous run of kw * c bytes (e.g. 9 for a 3x3 window on RGB) */
      const int8_t *src = x + ((ptrdiff_t)iy * w + ix0) * c;
      int32_t n = row_len;
      for (; n >= 4; n -= 4, src += 4, s += 4) ek_store32(s, ek_load32(src));
      for (; n > 0; --n) *s++ = *src++;
      continue;
    }
    for (int32_t kx = 0; kx < kw; ++kx, s += c) {
      const int32_t ix = ix0 + p->dilation_w * kx;
      /* one loop for both cases (a separate fill loop would become a memset call costing more than it
         fills): outside the image it reads the zero point c times */
      const int inside = inside_row && ix >= 0 && ix < w;
      const int8_t *src = inside ? x + ((ptrdiff_t)iy * w + ix) * c : &zp;
      const int32_t mask = inside ? -1 : 0;
      for (int32_t i = 0; i < c; ++i) s[i] = src[i & mask];
    }
  }
  while ((s - staging) & 3) *s++ = 0;
  conv_expand_run(staging, dst, (int32_t)(s - staging) >> 2);
}

/* im2col of the block's pixels p0 .. p0+np-1 into the 4-column block; columns >= np are zero. */
static void conv_im2col_block(const conv_data *d, const ek_op_params *p, const ek_tensor *in, const ek_tensor *f,
                              int32_t b, int32_t p0, int32_t np, int32_t ow, uint32_t *block, int8_t *staging) {
  const int32_t h = in->dims[1], w = in->dims[2], c = in->dims[3];
  const int32_t groups = (f->dims[1] * f->dims[2] * c + 3) >> 2;
  const int8_t *x = (const int8_t *)in->data + (ptrdiff_t)b * h * w * c; /* offsets < tensor bytes < 2^31 */
  const int8_t zp = (int8_t)(-d->input_offset);
  if (np == CONV_COLUMNS && f->dims[1] == 1 && f->dims[2] == 1 && p->stride_h == 1 && p->stride_w == 1 &&
      d->pad_h == 0 && d->pad_w == 0 && ow == w && (c & 3) == 0) { /* 1x1, stride 1: output pixel q reads input pixel q */
    for (int32_t col = 0; col < CONV_COLUMNS; ++col) conv_expand_run(x + (ptrdiff_t)(p0 + col) * c, block + 2 * col, c >> 2);
    return;
  }
  const int run9x3 = f->dims[1] == 3 && f->dims[2] * c == 9 && p->dilation_w == 1;
  const ptrdiff_t rs = (ptrdiff_t)p->dilation_h * w * c;
  int32_t oy = p0 / ow, ox = p0 - oy * ow;
  if (run9x3 && np == CONV_COLUMNS && ox + CONV_COLUMNS <= ow) { /* one output row: are all four windows inside? */
    const int32_t iy0 = oy * p->stride_h - d->pad_h, ix0 = ox * p->stride_w - d->pad_w;
    if (ix0 >= 0 && ix0 + (CONV_COLUMNS - 1) * p->stride_w + f->dims[2] <= w && iy0 >= 0 &&
        iy0 + 2 * p->dilation_h < h) {
      conv_run9x3_block((const uint8_t *)x + ((ptrdiff_t)iy0 * w + ix0) * c, rs, (ptrdiff_t)p->stride_w * c, block);
      return;
    }
  }
  for (int32_t col = 0; col < CONV_COLUMNS; ++col) {
    uint32_t *dst = block + 2 * col;
    if (col >= np) {
      for (int32_t g = 0; g < groups; ++g) dst[8 * g] = dst[8 * g + 1] = 0;
      continue;
    }
    const int32_t iy0 = oy * p->stride_h - d->pad_h, ix0 = ox * p->stride_w - d->pad_w;
    if (run9x3 && ix0 >= 0 && ix0 + f->dims[2] <= w && iy0 >= 0 && iy0 + 2 * p->dilation_h < h) {
      conv_run9x3_column((const uint8_t *)x + ((ptrdiff_t)iy0 * w + ix0) * c, rs, dst);
    } else if (run9x3) {
      conv_run9x3_border(x, h, w, c, p->dilation_h, iy0, ix0, zp, dst);
    } else {
      conv_im2col(p, in, f, x, iy0, ix0, zp, dst, staging);
    }
    if (++ox == ow) {
      ox = 0;
      ++oy;
    }
  }
}

/* acc[j] += dot product of the weight row with column j, over `groups` groups of 4 depth elements
 * (scratch layout: see conv_blocked). On Cortex-M: 13 instructions per group for 16 multiply-accumulates
 * (one weight word, two LDMs of the four columns, two SXTB16, eight SMLAD), two groups per loop pass. */
#if EK_CONV_DSP && defined(__OPTIMIZE__) && !defined(EK_CONV_NO_ASM)
#define CONV_DOT_GROUP                                     \
  "ldr %[w02], [%[pw]], #4\n\t"                            \
  "ldmia %[pc]!, {%[c0], %[c1], %[c2], %[c3]}\n\t"         \
  "sxtb16 %[w13], %[w02], ror #8\n\t"                      \
  "sxtb16 %[w02], %[w02]\n\t"                              \
  "smlad %[a0], %[c0], %[w02], %[a0]\n\t"                  \
  "smlad %[a0], %[c1], %[w13], %[a0]\n\t"                  \
  "smlad %[a1], %[c2], %[w02], %[a1]\n\t"                  \
  "smlad %[a1], %[c3], %[w13], %[a1]\n\t"                  \
  "ldmia %[pc]!, {%[c0], %[c1], %[c2], %[c3]}\n\t"         \
  "smlad %[a2], %[c0], %[w02], %[a2]\n\t"                  \
  "smlad %[a2], %[c1], %[w13], %[a2]\n\t"                  \
  "smlad %[a3], %[c2], %[w02], %[a3]\n\t"                  \
  "smlad %[a3], %[c3], %[w13], %[a3]\n\t"
static inline void conv_dot4(const uint32_t *col, const int8_t *w, int32_t groups, int32_t *acc) {
  if (groups <= 0) return;
  register uint32_t c0 __asm__("r0"), c1 __asm__("r1"), c2 __asm__("r2"), c3 __asm__("r3");
  register int32_t a0 __asm__("r4") = acc[0], a1 __asm__("r5") = acc[1], a2 __asm__("r6") = acc[2],
                                      a3 __asm__("r8") = acc[3];
  register const uint32_t *pc __asm__("r10") = col;
  register const int8_t *pw __asm__("r11") = w;
  register int32_t n __asm__("r12") = groups >> 1; /* pairs of groups */
  register uint32_t w02 __asm__("r9"), w13 __asm__("lr");
  __asm__ volatile(
      "tst %[odd], #1\n\t"
      "beq 2f\n\t"
      CONV_DOT_GROUP
      "2:\n\t"
      "cmp %[n], #0\n\t"
      "beq 3f\n\t"
      "1:\n\t"
      CONV_DOT_GROUP
      CONV_DOT_GROUP
      "subs %[n], %[n], #1\n\t"
      "bne 1b\n\t"
      "3:\n\t"
      : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [pc] "+r"(pc), [pw] "+r"(pw), [n] "+r"(n),
        [c0] "=&r"(c0), [c1] "=&r"(c1), [c2] "=&r"(c2), [c3] "=&r"(c3), [w02] "=&r"(w02), [w13] "=&r"(w13)
      : [odd] "r"(groups)
      : "cc", "memory");
  acc[0] = a0;
  acc[1] = a1;
  acc[2] = a2;
  acc[3] = a3;
}
#else
static inline void conv_dot4(const uint32_t *col, const int8_t *w, int32_t groups, int32_t *acc) {
  int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
  for (int32_t g = 0; g < groups; ++g) {
    const uint32_t wv = ek_load32(w);
    w += 4;
    const uint32_t w02 = ek_sxtb16(wv), w13 = ek_sxtb16_ror8(wv);
    a0 = ek_smlad(col[0], w02, a0);
    a0 = ek_smlad(col[1], w13, a0);
    a1 = ek_smlad(col[2], w02, a1);
    a1 = ek_smlad(col[3], w13, a1);
    a2 = ek_smlad(col[4], w02, a2);
    a2 = ek_smlad(col[5], w13, a2);
    a3 = ek_smlad(col[6], w02, a3);
    a3 = ek_smlad(col[7], w13, a3);
    col += 8;
  }
  acc[0] = a0;
  acc[1] = a1;
  acc[2] = a2;
  acc[3] = a3;
}
#endif

/* ---------- Cortex-M (DSP extension): one 4-pixel block over all output channels, in assembly ----------
 * Used when the block is full and every channel takes the fast requantization: per output
 * channel it runs conv_dot4's inner loop over all groups (a zero-padded last group multiplies the next
 * row's first bytes by 0, so the last channel is left to C when depth % 4 != 0: no read past the weights),
 * then ek_conv_requant_fast with the output offset folded into the rounding constant (ek_conv_requant_zp2;
 * every channel's exponent <= EK_CONV_ZP_FOLD_MAX_E) and the activation clamp (skipped when it is the int8
 * range the SSAT already gives) for the four pixels, with all
 * values in registers (the C version of the same steps spills them around the dot product's registers). */
#if EK_CONV_DSP && defined(__thumb2__) && !defined(EK_CONV_NO_ASM)
#define CONV_BLOCK_ASM 1
typedef struct conv_block_args { /* offsets used by the assembly below (32-bit targets only) */
  const uint32_t *cols;          /*  0 */
  const int8_t *weights;         /*  4 */
  int32_t groups;                /*  8 */
  int32_t count;                 /* 12: output channels left */
  const ek_conv_channel *ch;     /* 16: current channel (fold: accumulator start) */
  int8_t *dst;                   /* 20: output of pixel 0, current channel */
  int32_t stride;                /* 24: bytes between the pixels' outputs */
  int32_t zp, lo, hi;            /* 28, 32, 36 */
  int32_t row_pad;               /* 40: 4 * groups - depth: bytes to step back to the next weight row */
  int32_t clamp;                 /* 44: nonzero when [lo, hi] is narrower than [-128, 127] */
} conv_block_args;
typedef char conv_block_args_is_48_bytes[sizeof(conv_block_args) == 48 ? 1 : -1];
typedef char conv_channel_is_16_bytes[sizeof(ek_conv_channel) == 16 ? 1 : -1];
void ek_conv_block4_dsp(conv_block_args *args);
/* The 8 SMLADs of one group of 4 input channels for the 4 pixels (weight pairs in r8/r9, two columns per LDMIA
 * in r0-r3): pixel p's first SMLAD adds to ``ap`` (its accumulator, or a fold register for the first group). */
#define CONV_MAC8(a4, a5, a6, a7)              \
    "  smlad r4, r0, r8, " a4 "\n"              \
    "  smlad r4, r1, r9, r4\n"                   \
    "  smlad r5, r2, r8, " a5 "\n"              \
    "  smlad r5, r3, r9, r5\n"                   \
    "  ldmia r10!, {r0-r3}\n"                    \
    "  smlad r6, r0, r8, " a6 "\n"              \
    "  smlad r6, r1, r9, r6\n"                   \
    "  smlad r7, r2, r8, " a7 "\n"              \
    "  smlad r7, r3, r9, r7\n"
/* One group: 4 int8 weights sign-extended in pairs. */
#define CONV_GROUP                     \
    "  ldr r8, [r11], #4\n"            \
    "  ldmia r10!, {r0-r3}\n"          \
    "  sxtb16 r9, r8, ror #8\n"        \
    "  sxtb16 r8, r8\n"                \
    CONV_MAC8("r4", "r5", "r6", "r7")
__asm__(
    "  .syntax unified\n"
    "  .thumb\n"
    "  .section .text.ek_conv_block4_dsp, \"ax\", %progbits\n"
    "  .global ek_conv_block4_dsp\n"
    "  .type ek_conv_block4_dsp, %function\n"
    "  .thumb_func\n"
    "  .balign 4\n"
    "ek_conv_block4_dsp:\n"
    "  push {r4-r11, lr}\n"
    "  mov lr, r0\n"
    "  ldr r11, [lr, #4]\n"                 /* weights: rows are contiguous */
    ".Lek_cb_channel:\n"
    "  ldr r0, [lr, #16]\n"                 /* acc = fold */
    "  ldr r4, [r0, #8]\n"
    "  mov r5, r4\n"
    "  mov r6, r4\n"
    "  mov r7, r4\n"
    "  ldr r10, [lr, #0]\n"
    "  ldr r12, [lr, #8]\n"
    "  tst r12, #1\n"                      /* groups % 4 single groups first, then four per pass */
    "  beq .Lek_cb_two\n"
    CONV_GROUP
    ".Lek_cb_two:\n"
    "  tst r12, #2\n"
    "  beq .Lek_cb_quads\n"
    CONV_GROUP
    CONV_GROUP
    ".Lek_cb_quads:\n"
    "  lsrs r12, r12, #2\n"
    "  beq .Lek_cb_requant\n"
    ".Lek_cb_loop:\n"
    CONV_GROUP CONV_GROUP CONV_GROUP CONV_GROUP
    "  subs r12, r12, #1\n"
    "  bne .Lek_cb_loop\n"
    ".Lek_cb_requant:\n"
    "  ldr r0, [lr, #40]\n"                 /* next weight row (a zero-padded last group read 4 - pad bytes of it) */
    "  sub r11, r11, r0\n"
    "  ldr r0, [lr, #16]\n"                 /* multiplier, shifts (exponent e in bits 0-7) */
    "  ldmia r0, {r1, r3}\n"
    "  ldr r2, [r0, #12]\n"                 /* half + zp << e: the zero point folded in (ek_conv_requant_zp2) */
    "  adds r0, r0, #16\n"
    "  str r0, [lr, #16]\n"
    "  and r3, r3, #255\n"                  /* e */
    "  ldr r10, [lr, #20]\n"                /* dst */
    "  ldr r12, [lr, #24]\n"                /* stride */
#define CONV_OUT(ra)                  \
    "  sub r0, r2, " ra ", lsr #31\n"   \
    "  lsl " ra ", " ra ", #1\n"        \
    "  smmlar " ra ", " ra ", r1, r0\n" \
    "  asr " ra ", " ra ", r3\n"        \
    "  ssat " ra ", #8, " ra "\n"
#define CONV_CLAMP(ra)                \
    "  cmp " ra ", r8\n"                \
    "  it lt\n"                         \
    "  movlt " ra ", r8\n"              \
    "  cmp " ra ", r9\n"                \
    "  it gt\n"                         \
    "  movgt " ra ", r9\n"
    CONV_OUT("r4") CONV_OUT("r5") CONV_OUT("r6") CONV_OUT("r7")
    "  ldr r0, [lr, #44]\n"                 /* activation clamp only when narrower than int8 */
    "  cbz r0, .Lek_cb_store\n"
    "  ldrd r8, r9, [lr, #32]\n"            /* lo, hi */
    CONV_CLAMP("r4") CONV_CLAMP("r5") CONV_CLAMP("r6") CONV_CLAMP("r7")
    ".Lek_cb_store:\n"
    "  strb r4, [r10]\n"
    "  strb r5, [r10, r12]\n"
    "  add r10, r10, r12, lsl #1\n"
    "  strb r6, [r10]\n"
    "  strb r7, [r10, r12]\n"
    "  ldr r10, [lr, #20]\n"
    "  adds r10, r10, #1\n"
    "  str r10, [lr, #20]\n"
    "  ldr r0, [lr, #12]\n"
    "  subs r0, r0, #1\n"
    "  str r0, [lr, #12]\n"
    "  bne .Lek_cb_channel\n"
    "  pop {r4-r11, pc}\n"
    "  .size ek_conv_block4_dsp, . - ek_conv_block4_dsp\n"
    "  .text\n");

#define CONV_CLAMPX(ra)               \
    "  cmp " ra ", r3\n"                \
    "  it lt\n"                         \
    "  movlt " ra ", r3\n"              \
    "  cmp " ra ", r12\n"               \
    "  it gt\n"                         \
    "  movgt " ra ", r12\n"
#define CONV_OUTX(ra)                 \
    "  sub r0, r2, " ra ", lsr #31\n"   \
    "  smmlar " ra ", " ra ", r1, r0\n" \
    "  asr " ra ", " ra ", r3\n"        \
    "  ssat " ra ", #8, " ra "\n"
/* One group of expanded weights: the doubled int16 pairs, one LDRD. */
#define CONV_GROUPX \
    "  ldrd r8, r9, [r11], #8\n" \
    "  ldmia r10!, {r0-r3}\n" \
    CONV_MAC8("r4", "r5", "r6", "r7")
/* The first group: every accumulator starts from 2 * fold (r12). */
#define CONV_FIRSTX \
    "  ldrd r8, r9, [r11], #8\n" \
    "  ldmia r10!, {r0-r3}\n" \
    CONV_MAC8("r12", "r12", "r12", "r12")

/* The same block over expanded weights (conv_data.expanded): per output channel one record of
 * CONV_RECORD_WORDS(groups) words, [2 * fold, the groups' doubled int16 weight pairs, multiplier, half + zp * 2^e,
 * exponent], read in one pass: one LDRD per group instead of LDR + 2 SXTB16, the accumulators already hold 2 * acc
 * (no doubling before SMMLAR), and no per-channel table look-ups.
 * Per-channel overhead is kept small for layers with few groups (1x1 convolutions on 8-32 channels): the group
 * count's dispatch is decided once per call (`entry`: the first group, which starts the four accumulators from
 * 2 * fold, followed by (groups - 1) % 4 groups; `cont`: the loop of four groups or straight to the
 * requantization), and one LDMDB reads the store state. The four output bytes are stored last pixel first
 * at dst + channel + off[j] (the channel from the record's last word: constant channels have no record):
 * a partial block (np < 4) sets off[j] = 0 for j >= np, so its unused columns' values are
 * overwritten by pixel 0's at once (nothing outside the block's pixels is written). */
typedef struct conv_blockx_args { /* offsets used by the assembly below (relative to &cols, the LR base) */
  int32_t clamp;                  /* -24: nonzero when [lo, hi] is narrower than [-128, 127] */
  int8_t *dst;                    /* -20: output of pixel 0, channel 0 */
  int32_t off[3];                 /* -16, -12, -8: bytes from pixel 0's output to pixels 1, 2, 3's (0: unused) */
  const uint32_t *end;            /* -4: end of the last channel's record */
  const uint32_t *cols;           /*  0 */
  uintptr_t entry;                /*  4: code address (Thumb bit set) of the first-groups sequence */
  int32_t quads;                  /*  8: (groups - 1) >> 2 */
  uintptr_t cont;                 /* 12: ek_conv_bx_quads or ek_conv_bx_requant */
  int32_t lo, hi;                 /* 16, 20 */
  const uint32_t *records;        /* 24 */
} conv_blockx_args;
typedef char conv_blockx_args_is_52_bytes[sizeof(conv_blockx_args) == 52 ? 1 : -1];
void ek_conv_block4x_dsp(conv_blockx_args *args);
void ek_conv_bx_first0(void); /* code labels inside ek_conv_block4x_dsp, never called from C */
void ek_conv_bx_first1(void);
void ek_conv_bx_first2(void);
void ek_conv_bx_first3(void);
void ek_conv_bx_quads(void);
void ek_conv_bx_requant(void);
__asm__(
    "  .syntax unified\n"
    "  .thumb\n"
    "  .section .text.ek_conv_block4x_dsp, \"ax\", %progbits\n"
    "  .global ek_conv_block4x_dsp\n"
    "  .type ek_conv_block4x_dsp, %function\n"
    "  .thumb_func\n"
    "  .balign 4\n"
    "ek_conv_block4x_dsp:\n"
    "  push {r4-r11, lr}\n"
    "  add lr, r0, #24\n"
    "  ldr r11, [lr, #24]\n"                /* records are contiguous */
    ".Lek_cbx_channel:\n"
    "  ldr r12, [r11], #4\n"                /* 2 * fold: the first group's accumulator start */
    "  ldmia lr, {r10, pc}\n"               /* cols; jump to the entry for this group count */
    "  .global ek_conv_bx_first3\n  .type ek_conv_bx_first3, %function\n  .thumb_func\n"
    "ek_conv_bx_first3:\n"
    CONV_FIRSTX CONV_GROUPX CONV_GROUPX CONV_GROUPX
    "  ldr pc, [lr, #12]\n"
    "  .global ek_conv_bx_first2\n  .type ek_conv_bx_first2, %function\n  .thumb_func\n"
    "ek_conv_bx_first2:\n"
    CONV_FIRSTX CONV_GROUPX CONV_GROUPX
    "  ldr pc, [lr, #12]\n"
    "  .global ek_conv_bx_first1\n  .type ek_conv_bx_first1, %function\n  .thumb_func\n"
    "ek_conv_bx_first1:\n"
    CONV_FIRSTX CONV_GROUPX
    "  ldr pc, [lr, #12]\n"
    "  .global ek_conv_bx_first0\n  .type ek_conv_bx_first0, %function\n  .thumb_func\n"
    "ek_conv_bx_first0:\n"
    CONV_FIRSTX
    "  ldr pc, [lr, #12]\n"
    "  .global ek_conv_bx_quads\n  .type ek_conv_bx_quads, %function\n  .thumb_func\n"
    "ek_conv_bx_quads:\n"
    "  ldr r12, [lr, #8]\n"
    ".Lek_cbx_loop:\n"
    CONV_GROUPX
    CONV_GROUPX
    CONV_GROUPX
    CONV_GROUPX
    "  subs r12, r12, #1\n"
    "  bne .Lek_cbx_loop\n"
    "  .global ek_conv_bx_requant\n  .type ek_conv_bx_requant, %function\n  .thumb_func\n"
    "ek_conv_bx_requant:\n"
    "  ldmia r11!, {r1, r2, r3}\n"          /* multiplier, half + zp << e, e | channel << 8 */
    CONV_OUTX("r4") CONV_OUTX("r5") CONV_OUTX("r6") CONV_OUTX("r7")
    "  ldmdb lr, {r0, r1, r2, r8, r9, r10}\n" /* clamp, dst, off1, off2, off3, end */
    "  add r1, r1, r3, lsr #8\n"            /* this channel's output of pixel 0 */
    "  cbz r0, .Lek_cbx_store\n"            /* activation clamp only when narrower than int8 */
    "  ldrd r3, r12, [lr, #16]\n"           /* lo, hi */
    CONV_CLAMPX("r4") CONV_CLAMPX("r5") CONV_CLAMPX("r6") CONV_CLAMPX("r7")
    ".Lek_cbx_store:\n"                     /* last pixel first: unused columns (off 0) are overwritten by pixel 0 */
    "  strb r7, [r1, r9]\n"
    "  strb r6, [r1, r8]\n"
    "  strb r5, [r1, r2]\n"
    "  strb r4, [r1]\n"
    "  cmp r11, r10\n"
    "  bne .Lek_cbx_channel\n"
    "  pop {r4-r11, pc}\n"
    "  .size ek_conv_block4x_dsp, . - ek_conv_block4x_dsp\n"
    "  .text\n");
#undef CONV_FIRSTX

/* One column of a partial block over expanded weights (np <= 2: cheaper than the four-column block with unused
 * columns): per output channel 2 * fold + the groups' two SMLADs, the same requantization and clamp, one byte. */
typedef struct conv_block1x_args { /* offsets used by the assembly below */
  const uint32_t *col;             /*  0: the column's first word (block + 2 * j; 8 words per group) */
  int32_t groups;                  /*  4 */
  const uint32_t *records;         /*  8 */
  const uint32_t *end;             /* 12 */
  int8_t *dst;                     /* 16: output of the pixel, channel 0 */
  int32_t clamp;                   /* 20 */
  int32_t lo, hi;                  /* 24, 28 */
} conv_block1x_args;
typedef char conv_block1x_args_is_32_bytes[sizeof(conv_block1x_args) == 32 ? 1 : -1];
void ek_conv_block1x_dsp(conv_block1x_args *args);
__asm__(
    "  .syntax unified\n"
    "  .thumb\n"
    "  .section .text.ek_conv_block1x_dsp, \"ax\", %progbits\n"
    "  .global ek_conv_block1x_dsp\n"
    "  .type ek_conv_block1x_dsp, %function\n"
    "  .thumb_func\n"
    "  .balign 4\n"
    "ek_conv_block1x_dsp:\n"
    "  push {r4-r11, lr}\n"
    "  mov lr, r0\n"
    "  ldr r11, [lr, #8]\n"
    ".Lek_cb1_channel:\n"
    "  ldr r4, [r11], #4\n"                 /* 2 * fold */
    "  ldmia lr, {r10, r12}\n"              /* column, groups */
    "  lsrs r12, r12, #1\n"                 /* pairs of groups; C = an odd one first */
    "  bcc .Lek_cb1_pairs\n"
    "  ldrd r8, r9, [r11], #8\n"
    "  ldrd r0, r1, [r10], #32\n"
    "  smlad r4, r0, r8, r4\n"
    "  smlad r4, r1, r9, r4\n"
    ".Lek_cb1_pairs:\n"
    "  beq .Lek_cb1_requant\n"              /* Z still from the LSRS */
    ".Lek_cb1_loop:\n"
    "  ldrd r8, r9, [r11], #8\n"
    "  ldrd r0, r1, [r10], #32\n"
    "  smlad r4, r0, r8, r4\n"
    "  smlad r4, r1, r9, r4\n"
    "  ldrd r8, r9, [r11], #8\n"
    "  ldrd r0, r1, [r10], #32\n"
    "  smlad r4, r0, r8, r4\n"
    "  smlad r4, r1, r9, r4\n"
    "  subs r12, r12, #1\n"
    "  bne .Lek_cb1_loop\n"
    ".Lek_cb1_requant:\n"
    "  ldmia r11!, {r1, r2, r3}\n"          /* multiplier, half + zp << e, e */
    CONV_OUTX("r4")
    "  ldr r0, [lr, #20]\n"
    "  cbz r0, .Lek_cb1_store\n"
    "  ldrd r8, r9, [lr, #24]\n"            /* lo, hi */
    CONV_CLAMP("r4")
    ".Lek_cb1_store:\n"
    "  ldr r1, [lr, #16]\n"
    "  add r1, r1, r3, lsr #8\n"            /* + the record's channel */
    "  strb r4, [r1]\n"
    "  ldr r0, [lr, #12]\n"
    "  cmp r11, r0\n"
    "  bne .Lek_cb1_channel\n"
    "  pop {r4-r11, pc}\n"
    "  .size ek_conv_block1x_dsp, . - ek_conv_block1x_dsp\n"
    "  .text\n");

/* ---------- Cortex-M (DSP): 1x1 stride-1 convolutions on 4, 8 or 12 input channels (1-3 groups) ----------
 * The expanded-weight block above spends ~26 instructions per output channel and 4-pixel block on requantization,
 * stores and bookkeeping, plus ~16 per group of 4 pixels on the C im2col: on 1-3 groups that is more than the
 * multiply-accumulates themselves (issue 25: the 8-channel 1x1 layer of MobileNet-v1 0.25 at 1.64 instructions per
 * MAC). `ek_conv_pw<G>_dsp` runs a whole run of full 4-pixel blocks of such a layer (same records, same block
 * layout, same requantization: ek_conv_requant_zp2 then SSAT, no activation clamp narrower than int8):
 *  - per block the four pixels' 4 * G raw input words are read with one LDM, expanded with SXTB16 and stored with
 *    STM/STRD into the block (before any of the block's outputs is written: the access contract of the block path);
 *  - per output channel one LDM reads the record's 2 * fold and weights (G <= 2; G = 3: one more LDM for the last
 *    group), one LDM per two columns and group reads the block, the first group's SMLADs start from 2 * fold, one LDM
 *    reads multiplier, rounding constant and exponent | channel << 8, one LDM from the frame reads the store state;
 *  - G = 1, 2: channels are run in pairs, the first of a pair reading the block downwards (LDMDB) and the second
 *    upwards, so the block pointer needs no reset and the end test runs once per pair (an odd count enters at the
 *    second copy); G = 3 resets the pointer per channel.
 * Frame (sp-relative, copied from conv_pw_args): 0 dst (pixel 0, channel 0 of the block), 4-12 the three pixels'
 * output offsets, 16 end of the records, 20 src (raw input of the next block), 24 block, 28 src end, 32 records,
 * 36 odd record count. An optional kernel path (EK_NEED_CONV_SMALL_POINTWISE, edgekit/firmware/kernel_paths.py): a
 * model's own build without such a layer leaves it out of flash (the KWS code budget). */
#if !defined(EK_MODEL_PATHS) || defined(EK_NEED_CONV_SMALL_POINTWISE)
#define CONV_PW_ASM 1
typedef struct conv_pw_args {  /* the frame layout above */
  int8_t *dst;
  int32_t off[3];
  const uint32_t *end;
  const int8_t *src;
  uint32_t *block;
  const int8_t *src_end;
  const uint32_t *records;
  int32_t odd;
} conv_pw_args;
typedef char conv_pw_args_is_40_bytes[sizeof(conv_pw_args) == 40 ? 1 : -1];
void ek_conv_pw1_dsp(conv_pw_args *args);
void ek_conv_pw2_dsp(conv_pw_args *args);
void ek_conv_pw3_dsp(conv_pw_args *args);
/* One group of the four columns upwards (LDMIA: columns 0-1, then 2-3; accumulators r4-r7 = pixels 0-3) or downwards
 * (LDMDB: columns 2-3 into r4-r5, then 0-1 into r6-r7); `a` = the accumulators' start (r7 = 2 * fold for the first
 * group: r7 is the last one written). */
#define CONV_PW_UP_(wa, wb, a4, a5, a6, a7)   \
    "  ldmia r10!, {r0-r3}\n"                  \
    "  smlad r4, r0, " wa ", " a4 "\n"         \
    "  smlad r4, r1, " wb ", r4\n"             \
    "  smlad r5, r2, " wa ", " a5 "\n"         \
    "  smlad r5, r3, " wb ", r5\n"             \
    "  ldmia r10!, {r0-r3}\n"                  \
    "  smlad r6, r0, " wa ", " a6 "\n"         \
    "  smlad r6, r1, " wb ", r6\n"             \
    "  smlad r7, r2, " wa ", " a7 "\n"         \
    "  smlad r7, r3, " wb ", r7\n"
#define CONV_PW_DOWN_(wa, wb, a4, a5, a6, a7) \
    "  ldmdb r10!, {r0-r3}\n"                  \
    "  smlad r4, r0, " wa ", " a4 "\n"         \
    "  smlad r4, r1, " wb ", r4\n"             \
    "  smlad r5, r2, " wa ", " a5 "\n"         \
    "  smlad r5, r3, " wb ", r5\n"             \
    "  ldmdb r10!, {r0-r3}\n"                  \
    "  smlad r6, r0, " wa ", " a6 "\n"         \
    "  smlad r6, r1, " wb ", r6\n"             \
    "  smlad r7, r2, " wa ", " a7 "\n"         \
    "  smlad r7, r3, " wb ", r7\n"
#define CONV_PW_UP(wa, wb, acc) CONV_PW_UP_(wa, wb, acc)
#define CONV_PW_DOWN(wa, wb, acc) CONV_PW_DOWN_(wa, wb, acc)
#define CONV_PW_FIRST "r7", "r7", "r7", "r7"
#define CONV_PW_NEXT "r4", "r5", "r6", "r7"
/* Requantization of r4-r7 (ek_conv_requant_zp2 + SSAT, as CONV_OUTX), the store state from the frame, the four
   bytes at dst + channel + off (c0-c3: the registers holding pixels 0-3). Leaves the records' end in r9. */
#define CONV_PW_OUT(c0, c1, c2, c3)            \
    "  ldmia r11!, {r1, r2, r3}\n"             \
    CONV_OUTX("r4") CONV_OUTX("r5") CONV_OUTX("r6") CONV_OUTX("r7") \
    "  ldmia sp, {r0, r1, r2, r8, r9}\n"       \
    "  add r0, r0, r3, lsr #8\n"               \
    "  strb " c0 ", [r0]\n"                    \
    "  strb " c1 ", [r0, r1]\n"                \
    "  strb " c2 ", [r0, r2]\n"                \
    "  strb " c3 ", [r0, r8]\n"
#define CONV_PW_PROLOGUE(name)                 \
    "  .syntax unified\n"                      \
    "  .thumb\n"                               \
    "  .section .text." name ", \"ax\", %progbits\n" \
    "  .global " name "\n"                     \
    "  .type " name ", %function\n"            \
    "  .thumb_func\n"                          \
    "  .balign 4\n"                            \
    name ":\n"                                 \
    "  push {r4-r11, lr}\n"                    \
    "  sub sp, sp, #40\n"                      \
    "  ldmia r0, {r1-r10}\n"                   \
    "  stmia sp, {r1-r10}\n"
/* Block loop head: exit at the end of the input run, else r11 = src, r10 = block. */
#define CONV_PW_TOP(label)                     \
    label "_top:\n"                            \
    "  ldrd r11, r10, [sp, #20]\n"             \
    "  ldr r12, [sp, #28]\n"                   \
    "  cmp r11, r12\n"                         \
    "  beq " label "_exit\n"
#define CONV_PW_NEXT_BLOCK(label)              \
    "  ldrd r0, r1, [sp]\n"                    \
    "  add r0, r0, r1, lsl #2\n"               \
    "  str r0, [sp]\n"                         \
    "  b " label "_top\n"                      \
    label "_exit:\n"                           \
    "  add sp, sp, #40\n"                      \
    "  pop {r4-r11, pc}\n"
#define CONV_PW_SX4(a, b)                      \
    "  sxtb16 r8, " a "\n"                     \
    "  sxtb16 r9, " a ", ror #8\n"             \
    "  sxtb16 r12, " b "\n"                    \
    "  sxtb16 lr, " b ", ror #8\n"
/* Pairs of channels: the first reads the block downwards (r10 at its end), the second upwards; an odd count starts
   with the second. */
#define CONV_PW_PAIRS(label, bytes, head, down, up) \
    "  ldr r11, [sp, #32]\n"                   \
    "  ldr r0, [sp, #36]\n"                    \
    "  cbz r0, " label "_down\n"               \
    "  sub r10, r10, #" bytes "\n"             \
    "  b " label "_up\n"                       \
    label "_down:\n"                           \
    head down CONV_PW_OUT("r6", "r7", "r4", "r5") \
    label "_up:\n"                             \
    head up CONV_PW_OUT("r4", "r5", "r6", "r7") \
    "  cmp r11, r9\n"                          \
    "  bne " label "_down\n"
__asm__(
    CONV_PW_PROLOGUE("ek_conv_pw1_dsp")
    CONV_PW_TOP(".Lek_pw1")
    "  ldmia r11!, {r0-r3}\n"                  /* pixels 0-3, one group each */
    "  str r11, [sp, #20]\n"
    "  sxtb16 r4, r0\n"
    "  sxtb16 r5, r0, ror #8\n"
    "  sxtb16 r6, r1\n"
    "  sxtb16 r7, r1, ror #8\n"
    CONV_PW_SX4("r2", "r3")
    "  stmia r10!, {r4-r9, r12, lr}\n"
    CONV_PW_PAIRS(".Lek_pw1", "32", "  ldmia r11!, {r7, r8, r9}\n",  /* 2 * fold, weights */
                  CONV_PW_DOWN("r8", "r9", CONV_PW_FIRST), CONV_PW_UP("r8", "r9", CONV_PW_FIRST))
    CONV_PW_NEXT_BLOCK(".Lek_pw1")
    "  .size ek_conv_pw1_dsp, . - ek_conv_pw1_dsp\n"
    "  .text\n");
__asm__(
    CONV_PW_PROLOGUE("ek_conv_pw2_dsp")
    CONV_PW_TOP(".Lek_pw2")
    "  ldmia r11!, {r0-r7}\n"                  /* pixel j: group 0 in r(2j), group 1 in r(2j+1) */
    "  str r11, [sp, #20]\n"
    CONV_PW_SX4("r0", "r2")
    "  stmia r10!, {r8, r9, r12, lr}\n"
    CONV_PW_SX4("r4", "r6")
    "  stmia r10!, {r8, r9, r12, lr}\n"
    CONV_PW_SX4("r1", "r3")
    "  stmia r10!, {r8, r9, r12, lr}\n"
    CONV_PW_SX4("r5", "r7")
    "  stmia r10!, {r8, r9, r12, lr}\n"
    CONV_PW_PAIRS(".Lek_pw2", "64", "  ldmia r11!, {r7, r8, r9, r12, lr}\n",  /* 2 * fold, both groups' weights */
                  CONV_PW_DOWN("r12", "lr", CONV_PW_FIRST) CONV_PW_DOWN("r8", "r9", CONV_PW_NEXT),
                  CONV_PW_UP("r8", "r9", CONV_PW_FIRST) CONV_PW_UP("r12", "lr", CONV_PW_NEXT))
    CONV_PW_NEXT_BLOCK(".Lek_pw2")
    "  .size ek_conv_pw2_dsp, . - ek_conv_pw2_dsp\n"
    "  .text\n");
#define CONV_PW_SX4_STRD(a, b, offset0, offset1) \
    CONV_PW_SX4(a, b)                          \
    "  strd r8, r9, [r10, #" offset0 "]\n"     \
    "  strd r12, lr, [r10, #" offset1 "]\n"
__asm__(
    CONV_PW_PROLOGUE("ek_conv_pw3_dsp")
    CONV_PW_TOP(".Lek_pw3")
    "  ldmia r11!, {r0-r5}\n"                  /* pixels 0-1: groups 0-2 in r0-r2, r3-r5 */
    CONV_PW_SX4_STRD("r0", "r3", "0", "8")
    CONV_PW_SX4_STRD("r1", "r4", "32", "40")
    CONV_PW_SX4_STRD("r2", "r5", "64", "72")
    "  ldmia r11!, {r0-r5}\n"                  /* pixels 2-3 */
    "  str r11, [sp, #20]\n"
    CONV_PW_SX4_STRD("r0", "r3", "16", "24")
    CONV_PW_SX4_STRD("r1", "r4", "48", "56")
    CONV_PW_SX4_STRD("r2", "r5", "80", "88")
    "  ldr r11, [sp, #32]\n"
    ".Lek_pw3_channel:\n"
    "  ldmia r11!, {r7, r8, r9, r12, lr}\n"    /* 2 * fold, groups 0-1's weights */
    CONV_PW_UP("r8", "r9", CONV_PW_FIRST)
    CONV_PW_UP("r12", "lr", CONV_PW_NEXT)
    "  ldmia r11!, {r8, r9}\n"                 /* group 2's weights */
    CONV_PW_UP("r8", "r9", CONV_PW_NEXT)
    "  sub r10, r10, #96\n"
    CONV_PW_OUT("r4", "r5", "r6", "r7")
    "  cmp r11, r9\n"
    "  bne .Lek_pw3_channel\n"
    CONV_PW_NEXT_BLOCK(".Lek_pw3")
    "  .size ek_conv_pw3_dsp, . - ek_conv_pw3_dsp\n"
    "  .text\n");
#undef CONV_PW_SX4_STRD
#undef CONV_PW_PAIRS
#undef CONV_PW_SX4
#undef CONV_PW_NEXT_BLOCK
#undef CONV_PW_TOP
#undef CONV_PW_PROLOGUE
#undef CONV_PW_OUT
#undef CONV_PW_NEXT
#undef CONV_PW_FIRST
#undef CONV_PW_DOWN
#undef CONV_PW_UP
#undef CONV_PW_DOWN_
#undef CONV_PW_UP_
#else
#define CONV_PW_ASM 0
#endif
#undef CONV_OUTX
#undef CONV_CLAMPX
#undef CONV_GROUPX
#undef CONV_OUT
#undef CONV_CLAMP
#else
#define CONV_BLOCK_ASM 0
#endif

/* One block over expanded weights (conv_data.expanded: fast requantization with the zero point folded, doubled
   int16 weights, two words per group): the assembly on Cortex-M with DSP (partial blocks too: see
   conv_blockx_args), else the same steps in C (what the host build runs, so the layout is tested there). */
static void conv_block_expanded(const conv_data *d, const uint32_t *block, int32_t groups, int32_t np, int8_t *yp) {
  const int32_t oc = d->channels, lo = d->act_min, hi = d->act_max, words = CONV_RECORD_WORDS(groups);
  const int32_t records = d->records;
  const uint32_t *rec = conv_records(d);
#if CONV_BLOCK_ASM
  if (records == 0) return; /* every channel constant */
  {
    static void (*const first[4])(void) = {ek_conv_bx_first0, ek_conv_bx_first1, ek_conv_bx_first2,
                                           ek_conv_bx_first3};
    if (np <= 2) { /* one column at a time: 4 instructions per group and column instead of 11 for all four */
      for (int32_t j = 0; j < np; ++j) {
        conv_block1x_args one = {block + 2 * j, groups, rec, rec + (ptrdiff_t)records * words, yp + (ptrdiff_t)j * oc,
                                 lo > -128 || hi < 127, lo, hi};
        ek_conv_block1x_dsp(&one);
      }
      return;
    }
    const int32_t quads = (groups - 1) >> 2; /* groups >= 1 */
    conv_blockx_args args = {lo > -128 || hi < 127, yp, {np > 1 ? oc : 0, np > 2 ? 2 * oc : 0, np > 3 ? 3 * oc : 0},
                             rec + (ptrdiff_t)records * words, block, (uintptr_t)first[(groups - 1) & 3], quads,
                             quads ? (uintptr_t)ek_conv_bx_quads : (uintptr_t)ek_conv_bx_requant, lo, hi, rec};
    ek_conv_block4x_dsp(&args);
    return;
  }
#endif
  for (int32_t r = 0; r < records; ++r, rec += words) { /* only the block's np columns (a partial last block) */
    const uint32_t *q = rec + 1 + 2 * groups; /* multiplier, half + zp << e, e | channel << 8 */
    const int32_t o = (int32_t)(q[2] >> 8), e = (int32_t)(q[2] & 0xFFu);
    for (int32_t j = 0; j < np; ++j) {
      int32_t acc = (int32_t)rec[0];
      const uint32_t *col = block + 2 * j, *w = rec + 1;
      for (int32_t g = 0; g < groups; ++g, col += 8, w += 2) acc = ek_smlad(col[1], w[1], ek_smlad(col[0], w[0], acc));
      yp[j * oc + o] = ek_conv_clamp8(ek_ssat8(ek_conv_requant_zp2(acc, (int32_t)q[0], (int32_t)q[1], e)), lo, hi);
    }
  }
}

#if CONV_BLOCK_ASM && CONV_PW_ASM
/* conv_data.expanded, 1x1 stride 1 unpadded on 1-3 groups (input channels 4, 8, 12), no clamp narrower than int8,
   word-aligned input: each batch's run of full 4-pixel blocks in ek_conv_pw<G>_dsp (c % 4 == 0 keeps every block's
   input word-aligned), a partial last block through conv_block_expanded. */
static CONV_NOINLINE void conv_pointwise_small(const conv_data *d, const ek_tensor *in, ek_tensor *out, uint32_t *block, const conv_blockx_args *bx,
                                               int32_t row0, int32_t row1) {
  static void (*const pw[3])(conv_pw_args *) = {ek_conv_pw1_dsp, ek_conv_pw2_dsp, ek_conv_pw3_dsp};
  const int32_t n = in->dims[0], c = in->dims[3], oc = d->channels, ow = out->dims[2], pixels = out->dims[1] * ow;
  const int32_t groups = c >> 2;
  int8_t *y = (int8_t *)out->data;
  for (int32_t b = 0; b < n; ++b) {
    const int8_t *x = (const int8_t *)in->data + (ptrdiff_t)b * pixels * c; /* 1x1 stride 1: h * w == pixels */
    const int32_t p0 = row0 * ow, end = row1 * ow, full = (end - p0) & ~(CONV_COLUMNS - 1);
    if (full > 0) {
      conv_pw_args pa = {y + ((int64_t)b * pixels + p0) * oc, {oc, 2 * oc, 3 * oc}, bx->end,
                         x + (ptrdiff_t)p0 * c, block, x + (ptrdiff_t)(p0 + full) * c, bx->records, d->records & 1};
      pw[groups - 1](&pa);
    }
    if (p0 + full < end) { /* 1-3 pixels left */
      const int32_t np = end - p0 - full;
      for (int32_t col = 0; col < CONV_COLUMNS; ++col) {
        uint32_t *dst = block + 2 * col;
        for (int32_t g = 0; g < groups; ++g) {
          const uint32_t v = col < np ? ek_load32(x + (ptrdiff_t)(p0 + full + col) * c + 4 * g) : 0u;
          dst[8 * g] = ek_sxtb16(v);
          dst[8 * g + 1] = ek_sxtb16_ror8(v);
        }
      }
      conv_block_expanded(d, block, groups, np, y + ((int64_t)b * pixels + p0 + full) * oc);
    }
  }
}
#endif

#if CONV_BLOCK_ASM
/* The expanded path's block loop on Cortex-M: the assembly's arguments built once per call (per block only the
   im2col and the output address change); partial blocks through conv_block_expanded. */
static CONV_NOINLINE void conv_expanded_dsp(const conv_data *d, const ek_op_params *p, const ek_tensor *in,
                                            const ek_tensor *f, ek_tensor *out, uint32_t *block, int32_t row0,
                                            int32_t row1) {
  static void (*const first[4])(void) = {ek_conv_bx_first0, ek_conv_bx_first1, ek_conv_bx_first2, ek_conv_bx_first3};
  if (d->records == 0) return; /* every channel constant */
  const int32_t n = in->dims[0], oc = d->channels, ow = out->dims[2], pixels = out->dims[1] * ow;
  const int32_t groups = (f->dims[1] * f->dims[2] * f->dims[3] + 3) >> 2, quads = (groups - 1) >> 2;
  const int32_t lo = d->act_min, hi = d->act_max;
  const uint32_t *rec = conv_records(d);
  int8_t *staging = (int8_t *)(block + 2 * CONV_COLUMNS * groups);
  int8_t *y = (int8_t *)out->data;
  conv_blockx_args args = {lo > -128 || hi < 127, y, {oc, 2 * oc, 3 * oc},
                           rec + (ptrdiff_t)d->records * CONV_RECORD_WORDS(groups),
                           block, (uintptr_t)first[(groups - 1) & 3], quads,
                           quads ? (uintptr_t)ek_conv_bx_quads : (uintptr_t)ek_conv_bx_requant, lo, hi, rec};
  /* the two common full-block im2col cases, their invariants hoisted (else conv_im2col_block) */
  const int32_t h = in->dims[1], w = in->dims[2], c = in->dims[3], kw = f->dims[2];
  const int pointwise = f->dims[1] == 1 && kw == 1 && p->stride_h == 1 && p->stride_w == 1 && d->pad_h == 0 &&
                        d->pad_w == 0 && ow == w && (c & 3) == 0;
#if CONV_PW_ASM
  if (pointwise && groups <= 3 && !args.clamp && ((uintptr_t)in->data & 3u) == 0) {
    conv_pointwise_small(d, in, out, block, &args, row0, row1);
    return;
  }
#endif
  const int run9x3 = f->dims[1] == 3 && kw * c == 9 && p->dilation_w == 1;
  const int32_t iy_max = h - 1 - 2 * p->dilation_h, ix_max = w - (CONV_COLUMNS - 1) * p->stride_w - kw;
  const ptrdiff_t rs = (ptrdiff_t)p->dilation_h * w * c, step = (ptrdiff_t)p->stride_w * c;
  for (int32_t b = 0; b < n; ++b) {
    const int8_t *x = (const int8_t *)in->data + (ptrdiff_t)b * h * w * c;
    for (int32_t p0 = row0 * ow, end = row1 * ow; p0 < end; p0 += CONV_COLUMNS) {
      const int32_t np = end - p0 < CONV_COLUMNS ? end - p0 : CONV_COLUMNS;
      int done = 0;
      if (np == CONV_COLUMNS && pointwise) { /* output pixel q reads input pixel q */
        for (int32_t col = 0; col < CONV_COLUMNS; ++col)
          conv_expand_run(x + (ptrdiff_t)(p0 + col) * c, block + 2 * col, c >> 2);
        done = 1;
      } else if (np == CONV_COLUMNS && run9x3) {
        const int32_t oy = p0 / ow, ox = p0 - oy * ow;
        const int32_t iy0 = oy * p->stride_h - d->pad_h, ix0 = ox * p->stride_w - d->pad_w;
        if (ox + CONV_COLUMNS <= ow && ix0 >= 0 && ix0 <= ix_max && iy0 >= 0 && iy0 <= iy_max) {
          conv_run9x3_block((const uint8_t *)x + ((ptrdiff_t)iy0 * w + ix0) * c, rs, step, block);
          done = 1;
        }
      }
      if (!done) conv_im2col_block(d, p, in, f, b, p0, np, ow, block, staging);
      int8_t *yp = y + ((int64_t)b * pixels + p0) * oc;
      if (np == CONV_COLUMNS) {
        args.dst = yp;
        ek_conv_block4x_dsp(&args);
      } else {
        conv_block_expanded(d, block, groups, np, yp);
      }
    }
  }
}
#endif

/* Four output pixels (consecutive in row-major order, across row ends) per pass.
 * Block layout, int16: for each group g of 4 depth elements, 16 values: column j at [16g + 4j, 16g + 4j + 3]
 * holding the raw inputs (x0, x2, x1, x3), so one SMLAD pairs with SXTB16 of 4 weights (x0,x2 . w0,w2) and
 * another with SXTB16 ROR 8 (x1,x3 . w1,w3); a trailing partial group is zero-padded. Per group the inner
 * loop reads one weight word and the four columns' 8 words in sequence. Accumulators start at the fold. */
static void conv_blocked(const conv_data *d, const ek_conv_channel *ch, const ek_op_params *p, const ek_tensor *in,
                         const ek_tensor *f, ek_tensor *out, uint32_t *block, int32_t row0, int32_t row1) {
#if CONV_BLOCK_ASM
  if (d->expanded) {
    conv_expanded_dsp(d, p, in, f, out, block, row0, row1);
    return;
  }
#endif
  const int32_t n = in->dims[0];
  const int32_t oc = f->dims[0], depth = f->dims[1] * f->dims[2] * f->dims[3];
  const int32_t oh = out->dims[1], ow = out->dims[2];
  const int32_t pixels = oh * ow;
  const int32_t full_groups = depth >> 2, tail = depth & 3, groups = (depth + 3) >> 2;
  const int32_t lo = d->act_min, hi = d->act_max, zp = d->output_offset;
  const int fast = d->fast_requant;
  static const uint8_t perm[4] = {0, 2, 1, 3}; /* position of depth element i of a group in a column's 2 words */
  /* zero-padded weight rows (per-op data) when depth % 4 != 0: every channel runs whole groups */
  const int8_t *wt = d->padded ? (const int8_t *)(const void *)conv_records(d) : (const int8_t *)f->data;
  const int32_t wstride = d->padded ? 4 * groups : depth;
  const int32_t dot_groups = d->padded ? groups : full_groups, dot_tail = d->padded ? 0 : tail;
  int8_t *staging = (int8_t *)(block + 2 * CONV_COLUMNS * groups);
  const int16_t *tail_cols = (const int16_t *)(const void *)(block + 8 * full_groups);
  int8_t *y = (int8_t *)out->data;
  for (int32_t b = 0; b < n; ++b) {
    for (int32_t p0 = row0 * ow, end = row1 * ow; p0 < end; p0 += CONV_COLUMNS) {
      const int32_t np = end - p0 < CONV_COLUMNS ? end - p0 : CONV_COLUMNS;
      conv_im2col_block(d, p, in, f, b, p0, np, ow, block, staging);
      int8_t *yp = y + ((int64_t)b * pixels + p0) * oc;
      if (d->expanded) {
        conv_block_expanded(d, block, groups, np, yp);
        continue;
      }
      int32_t o = 0;
#if CONV_BLOCK_ASM
      if (np == CONV_COLUMNS && fast && d->zp_fold) {
        const int32_t count = dot_tail ? oc - 1 : oc;
        if (count > 0) {
          conv_block_args args = {block, wt, groups, count, ch, yp, oc, zp, lo, hi, 4 * groups - wstride,
                                  lo > -128 || hi < 127};
          ek_conv_block4_dsp(&args);
          o = count;
        }
      }
#endif
      for (; o < oc; ++o) {
        const int8_t *wp = wt + (int64_t)o * wstride;
        const int32_t init = ch[o].fold;
        int32_t acc[4] = {init, init, init, init};
        conv_dot4(block, wp, dot_groups, acc);
        for (int32_t i = 0; i < dot_tail; ++i) {
          const int32_t wi = wp[4 * full_groups + i];
          for (int32_t j = 0; j < CONV_COLUMNS; ++j) acc[j] = ek_wrap_add(acc[j], wi * tail_cols[4 * j + perm[i]]);
        }
        const ek_conv_channel *cc = &ch[o];
        int8_t *dst = yp + o;
        for (int32_t j = 0; j < np; ++j, dst += oc) {
          const int32_t v =
              fast ? ek_conv_requant_fast(acc[j], cc) : ek_mbqm(acc[j], cc->multiplier, ek_conv_shift(cc));
          *dst = ek_conv_clamp8(ek_wrap_add(v, zp), lo, hi);
        }
      }
    }
  }
}

#endif /* !EK_CONV_MVE */

#if EK_CONV_MVE
/* Short copies and fills with predicated vector stores (the gathers copy runs of a few bytes: library calls
   would cost more than the bytes). */
static inline void conv_mve_copy(int8_t *dst, const int8_t *src, int32_t n) {
  for (; n > 0; n -= 16, dst += 16, src += 16) {
    const mve_pred16_t p = vctp8q((uint32_t)n);
    vstrbq_p_s8(dst, vldrbq_z_s8(src, p), p);
  }
}
static inline void conv_mve_fill(int8_t *dst, int8_t v, int32_t n) {
  const int8x16_t value = vdupq_n_s8(v);
  for (; n > 0; n -= 16, dst += 16) vstrbq_p_s8(dst, value, vctp8q((uint32_t)n));
}

/* Helium: the receptive field of one output pixel as a contiguous int8 column (raw inputs, the input zero point
 * where the window leaves the image: its products cancel against the fold). A window of one contiguous run
 * inside the image (1x1 filters, or full-width rows) is used in place; others are gathered into dst. */
static const int8_t *conv_column8(const ek_op_params *p, const ek_tensor *in, const ek_tensor *f, const int8_t *x,
                                  int32_t iy0, int32_t ix0, int8_t zp, int8_t *dst) {
  const int32_t h = in->dims[1], w = in->dims[2], c = in->dims[3];
  const int32_t kh = f->dims[1], kw = f->dims[2];
  const int rows_inside = iy0 >= 0 && iy0 + (kh - 1) * p->dilation_h < h;
  const int cols_inside = ix0 >= 0 && ix0 + (kw - 1) * p->dilation_w < w;
  if (rows_inside && cols_inside && (kw == 1 || p->dilation_w == 1) && (kh == 1 || (kw == w && p->dilation_h == 1)))
    return x + ((ptrdiff_t)iy0 * w + ix0) * c;
  int8_t *s = dst;
  for (int32_t ky = 0; ky < kh; ++ky) {
    const int32_t iy = iy0 + p->dilation_h * ky;
    const int inside_row = iy >= 0 && iy < h;
    if (inside_row && cols_inside && p->dilation_w == 1) {
      conv_mve_copy(s, x + ((ptrdiff_t)iy * w + ix0) * c, kw * c);
      s += kw * c;
      continue;
    }
    if (!inside_row) {
      conv_mve_fill(s, zp, kw * c);
      s += kw * c;
      continue;
    }
    for (int32_t kx = 0; kx < kw; ++kx, s += c) {
      const int32_t ix = ix0 + p->dilation_w * kx;
      if (ix >= 0 && ix < w) {
        conv_mve_copy(s, x + ((ptrdiff_t)iy * w + ix) * c, c);
      } else {
        conv_mve_fill(s, zp, c);
      }
    }
  }
  return dst;
}

/* Helium blocked path: four output pixels per pass, each output channel's weight row read once per pass and
 * dotted with the four int8 columns by VMLADAVA (accumulators start at the fold). Scratch: 4 columns of
 * `depth` bytes (the im2col block of the DSP path is larger). */
static void conv_blocked_mve(const conv_data *d, const ek_conv_channel *ch, const ek_op_params *p,
                             const ek_tensor *in, const ek_tensor *f, ek_tensor *out, int8_t *scratch, int32_t row0,
                             int32_t row1) {
  const int32_t n = in->dims[0], h = in->dims[1], w = in->dims[2], c = in->dims[3];
  const int32_t oc = f->dims[0], depth = f->dims[1] * f->dims[2] * f->dims[3];
  const int32_t oh = out->dims[1], ow = out->dims[2];
  const int32_t pixels = oh * ow;
  const int32_t lo = d->act_min, hi = d->act_max, zp = d->output_offset;
  const int8_t in_zp = (int8_t)(-d->input_offset);
  const int fast = d->fast_requant;
  const int8_t *wt = (const int8_t *)f->data;
  int8_t *y = (int8_t *)out->data;
  for (int32_t b = 0; b < n; ++b) {
    const int8_t *x = (const int8_t *)in->data + (ptrdiff_t)b * h * w * c;
    for (int32_t p0 = row0 * ow, end = row1 * ow; p0 < end; p0 += CONV_COLUMNS) {
      const int32_t np = end - p0 < CONV_COLUMNS ? end - p0 : CONV_COLUMNS;
      const int8_t *cols[CONV_COLUMNS];
      int32_t oy = p0 / ow, ox = p0 - oy * ow;
      for (int32_t j = 0; j < CONV_COLUMNS; ++j) {
        if (j >= np) {
          cols[j] = cols[0]; /* computed, not stored */
          continue;
        }
        int8_t *col = scratch + (ptrdiff_t)j * depth;
        cols[j] = conv_column8(p, in, f, x, oy * p->stride_h - d->pad_h, ox * p->stride_w - d->pad_w, in_zp, col);
        if (cols[j] != col) { /* a window inside the image: copied too, so the block may overwrite its input */
          conv_mve_copy(col, cols[j], depth);
          cols[j] = col;
        }
        if (++ox == ow) {
          ox = 0;
          ++oy;
        }
      }
      int8_t *yp = y + ((int64_t)b * pixels + p0) * oc;
      const int8_t *wp = wt;
      if (np == CONV_COLUMNS && fast) { /* vector requantization, the 4 bytes stored with one scatter */
        const uint32x4_t offsets = vmulq_n_u32(vidupq_n_u32(0, 1), (uint32_t)oc);
        for (int32_t o = 0; o < oc; ++o, wp += depth) {
          const ek_conv_channel *cc = &ch[o];
          int32_t acc[4] = {cc->fold, cc->fold, cc->fold, cc->fold};
          ek_mve_dot4_s8(wp, cols[0], cols[1], cols[2], cols[3], depth, acc);
          const int32x4_t v = ek_mve_requant4(vld1q_s32(acc), cc->multiplier, ek_conv_exponent(cc), zp, lo, hi);
          vstrbq_scatter_offset_s32(yp + o, offsets, v);
        }
        continue;
      }
      for (int32_t o = 0; o < oc; ++o, wp += depth) {
        const ek_conv_channel *cc = &ch[o];
        int32_t acc[4] = {cc->fold, cc->fold, cc->fold, cc->fold};
        ek_mve_dot4_s8(wp, cols[0], cols[1], cols[2], cols[3], depth, acc);
        int8_t *dst = yp + o;
        for (int32_t j = 0; j < np; ++j, dst += oc) {
          const int32_t v =
              fast ? ek_conv_requant_fast(acc[j], cc) : ek_mbqm(acc[j], cc->multiplier, ek_conv_shift(cc));
          *dst = ek_conv_clamp8(ek_wrap_add(v, zp), lo, hi);
        }
      }
    }
  }
}
#endif

static ek_status conv_eval(ek_context *ctx, ek_op *op) {
  const conv_data *d = (const conv_data *)op->user_data;
  const ek_conv_channel *ch = conv_channels(op->user_data);
  const ek_tensor *in = ek_input(ctx, op, 0), *f = ek_input(ctx, op, 1), *bias = ek_input(ctx, op, 2);
  ek_tensor *out = ek_output(ctx, op, 0);
  const int32_t *bias_data = bias ? (const int32_t *)bias->data : (const int32_t *)0;
  /* all output rows, or the range a row-streamed group asks for (batch 1 there) */
  const int32_t row0 = ctx->row_end > 0 ? ctx->row_begin : 0, row1 = ctx->row_end > 0 ? ctx->row_end : out->dims[1];
  if (d->path == CONV_PATH_BLOCKED) {
#if EK_CONV_MVE
    conv_blocked_mve(d, ch, &op->params, in, f, out, (int8_t *)op->scratch, row0, row1);
#else
    conv_blocked(d, ch, &op->params, in, f, out, (uint32_t *)op->scratch, row0, row1);
#endif
  } else {
    conv_reference(d, ch, &op->params, in, f, bias_data, out, row0, row1);
  }
  if (d->constants > 0) /* after the rows: every path left these bytes to them (or wrote 0 + zp there) */
    ek_conv_fill_constant((int8_t *)out->data + (ptrdiff_t)row0 * out->dims[2] * d->channels, /* rows, batches */
                          ((in->dims[0] - 1) * out->dims[1] + row1 - row0) * out->dims[2], d->channels,
                          conv_constant_list(d), d->constants);
  return EK_OK;
}

/* Kernel access contract (firmware/runtime/README.md): raster groups. Blocked: 4 pixels, their windows copied
   into scratch first on every path (the im2col block on C/DSP, four int8 columns on Helium: the overlap is decided
   on the host, so both device paths must keep the same order). Reference: pixel by pixel. */
static int conv_overlap(const ek_context *ctx, const ek_op *op, int input_index, int32_t *d_max) {
  const conv_data *d = (const conv_data *)op->user_data;
  if (input_index != 0 || !d) return EK_OVERLAP_NONE;
  const ek_tensor *in = ek_input((ek_context *)ctx, op, 0), *out = ek_output((ek_context *)ctx, op, 0);
  const int blocked = d->path == CONV_PATH_BLOCKED;
  return ek_stream_raster(in, out, op->params.stride_h, op->params.stride_w, d->pad_h, d->pad_w,
                          blocked ? CONV_COLUMNS : 1, blocked, d_max)
             ? EK_OVERLAP_UPTO
             : EK_OVERLAP_NONE;
}

/* The blocked path reads the bias only through the folds, and with conv_data.expanded not the int8 weights either. */
int ek_conv_2d_skips_input(const void *user_data, int input_index) {
  const conv_data *d = (const conv_data *)user_data;
  return d->path == CONV_PATH_BLOCKED && (input_index == 2 || (input_index == 1 && d->expanded));
}

/* edgekit-op: CONV_2D | types: int8 | versions: 1-3 | fast path: Cortex-M4 DSP, Helium (M55) */
const ek_kernel ek_kernel_conv_2d = {EK_OP_CONV_2D, "CONV_2D", EK_HOST_FN(conv_persistent_bytes), EK_HOST_FN(conv_scratch_bytes), EK_HOST_FN(conv_prepare), conv_eval, EK_HOST_FN(conv_overlap)};
