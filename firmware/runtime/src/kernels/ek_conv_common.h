/* Private helpers of the heavy int8 kernels (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, pooling).
 *
 * Everything here is static inline so each kernel file stays self-contained (the firmware links only
 * the kernel files of the model's ops).  Semantics follow LiteRT's reference kernels (BUILTIN_REF):
 * tflite/kernels/padding.h, kernel_util.cc, quantization_util.cc, internal/common.cc and
 * internal/reference/integer_ops/{conv,depthwise_conv,fully_connected,pooling}.h.
 */
#ifndef EK_CONV_COMMON_H
#define EK_CONV_COMMON_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ek_fixedpoint.h"
#include "ek_kernels.h"

#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
#include <arm_acle.h>
#define EK_CONV_DSP 1
#else
#define EK_CONV_DSP 0
#endif

/* Helium (M-profile vector extension, integer part): the Cortex-M55 / M85 fast paths. */
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1) && !defined(EK_CONV_NO_MVE)
#include <arm_mve.h>
#define EK_CONV_MVE 1
#else
#define EK_CONV_MVE 0
#endif

/* Largest per-op scratch the blocked (im2col) paths ask for; bigger layers use the reference loops.
   The size depends only on the model, never on the build, so the host plans the same arena as the device. */
#define EK_CONV_SCRATCH_MAX 16384

/* ---------- checks ---------- */

static inline int ek_conv_finite_positive(float s) { return isfinite(s) && s > 0.0f; }

/* int8 activation tensor with one usable per-tensor scale and an int8 zero point, bytes matching dims. */
static inline int ek_conv_is_q8_activation(const ek_tensor *t) {
  if (!t || t->type != EK_INT8 || t->num_scales < 1 || !ek_conv_finite_positive(t->scale)) return 0;
  if (t->zero_point < -128 || t->zero_point > 127) return 0;
  return t->data != NULL && ek_num_elements(t) > 0 && t->bytes == ek_num_elements(t);
}

/* Product of dims (all >= 1) or -1 when a dim is < 1 or the product exceeds INT32_MAX. */
static inline int32_t ek_conv_elements(const ek_tensor *t) {
  if (t->ndim < 0 || t->ndim > EK_MAX_DIMS) return -1;
  int64_t n = 1;
  for (int32_t i = 0; i < t->ndim; ++i) {
    if (t->dims[i] < 1) return -1;
    n *= t->dims[i];
    if (n > INT32_MAX) return -1;
  }
  return (int32_t)n;
}

/* Filter scales: finite and >= 0 (0 is a legal all-zero channel: TFLite's QuantizeMultiplier maps it to 0). */
static inline int ek_conv_scales_ok(const ek_tensor *t) {
  if (t->num_scales < 1) return 0;
  if (t->num_scales == 1) return isfinite(t->scale) && t->scale >= 0.0f;
  if (!t->scales) return 0;
  for (int32_t i = 0; i < t->num_scales; ++i) {
    if (!isfinite(t->scales[i]) || t->scales[i] < 0.0f) return 0;
  }
  return 1;
}

/* Per-channel quantization axis: TFLite only checks that the quantized dimension has `channels` entries. */
static inline int ek_conv_channel_axis_ok(const ek_tensor *t, int32_t channels) {
  return t->quantized_dimension >= 0 && t->quantized_dimension < t->ndim &&
         t->dims[t->quantized_dimension] == channels;
}

static inline float ek_conv_scale_at(const ek_tensor *t, int32_t channel) {
  return (t->num_scales > 1 && t->scales) ? t->scales[channel] : t->scale;
}

/* All zero points of the tensor equal 0 (symmetric int8 weights). */
static inline int ek_conv_zero_points_zero(const ek_tensor *t) {
  if (t->zero_point != 0) return 0;
  if (t->num_scales > 1 && t->zero_points) {
    for (int32_t i = 0; i < t->num_scales; ++i) {
      if (t->zero_points[i] != 0) return 0;
    }
  }
  return 1;
}

/* Fused activations the int8 kernels clamp with (TANH/SIGN_BIT fused into an int8 op are rejected: the
   reference kernels would silently ignore them). */
static inline int ek_conv_activation_ok(int32_t act) {
  return act == EK_ACT_NONE || act == EK_ACT_RELU || act == EK_ACT_RELU_N1_TO_1 || act == EK_ACT_RELU6;
}

/* CalculateActivationRangeQuantized for an int8 output. Returns 0 where TFLite's Quantize() would fail
   (round(f / scale) outside int32); we also refuse |round(f / scale)| >= 2^30 so nothing can overflow. */
static inline int ek_conv_quantizable(float f, float scale) {
  const float q = roundf(f / scale);
  return q > -1073741824.0f && q < 1073741824.0f;
}
static inline int ek_conv_activation_range(int32_t act, const ek_tensor *out, int32_t *act_min, int32_t *act_max) {
  const float s = out->scale;
  if (act == EK_ACT_RELU && !ek_conv_quantizable(0.0f, s)) return 0;
  if (act == EK_ACT_RELU6 && !(ek_conv_quantizable(0.0f, s) && ek_conv_quantizable(6.0f, s))) return 0;
  if (act == EK_ACT_RELU_N1_TO_1 && !(ek_conv_quantizable(-1.0f, s) && ek_conv_quantizable(1.0f, s))) return 0;
  ek_activation_range(act, s, out->zero_point, -128, 127, act_min, act_max);
  return *act_min <= *act_max;
}

/* ---------- windows (padding.h ComputePaddingHeightWidth) ---------- */

/* Output size and leading padding of one spatial dimension. Returns 0 for an invalid or empty window
   or for sizes whose index arithmetic would not fit int32 (then eval's int32 math cannot overflow). */
static inline int ek_conv_window(int32_t padding, int32_t in, int32_t filter, int32_t stride, int32_t dilation,
                                 int32_t *out, int32_t *pad) {
  if (in < 1 || filter < 1 || stride < 1 || dilation < 1) return 0;
  const int64_t eff = (int64_t)(filter - 1) * dilation + 1;
  int64_t o;
  if (padding == EK_PAD_SAME) {
    o = ((int64_t)in + stride - 1) / stride;
  } else if (padding == EK_PAD_VALID) {
    o = ((int64_t)in + stride - eff) / stride;
  } else {
    return 0;
  }
  if (o < 1) return 0;
  int64_t total = (o - 1) * stride + eff - in;
  if (total < 0) total = 0;
  if ((o - 1) * stride + eff + total > INT32_MAX) return 0;
  *out = (int32_t)o;
  *pad = (int32_t)(total / 2);
  return 1;
}

/* Checks shared by CONV_2D and DEPTHWISE_CONV_2D prepare(): filter quantization, bias, activation, strides,
   padding and the output shape. The messages name no op: the runtime reports the failing op's index and name.
   On success *oh, *ow, *pad_h, *pad_w hold the output size and the top/left padding. */
static inline ek_status ek_conv_check_common(ek_context *ctx, const ek_op *op, const ek_tensor *in, const ek_tensor *f,
                                             const ek_tensor *bias, const ek_tensor *out, int32_t oc, int32_t kh,
                                             int32_t kw, int32_t *oh, int32_t *ow, int32_t *pad_h, int32_t *pad_w) {
  if (!ek_conv_scales_ok(f) || (f->num_scales != 1 && f->num_scales != oc) ||
      (f->num_scales > 1 && !ek_conv_channel_axis_ok(f, oc)))
    return ek_fail(ctx, op, EK_ERR_MODEL, "filter needs one scale or one per output channel, finite and >= 0");
  if (!ek_conv_zero_points_zero(f))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "int8 filter zero points must be 0");
  if (bias) {
    if (bias->type != EK_INT32) return ek_fail(ctx, op, EK_ERR_TYPE, "bias must be int32");
    if (!bias->data || ek_conv_elements(bias) != oc || bias->bytes != 4 * oc || ((uintptr_t)bias->data & 3u))
      return ek_fail(ctx, op, EK_ERR_SHAPE, "bias must hold one aligned int32 per output channel");
  }
  const ek_op_params *p = &op->params;
  if (!ek_conv_activation_ok(p->activation))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "fused activation must be NONE, RELU, RELU_N1_TO_1 or RELU6");
  if (p->stride_h < 1 || p->stride_w < 1 || p->dilation_h < 1 || p->dilation_w < 1)
    return ek_fail(ctx, op, EK_ERR_MODEL, "strides and dilations must be >= 1");
  if (!ek_conv_window(p->padding, in->dims[1], kh, p->stride_h, p->dilation_h, oh, pad_h) ||
      !ek_conv_window(p->padding, in->dims[2], kw, p->stride_w, p->dilation_w, ow, pad_w))
    return ek_fail(ctx, op, EK_ERR_SHAPE, "padding/stride/dilation give no valid output for this input");
  if (out->dims[0] != in->dims[0] || out->dims[1] != *oh || out->dims[2] != *ow || out->dims[3] != oc)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "output shape differs from the one the input, filter and options give");
  return EK_OK;
}

/* ---------- requantization ---------- */

/* Per output channel: TFLite's multiplier/shift and what the fast requantization needs.
 *
 * MultiplyByQuantizedMultiplier(x, m, shift) with shift = -e <= -1 is RoundingDivideByPOT(SRDHM(x, m), e).
 * For |x| < 2^30 (so 2x fits int32):
 *   SRDHM(x, m) = floor((x*m + 2^30) / 2^31) = floor((2x*m + 2^31) / 2^32)      (any sign: the
 *                 sign-dependent nudge with truncating division is the same floor)  = SMMULR(2x, m)
 *   RoundingDivideByPOT(q, e) = floor((q + 2^(e-1) - [q < 0]) / 2^e), and [q < 0] may be replaced by
 *                 [x < 0] (they differ only where q = 0, and both then give 0).
 * So result = SMMLAR(2x, m, 2^(e-1) - [x < 0]) >> e: five instructions on Cortex-M (ADD, SUB, SMMLAR,
 * ASR and the sign bit folded into the SUB). prepare() enables it only where every channel has e >= 1
 * and the accumulator provably stays below 2^30 in magnitude (bias and depth bound); other layers use
 * ek_mbqm. Checked against ek_mbqm over millions of values in tests/firmware/test_kernels_conv.py. */
typedef struct ek_conv_channel { /* 16 bytes; the Cortex-M conv loop reads the first two with one LDM */
  int32_t multiplier;
  int32_t shifts;   /* bits 0-7: e of the fast path (the ASR by register reads only these), bits 8-15: TFLite's
                       shift (> 0 left, < 0 right) as int8 */
  int32_t fold;     /* blocked paths: bias + input_offset * sum of the channel's weights */
  int32_t half_zp;  /* CONV_2D assembly: ek_conv_half_zp(channel, output zero point) when the zero point folds */
} ek_conv_channel;

static inline int32_t ek_conv_exponent(const ek_conv_channel *ch) { return ch->shifts & 0xFF; }
static inline int32_t ek_conv_shift(const ek_conv_channel *ch) { return (int32_t)(int8_t)(uint8_t)(ch->shifts >> 8); }
static inline int32_t ek_conv_half(const ek_conv_channel *ch) {
  const int32_t e = ek_conv_exponent(ch);
  return e >= 1 ? (int32_t)(1u << (e - 1)) : 0;
}

/* Largest accumulator magnitude for which ek_conv_requant_fast is exact. */
#define EK_CONV_FAST_ACC_LIMIT ((int64_t)1 << 30)

/* Fills one channel from its effective scale. Returns 0 if the scale is not representable
   (TFLite CHECK-fails or overflows there: shift > 31; we stop at scales >= 2^30). Clears *fast_ok
   when the channel needs ek_mbqm (left shift or shift 0). */
static inline int ek_conv_channel_init(ek_conv_channel *ch, double effective_scale, int *fast_ok) {
  if (!(effective_scale >= 0.0) || !(effective_scale < 1073741824.0)) return 0;
  int32_t m = 0;
  int shift = 0;
  ek_quantize_multiplier(effective_scale, &m, &shift);
  ch->multiplier = m;
  ch->fold = 0;
  ch->half_zp = 0;
  int e = -shift;
  if (m == 0) e = 1; /* any e >= 1 gives 0, as TFLite does */
  if (e < 1 || e > 31) {
    e = 0;
    *fast_ok = 0;
  }
  ch->shifts = (int32_t)((uint32_t)e | ((uint32_t)(uint8_t)(int8_t)shift << 8)); /* shift in [-31, 31] */
  return 1;
}

/* Largest |bias| of a constant int32 bias tensor (INT64_MAX if it is not constant: unknown at prepare). */
static inline int64_t ek_conv_bias_bound(const ek_tensor *bias, int32_t count) {
  if (!bias) return 0;
  if (!bias->is_constant) return INT64_MAX;
  const int32_t *b = (const int32_t *)bias->data;
  int64_t m = 0;
  for (int32_t i = 0; i < count; ++i) {
    const int64_t v = b[i] < 0 ? -(int64_t)b[i] : (int64_t)b[i];
    if (v > m) m = v;
  }
  return m;
}

/* True when bias_bound + terms * term_bound < 2^30 (ek_conv_requant_fast is then exact). */
static inline int ek_conv_acc_fits(int64_t bias_bound, int64_t terms, int64_t term_bound) {
  if (bias_bound >= EK_CONV_FAST_ACC_LIMIT || terms > EK_CONV_FAST_ACC_LIMIT / term_bound) return 0;
  return bias_bound + terms * term_bound < EK_CONV_FAST_ACC_LIMIT;
}

/* SMMLAR: acc + ((a * b + 2^31) >> 32) (wrap-around add). */
#if EK_CONV_DSP
static inline int32_t ek_smmlar(int32_t a, int32_t b, int32_t acc) {
  int32_t r;
  __asm__("smmlar %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(b), "r"(acc));
  return r;
}
#else
static inline int32_t ek_smmlar(int32_t a, int32_t b, int32_t acc) {
  const int32_t high = (int32_t)(((int64_t)a * b + ((int64_t)1 << 31)) >> 32);
  return (int32_t)((uint32_t)acc + (uint32_t)high);
}
#endif

/* MultiplyByQuantizedMultiplier for a channel with e >= 1 and |acc| < 2^30 (see above). */
static inline int32_t ek_conv_requant_fast(int32_t acc, const ek_conv_channel *ch) {
  return ek_smmlar(acc + acc, ch->multiplier, ek_conv_half(ch) - (int32_t)((uint32_t)acc >> 31)) >>
         ek_conv_exponent(ch);
}

/* The same with the output zero point folded in, on a doubled accumulator (acc2 = 2 * acc, |acc| < 2^30):
 *   (SMMLAR(acc2, m, half + zp * 2^e - [acc < 0]) >> e) == ek_conv_requant_fast(acc) + zp
 * because adding zp * 2^e before an arithmetic shift by e adds zp after it, provided the SMMLAR sum does not
 * wrap: |high part| <= 2^30, half <= 2^(e-1), |zp * 2^e| <= 2^(e+7), so e <= EK_CONV_ZP_FOLD_MAX_E suffices.
 * Kernels that double their weights (int8 weights expanded to int16 anyway) get acc2 for free and save the
 * doubling and the zero-point add per output. Checked against ek_mbqm in tests/firmware/test_kernels_conv.py. */
#define EK_CONV_ZP_FOLD_MAX_E 22
static inline int32_t ek_conv_half_zp(const ek_conv_channel *ch, int32_t zp) {
  return (int32_t)((uint32_t)ek_conv_half(ch) + ((uint32_t)zp << ek_conv_exponent(ch)));
}
static inline int32_t ek_conv_requant_zp2(int32_t acc2, int32_t multiplier, int32_t half_zp, int32_t exponent) {
  return ek_smmlar(acc2, multiplier, half_zp - (int32_t)((uint32_t)acc2 >> 31)) >> exponent;
}

/* Saturation to int8 (SSAT #8). */
static inline int32_t ek_ssat8(int32_t v) { return v < -128 ? -128 : (v > 127 ? 127 : v); }

/* Wrapping int32 add (TFLite's int32 accumulators wrap in practice; in C that would be UB). */
static inline int32_t ek_wrap_add(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }

static inline int8_t ek_conv_clamp8(int32_t v, int32_t lo, int32_t hi) {
  return (int8_t)(v < lo ? lo : (v > hi ? hi : v));
}

/* ---------- channels with a constant output (dead filters of trained networks) ----------
 * For constant weights and bias, a channel's accumulator acc = bias + sum_k w_k * (x_k + input_offset) lies in
 * [lo, hi] for every int8 input, with lo/hi summing per tap the smaller/larger of w * (-128 + off) and
 * w * (127 + off) (a padded tap adds 0, which both bounds include). TFLite's int32 sum wraps, but when [lo, hi] fits
 * int32 the wrapped sum is the true one. MultiplyByQuantizedMultiplier with a right shift (shift <= 0, multiplier
 * >= 0) is monotonic, and so are the zero point add and the clamp: if lo and hi give the same output, every input
 * does. Such channels (trained networks' dead filters: effective scales down to 1e-11, folded biases far beyond
 * what the fast requantization allows) are computed here at generation time; the kernels write their value and
 * leave them out of the fast paths' range checks. */

/* Bit 16 of ek_conv_channel.shifts: the channel's output is the constant in bits 24-31 (int8). */
#define EK_CONV_CONSTANT_FLAG 0x10000
static inline int ek_conv_is_constant(const ek_conv_channel *ch) { return (ch->shifts & EK_CONV_CONSTANT_FLAG) != 0; }

/* [lo, hi] of one channel's accumulator (taps weights `step` bytes apart). */
static inline void ek_conv_acc_range(const int8_t *w, ptrdiff_t step, int32_t taps, int32_t bias, int32_t input_offset,
                                     int64_t *lo, int64_t *hi) {
  const int64_t xmin = -128 + (int64_t)input_offset, xmax = 127 + (int64_t)input_offset; /* xmin <= 0 <= xmax */
  int64_t l = bias, h = bias;
  for (int32_t t = 0; t < taps; ++t, w += step) {
    const int64_t a = (int64_t)*w * xmin, b = (int64_t)*w * xmax;
    l += a < b ? a : b;
    h += a < b ? b : a;
  }
  *lo = l;
  *hi = h;
}

/* Largest |acc| of a channel, or -1 when [lo, hi] leaves int32. */
static inline int64_t ek_conv_acc_bound(int64_t lo, int64_t hi) {
  if (lo < INT32_MIN || hi > INT32_MAX) return -1;
  return -lo > hi ? -lo : hi;
}

/* Channels of a CONV_2D (depthwise = 0, filter OHWI) or DEPTHWISE_CONV_2D (depthwise = 1, filter 1HWC) whose output
 * is one value for every input. Returns their count and, when list != NULL, writes one word per such channel in
 * increasing order: channel | (uint8)value << 24. Returns -1 when the analysis does not apply (weights or bias not
 * constant, or tensors prepare() would reject: it may run before prepare, to size the per-op data). */
static inline int32_t ek_conv_constant_channels(const ek_tensor *in, const ek_tensor *f, const ek_tensor *bias,
                                                const ek_tensor *out, int32_t activation, int depthwise, uint32_t *list) {
  if (!in || !f || !out || f->type != EK_INT8 || in->ndim != 4 || f->ndim != 4 || out->ndim != 4) return -1;
  /* the activations' quantization only (their data is bound after the per-op data is sized) */
  if (in->type != EK_INT8 || out->type != EK_INT8 || in->num_scales < 1 || out->num_scales < 1 ||
      !ek_conv_finite_positive(in->scale) || !ek_conv_finite_positive(out->scale) || in->zero_point < -128 ||
      in->zero_point > 127 || out->zero_point < -128 || out->zero_point > 127 || !f->is_constant || !f->data)
    return -1;
  const int32_t elements = ek_conv_elements(f);
  if (elements < 1 || f->bytes != elements) return -1;
  const int32_t oc = depthwise ? f->dims[3] : f->dims[0];
  const int32_t taps = depthwise ? f->dims[1] * f->dims[2] : f->dims[1] * f->dims[2] * f->dims[3];
  if (oc < 1 || oc >= (1 << 24) || (f->num_scales != 1 && f->num_scales != oc) || !ek_conv_scales_ok(f)) return -1;
  if (bias && (bias->type != EK_INT32 || !bias->is_constant || !bias->data || bias->bytes != 4 * oc)) return -1;
  int32_t amin = 0, amax = 0;
  if (!ek_conv_activation_ok(activation) || !ek_conv_activation_range(activation, out, &amin, &amax)) return -1;
  const int8_t *wt = (const int8_t *)f->data;
  const int32_t *b = bias ? (const int32_t *)bias->data : (const int32_t *)0;
  const int32_t zp = out->zero_point, off = -in->zero_point;
  int32_t count = 0;
  for (int32_t o = 0; o < oc; ++o) {
    const double eff = (double)in->scale * (double)ek_conv_scale_at(f, o) / (double)out->scale;
    if (!(eff >= 0.0) || !(eff < 1073741824.0)) return -1;
    int32_t m = 0;
    int shift = 0;
    ek_quantize_multiplier(eff, &m, &shift);
    if (shift > 0) continue;
    int64_t lo, hi;
    ek_conv_acc_range(wt + (depthwise ? (ptrdiff_t)o : (ptrdiff_t)o * taps), depthwise ? oc : 1, taps, b ? b[o] : 0,
                      off, &lo, &hi);
    if (ek_conv_acc_bound(lo, hi) < 0) continue;
    const int32_t vlo = ek_conv_clamp8(ek_wrap_add(ek_mbqm((int32_t)lo, m, shift), zp), amin, amax);
    const int32_t vhi = ek_conv_clamp8(ek_wrap_add(ek_mbqm((int32_t)hi, m, shift), zp), amin, amax);
    if (vlo != vhi) continue;
    if (list) list[count] = (uint32_t)o | ((uint32_t)(uint8_t)(int8_t)vlo << 24);
    ++count;
  }
  return count;
}

/* Channels of a CONV_2D (depthwise 0) or DEPTHWISE_CONV_2D (depthwise 1) op with a constant output: the count
   ek_conv_constant_channels finds, 0 when the analysis does not apply (tensor indices not yet validated). */
static inline int32_t ek_conv_op_constant_count(const ek_context *ctx, const ek_op *op, int depthwise) {
  if (op->num_inputs < 2 || op->num_inputs > 3 || op->num_outputs != 1) return 0;
  for (int i = 0; i < op->num_inputs; ++i)
    if (op->inputs[i] >= ctx->num_tensors || (i < 2 && op->inputs[i] < 0)) return 0;
  if (op->outputs[0] < 0 || op->outputs[0] >= ctx->num_tensors) return 0;
  const ek_tensor *bias = op->num_inputs > 2 && op->inputs[2] >= 0 ? &ctx->tensors[op->inputs[2]] : (const ek_tensor *)0;
  const int32_t n = ek_conv_constant_channels(&ctx->tensors[op->inputs[0]], &ctx->tensors[op->inputs[1]], bias,
                                              &ctx->tensors[op->outputs[0]], op->params.activation, depthwise,
                                              (uint32_t *)0);
  return n > 0 ? n : 0;
}

/* Marks the listed channels constant: multiplier 0, fold 0, exponent 1 (every requantization gives 0 for them, no
   range check sees their bias), flag and value in shifts. */
static inline void ek_conv_mark_constant(ek_conv_channel *ch, const uint32_t *list, int32_t count) {
  for (int32_t k = 0; k < count; ++k) {
    ek_conv_channel *c = &ch[list[k] & 0xFFFFFFu];
    c->multiplier = 0;
    c->fold = 0;
    c->half_zp = 0;
    c->shifts = 1 | EK_CONV_CONSTANT_FLAG | (int32_t)(list[k] & 0xFF000000u);
  }
}

/* Writes the constant channels (list, count >= 1) of `pixels` consecutive output pixels of oc channels each. Not
   inlined (it runs once per op call) and, with GCC, a weak definition: the kernels that include this header share
   one copy in the firmware (the code budget is tight). */
#if defined(__GNUC__)
__attribute__((noinline, weak)) void ek_conv_fill_constant(int8_t *y, int32_t pixels, int32_t oc, const uint32_t *list,
                                                             int32_t count);
#define EK_CONV_FILL_LINKAGE
#else
#define EK_CONV_FILL_LINKAGE static
#endif
EK_CONV_FILL_LINKAGE void ek_conv_fill_constant(int8_t *y, int32_t pixels, int32_t oc, const uint32_t *list, int32_t count) {
  /* channel by channel: pixels % 4 one at a time, then four per pass (~1.75 instructions per byte on Cortex-M4,
     against ~7 for a pixel-by-pixel walk of the list) */
  const ptrdiff_t step = oc, bytes = (ptrdiff_t)pixels * oc; /* indices, not pointers: none past the tensor */
  do {
    const uint32_t e = *list++;
    const int8_t v = (int8_t)(e >> 24);
    ptrdiff_t k = (ptrdiff_t)(e & 0xFFFFFFu);
    const ptrdiff_t single_end = k + step * (pixels & 3);
    for (; k < single_end; k += step) y[k] = v;
    for (; k < bytes; k += 4 * step) {
      y[k] = v;
      y[k + step] = v;
      y[k + 2 * step] = v;
      y[k + 3 * step] = v;
    }
  } while (--count > 0);
}

/* The zero point folds into the rounding constant (ek_conv_requant_zp2) without wrapping: always for exponents
 * <= EK_CONV_ZP_FOLD_MAX_E; above (live channels of trained networks with tiny scales), when the channel's
 * accumulator bound (acc_bound >= 0; -1: unknown) keeps |zp * 2^e + 2^(e-1)| + 1 + |SMMLAR's high part| < 2^31. */
static inline int ek_conv_zp_fold_ok(const ek_conv_channel *ch, int32_t zp, int64_t acc_bound) {
  const int32_t e = ek_conv_exponent(ch);
  if (e <= EK_CONV_ZP_FOLD_MAX_E) return 1;
  if (acc_bound < 0 || e > 31) return 0;
  const int64_t c = (int64_t)zp * ((int64_t)1 << e) + ((int64_t)1 << (e - 1));
  const int64_t high = ((acc_bound * (int64_t)ch->multiplier) >> 31) + 1;
  return (c < 0 ? -c : c) + 1 + high < ((int64_t)1 << 31);
}


/* ---------- FULLY_CONNECTED's double rounding ----------
 * LiteRT's reference FullyConnected / FullyConnectedPerChannel for int8 (reference/integer_ops/
 * fully_connected.h, the overloads taking input/filter/output scales, which is what BUILTIN_REF calls)
 * do NOT use the fixed-point multiplier: they compute
 *     static_cast<int32_t>(round(static_cast<double>(acc) * (double)s_in * (double)s_w / (double)s_out))
 * TFLite Micro (and the optimized LiteRT kernels) use MultiplyByQuantizedMultiplier instead, which rounds
 * twice (Q31 multiplier, then the shift); the two differ by one LSB now and then, and the error compounds
 * through a chain of FC layers: that is the up-to-3-LSB TFLM vs BUILTIN_REF disagreement on the MLPerf AD
 * autoencoder. We match BUILTIN_REF. An out-of-range double converts to INT32_MIN (x86 cvttsd2si, what the
 * reference build does; measured), after which TFLite adds the output zero point with int32 wrap-around.
 *
 * Cortex-M4/M33 have no double FPU, so instead of soft-float we emulate round(acc * eff) exactly with
 * integers: eff = mant * 2^exp (53-bit mant), the 84-bit product is rounded to 53 bits (round to nearest
 * even, as the double multiply does), then to an integer (half away from zero, as round() does).
 * The emulation is used on every build (one code path); a test compares it with the double expression. */
typedef struct ek_dscale {
  uint64_t mant; /* < 2^53 */
  int32_t exp;
  int32_t pad_;
} ek_dscale;

static inline void ek_dscale_init(ek_dscale *d, double eff) {
  int e = 0;
  const double f = frexp(eff, &e); /* eff = f * 2^e, f in [0.5, 1) or 0 */
  d->mant = (uint64_t)ldexp(f, 53);
  d->exp = e - 53;
  d->pad_ = 0;
}

static inline int ek_clz64(uint64_t v) { /* v != 0 */
#if defined(__GNUC__)
  return __builtin_clzll(v);
#else
  int n = 0;
  if (!(v >> 32)) { n += 32; v <<= 32; }
  if (!(v >> 48)) { n += 16; v <<= 16; }
  if (!(v >> 56)) { n += 8; v <<= 8; }
  if (!(v >> 60)) { n += 4; v <<= 4; }
  if (!(v >> 62)) { n += 2; v <<= 2; }
  if (!(v >> 63)) { n += 1; }
  return n;
#endif
}

/* static_cast<int32_t>(round((double)acc * eff)) with the reference build's INT32_MIN on overflow. */
static inline int32_t ek_dround_mul(int32_t acc, const ek_dscale *d) {
  const uint32_t a = acc < 0 ? 0u - (uint32_t)acc : (uint32_t)acc;
  if (a == 0 || d->mant == 0) return 0;
  /* P = a * mant = hi * 2^32 + lo, hi < 2^52 */
  const uint64_t lo_prod = (uint64_t)a * (uint32_t)d->mant;
  const uint64_t hi = (uint64_t)a * (uint32_t)(d->mant >> 32) + (lo_prod >> 32);
  const uint32_t lo = (uint32_t)lo_prod;
  int32_t exp = d->exp;
  uint64_t m;
  const int bits = hi ? 96 - ek_clz64(hi) : 64 - ek_clz64(lo);
  if (bits <= 53) {
    m = (hi << 32) | lo;
  } else { /* round to 53 significant bits, ties to even; drop in [1, 31] */
    const int drop = bits - 53;
    m = (hi << (32 - drop)) | (lo >> drop);
    const uint32_t rem = lo & ((1u << drop) - 1u);
    const uint32_t half = 1u << (drop - 1);
    if (rem > half || (rem == half && (m & 1u))) ++m;
    exp += drop;
  }
  uint64_t r;
  if (exp >= 0) {
    if (exp > 31 || m > (0x7FFFFFFFull >> exp)) return INT32_MIN;
    r = m << exp;
  } else {
    const int32_t f = -exp;
    r = f > 54 ? 0 : (m + (1ull << (f - 1))) >> f;
  }
  if (r > 0x7FFFFFFFull) return INT32_MIN;
  return acc < 0 ? -(int32_t)r : (int32_t)r;
}

/* The same result in a few instructions for the common case, exactly. With m31 = mant >> 22 (31 bits) and
 * s = -(exp + 22) in [33, 63], p = acc * m31 is the product in units of 2^22 (mant units), truncated toward zero:
 * the exact product P / 2^22 lies within |acc| of p on the side of acc's sign, and rounding P to 53 bits (the
 * double multiply) moves it by at most 2^8 in those units. So with t = p + 2^(s-1), floor(t / 2^s) is round()
 * unless t mod 2^s lies within |acc| + 512 of a multiple of 2^s (then the exact value may round the other way,
 * or be a tie, which round() takes away from zero): there bits [32, s) of t are all zeros or all ones, and
 * ek_dround_mul decides (about 2 / 2^(s-32) of the values). |acc| * eff < 2^30 (s >= 33): no overflow case.
 * ek_dfast_init sets sh = 0 (always ek_dround_mul) outside that range. */
typedef struct ek_dfast {
  int32_t m31;   /* mant >> 22 */
  int32_t half;  /* 2^(s - 33): the high word of 2^(s - 1) */
  uint32_t mask; /* 2^(s - 32) - 1 */
  int32_t sh;    /* s - 32 in [1, 31]; 0: not applicable */
  int32_t pre;   /* the accumulator is shifted left by this first (exact: see ek_dfast_init) */
} ek_dfast;

/* acc_bound: a bound on |acc| the caller guarantees. round(acc * eff) == round((acc << L) * (eff / 2^L)) exactly
 * (a power of two changes no mantissa bit), so the accumulator is pre-shifted by the largest L that keeps
 * |acc << L| < 2^31 and s <= 63: the more bits between 32 and s, the rarer the undecided case. */
static inline void ek_dfast_init(ek_dfast *f, const ek_dscale *d, int64_t acc_bound) {
  int32_t pre = 0;
  int32_t s = -(d->exp + 22);
  while (s < 63 && acc_bound >= 0 && (acc_bound << (pre + 1)) < ((int64_t)1 << 31)) {
    ++pre;
    ++s;
  }
  const int ok = d->mant != 0 && s >= 33 && s <= 63;
  f->m31 = ok ? (int32_t)(d->mant >> 22) : 0; /* not ok: hi = 0 and mask 1, so the edge test always fires */
  f->sh = ok ? s - 32 : 0;
  f->half = ok ? (int32_t)(1u << (s - 33)) : 0;
  f->mask = ok ? (1u << (s - 32)) - 1u : 1u;
  f->pre = ok ? pre : 0;
}

/* Nonzero when t's high word `hi` leaves the fast result undecided (always for sh = 0). */
static inline int ek_dfast_edge(int32_t hi, uint32_t mask) { return ((((uint32_t)hi & mask) + 1u) & mask) <= 1u; }

static inline int32_t ek_dround_fast(int32_t acc, const ek_dfast *f, const ek_dscale *d) {
  const int32_t hi = (int32_t)((uint64_t)((int64_t)(int32_t)((uint32_t)acc << f->pre) * f->m31) >> 32) + f->half;
  if (ek_dfast_edge(hi, f->mask)) return ek_dround_mul(acc, d);
  return hi >> f->sh;
}

/* ---------- DSP building blocks (ACLE on Cortex-M with the DSP extension, exact C elsewhere) ----------
 * The blocked kernels are written once against these, so the host build runs (and the host tests check)
 * the same loop structure, im2col layout and border handling that the Cortex-M build runs. */
static inline uint32_t ek_load32(const void *p) { /* unaligned-safe word load (LDR on Cortex-M) */
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}
static inline void ek_store32(void *p, uint32_t v) { memcpy(p, &v, 4); }

#if EK_CONV_DSP
static inline uint32_t ek_sxtb16(uint32_t x) { return (uint32_t)__sxtb16(x); }
static inline uint32_t ek_sxtb16_ror8(uint32_t x) { /* one SXTB16 with its rotate (the intrinsic costs a MOV more) */
  uint32_t r;
  __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
  return r;
}
static inline uint32_t ek_sadd16(uint32_t a, uint32_t b) { return (uint32_t)__sadd16(a, b); }
static inline int32_t ek_smlad(uint32_t a, uint32_t b, int32_t acc) { return __smlad(a, b, acc); }
static inline int32_t ek_smlabb(uint32_t a, uint32_t b, int32_t acc) { return __smlabb(a, b, acc); }
static inline int32_t ek_smlatt(uint32_t a, uint32_t b, int32_t acc) { return __smlatt(a, b, acc); }
#else
static inline uint32_t ek_pack16(int32_t lo, int32_t hi) { return ((uint32_t)lo & 0xFFFFu) | ((uint32_t)hi << 16); }
static inline int32_t ek_lo16(uint32_t x) { return (int32_t)(int16_t)(x & 0xFFFFu); }
static inline int32_t ek_hi16(uint32_t x) { return (int32_t)(int16_t)(x >> 16); }
static inline uint32_t ek_sxtb16(uint32_t x) {
  return ek_pack16((int8_t)(x & 0xFFu), (int8_t)((x >> 16) & 0xFFu));
}
static inline uint32_t ek_sxtb16_ror8(uint32_t x) {
  return ek_pack16((int8_t)((x >> 8) & 0xFFu), (int8_t)(x >> 24));
}
static inline uint32_t ek_sadd16(uint32_t a, uint32_t b) {
  return ek_pack16(ek_lo16(a) + ek_lo16(b), ek_hi16(a) + ek_hi16(b));
}
static inline int32_t ek_smlad(uint32_t a, uint32_t b, int32_t acc) {
  return (int32_t)((uint32_t)acc + (uint32_t)(ek_lo16(a) * ek_lo16(b)) + (uint32_t)(ek_hi16(a) * ek_hi16(b)));
}
static inline int32_t ek_smlabb(uint32_t a, uint32_t b, int32_t acc) {
  return (int32_t)((uint32_t)acc + (uint32_t)(ek_lo16(a) * ek_lo16(b)));
}
static inline int32_t ek_smlatt(uint32_t a, uint32_t b, int32_t acc) {
  return (int32_t)((uint32_t)acc + (uint32_t)(ek_hi16(a) * ek_hi16(b)));
}
#endif

/* The signed 16-bit halves of a word. */
static inline int32_t ek_lo16_of(uint32_t x) { return (int32_t)(int16_t)(x & 0xFFFFu); }
static inline int32_t ek_hi16_of(uint32_t x) { return (int32_t)(int16_t)(x >> 16); }

/* Pooling helpers: SXTAB16 (two int16 lanes += sign-extended bytes 0 and 2, or 1 and 3 with the rotation) and
   a bytewise signed maximum (SSUB8 sets the GE flags, SEL picks per byte). */
#if EK_CONV_DSP
static inline uint32_t ek_sxtab16(uint32_t acc, uint32_t x) { return (uint32_t)__sxtab16(acc, x); }
static inline uint32_t ek_sxtab16_ror8(uint32_t acc, uint32_t x) {
  uint32_t r;
  __asm__("sxtab16 %0, %1, %2, ror #8" : "=r"(r) : "r"(acc), "r"(x));
  return r;
}
static inline uint32_t ek_max8(uint32_t a, uint32_t b) {
  uint32_t r;
  __asm__("ssub8 %0, %1, %2\n\tsel %0, %1, %2" : "=&r"(r) : "r"(a), "r"(b) : "cc");
  return r;
}
#else
static inline uint32_t ek_sxtab16(uint32_t acc, uint32_t x) {
  return ek_pack16(ek_lo16(acc) + (int8_t)(x & 0xFFu), ek_hi16(acc) + (int8_t)((x >> 16) & 0xFFu));
}
static inline uint32_t ek_sxtab16_ror8(uint32_t acc, uint32_t x) {
  return ek_pack16(ek_lo16(acc) + (int8_t)((x >> 8) & 0xFFu), ek_hi16(acc) + (int8_t)(x >> 24));
}
static inline uint32_t ek_max8(uint32_t a, uint32_t b) {
  uint32_t r = 0;
  for (int i = 0; i < 32; i += 8) {
    const int8_t x = (int8_t)((a >> i) & 0xFFu), y = (int8_t)((b >> i) & 0xFFu);
    r |= (uint32_t)(uint8_t)(x > y ? x : y) << i;
  }
  return r;
}
#endif

/* Four int8 values plus an offset, as two words of int16 pairs in SMLAD order: (x0,x2) and (x1,x3).
   SMLAD of these against ek_sxtb16(w) / ek_sxtb16_ror8(w) of four int8 weights is the 4-term dot product. */
static inline void ek_expand4(uint32_t x, uint32_t offset2, uint32_t *w02, uint32_t *w13) {
  *w02 = ek_sadd16(ek_sxtb16(x), offset2);
  *w13 = ek_sadd16(ek_sxtb16_ror8(x), offset2);
}

static inline uint32_t ek_offset2(int32_t offset) { return ((uint32_t)offset & 0xFFFFu) * 0x10001u; }


#if EK_CONV_MVE
/* acc[j] += sum over k < n of w[k] * col_j[k] (n >= 1) for four int8 columns: a tail-predicated low-overhead
 * loop (DLSTP/LETP: the last pass loads and adds only the n % 16 live bytes, nothing past n is read), per 16
 * bytes one weight load, four column loads and four VMLADAVA (exact 32-bit sums; accumulators in even
 * registers as VMLADAVA requires). */
#if defined(__OPTIMIZE__) && !defined(EK_CONV_NO_ASM) /* fixed registers: r7 is the frame pointer at -O0 */
static inline void ek_mve_dot4_s8(const int8_t *w, const int8_t *c0, const int8_t *c1, const int8_t *c2,
                                  const int8_t *c3, int32_t n, int32_t *acc) {
  register int32_t a0 __asm__("r0") = acc[0], a1 __asm__("r2") = acc[1], a2 __asm__("r4") = acc[2],
                                      a3 __asm__("r6") = acc[3];
  register const int8_t *pw __asm__("r1") = w, *p0 __asm__("r3") = c0, *p1 __asm__("r5") = c1,
                                    *p2 __asm__("r7") = c2, *p3 __asm__("r8") = c3;
  register int32_t count __asm__("r12") = n;
  __asm__ volatile(
      "dlstp.8 lr, %[n]\n"
      "1:\n"
      "vldrb.8 q0, [%[pw]], #16\n"
      "vldrb.8 q1, [%[p0]], #16\n"
      "vmladava.s8 %[a0], q0, q1\n"
      "vldrb.8 q1, [%[p1]], #16\n"
      "vmladava.s8 %[a1], q0, q1\n"
      "vldrb.8 q1, [%[p2]], #16\n"
      "vmladava.s8 %[a2], q0, q1\n"
      "vldrb.8 q1, [%[p3]], #16\n"
      "vmladava.s8 %[a3], q0, q1\n"
      "letp lr, 1b\n"
      : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [pw] "+r"(pw), [p0] "+r"(p0), [p1] "+r"(p1),
        [p2] "+r"(p2), [p3] "+r"(p3)
      : [n] "r"(count)
      : "lr", "d0", "d1", "d2", "d3", "memory");
  acc[0] = a0;
  acc[1] = a1;
  acc[2] = a2;
  acc[3] = a3;
}
#else
static inline void ek_mve_dot4_s8(const int8_t *w, const int8_t *c0, const int8_t *c1, const int8_t *c2,
                                  const int8_t *c3, int32_t n, int32_t *acc) {
  for (; n > 0; n -= 16, w += 16, c0 += 16, c1 += 16, c2 += 16, c3 += 16) {
    const mve_pred16_t p = vctp8q((uint32_t)n);
    const int8x16_t wv = vldrbq_z_s8(w, p); /* inactive lanes are 0 */
    acc[0] = vmladavaq_s8(acc[0], wv, vldrbq_z_s8(c0, p));
    acc[1] = vmladavaq_s8(acc[1], wv, vldrbq_z_s8(c1, p));
    acc[2] = vmladavaq_s8(acc[2], wv, vldrbq_z_s8(c2, p));
    acc[3] = vmladavaq_s8(acc[3], wv, vldrbq_z_s8(c3, p));
  }
}
#endif

/* MultiplyByQuantizedMultiplier of four accumulators with a right shift e >= 1 (TFLite's shift = -e), exact:
 * SQRDMULH is SaturatingRoundingDoublingHighMul, and RoundingDivideByPOT(x, e) = VRSHL(x - [x < 0], -e)
 * (VRSHL rounds half up at full precision; the saturating subtract changes nothing: INT32_MIN gives the same
 * quotient either way). Then the output zero point and the activation clamp. */
static inline int32x4_t ek_mve_requant4(int32x4_t acc, int32_t multiplier, int32_t exponent, int32_t zp, int32_t lo,
                                        int32_t hi) {
  const int32x4_t r = vqrdmulhq_n_s32(acc, multiplier);
  const int32x4_t q = vrshlq_n_s32(vqaddq_s32(r, vshrq_n_s32(r, 31)), -exponent);
  return vminq_s32(vmaxq_s32(vaddq_n_s32(q, zp), vdupq_n_s32(lo)), vdupq_n_s32(hi));
}
#endif

#endif
