/* FULLY_CONNECTED, int8 input/output, int8 weights [units, depth] with one scale (any zero point) or one scale
 * per unit (zero points 0), optional int32 bias, input of any rank (batches = elements / depth),
 * keep_num_dims.
 *
 * Bit-exact with LiteRT BUILTIN_REF, whose int8 reference FullyConnected(PerChannel) rescales the int32
 * accumulator with round(double(acc) * s_in * s_w / s_out), not with the fixed-point multiplier that
 * TFLite Micro uses (see ek_dround_mul in ek_conv_common.h: that is why TFLM and BUILTIN_REF disagree by
 * up to 3 LSB on the MLPerf AD autoencoder; we match BUILTIN_REF).
 *
 * Blocked path: each input row is expanded once (int8 + input offset -> int16 pairs in SMLAD order) into
 * scratch, then two units at a time take one weight word each per 4 inputs (SXTB16 + 2 SMLAD per unit).
 * A non-zero weight zero point (per-tensor only) adds weight_offset * sum(x + input_offset) per row.
 */
#include "ek_conv_common.h"
#include "ek_stream.h"

enum { FC_PATH_REFERENCE = 0, FC_PATH_BLOCKED = 1 };

typedef struct fc_data {
  int32_t act_min, act_max;
  int32_t input_offset, weight_offset, output_offset;
  int32_t units, depth, batches;
  int32_t path;
  int32_t num_scales; /* ek_dscale entries: 1 or units */
} fc_data;

static ek_dscale *fc_scales(void *user_data) {
  return (ek_dscale *)((uint8_t *)user_data + ((sizeof(fc_data) + 7u) & ~(size_t)7u));
}

static int32_t fc_num_scales(const ek_context *ctx, const ek_op *op) {
  if (op->num_inputs < 2 || op->inputs[1] < 0 || op->inputs[1] >= ctx->num_tensors) return 0;
  const int32_t s = ctx->tensors[op->inputs[1]].num_scales;
  return s > 0 ? s : 0;
}

static size_t fc_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  return ((sizeof(fc_data) + 7u) & ~(size_t)7u) + (size_t)fc_num_scales(ctx, op) * sizeof(ek_dscale);
}

static int32_t fc_depth(const ek_context *ctx, const ek_op *op) {
  if (op->num_inputs < 2 || op->inputs[1] < 0 || op->inputs[1] >= ctx->num_tensors) return 0;
  const ek_tensor *f = &ctx->tensors[op->inputs[1]];
  return (f->ndim == 2 && f->dims[1] > 0) ? f->dims[1] : 0;
}

/* The smaller of the op's input and output bytes (BALANCED: a bigger scratch is not worth it). */
static int32_t fc_io_bytes(const ek_context *ctx, const ek_op *op) {
  const ek_tensor *in = ek_input((ek_context *)ctx, op, 0), *out = ek_output((ek_context *)ctx, op, 0);
  if (!in || !out) return 0;
  return in->bytes < out->bytes ? in->bytes : out->bytes;
}

static size_t fc_scratch_bytes(const ek_context *ctx, const ek_op *op) {
  const int64_t bytes = ((int64_t)fc_depth(ctx, op) + 3) / 4 * 8;
  if (ctx->optimize == EK_OPTIMIZE_RAM) return 0; /* reference path: no scratch */
  if (ctx->optimize == EK_OPTIMIZE_BALANCED && op->num_outputs == 1 && op->outputs[0] >= 0 &&
      op->outputs[0] < ctx->num_tensors && bytes > (int64_t)fc_io_bytes(ctx, op))
    return 0;
  return bytes <= EK_CONV_SCRATCH_MAX ? (size_t)bytes : 0;
}

static ek_status fc_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs < 2 || op->num_inputs > 3 || op->num_outputs != 1)
    return ek_fail(ctx, op, EK_ERR_MODEL, "FULLY_CONNECTED needs 2 or 3 inputs (input, weights, optional bias) and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0), *f = ek_input(ctx, op, 1), *bias = ek_input(ctx, op, 2);
  const ek_tensor *out = ek_output(ctx, op, 0);
  if (!in || !f || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "FULLY_CONNECTED input, weights or output missing");
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
  d->path = (op->scratch && fc_scratch_bytes(ctx, op) > 0) ? FC_PATH_BLOCKED : FC_PATH_REFERENCE;
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

#if !EK_CONV_MVE /* the DSP (and portable) blocked path */
/* Dot product of one weight row with the expanded input row (groups of 4 as (x0,x2),(x1,x3), tail natural). */
static void fc_blocked(const fc_data *d, const ek_dscale *ds, const int8_t *x, const int8_t *wt, const int32_t *bias,
                       int8_t *y, uint32_t *row) {
  const int32_t depth = d->depth, groups = depth >> 2, tail = depth & 3;
  const uint32_t off2 = ek_offset2(d->input_offset);
  for (int32_t b = 0; b < d->batches; ++b) {
    const int8_t *xr = x + (int64_t)b * depth;
    uint32_t sum = 0; /* sum(x + input_offset), for a non-zero weight zero point */
    for (int32_t g = 0; g < groups; ++g) ek_expand4(ek_load32(xr + 4 * g), off2, &row[2 * g], &row[2 * g + 1]);
    int16_t *row_tail = (int16_t *)(void *)(row + 2 * groups);
    for (int32_t i = 0; i < tail; ++i) row_tail[i] = (int16_t)(xr[4 * groups + i] + d->input_offset);
    if (d->weight_offset) {
      for (int32_t k = 0; k < depth; ++k) sum += (uint32_t)(xr[k] + d->input_offset);
    }
    const uint32_t correction = sum * (uint32_t)d->weight_offset;
    int8_t *yr = y + (int64_t)b * d->units;
    int32_t u = 0;
    for (; u + 4 <= d->units; u += 4) { /* four units share each expanded input pair */
      const int8_t *w0 = wt + (int64_t)u * depth, *w1 = w0 + depth, *w2 = w1 + depth, *w3 = w2 + depth;
      int32_t a0 = (int32_t)((bias ? (uint32_t)bias[u] : 0u) + correction);
      int32_t a1 = (int32_t)((bias ? (uint32_t)bias[u + 1] : 0u) + correction);
      int32_t a2 = (int32_t)((bias ? (uint32_t)bias[u + 2] : 0u) + correction);
      int32_t a3 = (int32_t)((bias ? (uint32_t)bias[u + 3] : 0u) + correction);
      const uint32_t *r = row;
      for (int32_t g = 0; g < groups; ++g, r += 2, w0 += 4, w1 += 4, w2 += 4, w3 += 4) {
        const uint32_t r02 = r[0], r13 = r[1];
        uint32_t v = ek_load32(w0);
        a0 = ek_smlad(r02, ek_sxtb16(v), a0);
        a0 = ek_smlad(r13, ek_sxtb16_ror8(v), a0);
        v = ek_load32(w1);
        a1 = ek_smlad(r02, ek_sxtb16(v), a1);
        a1 = ek_smlad(r13, ek_sxtb16_ror8(v), a1);
        v = ek_load32(w2);
        a2 = ek_smlad(r02, ek_sxtb16(v), a2);
        a2 = ek_smlad(r13, ek_sxtb16_ror8(v), a2);
        v = ek_load32(w3);
        a3 = ek_smlad(r02, ek_sxtb16(v), a3);
        a3 = ek_smlad(r13, ek_sxtb16_ror8(v), a3);
      }
      for (int32_t i = 0; i < tail; ++i) {
        a0 = ek_wrap_add(a0, w0[i] * row_tail[i]);
        a1 = ek_wrap_add(a1, w1[i] * row_tail[i]);
        a2 = ek_wrap_add(a2, w2[i] * row_tail[i]);
        a3 = ek_wrap_add(a3, w3[i] * row_tail[i]);
      }
      yr[u] = fc_output(d, ds, u, a0);
      yr[u + 1] = fc_output(d, ds, u + 1, a1);
      yr[u + 2] = fc_output(d, ds, u + 2, a2);
      yr[u + 3] = fc_output(d, ds, u + 3, a3);
    }
    for (; u < d->units; ++u) {
      const int8_t *w0 = wt + (int64_t)u * depth;
      int32_t a0 = (int32_t)((bias ? (uint32_t)bias[u] : 0u) + correction);
      const uint32_t *r = row;
      for (int32_t g = 0; g < groups; ++g) {
        const uint32_t v0 = ek_load32(w0);
        a0 = ek_smlad(r[0], ek_sxtb16(v0), a0);
        a0 = ek_smlad(r[1], ek_sxtb16_ror8(v0), a0);
        r += 2;
        w0 += 4;
      }
      for (int32_t i = 0; i < tail; ++i) a0 = ek_wrap_add(a0, w0[i] * row_tail[i]);
      yr[u] = fc_output(d, ds, u, a0);
    }
  }
}

#endif /* !EK_CONV_MVE */

#if EK_CONV_MVE
/* Helium: acc[j] += sum over k < n of w_j[k] * x[k], int8 weights (widened on load) against the int16 row
 * x + input_offset; tail-predicated loop, per 8 inputs one row load, four weight loads, four VMLADAVA. */
#if defined(__OPTIMIZE__) && !defined(EK_CONV_NO_ASM) /* fixed registers: r7 is the frame pointer at -O0 */
static inline void fc_mve_dot4(const int16_t *x, const int8_t *w0, const int8_t *w1, const int8_t *w2,
                               const int8_t *w3, int32_t n, int32_t *acc) {
  register int32_t a0 __asm__("r0") = acc[0], a1 __asm__("r2") = acc[1], a2 __asm__("r4") = acc[2],
                                      a3 __asm__("r6") = acc[3];
  register const int8_t *p0 __asm__("r1") = w0, *p1 __asm__("r3") = w1, *p2 __asm__("r5") = w2,
                                    *p3 __asm__("r7") = w3; /* widening loads want r0-r7 */
  register const int16_t *px __asm__("r8") = x;
  register int32_t count __asm__("r12") = n;
  __asm__ volatile(
      "dlstp.16 lr, %[n]\n"
      "1:\n"
      "vldrh.16 q0, [%[px]], #16\n"
      "vldrb.s16 q1, [%[p0]], #8\n"
      "vmladava.s16 %[a0], q1, q0\n"
      "vldrb.s16 q1, [%[p1]], #8\n"
      "vmladava.s16 %[a1], q1, q0\n"
      "vldrb.s16 q1, [%[p2]], #8\n"
      "vmladava.s16 %[a2], q1, q0\n"
      "vldrb.s16 q1, [%[p3]], #8\n"
      "vmladava.s16 %[a3], q1, q0\n"
      "letp lr, 1b\n"
      : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [p0] "+r"(p0), [p1] "+r"(p1), [p2] "+r"(p2),
        [p3] "+r"(p3), [px] "+r"(px)
      : [n] "r"(count)
      : "lr", "d0", "d1", "d2", "d3", "memory");
  acc[0] = a0;
  acc[1] = a1;
  acc[2] = a2;
  acc[3] = a3;
}
#else
static inline void fc_mve_dot4(const int16_t *x, const int8_t *w0, const int8_t *w1, const int8_t *w2,
                               const int8_t *w3, int32_t n, int32_t *acc) {
  for (; n > 0; n -= 8, x += 8, w0 += 8, w1 += 8, w2 += 8, w3 += 8) {
    const mve_pred16_t p = vctp16q((uint32_t)n);
    const int16x8_t xv = vldrhq_z_s16(x, p); /* inactive lanes are 0 */
    acc[0] = vmladavaq_s16(acc[0], vldrbq_z_s16(w0, p), xv);
    acc[1] = vmladavaq_s16(acc[1], vldrbq_z_s16(w1, p), xv);
    acc[2] = vmladavaq_s16(acc[2], vldrbq_z_s16(w2, p), xv);
    acc[3] = vmladavaq_s16(acc[3], vldrbq_z_s16(w3, p), xv);
  }
}
#endif

/* The blocked path on Helium: the input row as int16 (x + input_offset) in natural order (the scratch holds
   2 bytes per input), four units per pass (the last pass repeats a unit instead of reading past the weights). */
static void fc_blocked_mve(const fc_data *d, const ek_dscale *ds, const int8_t *x, const int8_t *wt,
                           const int32_t *bias, int8_t *y, int16_t *row) {
  const int32_t depth = d->depth, units = d->units;
  for (int32_t b = 0; b < d->batches; ++b) {
    const int8_t *xr = x + (int64_t)b * depth;
    uint32_t sum = 0; /* sum(x + input_offset), for a non-zero weight zero point */
    for (int32_t k = 0; k < depth; ++k) {
      row[k] = (int16_t)(xr[k] + d->input_offset);
      sum += (uint32_t)row[k];
    }
    const uint32_t correction = d->weight_offset ? sum * (uint32_t)d->weight_offset : 0u;
    int8_t *yr = y + (int64_t)b * units;
    for (int32_t u = 0; u < units; u += 4) {
      int32_t idx[4], acc[4];
      for (int32_t j = 0; j < 4; ++j) {
        idx[j] = u + j < units ? u + j : units - 1;
        acc[j] = (int32_t)((bias ? (uint32_t)bias[idx[j]] : 0u) + correction);
      }
      fc_mve_dot4(row, wt + (int64_t)idx[0] * depth, wt + (int64_t)idx[1] * depth, wt + (int64_t)idx[2] * depth,
                  wt + (int64_t)idx[3] * depth, depth, acc);
      for (int32_t j = 0; j < 4 && u + j < units; ++j) yr[u + j] = fc_output(d, ds, u + j, acc[j]);
    }
  }
}
#endif

static ek_status fc_eval(ek_context *ctx, ek_op *op) {
  const fc_data *d = (const fc_data *)op->user_data;
  const ek_dscale *ds = fc_scales(op->user_data);
  const ek_tensor *in = ek_input(ctx, op, 0), *f = ek_input(ctx, op, 1), *bias = ek_input(ctx, op, 2);
  ek_tensor *out = ek_output(ctx, op, 0);
  const int32_t *bias_data = bias ? (const int32_t *)bias->data : (const int32_t *)0;
  if (d->path == FC_PATH_BLOCKED) {
#if EK_CONV_MVE
    fc_blocked_mve(d, ds, (const int8_t *)in->data, (const int8_t *)f->data, bias_data, (int8_t *)out->data,
                   (int16_t *)op->scratch);
#else
    fc_blocked(d, ds, (const int8_t *)in->data, (const int8_t *)f->data, bias_data, (int8_t *)out->data,
               (uint32_t *)op->scratch);
#endif
  } else {
    fc_reference(d, ds, (const int8_t *)in->data, (const int8_t *)f->data, bias_data, (int8_t *)out->data);
  }
  return EK_OK;
}

/* Kernel access contract (firmware/runtime/README.md): blocked, each input row is expanded into scratch before
   its outputs are written (rows copied); reference, every output unit reads the whole row (rows live). */
static int fc_overlap(const ek_context *ctx, const ek_op *op, int input_index, int32_t *d_max) {
  (void)ctx;
  const fc_data *d = (const fc_data *)op->user_data;
  if (input_index != 0 || !d || d->batches < 1) return EK_OVERLAP_NONE;
  const int ok = d->path == FC_PATH_BLOCKED ? ek_stream_rows(d->batches, d->depth, d->units, d_max)
                                            : ek_stream_rows_live(d->batches, d->depth, d->units, d_max);
  return ok ? EK_OVERLAP_UPTO : EK_OVERLAP_NONE;
}

const ek_kernel ek_kernel_fully_connected = {EK_OP_FULLY_CONNECTED, "FULLY_CONNECTED", EK_HOST_FN(fc_persistent_bytes), EK_HOST_FN(fc_scratch_bytes), EK_HOST_FN(fc_prepare), fc_eval, EK_HOST_FN(fc_overlap)};
