/* DEPTHWISE_CONV_2D, int8 activations, int8 weights (per-channel or per-tensor), optional int32 bias,
 * any depth multiplier, SAME/VALID padding, strides, dilation.
 *
 * Bit-exact with LiteRT's reference_integer_ops::DepthwiseConvPerChannel (BUILTIN_REF). As LiteRT does,
 * the depth multiplier is taken from the shapes (output channels / input channels); the option value is
 * not used.
 *
 * Paths (chosen in prepare):
 *  - reference: TFLite's loop nest; used for non-constant weights or bias, and layers whose line buffer
 *    would exceed EK_CONV_SCRATCH_MAX;
 *  - blocked (constant weights and bias): the input offset is folded into the bias at
 *    prepare time (sum(w * (x + off)) + bias = sum(w * x) + (bias + off * sum(w)), exact in wrap-around
 *    int32), so the multiplies take raw int8 values. Channels go in groups of four: per group the weights
 *    are expanded once into doubled int16 pairs, and the group's input is copied into scratch as two
 *    words per pixel (the 4 int8 values as int16 pairs, expanded once instead of once per tap), padded
 *    with the input zero point around the image (its contribution w * (zp + off) is exactly 0), so border
 *    pixels need no other code: the whole padded plane when it fits, else a ring of rows refilled as the
 *    output row advances. Per tap and group: LDRD of the input pair, LDRD of the weight pair, four
 *    SMLABB/SMLATT; the doubled accumulators and the output zero point folded into the rounding constant
 *    leave four instructions of requantization per output (ek_conv_requant_zp2). The 3x3 pass and the input
 *    expansion (ek_dw_expand4_dsp; in ring mode it writes both copies of a row) are assembly on Cortex-M with the
 *    DSP extension and without Helium, the same steps in exact C elsewhere.
 *  - blocked with a depth multiplier > 1 (dw_blocked_multiplier): the same passes; each lane of a group is
 *    filled from its output channel's input channel (a broadcast of one byte when the group reads one).
 *  - Helium (Cortex-M55), multiplier 1, plane mode: 3x3 stride-1 SAME layers with rows of 2-5 pixels (KWS) run
 *    dw_dot_mve (one VMLADAV.S8 per window over channel-major planes); other layers with at least 4 taps run
 *    dw_blocked_mve (8 channels per vector, widening multiplies). Both keep the blocked path's access contract.
 *  - row ranges of a row-streamed group (dw_blocked_rows, dw_blocked_rows_mve; EK_NEED_DW_ROWS): the blocked passes on
 *    the padded rows the range reads, filled per channel group into the same scratch (see there).
 * Channels whose output is one value for every input (dead filters of trained networks: ek_conv_constant_channels)
 * are computed in prepare, left out of the range checks (so the layer keeps the blocked path) and written by
 * ek_conv_fill_constant after the op.
 */
#include "ek_conv_common.h"
#include "ek_stream.h"

enum { DW_PATH_REFERENCE = 0, DW_PATH_BLOCKED = 1 };

/* Helium builds: the eval paths are not inlined into dw_eval, so the stack holds only the frame of the path that runs
   (measured: KWS stack high-water 836 B on mps3-an547, as before the small-map path). Elsewhere gcc's inlining
   gives the smaller high-water mark (and the Cortex-M4 code stays as it was). */
#if defined(__GNUC__) && EK_CONV_MVE
#define EK_DW_NOINLINE __attribute__((noinline))
#else
#define EK_DW_NOINLINE
#endif
/* The reference loop runs only for layers the blocked paths do not take (non-constant weights, huge maps): compiled
   for size (the firmware's code budget). */
#if defined(__GNUC__)
#define EK_DW_COLD __attribute__((noinline, cold))
#else
#define EK_DW_COLD
#endif

typedef struct dw_data {
  int32_t pad_h, pad_w;
  int32_t act_min, act_max;
  int32_t input_offset, output_offset;
  int32_t multiplier; /* depth multiplier */
  int32_t path;
  int32_t fast_requant;
  int32_t channels;
  int32_t constants; /* channels with a constant output (ek_conv_constant_channels), listed after the channel table */
  int32_t fill;      /* constants written after the op: paths other than the Cortex-M4/portable blocked one (whose
                        group table gives them their value) */
} dw_data;

static ek_conv_channel *dw_channels(void *user_data) {
  return (ek_conv_channel *)((uint8_t *)user_data + ((sizeof(dw_data) + 7u) & ~(size_t)7u));
}

static int32_t dw_out_channels(const ek_context *ctx, const ek_op *op) {
  if (op->num_inputs < 2 || op->inputs[1] < 0 || op->inputs[1] >= ctx->num_tensors) return 0;
  const ek_tensor *f = &ctx->tensors[op->inputs[1]];
  return (f->ndim == 4 && f->dims[3] > 0) ? f->dims[3] : 0;
}


static inline uint32_t *dw_constant_list(const dw_data *d) {
  return (uint32_t *)(void *)(dw_channels((void *)(uintptr_t)d) + d->channels);
}

static size_t dw_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  return ((sizeof(dw_data) + 7u) & ~(size_t)7u) + (size_t)dw_out_channels(ctx, op) * sizeof(ek_conv_channel) +
         4u * (size_t)ek_conv_op_constant_count(ctx, op, 1);
}

/* Scratch of the blocked path, in words. The input of one group of 4 channels is held two words per pixel,
 * padded with the input zero point around the image:
 *  - plane mode (the whole padded plane fits): hp rows of 2 * wp words, filled once per group;
 *  - ring mode (large maps): a ring of kh rows, each stored twice (slots s and s + kh) so that the rows of
 *    any window are consecutive, refilled as the output row advances; plus kh row tags.
 * Then the group table: 4 folds, 2 * kh * kw expanded weight words, 4 x (multiplier, half + zp * 2^e, exponent).
 * 0 when neither fits EK_CONV_SCRATCH_MAX. */
typedef struct dw_geometry {
  int32_t kh, kw;
  int32_t wp, hp;      /* padded width and height (in pixels) the output's windows span */
  int32_t plane;       /* 1: plane mode, 0: ring mode */
  int32_t words;       /* scratch words */
} dw_geometry;

static int dw_geometry_of(const ek_context *ctx, const ek_op *op, dw_geometry *g) {
  if (op->num_inputs < 2 || op->inputs[0] < 0 || op->inputs[1] < 0 || op->inputs[0] >= ctx->num_tensors ||
      op->inputs[1] >= ctx->num_tensors)
    return 0;
  const ek_tensor *in = ek_input((ek_context *)ctx, op, 0), *f = ek_input((ek_context *)ctx, op, 1);
  if (in->ndim != 4 || f->ndim != 4 || in->dims[3] < 1 || f->dims[3] < 1 || f->dims[3] % in->dims[3] != 0 ||
      f->dims[1] < 1 || f->dims[2] < 1)
    return 0;
  const ek_op_params *p = &op->params;
  int32_t ow, oh, pad;
  if (!ek_conv_window(p->padding, in->dims[2], f->dims[2], p->stride_w, p->dilation_w, &ow, &pad) ||
      !ek_conv_window(p->padding, in->dims[1], f->dims[1], p->stride_h, p->dilation_h, &oh, &pad))
    return 0;
  const int64_t kh = f->dims[1];
  const int64_t wp = (int64_t)(ow - 1) * p->stride_w + (int64_t)(f->dims[2] - 1) * p->dilation_w + 1;
  const int64_t hp = (int64_t)(oh - 1) * p->stride_h + (kh - 1) * p->dilation_h + 1;
  const int64_t table = 16 + 2 * kh * f->dims[2];
  const int64_t limit = EK_CONV_SCRATCH_MAX / 4;
  g->kh = (int32_t)kh;
  g->kw = f->dims[2];
  if (wp > limit || hp > limit) return 0;
  g->wp = (int32_t)wp;
  g->hp = (int32_t)hp;
  const int64_t ring_words = 4 * kh * wp + kh + table, plane_words = 2 * hp * wp + table;
  const ek_tensor *out = ek_output((ek_context *)ctx, op, 0);
  const int small = ctx->optimize == EK_OPTIMIZE_RAM ||
                    (ctx->optimize == EK_OPTIMIZE_BALANCED && out && in && plane_words * 4 > (int64_t)(out->bytes < in->bytes ? out->bytes : in->bytes));
  if (plane_words <= limit && !(small && ring_words < plane_words && ring_words <= limit)) {
    g->plane = 1;
    g->words = (int32_t)(2 * hp * wp + table);
    return 1;
  }
  if (4 * kh * wp + kh + table <= limit) {
    g->plane = 0;
    g->words = (int32_t)(4 * kh * wp + kh + table);
    return 1;
  }
  return 0;
}

static size_t dw_scratch_bytes(const ek_context *ctx, const ek_op *op) {
  dw_geometry g;
  return dw_geometry_of(ctx, op, &g) ? (size_t)g.words * 4u : 0;
}

static ek_status dw_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs < 2 || op->num_inputs > 3 || op->num_outputs != 1)
    return ek_fail(ctx, op, EK_ERR_MODEL,
                   "DEPTHWISE_CONV_2D needs 2 or 3 inputs (input, filter, optional bias) and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0), *f = ek_input(ctx, op, 1), *bias = ek_input(ctx, op, 2);
  const ek_tensor *out = ek_output(ctx, op, 0);
  if (!in || !f || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "DEPTHWISE_CONV_2D input, filter or output missing");
  if (in->type != EK_INT8 || out->type != EK_INT8 || f->type != EK_INT8)
    return ek_fail(ctx, op, EK_ERR_TYPE, "DEPTHWISE_CONV_2D supports int8 input, filter and output only");
  if (in->ndim != 4 || f->ndim != 4 || out->ndim != 4)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "DEPTHWISE_CONV_2D input, filter and output must be 4-D");
  if (!ek_conv_is_q8_activation(in) || !ek_conv_is_q8_activation(out))
    return ek_fail(ctx, op, EK_ERR_MODEL,
                   "DEPTHWISE_CONV_2D input/output need a finite positive scale, an int8 zero point and matching bytes");
  if (!f->data || ek_conv_elements(f) < 1 || f->bytes != ek_conv_elements(f))
    return ek_fail(ctx, op, EK_ERR_MODEL, "DEPTHWISE_CONV_2D filter has no data or an inconsistent size");
  const int32_t c = in->dims[3];
  const int32_t kh = f->dims[1], kw = f->dims[2], oc = f->dims[3];
  if (f->dims[0] != 1) return ek_fail(ctx, op, EK_ERR_SHAPE, "DEPTHWISE_CONV_2D filter must be [1, H, W, channels]");
  if (oc % c != 0)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "DEPTHWISE_CONV_2D filter channels must be a multiple of the input channels");
  int32_t oh = 0, ow = 0, pad_h = 0, pad_w = 0;
  const ek_status common = ek_conv_check_common(ctx, op, in, f, bias, out, oc, kh, kw, &oh, &ow, &pad_h, &pad_w);
  if (common != EK_OK) return common;
  const ek_op_params *p = &op->params;

  dw_data *d = (dw_data *)op->user_data;
  ek_conv_channel *ch = dw_channels(op->user_data);
  if (!d || oc != dw_out_channels(ctx, op))
    return ek_fail(ctx, op, EK_ERR_INTERNAL, "DEPTHWISE_CONV_2D persistent data missing");
  d->pad_h = pad_h;
  d->pad_w = pad_w;
  d->input_offset = -in->zero_point;
  d->output_offset = out->zero_point;
  d->multiplier = oc / c;
  d->channels = oc;
  if (!ek_conv_activation_range(p->activation, out, &d->act_min, &d->act_max))
    return ek_fail(ctx, op, EK_ERR_MODEL, "DEPTHWISE_CONV_2D activation range does not fit the output scale");
  const int32_t constants = ek_conv_constant_channels(in, f, bias, out, p->activation, 1, (uint32_t *)0);
  d->constants = constants > 0 ? constants : 0;
  d->fill = 0;
  if (d->constants != ek_conv_op_constant_count(ctx, op, 1))
    return ek_fail(ctx, op, EK_ERR_INTERNAL, "DEPTHWISE_CONV_2D persistent data sized for other tensors");
  int fast = 1;
  for (int32_t i = 0; i < oc; ++i) {
    const double eff = (double)in->scale * (double)ek_conv_scale_at(f, i) / (double)out->scale;
    int channel_fast = 1;
    if (!ek_conv_channel_init(&ch[i], eff, &channel_fast))
      return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "DEPTHWISE_CONV_2D effective output scale too large (>= 2^30)");
    fast = fast && channel_fast;
  }
  if (d->constants > 0) { /* constant channels: exponent 1, no left shift, out of every range check below */
    ek_conv_constant_channels(in, f, bias, out, p->activation, 1, dw_constant_list(d));
    ek_conv_mark_constant(ch, dw_constant_list(d), d->constants);
    fast = 1;
    for (int32_t i = 0; i < oc; ++i) {
      const int32_t e = ek_conv_exponent(&ch[i]);
      fast = fast && e >= 1 && e <= 31;
    }
  }
  /* per-channel accumulator bounds from the constant weights and bias (-1: not constant, or leaving int32) */
  int64_t live_bias = 0, live_bound = constants >= 0 ? 0 : -1;
  for (int32_t o = 0; o < oc; ++o) {
    if (ek_conv_is_constant(&ch[o])) continue;
    if (bias) {
      const int64_t bv = bias->is_constant ? (int64_t)((const int32_t *)bias->data)[o] : INT64_MAX;
      const int64_t mag = bv < 0 ? -bv : bv;
      if (mag > live_bias) live_bias = mag;
    }
    if (live_bound >= 0) {
      int64_t lo, hi;
      ek_conv_acc_range((const int8_t *)f->data + o, oc, kh * kw, bias ? ((const int32_t *)bias->data)[o] : 0,
                        d->input_offset, &lo, &hi);
      const int64_t bound = ek_conv_acc_bound(lo, hi);
      live_bound = bound < 0 ? -1 : (bound > live_bound ? bound : live_bound);
    }
  }
  const int bounded = live_bound >= 0 && live_bound < EK_CONV_FAST_ACC_LIMIT;
  /* reference path: |w * (x + input_offset)| <= 128 * 255 per tap */
  d->fast_requant = fast && (bounded || ek_conv_acc_fits(live_bias, (int64_t)kh * kw, 128 * 255));
  d->path = DW_PATH_REFERENCE;
  if (f->is_constant && (!bias || bias->is_constant) && op->scratch &&
      dw_scratch_bytes(ctx, op) > 0) { /* fold = bias + input_offset * sum of the channel's taps */
    const int8_t *wt = (const int8_t *)f->data;
    const int32_t *b = bias ? (const int32_t *)bias->data : (const int32_t *)0;
    int64_t fold_bound = 0;
    for (int32_t i = 0; i < oc; ++i) {
      if (ek_conv_is_constant(&ch[i])) continue; /* fold 0 */
      uint32_t sum = 0;
      for (int32_t t = 0; t < kh * kw; ++t) sum += (uint32_t)(int32_t)wt[(int64_t)t * oc + i];
      ch[i].fold = (int32_t)(sum * (uint32_t)d->input_offset + (b ? (uint32_t)b[i] : 0u));
      const int64_t magnitude = ch[i].fold < 0 ? -(int64_t)ch[i].fold : (int64_t)ch[i].fold;
      if (magnitude > fold_bound) fold_bound = magnitude;
    }
    /* the blocked accumulator starts at fold and adds |w * x| <= 128 * 128 per tap; it requantizes with
       the fast formula only */
    int zp_fold = 1; /* the output zero point goes into the rounding constant (ek_conv_requant_zp2) */
    for (int32_t i = 0; i < oc && zp_fold; ++i) {
      int64_t bound = -1;
      if (ek_conv_exponent(&ch[i]) > EK_CONV_ZP_FOLD_MAX_E && constants >= 0) {
        int64_t lo, hi;
        ek_conv_acc_range(wt + i, oc, kh * kw, b ? b[i] : 0, d->input_offset, &lo, &hi);
        bound = ek_conv_acc_bound(lo, hi);
      }
      zp_fold = ek_conv_zp_fold_ok(&ch[i], d->output_offset, bound);
    }
    /* the blocked sums end at the true accumulator (wrap-around), so the per-channel bounds hold for them too */
    if (fast && zp_fold && (bounded || ek_conv_acc_fits(fold_bound, (int64_t)kh * kw, 128 * 128))) {
      d->path = DW_PATH_BLOCKED;
      d->fast_requant = 1;
    }
  }
  /* the Helium paths (planned for Helium, or this build) and the reference loop need the fill pass */
  d->fill = (d->path != DW_PATH_BLOCKED || ctx->plan_mve || EK_CONV_MVE) ? d->constants : 0;
  return EK_OK;
}

static inline int8_t dw_output(const dw_data *d, const ek_conv_channel *ch, int32_t acc) {
  const int32_t v = d->fast_requant ? ek_conv_requant_fast(acc, ch) : ek_mbqm(acc, ch->multiplier, ek_conv_shift(ch));
  return ek_conv_clamp8(ek_wrap_add(v, d->output_offset), d->act_min, d->act_max);
}

/* One output pixel, TFLite's loop (taps outside the image skipped, input offset added per tap). */
static EK_DW_COLD void dw_pixel_reference(const dw_data *d, const ek_conv_channel *ch, const ek_op_params *p,
                                              const ek_tensor *in, const ek_tensor *f, const int32_t *bias, int32_t b,
                                              int32_t oy, int32_t ox, int8_t *yp) {
  const int32_t h = in->dims[1], w = in->dims[2], c = in->dims[3];
  const int32_t kh = f->dims[1], kw = f->dims[2], oc = f->dims[3], m = d->multiplier;
  const int8_t *x = (const int8_t *)in->data, *wt = (const int8_t *)f->data;
  const int32_t iy0 = oy * p->stride_h - d->pad_h, ix0 = ox * p->stride_w - d->pad_w;
  for (int32_t ic = 0; ic < c; ++ic) {
    for (int32_t j = 0; j < m; ++j) {
      const int32_t o = ic * m + j;
      uint32_t acc = 0;
      for (int32_t ky = 0; ky < kh; ++ky) {
        const int32_t iy = iy0 + p->dilation_h * ky;
        if (iy < 0 || iy >= h) continue;
        for (int32_t kx = 0; kx < kw; ++kx) {
          const int32_t ix = ix0 + p->dilation_w * kx;
          if (ix < 0 || ix >= w) continue;
          const int32_t xv = x[(((int64_t)b * h + iy) * w + ix) * c + ic];
          const int32_t fv = wt[((int64_t)ky * kw + kx) * oc + o];
          acc += (uint32_t)(fv * (xv + d->input_offset));
        }
      }
      if (bias) acc += (uint32_t)bias[o];
      yp[o] = dw_output(d, &ch[o], (int32_t)acc);
    }
  }
}

/* ---------- blocked path ----------
 * Scratch pixels are pre-expanded: two words per padded pixel, the group's 4 raw int8 inputs as int16 pairs
 * (x0,x2) and (x1,x3), so a tap is one LDRD of input, one LDRD of weights and four SMLAxy.
 * Group table (words): [0..3] the doubled folds of the group's 4 channels, [4 .. 4 + 2T) per tap t the doubled
 * weights of the 4 channels as (2w0,2w2),(2w1,2w3) int16 pairs, then per channel (multiplier, half + zp * 2^e,
 * exponent): the accumulators hold 2 * acc, which is what the requantization wants (ek_conv_requant_zp2), and
 * the output zero point is folded into the rounding constant. */
typedef struct dw_pass {      /* output rows of one channel group; offsets used by the assembly below */
  const uint32_t *table;      /*  0 */
  const uint32_t *row0;       /*  4: padded-input pixel (2 words) of tap (0,0) of the first output pixel */
  int32_t tap_row_step;       /*  8: bytes between a window's tap rows */
  int32_t col_step;           /* 12: bytes between a window's taps in a row (8 * dilation_w) */
  int32_t pixel_step;         /* 16: bytes between consecutive pixels' windows (8 * stride_w) */
  int32_t count;              /* 20: pixels per output row */
  int32_t rows;               /* 24: output rows */
  int32_t row_step;           /* 28: bytes between consecutive output rows' first windows */
  int8_t *dst;                /* 32: output of the first pixel, first channel of the group (rows are contiguous) */
  int32_t dst_step;           /* 36: bytes between pixels' outputs (channels) */
  int32_t lo, hi;             /* 40, 44: activation clamp */
  int32_t clamp;              /* 48: nonzero when [lo, hi] is narrower than [-128, 127] */
  int32_t left;               /* 52: working counter of the assembly */
} dw_pass;

static inline int8_t dw_out_fast(int32_t acc2, const uint32_t *params, int32_t lo, int32_t hi) {
  const int32_t v = ek_ssat8(ek_conv_requant_zp2(acc2, (int32_t)params[0], (int32_t)params[1], (int32_t)params[2]));
  return ek_conv_clamp8(v, lo, hi);
}

/* Portable pass (any kernel size): the same steps as the assembly. */
static void dw_pass_c(const dw_pass *ps, int32_t kh, int32_t kw, int32_t lanes) {
  const uint32_t *table = ps->table;
  const uint32_t *params = table + 4 + 2 * kh * kw;
  const int32_t cstep = ps->col_step >> 2, pstep = ps->pixel_step >> 2, tstep = ps->tap_row_step >> 2;
  int8_t *dst = ps->dst;
  for (int32_t r = 0; r < ps->rows; ++r) {
    const uint32_t *row0 = ps->row0 + r * (ps->row_step >> 2);
    for (int32_t px = 0; px < ps->count; ++px, dst += ps->dst_step) {
      int32_t a0 = (int32_t)table[0], a1 = (int32_t)table[1], a2 = (int32_t)table[2], a3 = (int32_t)table[3];
      const uint32_t *wv = table + 4;
      const uint32_t *xr = row0 + px * pstep;
      for (int32_t ky = 0; ky < kh; ++ky, xr += tstep) {
        for (int32_t kx = 0; kx < kw; ++kx, wv += 2) {
          const uint32_t x02 = xr[kx * cstep], x13 = xr[kx * cstep + 1];
          a0 = ek_smlabb(x02, wv[0], a0);
          a2 = ek_smlatt(x02, wv[0], a2);
          a1 = ek_smlabb(x13, wv[1], a1);
          a3 = ek_smlatt(x13, wv[1], a3);
        }
      }
      dst[0] = dw_out_fast(a0, params, ps->lo, ps->hi);
      if (lanes > 1) dst[1] = dw_out_fast(a1, params + 3, ps->lo, ps->hi);
      if (lanes > 2) dst[2] = dw_out_fast(a2, params + 6, ps->lo, ps->hi);
      if (lanes > 3) dst[3] = dw_out_fast(a3, params + 9, ps->lo, ps->hi);
    }
  }
}

#if EK_CONV_DSP && defined(__thumb2__) && !defined(EK_CONV_NO_ASM)
#define DW_PASS_ASM 1
typedef char dw_pass_is_56_bytes[sizeof(dw_pass) == 56 ? 1 : -1];
/* The 3x3 pass (dilation_w 1) of a full 4-channel group: per pixel 9 x (LDRD input, LDRD weights, 4 SMLAxy),
 * then per channel LDM of (multiplier, half + zp * 2^e, exponent), SUB, SMMLAR, ASR, SSAT; the activation
 * clamp only when it is narrower than int8; 4 byte stores. */
void ek_dw_pass3x3_dsp(dw_pass *ps);
#define DW_TAP(off)                       \
  "  ldrd r4, r5, [r8, #" off "]\n"       \
  "  ldrd r6, r7, [r10], #8\n"            \
  "  smlabb r0, r4, r6, r0\n"             \
  "  smlatt r2, r4, r6, r2\n"             \
  "  smlabb r1, r5, r7, r1\n"             \
  "  smlatt r3, r5, r7, r3\n"
#define DW_ROW DW_TAP("0") DW_TAP("8") DW_TAP("16")
#define DW_OUT(ra)                        \
  "  ldmia r10!, {r5, r6, r7}\n"          \
  "  sub r4, r6, " ra ", lsr #31\n"       \
  "  smmlar " ra ", " ra ", r5, r4\n"     \
  "  asr " ra ", " ra ", r7\n"            \
  "  ssat " ra ", #8, " ra "\n"
#define DW_CLAMP(ra)                      \
  "  cmp " ra ", r4\n"                    \
  "  it lt\n"                             \
  "  movlt " ra ", r4\n"                  \
  "  cmp " ra ", r5\n"                    \
  "  it gt\n"                             \
  "  movgt " ra ", r5\n"
/* The row and pixel loops, twice: with the activation clamp (labels ...c) and without it (...n), so the
   per-pixel test of the clamp flag disappears. */
#define DW_LOOPS(sfx, CLAMP)                     \
    ".Lek_dw_row" sfx ":\n"                      \
    "  ldr r11, [lr, #4]\n"                      \
    "  ldr r4, [lr, #20]\n"                      \
    "  str r4, [lr, #52]\n"                      \
    ".Lek_dw_pixel" sfx ":\n"                    \
    "  ldr r10, [lr, #0]\n"                      \
    "  ldmia r10!, {r0-r3}\n"                    \
    "  mov r8, r11\n"                            \
    DW_ROW                                       \
    "  add r8, r8, r12\n"                        \
    DW_ROW                                       \
    "  add r8, r8, r12\n"                        \
    DW_ROW                                       \
    DW_OUT("r0") DW_OUT("r1") DW_OUT("r2") DW_OUT("r3") \
    CLAMP                                        \
    "  strb r0, [r9]\n"                          \
    "  strb r1, [r9, #1]\n"                      \
    "  strb r2, [r9, #2]\n"                      \
    "  strb r3, [r9, #3]\n"                      \
    "  ldr r4, [lr, #36]\n"                      \
    "  add r9, r9, r4\n"                         \
    "  ldr r4, [lr, #16]\n"                      \
    "  add r11, r11, r4\n"                       \
    "  ldr r4, [lr, #52]\n"                      \
    "  subs r4, r4, #1\n"                        \
    "  str r4, [lr, #52]\n"                      \
    "  bne .Lek_dw_pixel" sfx "\n"               \
    "  ldr r4, [lr, #4]\n"                       \
    "  ldr r5, [lr, #28]\n"                      \
    "  add r4, r4, r5\n"                         \
    "  str r4, [lr, #4]\n"                       \
    "  ldr r5, [lr, #24]\n"                      \
    "  subs r5, r5, #1\n"                        \
    "  str r5, [lr, #24]\n"                      \
    "  bne .Lek_dw_row" sfx "\n"                 \
    "  pop {r4-r11, pc}\n"
#define DW_CLAMP4                                \
    "  ldrd r4, r5, [lr, #40]\n"                 \
    DW_CLAMP("r0") DW_CLAMP("r1") DW_CLAMP("r2") DW_CLAMP("r3")
__asm__(
    "  .syntax unified\n"
    "  .thumb\n"
    "  .section .text.ek_dw_pass3x3_dsp, \"ax\", %progbits\n"
    "  .global ek_dw_pass3x3_dsp\n"
    "  .type ek_dw_pass3x3_dsp, %function\n"
    "  .thumb_func\n"
    "  .balign 4\n"
    "ek_dw_pass3x3_dsp:\n"
    "  push {r4-r11, lr}\n"
    "  mov lr, r0\n"
    "  ldr r12, [lr, #8]\n"                  /* tap_row_step */
    "  ldr r9, [lr, #32]\n"                  /* dst (rows are contiguous) */
    "  ldr r4, [lr, #48]\n"                  /* clamp narrower than int8? */
    "  cmp r4, #0\n"
    "  bne.w .Lek_dw_clamped\n"
    DW_LOOPS("n", "")
    ".Lek_dw_clamped:\n"
    DW_LOOPS("c", DW_CLAMP4)
    "  .size ek_dw_pass3x3_dsp, . - ek_dw_pass3x3_dsp\n"
    "  .text\n");
#undef DW_LOOPS
#undef DW_CLAMP4
#undef DW_TAP
#undef DW_ROW
#undef DW_OUT
#undef DW_CLAMP
#else
#define DW_PASS_ASM 0
#endif

static void dw_run_pass(dw_pass *ps, int32_t kh, int32_t kw, int32_t lanes) {
#if DW_PASS_ASM
  if (kh == 3 && kw == 3 && lanes == 4 && ps->col_step == 8) {
    ek_dw_pass3x3_dsp(ps);
    return;
  }
#endif
  dw_pass_c(ps, kh, kw, lanes);
}

/* Group table for channels [c0, c0 + lanes): missing lanes get zero weights and folds. */
static void dw_group_table(const ek_conv_channel *ch, const int8_t *wt, int32_t c, int32_t taps, int32_t c0,
                           int32_t lanes, int32_t zp, uint32_t *table) {
  for (int32_t j = 0; j < 4; ++j) table[j] = j < lanes ? (uint32_t)ch[c0 + j].fold * 2u : 0u;
  uint32_t *wv = table + 4;
  const int8_t *src = wt + c0;
  for (int32_t t = 0; t < taps; ++t, wv += 2, src += c) {
    uint32_t word;
    if (lanes == 4) {
      word = ek_load32(src);
    } else {
      word = 0;
      for (int32_t j = 0; j < lanes; ++j) word |= (uint32_t)(uint8_t)src[j] << (8 * j);
    }
    const uint32_t w02 = ek_sxtb16(word), w13 = ek_sxtb16_ror8(word);
    wv[0] = ek_sadd16(w02, w02); /* |2w| <= 256: exact in int16 */
    wv[1] = ek_sadd16(w13, w13);
  }
  for (int32_t j = 0; j < 4; ++j, wv += 3) {
    const ek_conv_channel *cc = &ch[c0 + (j < lanes ? j : 0)];
    wv[0] = (uint32_t)(j < lanes ? cc->multiplier : 0);
    /* a constant channel (multiplier 0, exponent 1): (2K + 1 - [acc < 0]) >> 1 = K, its value, with no fill pass */
    wv[1] = ek_conv_is_constant(cc) ? 2u * (uint32_t)(int32_t)(int8_t)(cc->shifts >> 24) + 1u
                                    : (uint32_t)ek_conv_half_zp(cc, zp);
    wv[2] = (uint32_t)ek_conv_exponent(cc);
  }
}

/* n pixels of 4 channels (src, src + c, ...) expanded to two words each, (x0, x2) and (x1, x3) as int16 pairs, at
   dst and, when dup is nonzero, also at dst + dup (words): the ring's second copy of the row. */
#if EK_CONV_DSP && !EK_CONV_MVE && defined(__thumb2__) && !defined(EK_CONV_NO_ASM)
/* Cortex-M4: per pixel LDR, ADD, 2 SXTB16, 1 or 2 STRD, SUBS, BNE (gcc's loop took 9 plus a memcpy of the row). */
void ek_dw_expand4_dsp(uint32_t *dst, const int8_t *src, int32_t c, int32_t n, uint32_t *dup_dst);
__asm__(
    "  .syntax unified\n"
    "  .thumb\n"
    "  .section .text.ek_dw_expand4_dsp, \"ax\", %progbits\n"
    "  .global ek_dw_expand4_dsp\n"
    "  .type ek_dw_expand4_dsp, %function\n"
    "  .thumb_func\n"
    "  .balign 4\n"
    "ek_dw_expand4_dsp:\n"
    "  push {r4-r7, lr}\n"
    "  ldr r7, [sp, #20]\n"            /* second copy or 0 */
    "  cbz r7, 2f\n"
    "1:\n"
    "  ldr r4, [r1]\n"
    "  add r1, r1, r2\n"
    "  sxtb16 r5, r4\n"
    "  sxtb16 r6, r4, ror #8\n"
    "  strd r5, r6, [r0], #8\n"
    "  strd r5, r6, [r7], #8\n"
    "  subs r3, r3, #1\n"
    "  bne 1b\n"
    "  pop {r4-r7, pc}\n"
    "2:\n"
    "  ldr r4, [r1]\n"
    "  add r1, r1, r2\n"
    "  sxtb16 r5, r4\n"
    "  sxtb16 r6, r4, ror #8\n"
    "  strd r5, r6, [r0], #8\n"
    "  subs r3, r3, #1\n"
    "  bne 2b\n"
    "  pop {r4-r7, pc}\n"
    "  .size ek_dw_expand4_dsp, . - ek_dw_expand4_dsp\n"
    "  .text\n");
static inline void dw_expand4(uint32_t *dst, const int8_t *src, int32_t c, int32_t n, int32_t dup) {
  if (n > 0) ek_dw_expand4_dsp(dst, src, c, n, dup ? dst + dup : (uint32_t *)0);
}
#else
static inline void dw_expand4(uint32_t *dst, const int8_t *src, int32_t c, int32_t n, int32_t dup) {
  for (int32_t i = 0; i < n; ++i, src += c, dst += 2) {
    const uint32_t v = ek_load32(src);
    dst[0] = ek_sxtb16(v);
    dst[1] = ek_sxtb16_ror8(v);
    if (dup) {
      dst[dup] = dst[0];
      dst[dup + 1] = dst[1];
    }
  }
}
#endif

/* A padded row := input row iy of the group, two expanded words per pixel (zero point outside the image and
   for missing lanes); also at row + dup (words) when dup is nonzero (the ring's second copy). */
static void dw_fill_row(const int8_t *x, int32_t h, int32_t w, int32_t c, int32_t iy, int32_t pad_w, int32_t c0,
                        int32_t lanes, uint32_t zp_word, uint32_t *row, int32_t wp, int32_t dup) {
  int32_t first = pad_w, last = pad_w + w; /* row pixels [first, last) hold image columns 0 .. w-1 */
  if (iy < 0 || iy >= h) first = last = wp;
  if (first > wp) first = wp;
  if (last > wp) last = wp;
  const uint32_t zp02 = ek_sxtb16(zp_word), zp13 = ek_sxtb16_ror8(zp_word);
  int32_t i = 0;
  for (; i < first; ++i) {
    row[2 * i] = row[2 * i + dup] = zp02;
    row[2 * i + 1] = row[2 * i + 1 + dup] = zp13;
  }
  if (first < last) {
    const int8_t *src = x + ((ptrdiff_t)iy * w + (first - pad_w)) * c + c0;
    uint32_t *dst = row + 2 * i;
    if (lanes == 4) {
      dw_expand4(dst, src, c, last - i, dup);
      i = last;
    } else {
      for (; i < last; ++i, src += c, dst += 2) {
        uint32_t word = zp_word;
        for (int32_t j = 0; j < lanes; ++j)
          word = (word & ~(0xFFu << (8 * j))) | ((uint32_t)(uint8_t)src[j] << (8 * j));
        dst[0] = dst[dup] = ek_sxtb16(word);
        dst[1] = dst[dup + 1] = ek_sxtb16_ror8(word);
      }
    }
  }
  for (; i < wp; ++i) {
    row[2 * i] = row[2 * i + dup] = zp02;
    row[2 * i + 1] = row[2 * i + 1 + dup] = zp13;
  }
}

/* Plane mode: the padded plane's zero-point border (the same for every group). */
static void dw_fill_border(uint32_t *lines, int32_t hp, int32_t wp, int32_t pad_h, int32_t pad_w, int32_t h, int32_t w,
                           uint32_t zp_word) {
  const uint32_t zp02 = ek_sxtb16(zp_word), zp13 = ek_sxtb16_ror8(zp_word);
  const int32_t first = pad_w < wp ? pad_w : wp, last = pad_w + w < wp ? pad_w + w : wp;
  for (int32_t r = 0; r < hp; ++r) {
    uint32_t *row = lines + 2 * r * wp;
    const int inside = r >= pad_h && r - pad_h < h;
    for (int32_t i = 0; i < wp; ++i) {
      if (inside && i >= first && i < last) continue;
      row[2 * i] = zp02;
      row[2 * i + 1] = zp13;
    }
  }
}

/* Plane mode: the image part of the padded plane for channels [c0, c0 + lanes) (missing lanes: zero point). */
static void dw_fill_interior(const int8_t *x, int32_t h, int32_t w, int32_t c, int32_t pad_h, int32_t pad_w,
                             int32_t c0, int32_t lanes, uint32_t zp_word, uint32_t *lines, int32_t hp, int32_t wp) {
  const int32_t last = pad_w + w < wp ? pad_w + w : wp;
  const int32_t cols = last - pad_w, rows = hp - pad_h < h ? hp - pad_h : h;
  if (cols <= 0) return;
  for (int32_t iy = 0; iy < rows; ++iy) {
    const int8_t *src = x + (ptrdiff_t)iy * w * c + c0;
    uint32_t *dst = lines + 2 * ((iy + pad_h) * wp + pad_w);
    if (lanes == 4) {
      dw_expand4(dst, src, c, cols, 0);
    } else {
      for (int32_t i = 0; i < cols; ++i, src += c, dst += 2) {
        uint32_t word = zp_word;
        for (int32_t j = 0; j < lanes; ++j)
          word = (word & ~(0xFFu << (8 * j))) | ((uint32_t)(uint8_t)src[j] << (8 * j));
        dst[0] = ek_sxtb16(word);
        dst[1] = ek_sxtb16_ror8(word);
      }
    }
  }
}

static EK_DW_NOINLINE void dw_blocked(const dw_data *d, const ek_conv_channel *ch, const ek_op_params *p,
                                      const ek_tensor *in, const ek_tensor *f, ek_tensor *out, uint32_t *scratch,
                                      const dw_geometry *g) {
  const int32_t n = in->dims[0], h = in->dims[1], w = in->dims[2], c = in->dims[3];
  const int32_t kh = g->kh, kw = g->kw, wp = g->wp;
  const int32_t oh = out->dims[1], ow = out->dims[2];
  const int32_t row_words = 2 * wp;
  const uint32_t zp_word = (uint32_t)(uint8_t)(-d->input_offset) * 0x01010101u;
  uint32_t *lines = scratch;
  const int32_t line_words = g->plane ? g->hp * row_words : 2 * kh * row_words;
  int32_t *tags = (int32_t *)(void *)(lines + line_words);
  uint32_t *table = lines + line_words + (g->plane ? 0 : kh);
  const int32_t clamp = d->act_min > -128 || d->act_max < 127;
  for (int32_t b = 0; b < n; ++b) {
    const int8_t *x = (const int8_t *)in->data + (ptrdiff_t)b * h * w * c;
    int8_t *y = (int8_t *)out->data + (ptrdiff_t)b * oh * ow * c;
    for (int32_t c0 = 0; c0 < c; c0 += 4) {
      const int32_t lanes = c - c0 < 4 ? c - c0 : 4;
      dw_group_table(ch, (const int8_t *)f->data, c, kh * kw, c0, lanes, d->output_offset, table);
      dw_pass ps = {table, lines, 4 * row_words * p->dilation_h, 8 * p->dilation_w, 8 * p->stride_w, ow, oh,
                    4 * row_words * p->stride_h, y + c0, c, d->act_min, d->act_max, clamp, 0};
      if (g->plane) { /* padded row r holds input row r - pad_h; the zero-point border is written once */
        if (c0 == 0) dw_fill_border(lines, g->hp, wp, d->pad_h, d->pad_w, h, w, zp_word);
        dw_fill_interior(x, h, w, c, d->pad_h, d->pad_w, c0, lanes, zp_word, lines, g->hp, wp);
        dw_run_pass(&ps, kh, kw, lanes);
        continue;
      }
      /* ring mode, one output row per pass. Dilation 1: input row iy lives in slots iy mod kh and + kh, so
         a window's rows are consecutive slots and stay in place as the output row advances. Otherwise the
         window's rows are refilled into slots 0 .. kh-1. */
      const int ring = p->dilation_h == 1;
      for (int32_t k = 0; k < kh; ++k) tags[k] = INT32_MIN;
      ps.tap_row_step = 4 * row_words;
      for (int32_t oy = 0; oy < oh; ++oy) {
        const int32_t iy0 = oy * p->stride_h - d->pad_h;
        const int32_t s0 = ring ? ((iy0 % kh) + kh) % kh : 0;
        for (int32_t ky = 0; ky < kh; ++ky) {
          const int32_t iy = iy0 + p->dilation_h * ky;
          const int32_t slot = ring ? (s0 + ky) % kh : ky;
          if (!ring || tags[slot] != iy) {
            uint32_t *line = lines + slot * row_words;
            dw_fill_row(x, h, w, c, iy, d->pad_w, c0, lanes, zp_word, line, wp, kh * row_words);
            tags[slot] = iy;
          }
        }
        ps.row0 = lines + s0 * row_words;
        ps.dst = y + (ptrdiff_t)oy * ow * c + c0;
        ps.rows = 1;
        dw_run_pass(&ps, kh, kw, lanes);
      }
    }
  }
}

/* ---------- depth multiplier > 1 ----------
 * Output channel o reads input channel o / m. The blocked pass above runs unchanged: a group of 4 output channels
 * gets its padded input with lane j holding input channel (c0 + j) / m, so each lane multiplies exactly the value
 * the reference multiplies (the fold and the zero-point border are per output channel as before). With one input
 * channel, or a multiplier that is a multiple of 4, the 4 lanes hold the same byte (one multiply by 0x01010101),
 * and consecutive groups that read the same input channels share the padded plane: the demo's 1 -> 16 first layer
 * fills it once per image. Missing lanes of a partial last group read a valid channel: their weights and folds
 * are 0 and their outputs are not stored. */
typedef struct dw_lanes {
  int32_t channel[4]; /* input channel of each lane */
  int32_t broadcast;  /* all four lanes read the same input channel */
} dw_lanes;

static void dw_lanes_of(int32_t c, int32_t m, int32_t c0, dw_lanes *l) {
  for (int32_t j = 0; j < 4; ++j) {
    const int32_t ic = (c0 + j) / m;
    l->channel[j] = ic < c ? ic : c - 1;
  }
  l->broadcast = l->channel[0] == l->channel[3]; /* channels are non-decreasing */
}

static inline uint32_t dw_gather(const int8_t *px, const dw_lanes *l) {
  return (uint32_t)(uint8_t)px[l->channel[0]] | (uint32_t)(uint8_t)px[l->channel[1]] << 8 |
         (uint32_t)(uint8_t)px[l->channel[2]] << 16 | (uint32_t)(uint8_t)px[l->channel[3]] << 24;
}

/* `count` pixels of one input row (pixel stride c) into expanded words. */
static void dw_expand_pixels(const int8_t *src, int32_t c, int32_t count, const dw_lanes *l, uint32_t *dst) {
  if (l->broadcast) {
    src += l->channel[0];
    for (int32_t i = 0; i < count; ++i, src += c, dst += 2) {
      const uint32_t v = (uint32_t)(uint8_t)*src * 0x01010101u;
      dst[0] = ek_sxtb16(v);
      dst[1] = dst[0];
    }
  } else {
    for (int32_t i = 0; i < count; ++i, src += c, dst += 2) {
      const uint32_t v = dw_gather(src, l);
      dst[0] = ek_sxtb16(v);
      dst[1] = ek_sxtb16_ror8(v);
    }
  }
}

/* Ring mode: padded row := input row iy for the lanes (zero point outside the image). */
static void dw_fill_row_lanes(const int8_t *x, int32_t h, int32_t w, int32_t c, int32_t iy, int32_t pad_w,
                              const dw_lanes *l, uint32_t zp_word, uint32_t *row, int32_t wp) {
  int32_t first = pad_w, last = pad_w + w;
  if (iy < 0 || iy >= h) first = last = wp;
  if (first > wp) first = wp;
  if (last > wp) last = wp;
  const uint32_t zp02 = ek_sxtb16(zp_word), zp13 = ek_sxtb16_ror8(zp_word);
  for (int32_t i = 0; i < first; ++i) {
    row[2 * i] = zp02;
    row[2 * i + 1] = zp13;
  }
  if (first < last) dw_expand_pixels(x + ((ptrdiff_t)iy * w + (first - pad_w)) * c, c, last - first, l, row + 2 * first);
  for (int32_t i = last > first ? last : first; i < wp; ++i) {
    row[2 * i] = zp02;
    row[2 * i + 1] = zp13;
  }
}

static EK_DW_NOINLINE void dw_blocked_multiplier(const dw_data *d, const ek_conv_channel *ch, const ek_op_params *p,
                                                 const ek_tensor *in, const ek_tensor *f, ek_tensor *out,
                                                 uint32_t *scratch, const dw_geometry *g) {
  const int32_t n = in->dims[0], h = in->dims[1], w = in->dims[2], c = in->dims[3];
  const int32_t oc = out->dims[3], m = d->multiplier;
  const int32_t kh = g->kh, kw = g->kw, wp = g->wp;
  const int32_t oh = out->dims[1], ow = out->dims[2];
  const int32_t row_words = 2 * wp;
  const uint32_t zp_word = (uint32_t)(uint8_t)(-d->input_offset) * 0x01010101u;
  uint32_t *lines = scratch;
  const int32_t line_words = g->plane ? g->hp * row_words : 2 * kh * row_words;
  int32_t *tags = (int32_t *)(void *)(lines + line_words);
  uint32_t *table = lines + line_words + (g->plane ? 0 : kh);
  const int32_t clamp = d->act_min > -128 || d->act_max < 127;
  const int32_t pad_w = d->pad_w;
  const int32_t last = pad_w + w < wp ? pad_w + w : wp;
  const int32_t cols = last - pad_w, rows = g->hp - d->pad_h < h ? g->hp - d->pad_h : h;
  for (int32_t b = 0; b < n; ++b) {
    const int8_t *x = (const int8_t *)in->data + (ptrdiff_t)b * h * w * c;
    int8_t *y = (int8_t *)out->data + (ptrdiff_t)b * oh * ow * oc;
    dw_lanes filled = {{-1, -1, -1, -1}, 0}; /* lanes the plane holds (none yet for this image) */
    for (int32_t c0 = 0; c0 < oc; c0 += 4) {
      const int32_t lanes = oc - c0 < 4 ? oc - c0 : 4;
      dw_lanes l;
      dw_lanes_of(c, m, c0, &l);
      dw_group_table(ch, (const int8_t *)f->data, oc, kh * kw, c0, lanes, d->output_offset, table);
      dw_pass ps = {table, lines, 4 * row_words * p->dilation_h, 8 * p->dilation_w, 8 * p->stride_w, ow, oh,
                    4 * row_words * p->stride_h, y + c0, oc, d->act_min, d->act_max, clamp, 0};
      if (g->plane) {
        if (c0 == 0) dw_fill_border(lines, g->hp, wp, d->pad_h, pad_w, h, w, zp_word);
        if (memcmp(filled.channel, l.channel, sizeof l.channel) != 0) {
          for (int32_t iy = 0; iy < rows && cols > 0; ++iy)
            dw_expand_pixels(x + (ptrdiff_t)iy * w * c, c, cols, &l, lines + 2 * ((iy + d->pad_h) * wp + pad_w));
          filled = l;
        }
        dw_run_pass(&ps, kh, kw, lanes);
        continue;
      }
      const int ring = p->dilation_h == 1; /* as in dw_blocked */
      for (int32_t k = 0; k < kh; ++k) tags[k] = INT32_MIN;
      ps.tap_row_step = 4 * row_words;
      for (int32_t oy = 0; oy < oh; ++oy) {
        const int32_t iy0 = oy * p->stride_h - d->pad_h;
        const int32_t s0 = ring ? ((iy0 % kh) + kh) % kh : 0;
        for (int32_t ky = 0; ky < kh; ++ky) {
          const int32_t iy = iy0 + p->dilation_h * ky;
          const int32_t slot = ring ? (s0 + ky) % kh : ky;
          if (!ring || tags[slot] != iy) {
            uint32_t *line = lines + slot * row_words;
            dw_fill_row_lanes(x, h, w, c, iy, pad_w, &l, zp_word, line, wp);
            memcpy(line + kh * row_words, line, (size_t)row_words * 4u);
            tags[slot] = iy;
          }
        }
        ps.row0 = lines + s0 * row_words;
        ps.dst = y + (ptrdiff_t)oy * ow * oc + c0;
        ps.rows = 1;
        dw_run_pass(&ps, kh, kw, lanes);
      }
    }
  }
}

#if EK_CONV_MVE
/* ---------- Helium path (plane mode, at least 4 taps) ----------
 * Channels in groups of 8, two int32x4 accumulators per pixel (even and odd channels). The scratch that the DSP
 * path plans (two words per padded pixel, then its table) holds here the group's padded plane as 8 raw int8 per
 * pixel, then a table of 8 folds, 8 multipliers and 8 negated exponents (24 words <= 16 + 2 * taps). Per tap:
 * one widening load of the input (VLDRB.S16), one of the weights straight from the filter (predicated for a
 * partial last group: nothing past the tensor is read), VMULLB + VMULLT and two adds. Requantization on
 * vectors (ek_mve_requant_v), VMOVNB/VMOVNT back to channel order, one narrowing byte store. */
static inline int32x4_t ek_mve_requant_v(int32x4_t acc, int32x4_t multiplier, int32x4_t neg_exponent, int32_t zp,
                                         int32_t lo, int32_t hi) {
  const int32x4_t r = vqrdmulhq_s32(acc, multiplier);
  const int32x4_t q = vrshlq_s32(vqaddq_s32(r, vshrq_n_s32(r, 31)), neg_exponent);
  return vminq_s32(vmaxq_s32(vaddq_n_s32(q, zp), vdupq_n_s32(lo)), vdupq_n_s32(hi));
}

static int dw_mve_applies(const dw_geometry *g) { return g->plane && g->kh * g->kw >= 4; }

/* One group's output pixels. kh == kw == 3 and a full group (`full`, no predication) are the KWS / MobileNet case
   and get an unrolled tap loop; the rest loops. */
static inline void dw_mve_rows(const dw_data *d, const ek_op_params *p, const int8_t *plane, const int32_t *table,
                               const int8_t *wt, int32_t c, int32_t kh, int32_t kw, int32_t wp, int32_t oh, int32_t ow,
                               int8_t *y, mve_pred16_t lanes, int full3x3) {
  const int32x4_t m_even = vld1q_s32(table + 8), m_odd = vld1q_s32(table + 12);
  const int32x4_t e_even = vld1q_s32(table + 16), e_odd = vld1q_s32(table + 20);
  const int32_t tap_row = 8 * wp * p->dilation_h, tap_col = 8 * p->dilation_w;
  for (int32_t oy = 0; oy < oh; ++oy) {
    const int8_t *row = plane + (ptrdiff_t)8 * wp * oy * p->stride_h;
    for (int32_t ox = 0; ox < ow; ++ox, y += c) {
      const int8_t *xw = row + (ptrdiff_t)8 * ox * p->stride_w;
      int32x4_t a_even = vld1q_s32(table), a_odd = vld1q_s32(table + 4);
      const int8_t *w = wt;
      if (full3x3) { /* dilation_w 1 (tap_col 8): the 9 taps in assembly, accumulators through acc[] */
        int32_t acc[8];
        const int8_t *xa = xw;
        const int8_t *wa = w;
#define DW_MVE_TAP(off)                   \
  "vldrb.s16 q2, [%[x], #" off "]\n"      \
  "vldrb.s16 q3, [%[w]]\n"                \
  "add %[w], %[w], %[c]\n"                \
  "vmullb.s16 q4, q2, q3\n"               \
  "vmullt.s16 q5, q2, q3\n"               \
  "vadd.i32 q0, q0, q4\n"                 \
  "vadd.i32 q1, q1, q5\n"
#define DW_MVE_ROW DW_MVE_TAP("0") DW_MVE_TAP("8") DW_MVE_TAP("16")
        __asm__ volatile("vldrw.32 q0, [%[t]]\n"
                         "vldrw.32 q1, [%[t], #16]\n"
                         DW_MVE_ROW
                         "add %[x], %[x], %[row]\n"
                         DW_MVE_ROW
                         "add %[x], %[x], %[row]\n"
                         DW_MVE_ROW
                         "vstrw.32 q0, [%[acc]]\n"
                         "vstrw.32 q1, [%[acc], #16]\n"
                         : [x] "+l"(xa), [w] "+l"(wa) /* widening loads want r0-r7 */
                         : [t] "r"(table), [c] "r"(c), [row] "r"(tap_row), [acc] "r"(acc)
                         : "d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8", "d9", "d10", "d11", "memory");
#undef DW_MVE_TAP
#undef DW_MVE_ROW
        a_even = vld1q_s32(acc);
        a_odd = vld1q_s32(acc + 4);
      } else {
        for (int32_t ky = 0; ky < kh; ++ky, xw += tap_row) {
          const int8_t *xp = xw;
          for (int32_t kx = 0; kx < kw; ++kx, xp += tap_col, w += c) {
            const int16x8_t xv = vldrbq_s16(xp), wv = vldrbq_z_s16(w, lanes);
            a_even = vaddq_s32(a_even, vmullbq_int_s16(xv, wv));
            a_odd = vaddq_s32(a_odd, vmulltq_int_s16(xv, wv));
          }
        }
      }
      int16x8_t r = vdupq_n_s16(0);
      r = vmovnbq_s32(r, ek_mve_requant_v(a_even, m_even, e_even, d->output_offset, d->act_min, d->act_max));
      r = vmovntq_s32(r, ek_mve_requant_v(a_odd, m_odd, e_odd, d->output_offset, d->act_min, d->act_max));
      vstrbq_p_s16(y, r, lanes);
    }
  }
}

static EK_DW_NOINLINE void dw_blocked_mve(const dw_data *d, const ek_conv_channel *ch, const ek_op_params *p,
                                          const ek_tensor *in, const ek_tensor *f, ek_tensor *out, uint32_t *scratch,
                                          const dw_geometry *g) {
  const int32_t n = in->dims[0], h = in->dims[1], w = in->dims[2], c = in->dims[3];
  const int32_t kh = g->kh, kw = g->kw, wp = g->wp, hp = g->hp;
  const int32_t oh = out->dims[1], ow = out->dims[2];
  const int8_t zp = (int8_t)(-d->input_offset);
  int8_t *plane = (int8_t *)scratch;
  int32_t *table = (int32_t *)(void *)(scratch + 2 * hp * wp);
  const int32_t first = d->pad_w < wp ? d->pad_w : wp, last = d->pad_w + w < wp ? d->pad_w + w : wp;
  const int32_t cols = last - first, rows = hp - d->pad_h < h ? hp - d->pad_h : h;
  for (int32_t r = 0; r < hp; ++r) { /* the zero-point border, once */
    const int inside = r >= d->pad_h && r - d->pad_h < h;
    for (int32_t i = 0; i < wp; ++i)
      if (!(inside && i >= first && i < last)) memset(plane + 8 * ((ptrdiff_t)r * wp + i), zp, 8);
  }
  for (int32_t b = 0; b < n; ++b) {
    const int8_t *x = (const int8_t *)in->data + (ptrdiff_t)b * h * w * c;
    int8_t *y = (int8_t *)out->data + (ptrdiff_t)b * oh * ow * c;
    for (int32_t c0 = 0; c0 < c; c0 += 8) {
      const int32_t lanes = c - c0 < 8 ? c - c0 : 8;
      for (int32_t j = 0; j < 8; ++j) { /* even channels in lanes 0-3, odd ones in 4-7 (VMULLB / VMULLT order) */
        const ek_conv_channel *cc = &ch[c0 + (j < lanes ? j : 0)];
        const int32_t k = (j & 1) * 4 + (j >> 1);
        table[k] = j < lanes ? cc->fold : 0;
        table[8 + k] = j < lanes ? cc->multiplier : 0;
        table[16 + k] = -ek_conv_exponent(cc);
      }
      for (int32_t iy = 0; iy < rows && cols > 0; ++iy) {
        const int8_t *src = x + ((ptrdiff_t)iy * w + (first - d->pad_w)) * c + c0;
        int8_t *dst = plane + 8 * ((ptrdiff_t)(iy + d->pad_h) * wp + first);
        if (lanes == 8) {
          for (int32_t i = 0; i < cols; ++i, src += c, dst += 8) memcpy(dst, src, 8);
        } else {
          for (int32_t i = 0; i < cols; ++i, src += c, dst += 8) memcpy(dst, src, (size_t)lanes);
        }
      }
      const mve_pred16_t live = vctp16q((uint32_t)lanes);
      const int8_t *wt = (const int8_t *)f->data + c0;
      if (kh == 3 && kw == 3 && lanes == 8 && p->dilation_w == 1) {
        dw_mve_rows(d, p, plane, table, wt, c, 3, 3, wp, oh, ow, y + c0, live, 1);
      } else {
        dw_mve_rows(d, p, plane, table, wt, c, kh, kw, wp, oh, ow, y + c0, live, 0);
      }
    }
  }
}
#endif

#if EK_CONV_MVE && defined(__thumb2__) && !defined(EK_CONV_NO_ASM)
/* ---------- Helium path for small maps (3x3, stride 1, SAME, rows of 2-5 pixels: KWS's 25x5 layers) ----------
 * One channel at a time, so the whole 3x3 window is one 16-byte vector and one VMLADAV.S8 does its 9 MACs. A group
 * of 8 channels is first copied out of the NHWC input into 8 channel-major planes in the scratch (one widening load of
 * the pixel's 8 channels, one scatter store to the 8 planes), each padded with the input zero point and stored with
 * row stride s = w + 1: a row is [zp, x0 .. x(w-1)], its right padding is the next row's left padding. The window of
 * output (y, x) then starts at y * s + x and ends at y * s + x + 2s + 2 <= 15 bytes further: lanes ky * s + kx of the
 * weight vector hold the channel's weights, the other lanes 0. Two neighbouring outputs share a load (the second one's
 * weights are the same vector shifted by one lane). The sums go through a buffer in the scratch and are requantized
 * 4 at a time in a tail-predicated loop: + fold (bias + input offset * sum of weights, exact in wrap-around int32 as in
 * the other blocked paths), then exactly ek_mve_requant4, and a byte scatter to the NHWC output (C bytes apart).
 * Access order: the group's planes are filled completely before any of its outputs is written, and only the group's
 * channels are written: the channel-groups-in-place contract of the blocked path (d_max = 0, dw_overlap). */
#define DW_DOT_ASM 1
#define DW_DOT_GROUP 8
#define DW_DOT_SLACK 16 /* the last windows' 16-byte loads read up to 15 bytes past the last plane (weights 0) */
#define DW_DOT_WREC 17  /* bytes per channel weight record: byte 1 + ky * s + kx holds tap (ky, kx), the rest 0 */

typedef struct dw_dot_fit {
  int32_t s;           /* plane row stride, w + 1 */
  int32_t plane_bytes; /* (h + 2) * s + 1 */
  int32_t acc_offset;  /* scratch bytes before the accumulator buffer */
  int32_t block_rows;  /* output rows per accumulator buffer */
} dw_dot_fit;

static int dw_dot_applies(const dw_data *d, const ek_op_params *p, const ek_tensor *in, const ek_tensor *out,
                          const dw_geometry *g, dw_dot_fit *fit) {
  if (d->multiplier != 1 || !g->plane || g->kh != 3 || g->kw != 3 || p->stride_h != 1 || p->stride_w != 1 ||
      p->dilation_h != 1 || p->dilation_w != 1 || d->pad_h != 1 || d->pad_w != 1)
    return 0;
  const int32_t h = in->dims[1], w = in->dims[2];
  if (out->dims[1] != h || out->dims[2] != w || w < 2 || w > 5 || g->wp != w + 2 || g->hp != h + 2) return 0;
  fit->s = w + 1;
  fit->plane_bytes = (h + 2) * fit->s + 1;
  fit->acc_offset = (DW_DOT_GROUP * fit->plane_bytes + DW_DOT_SLACK + 15) & ~15;
  const int32_t left = g->words * 4 - fit->acc_offset;
  fit->block_rows = left > 0 ? left / (4 * w) : 0;
  if (fit->block_rows > h) fit->block_rows = h;
  return fit->block_rows >= 1;
}

/* One channel's outputs (ek_dw_dot_channel<w>, w = 2..5; offsets used by the assembly). */
typedef struct dw_dot_job {
  const int8_t *plane;          /*  0: the channel's plane */
  int32_t *acc;                 /*  4: accumulator buffer (block_rows * w) */
  const int8_t *weights;        /*  8: the channel's weight record (DW_DOT_WREC bytes) */
  int32_t rows;                 /* 12: output rows */
  int32_t block_rows;           /* 16 */
  int8_t *out;                  /* 20: output of pixel 0 for this channel */
  int32_t c;                    /* 24: bytes between output pixels */
  int32_t fold, multiplier;     /* 28, 32 */
  int32_t neg_exponent, zp;     /* 36, 40 */
  int32_t lo, hi;               /* 44, 48: activation clamp */
} dw_dot_job;
typedef char dw_dot_job_is_52_bytes[sizeof(dw_dot_job) == 52 ? 1 : -1];

/* r0 = input (first pixel, first channel of the group), r1 = scratch, r2 = rows, r3 = {w, c, fill bytes, zp, offsets
   bytes, lanes, s + 1}: zero-point fill of the planes, then per pixel one widening load of the
   group's channels and one byte scatter to their planes (predicated for a partial group). */
void ek_dw_dot_fill(const int8_t *src, int8_t *planes, int32_t rows, const int32_t *prm);
/* Per block of rows: the 3x3 window sums into the buffer (per row: w / 2 shared loads, w VMLADAV.S8), then
   + fold and ek_mve_requant4 on 4 sums at a time (tail-predicated loop), byte scatter to the NHWC output. */
void ek_dw_dot_channel2(const dw_dot_job *job);
void ek_dw_dot_channel3(const dw_dot_job *job);
void ek_dw_dot_channel4(const dw_dot_job *job);
void ek_dw_dot_channel5(const dw_dot_job *job);

#define DW_DOT_FN(name)                \
  "  .section .text." name ", \"ax\", %progbits\n" \
  "  .global " name "\n"               \
  "  .type " name ", %function\n"      \
  "  .thumb_func\n"                    \
  "  .balign 4\n"                      \
  name ":\n"
#define DW_DOT_PAIR                    \
  "  vldrb.8 q5, [r0], #2\n"           \
  "  vmladav.s8 r4, q5, q0\n"          \
  "  vmladav.s8 r6, q5, q1\n"          \
  "  strd r4, r6, [r1], #8\n"
#define DW_DOT_ONE                     \
  "  vldrb.8 q5, [r0], #2\n"           \
  "  vmladav.s8 r4, q5, q0\n"          \
  "  str r4, [r1], #4\n"
#define DW_DOT_CHANNEL(name, W, BODY)  \
  DW_DOT_FN(name)                      \
  "  push {r4-r11, lr}\n"              \
  "  vpush {d8-d13}\n"                 \
  "  mov r11, r0\n"                    \
  "  ldr r2, [r11, #8]\n"              \
  "  vldrb.8 q0, [r2, #1]\n"           /* window at x */ \
  "  vldrb.8 q1, [r2]\n"               /* window at x + 1 */ \
  "  ldr r3, [r11, #24]\n"             \
  "  movs r2, #0\n"                    \
  "  vidup.u32 q4, r2, #1\n"          /* 0, 1, 2, 3 */ \
  "  vmul.i32 q4, q4, r3\n"           /* output offsets 0, c, 2c, 3c */ \
  "  ldrd r2, r3, [r11, #44]\n"        \
  "  vdup.32 q2, r2\n"                 \
  "  vdup.32 q3, r3\n"                 \
  "  ldr r0, [r11, #0]\n"              \
  "  ldr r9, [r11, #12]\n"             /* rows left */ \
  "  ldr r10, [r11, #20]\n"            /* output of the block */ \
  "1:\n"                               \
  "  ldr r3, [r11, #16]\n"             \
  "  cmp r9, r3\n"                     \
  "  it lt\n"                          \
  "  movlt r3, r9\n"                   \
  "  sub r9, r9, r3\n"                 \
  "  ldr r1, [r11, #4]\n"              \
  "  mov r8, r1\n"                     \
  "  mov r12, #" #W "\n"               \
  "  mul r12, r12, r3\n"               /* sums in this block */ \
  "  dls lr, r3\n"                     \
  "2:\n"                               \
  BODY                                 \
  "  le lr, 2b\n"                      \
  "  ldrd r4, r5, [r11, #28]\n"        /* fold, multiplier */ \
  "  ldrd r6, r7, [r11, #36]\n"        /* -exponent, zp */ \
  "  ldr r2, [r11, #24]\n"             \
  "  mov r3, r10\n"                    \
  "  mla r10, r2, r12, r10\n"          \
  "  lsls r2, r2, #2\n"                \
  "  dlstp.32 lr, r12\n"               \
  "3:\n"                               \
  "  vldrw.u32 q5, [r8], #16\n"        \
  "  vadd.i32 q5, q5, r4\n"            \
  "  vqrdmulh.s32 q5, q5, r5\n"        \
  "  vshr.s32 q6, q5, #31\n"           \
  "  vqadd.s32 q5, q5, q6\n"           \
  "  vrshl.s32 q5, r6\n"               \
  "  vadd.i32 q5, q5, r7\n"            \
  "  vmax.s32 q5, q5, q2\n"            \
  "  vmin.s32 q5, q5, q3\n"            \
  "  vstrb.32 q5, [r3, q4]\n"          \
  "  add r3, r3, r2\n"                 \
  "  letp lr, 3b\n"                    \
  "  cmp r9, #0\n"                     \
  "  bne 1b\n"                         \
  "  vpop {d8-d13}\n"                  \
  "  pop {r4-r11, pc}\n"               \
  "  .size " name ", . - " name "\n"
__asm__(
    "  .syntax unified\n"
    "  .thumb\n"
    DW_DOT_FN("ek_dw_dot_fill")
    "  push {r4-r7, lr}\n"
    "  ldrd r4, r5, [r3]\n"            /* w, c */
    "  movs r6, #0\n"
    "  vidup.u16 q1, r6, #1\n"         /* 0, 1, .., 7 (VIDUP wants an even base register) */
    "  ldr r12, [r3, #16]\n"           /* plane bytes */
    "  vmul.i16 q1, q1, r12\n"         /* plane offsets 0, pb, .., 7pb */
    "  ldr r6, [r3, #8]\n"             /* fill bytes */
    "  ldr r7, [r3, #12]\n"            /* zp */
    "  vdup.8 q0, r7\n"
    "  mov r7, r1\n"
    "  dlstp.8 lr, r6\n"
    "1:\n"
    "  vstrb.8 q0, [r7], #16\n"
    "  letp lr, 1b\n"
    "  ldrd r12, r7, [r3, #20]\n"      /* lanes, s + 1 */
    "  add r1, r1, r7\n"
    "  cmp r12, #8\n"
    "  beq 4f\n"
    "  vctp.16 r12\n"                  /* a partial group: predicated */
    "2:\n"
    "  dls lr, r4\n"
    "3:\n"
    "  vpstt\n"
    "  vldrbt.s16 q0, [r0]\n"
    "  vstrbt.16 q0, [r1, q1]\n"
    "  add r0, r0, r5\n"
    "  add r1, r1, #1\n"
    "  le lr, 3b\n"
    "  add r1, r1, #1\n"
    "  subs r2, r2, #1\n"
    "  bne 2b\n"
    "  pop {r4-r7, pc}\n"
    "4:\n"
    "  dls lr, r4\n"
    "5:\n"
    "  vldrb.s16 q0, [r0]\n"
    "  vstrb.16 q0, [r1, q1]\n"
    "  add r0, r0, r5\n"
    "  add r1, r1, #1\n"
    "  le lr, 5b\n"
    "  add r1, r1, #1\n"
    "  subs r2, r2, #1\n"
    "  bne 4b\n"
    "  pop {r4-r7, pc}\n"
    "  .size ek_dw_dot_fill, . - ek_dw_dot_fill\n"
    DW_DOT_CHANNEL("ek_dw_dot_channel2", 2, DW_DOT_PAIR "  adds r0, r0, #1\n")
    DW_DOT_CHANNEL("ek_dw_dot_channel3", 3, DW_DOT_PAIR DW_DOT_ONE)
    DW_DOT_CHANNEL("ek_dw_dot_channel4", 4, DW_DOT_PAIR DW_DOT_PAIR "  adds r0, r0, #1\n")
    DW_DOT_CHANNEL("ek_dw_dot_channel5", 5, DW_DOT_PAIR DW_DOT_PAIR DW_DOT_ONE)
    "  .text\n");
#undef DW_DOT_FN
#undef DW_DOT_PAIR
#undef DW_DOT_ONE
#undef DW_DOT_CHANNEL

/* The group's weight records: record k holds channel c0 + k's tap (ky, kx) at byte 1 + ky * s + kx and 0 elsewhere,
   so record + 1 is the window at x and the record itself the window at x + 1. Per tap one widening load of the group's
   weights and one byte scatter to the records. */
static EK_DW_NOINLINE void dw_dot_weight_records(const int8_t *wt, int32_t oc, int32_t c0, int32_t lanes, int32_t s,
                                                 int8_t *rec) {
  const int8x16_t zero = vdupq_n_s8(0);
  for (int32_t i = 0; i < DW_DOT_GROUP * DW_DOT_WREC; i += 16) vst1q_s8(rec + i, zero);
  const uint16x8_t offsets = vmulq_n_u16(vidupq_n_u16(0, 1), DW_DOT_WREC);
  const mve_pred16_t live = vctp16q((uint32_t)lanes);
  for (int32_t t = 0; t < 9; ++t)
    vstrbq_scatter_offset_p_s16(rec + 1 + (t / 3) * s + t % 3, offsets, vldrbq_z_s16(wt + t * oc + c0, live), live);
}

static EK_DW_NOINLINE void dw_dot_mve(const dw_data *d, const ek_conv_channel *ch, const ek_tensor *in,
                                                 const ek_tensor *f, ek_tensor *out, int8_t *scratch,
                                                 const dw_dot_fit *fit) {
  typedef void (*channel_fn)(const dw_dot_job *);
  static const channel_fn channel_of[4] = {ek_dw_dot_channel2, ek_dw_dot_channel3, ek_dw_dot_channel4,
                                           ek_dw_dot_channel5};
  const int32_t n = in->dims[0], h = in->dims[1], w = in->dims[2], c = in->dims[3];
  const int32_t s = fit->s, pb = fit->plane_bytes;
  const channel_fn run = channel_of[w - 2];
  int8_t records[DW_DOT_GROUP * DW_DOT_WREC + 16] __attribute__((aligned(16)));
  int32_t fill[7] = {w, c, 0, -d->input_offset, pb, 0, s + 1};
  dw_dot_job job = {0, (int32_t *)(void *)(scratch + fit->acc_offset), 0, h, fit->block_rows, 0, c, 0, 0, 0,
                    d->output_offset, d->act_min, d->act_max};
  for (int32_t b = 0; b < n; ++b) {
    const int8_t *x = (const int8_t *)in->data + (ptrdiff_t)b * h * w * c;
    int8_t *y = (int8_t *)out->data + (ptrdiff_t)b * h * w * c;
    for (int32_t c0 = 0; c0 < c; c0 += DW_DOT_GROUP) {
      const int32_t lanes = c - c0 < DW_DOT_GROUP ? c - c0 : DW_DOT_GROUP;
      fill[2] = lanes * pb + DW_DOT_SLACK;
      fill[5] = lanes;
      ek_dw_dot_fill(x + c0, scratch, h, fill);
      dw_dot_weight_records((const int8_t *)f->data, c, c0, lanes, s, records);
      for (int32_t k = 0; k < lanes; ++k) {
        const ek_conv_channel *cc = &ch[c0 + k];
        job.plane = scratch + k * pb;
        job.weights = records + k * DW_DOT_WREC;
        job.out = y + c0 + k;
        job.fold = cc->fold;
        job.multiplier = cc->multiplier;
        job.neg_exponent = -ek_conv_exponent(cc);
        run(&job);
      }
    }
  }
}
#endif

/* The op's paths, exactly as before constant channels existed (kept a separate, not inlined function: the same code
   and instruction counts as then); returns the output. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static ek_tensor *dw_compute(ek_context *ctx, ek_op *op) {
  const dw_data *d = (const dw_data *)op->user_data;
  const ek_conv_channel *ch = dw_channels(op->user_data);
  const ek_tensor *in = ek_input(ctx, op, 0), *f = ek_input(ctx, op, 1), *bias_t = ek_input(ctx, op, 2);
  ek_tensor *out = ek_output(ctx, op, 0);
  const ek_op_params *p = &op->params;
  if (d->path == DW_PATH_BLOCKED) {
    dw_geometry g;
    if (dw_geometry_of(ctx, op, &g)) { /* always true after prepare chose this path */
      if (d->multiplier > 1) {
        dw_blocked_multiplier(d, ch, p, in, f, out, (uint32_t *)op->scratch, &g);
        return out;
      }
#if defined(DW_DOT_ASM)
      dw_dot_fit fit;
      if (dw_dot_applies(d, p, in, out, &g, &fit)) {
        dw_dot_mve(d, ch, in, f, out, (int8_t *)op->scratch, &fit);
        return out;
      }
#endif
#if EK_CONV_MVE
      if (dw_mve_applies(&g)) {
        dw_blocked_mve(d, ch, p, in, f, out, (uint32_t *)op->scratch, &g);
        return out;
      }
#endif
      dw_blocked(d, ch, p, in, f, out, (uint32_t *)op->scratch, &g);
      return out;
    }
  }
  const int32_t *bias = bias_t ? (const int32_t *)bias_t->data : (const int32_t *)0;
  const int32_t n = in->dims[0], oc = f->dims[3];
  const int32_t oh = out->dims[1], ow = out->dims[2];
  int8_t *y = (int8_t *)out->data;
  for (int32_t b = 0; b < n; ++b)
    for (int32_t oy = 0; oy < oh; ++oy)
      for (int32_t ox = 0; ox < ow; ++ox)
        dw_pixel_reference(d, ch, p, in, f, bias, b, oy, ox, y + (((int64_t)b * oh + oy) * ow + ox) * oc);
  return out;
}

/* ---------- output rows [row_begin, row_end) of batch 0 (a row-streamed group, ek_stream_group.c) ----------
 * The blocked paths' passes and group tables, so the outputs are bit-exact with the whole op; only the filling
 * changes: per channel group the padded rows that a chunk of output rows reads are filled (input rows outside the
 * image: the zero point) into the op's scratch, linearly from the chunk's first window row, and one pass runs the
 * chunk. Only the input rows the range needs are read (rows r * stride_h - pad_h .. + (kh - 1) * dilation_h for
 * output row r, clamped to the image: the rows the group's window holds). The chunk holds as many output rows as
 * the scratch's line area does (plane geometry: the whole padded plane, so any range; ring geometry: 2 * kh rows).
 * A layer whose dilated window spans more rows than that (ring geometry, dilation_h > 1) fills each output row's kh
 * rows compactly instead. The scratch is the group's kernel scratch, shared by the group's ops: nothing is kept
 * between calls. Helium (multiplier 1, at least 4 taps, linear chunks): dw_mve_rows on the plane of 8 raw bytes
 * per pixel; otherwise the DSP / portable pass (dw_run_pass). */
#ifndef EK_NO_STREAM_GROUPS /* a firmware without groups never gets a row range: no row path in its flash */
/* The blocked row paths (~0.8 KB on Cortex-M4, ~1.4 KB on Helium): in a device build for one model (EK_MODEL_PATHS)
   only when one of its groups holds a DEPTHWISE_CONV_2D (EK_NEED_DW_ROWS, edgekit/firmware/kernel_paths.py); without
   them a row range runs TFLite's per-pixel loop (same outputs). */
#if !defined(EK_MODEL_PATHS) || defined(EK_NEED_DW_ROWS)
#define DW_ROWS_BLOCKED 1
#else
#define DW_ROWS_BLOCKED 0
#endif
#if DW_ROWS_BLOCKED
typedef struct dw_rows_job {
  int32_t r0, r1;     /* output rows */
  int32_t cap;        /* padded rows the line area holds */
  int32_t chunk;      /* output rows per linear chunk; 0: compact rows (kh rows per output row) */
} dw_rows_job;

/* Output rows per linear chunk of a line area of `cap` padded rows (0: the window does not fit it). */
static int32_t dw_rows_chunk(const ek_op_params *p, int32_t kh, int32_t cap) {
  const int32_t span = (kh - 1) * p->dilation_h + 1;
  return span <= cap ? (cap - span) / p->stride_h + 1 : 0;
}

static EK_DW_NOINLINE void dw_blocked_rows(const dw_data *d, const ek_conv_channel *ch, const ek_op_params *p,
                                           const ek_tensor *in, const ek_tensor *f, ek_tensor *out, uint32_t *scratch,
                                           const dw_geometry *g, const dw_rows_job *job) {
  const int32_t h = in->dims[1], w = in->dims[2], c = in->dims[3];
  const int32_t oc = out->dims[3], ow = out->dims[2];
  const int32_t kh = g->kh, kw = g->kw, wp = g->wp, row_words = 2 * wp;
  const uint32_t zp_word = (uint32_t)(uint8_t)(-d->input_offset) * 0x01010101u;
  uint32_t *lines = scratch;
  uint32_t *table = lines + (g->plane ? g->hp * row_words : 2 * kh * row_words + kh); /* as in dw_blocked */
  const int32_t clamp = d->act_min > -128 || d->act_max < 127;
  const int8_t *x = (const int8_t *)in->data;
  int8_t *y = (int8_t *)out->data;
  for (int32_t c0 = 0; c0 < oc; c0 += 4) {
    const int32_t lanes = oc - c0 < 4 ? oc - c0 : 4;
    dw_lanes l;
    dw_lanes_of(c, d->multiplier, c0, &l);
    dw_group_table(ch, (const int8_t *)f->data, oc, kh * kw, c0, lanes, d->output_offset, table);
    dw_pass ps = {table, lines, 4 * row_words * p->dilation_h, 8 * p->dilation_w, 8 * p->stride_w, ow, 1,
                  4 * row_words * p->stride_h, y, oc, d->act_min, d->act_max, clamp, 0};
    for (int32_t a = job->r0; a < job->r1;) {
      const int32_t n = job->chunk > 0 ? (job->r1 - a < job->chunk ? job->r1 - a : job->chunk) : 1;
      const int32_t first = a * p->stride_h - d->pad_h; /* input row of the chunk's first padded row */
      const int32_t count = job->chunk > 0 ? (n - 1) * p->stride_h + (kh - 1) * p->dilation_h + 1 : kh;
      const int32_t step = job->chunk > 0 ? 1 : p->dilation_h; /* input rows between filled rows */
      for (int32_t k = 0; k < count; ++k) {
        uint32_t *row = lines + k * row_words;
        if (d->multiplier == 1)
          dw_fill_row(x, h, w, c, first + k * step, d->pad_w, c0, lanes, zp_word, row, wp, 0);
        else
          dw_fill_row_lanes(x, h, w, c, first + k * step, d->pad_w, &l, zp_word, row, wp);
      }
      ps.tap_row_step = 4 * row_words * (job->chunk > 0 ? p->dilation_h : 1);
      ps.row0 = lines;
      ps.rows = n;
      ps.dst = y + (ptrdiff_t)a * ow * oc + c0;
      dw_run_pass(&ps, kh, kw, lanes);
      a += n;
    }
  }
}

#if EK_CONV_MVE
/* Helium: dw_blocked_mve's passes on linear chunks (multiplier 1, at least 4 taps): the padded rows as 8 raw bytes
   per pixel (2 words, the DSP layout's size), the table where the DSP path keeps its group table. */
static EK_DW_NOINLINE void dw_blocked_rows_mve(const dw_data *d, const ek_conv_channel *ch, const ek_op_params *p,
                                               const ek_tensor *in, const ek_tensor *f, ek_tensor *out,
                                               uint32_t *scratch, const dw_geometry *g, const dw_rows_job *job) {
  const int32_t h = in->dims[1], w = in->dims[2], c = in->dims[3];
  const int32_t kh = g->kh, kw = g->kw, wp = g->wp, ow = out->dims[2];
  const int8_t zp = (int8_t)(-d->input_offset);
  int8_t *plane = (int8_t *)scratch;
  int32_t *table = (int32_t *)(void *)(scratch + (g->plane ? 2 * g->hp * wp : 4 * kh * wp + kh));
  const int32_t first = d->pad_w < wp ? d->pad_w : wp, last = d->pad_w + w < wp ? d->pad_w + w : wp;
  const int32_t cols = last - first;
  const int8_t *x = (const int8_t *)in->data;
  int8_t *y = (int8_t *)out->data;
  for (int32_t c0 = 0; c0 < c; c0 += 8) {
    const int32_t lanes = c - c0 < 8 ? c - c0 : 8;
    for (int32_t j = 0; j < 8; ++j) { /* as in dw_blocked_mve */
      const ek_conv_channel *cc = &ch[c0 + (j < lanes ? j : 0)];
      const int32_t k = (j & 1) * 4 + (j >> 1);
      table[k] = j < lanes ? cc->fold : 0;
      table[8 + k] = j < lanes ? cc->multiplier : 0;
      table[16 + k] = -ek_conv_exponent(cc);
    }
    const mve_pred16_t live = vctp16q((uint32_t)lanes);
    const int8_t *wt = (const int8_t *)f->data + c0;
    const int full3x3 = kh == 3 && kw == 3 && lanes == 8 && p->dilation_w == 1;
    for (int32_t a = job->r0; a < job->r1;) {
      const int32_t n = job->r1 - a < job->chunk ? job->r1 - a : job->chunk;
      const int32_t iy0 = a * p->stride_h - d->pad_h, count = (n - 1) * p->stride_h + (kh - 1) * p->dilation_h + 1;
      for (int32_t k = 0; k < count; ++k) {
        int8_t *row = plane + (ptrdiff_t)8 * k * wp;
        const int32_t iy = iy0 + k;
        if (iy < 0 || iy >= h || cols <= 0) {
          memset(row, zp, (size_t)8 * wp);
          continue;
        }
        memset(row, zp, (size_t)8 * first);
        memset(row + 8 * last, zp, (size_t)8 * (wp - last));
        const int8_t *src = x + ((ptrdiff_t)iy * w + (first - d->pad_w)) * c + c0;
        int8_t *dst = row + 8 * first;
        if (lanes == 8) {
          for (int32_t i = 0; i < cols; ++i, src += c, dst += 8) memcpy(dst, src, 8);
        } else {
          for (int32_t i = 0; i < cols; ++i, src += c, dst += 8) memcpy(dst, src, (size_t)lanes);
        }
      }
      dw_mve_rows(d, p, plane, table, wt, c, kh, kw, wp, n, ow, y + (ptrdiff_t)a * ow * c + c0, live, full3x3);
      a += n;
    }
  }
}
#endif

/* The row range of a blocked-path layer as chunks (0: the layer keeps TFLite's per-pixel loop for its rows). */
static int dw_rows_plan(const ek_context *ctx, const ek_op *op, dw_geometry *g, dw_rows_job *job) {
  const dw_data *d = (const dw_data *)op->user_data;
  if (!d || d->path != DW_PATH_BLOCKED || !dw_geometry_of(ctx, op, g)) return 0;
  job->cap = g->plane ? g->hp : 2 * g->kh;
  job->chunk = dw_rows_chunk(&op->params, g->kh, job->cap);
  return 1;
}

#endif /* DW_ROWS_BLOCKED */

#ifndef EK_PREPARED_ONLY
/* The planner's question (ek_plan.c group_at): does a row range of this op run on a blocked path? */
int ek_dw_rows_fast(const ek_context *ctx, const ek_op *op) {
#if DW_ROWS_BLOCKED
  dw_geometry g;
  dw_rows_job job;
  return op && op->opcode == EK_OP_DEPTHWISE_CONV_2D && dw_rows_plan(ctx, op, &g, &job);
#else
  (void)ctx, (void)op;
  return 0;
#endif
}
#endif

static ek_status dw_eval_rows(ek_context *ctx, ek_op *op) {
  const dw_data *d = (const dw_data *)op->user_data;
  const ek_conv_channel *ch = dw_channels(op->user_data);
  const ek_tensor *in = ek_input(ctx, op, 0), *f = ek_input(ctx, op, 1), *bias_t = ek_input(ctx, op, 2);
  ek_tensor *out = ek_output(ctx, op, 0);
  const int32_t ow = out->dims[2], oc = f->dims[3];
  int8_t *y = (int8_t *)out->data;
  int fill = d->constants > 0;
#if DW_ROWS_BLOCKED
  dw_geometry g;
  dw_rows_job job;
  if (dw_rows_plan(ctx, op, &g, &job)) {
    job.r0 = ctx->row_begin;
    job.r1 = ctx->row_end;
#if EK_CONV_MVE
    if (d->multiplier == 1 && g.kh * g.kw >= 4 && job.chunk > 0) {
      dw_blocked_rows_mve(d, ch, &op->params, in, f, out, (uint32_t *)op->scratch, &g, &job);
    } else
#endif
    {
      dw_blocked_rows(d, ch, &op->params, in, f, out, (uint32_t *)op->scratch, &g, &job);
      fill = fill && (d->fill > 0 || EK_CONV_MVE); /* else the group table wrote them (as in dw_blocked) */
    }
  } else
#endif
  { /* TFLite's per-pixel loop */
    const int32_t *bias = bias_t ? (const int32_t *)bias_t->data : (const int32_t *)0;
    for (int32_t oy = ctx->row_begin; oy < ctx->row_end; ++oy)
      for (int32_t ox = 0; ox < ow; ++ox)
        dw_pixel_reference(d, ch, &op->params, in, f, bias, 0, oy, ox, y + ((int64_t)oy * ow + ox) * oc);
  }
  if (fill)
    ek_conv_fill_constant(y + (ptrdiff_t)ctx->row_begin * ow * d->channels, (ctx->row_end - ctx->row_begin) * ow,
                          d->channels, dw_constant_list(d), d->constants);
  return EK_OK;
}
#endif

static ek_status dw_eval(ek_context *ctx, ek_op *op) {
  const dw_data *d = (const dw_data *)op->user_data;
#ifndef EK_NO_STREAM_GROUPS
  if (ctx->row_end > 0) return dw_eval_rows(ctx, op);
#endif
  const ek_tensor *out = dw_compute(ctx, op);
  if (d->fill > 0) /* after the op (the input is no longer read): those paths wrote 0 + zp there */
    ek_conv_fill_constant((int8_t *)out->data, out->dims[0] * out->dims[1] * out->dims[2], d->channels,
                          dw_constant_list(d), d->fill);
  return EK_OK;
}

/* Kernel access contract (firmware/runtime/README.md). Blocked, multiplier 1: channel groups in place (the group's
   plane, or a ring of rows ahead of the output row, is copied before its outputs are written), so the output may
   sit exactly on the input. Reference: raster, pixel by pixel. */
static int dw_overlap(const ek_context *ctx, const ek_op *op, int input_index, int32_t *d_max) {
  const dw_data *d = (const dw_data *)op->user_data;
  if (input_index != 0 || !d) return EK_OVERLAP_NONE;
  const ek_tensor *in = ek_input((ek_context *)ctx, op, 0), *out = ek_output((ek_context *)ctx, op, 0);
  const ek_op_params *p = &op->params;
  if (d->path != DW_PATH_BLOCKED)
    return ek_stream_raster(in, out, p->stride_h, p->stride_w, d->pad_h, d->pad_w, 1, 0, d_max) ? EK_OVERLAP_UPTO
                                                                                                 : EK_OVERLAP_NONE;
  dw_geometry g;
  if (d->multiplier != 1 || !dw_geometry_of(ctx, op, &g) || in->ndim != 4 || out->ndim != 4) return EK_OVERLAP_NONE;
  if (!g.plane) { /* ring: every input row an output row overwrites must already be in the ring */
    if (p->dilation_h != 1) return EK_OVERLAP_NONE;
    const int64_t h = in->dims[1], w = in->dims[2], oh = out->dims[1], ow = out->dims[2];
    for (int64_t oy = 0; oy < oh; ++oy) {
      const int64_t last_row = ((oy + 1) * ow - 1) / w;
      int64_t loaded = oy * p->stride_h - d->pad_h + (g.kh - 1);
      if (loaded > h - 1) loaded = h - 1;
      if (last_row > loaded) return EK_OVERLAP_NONE;
    }
  }
  *d_max = 0;
  return EK_OVERLAP_EXACT;
}

/* edgekit-op: DEPTHWISE_CONV_2D | types: int8 | versions: 1-3 | fast path: Cortex-M4 DSP, Helium (M55) */
const ek_kernel ek_kernel_depthwise_conv_2d = {EK_OP_DEPTHWISE_CONV_2D, "DEPTHWISE_CONV_2D", EK_HOST_FN(dw_persistent_bytes), EK_HOST_FN(dw_scratch_bytes), EK_HOST_FN(dw_prepare), dw_eval, EK_HOST_FN(dw_overlap)};
