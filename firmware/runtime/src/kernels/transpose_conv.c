/* TRANSPOSE_CONV, int8 input/output, int8 weights (per-tensor or per-output-channel scales, zero points 0),
 * optional int32 bias, SAME/VALID padding, any strides, fused activation (version 4+).
 *
 * Bit-exact with LiteRT BUILTIN_REF: tflite/kernels/transpose_conv.cc (inputs: output_shape, weights [O, kh, kw, I],
 * input, optional bias; padding from ComputePaddingHeightWidth over the *output* size with dilation 1, i.e.
 * padding.h as for a convolution from the output back to the input; per-channel multipliers from
 * PopulateConvolutionQuantizationParams: double(s_in) * double(s_w[c]) / double(s_out), QuantizeMultiplier) and
 * tflite/kernels/internal/reference/integer_ops/transpose_conv.h (scatter: every input element, for every filter tap
 * that lands inside the output, adds (x + input_offset) * w to an int32 accumulator of its output element; then
 * + bias, MultiplyByQuantizedMultiplier, + output zero point, clamp to the activation range). The int32
 * accumulators live in the op's scratch (4 bytes per output element), as LiteRT's scratch tensor does.
 * The output_shape input must be a constant int32 [4] equal to the output's shape.
 */
/* edgekit-op: TRANSPOSE_CONV | types: int8 | versions: 1-5 | fast path: none */
#include <stdint.h>
#include <string.h>

#include "ek_conv_common.h"
#include "ek_fixedpoint.h"
#include "ek_kernels.h"
#include "ek_strided.h"

typedef struct tconv_data {
  int32_t pad_h, pad_w, input_offset, output_offset, act_min, act_max, channels, has_bias;
} tconv_data;

typedef struct tconv_channel {
  int32_t multiplier, shift;
} tconv_channel;

static int32_t tconv_channels(const ek_context *ctx, const ek_op *op) {
  const ek_tensor *f = op->num_inputs >= 2 ? ek_input((ek_context *)ctx, op, 1) : (const ek_tensor *)0;
  return f && f->ndim == 4 && f->dims[0] > 0 && f->dims[0] <= 65536 ? f->dims[0] : 0;
}

static size_t tconv_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  return sizeof(tconv_data) + (size_t)tconv_channels(ctx, op) * sizeof(tconv_channel);
}

static size_t tconv_scratch_bytes(const ek_context *ctx, const ek_op *op) {
  const ek_tensor *out = op->num_outputs == 1 ? ek_output((ek_context *)ctx, op, 0) : (const ek_tensor *)0;
  return out && out->type == EK_INT8 && out->bytes > 0 ? 4u * (size_t)out->bytes : 0;
}

static ek_status tconv_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs < 3 || op->num_inputs > 4 || op->num_outputs != 1)
    return ek_fail(ctx, op, EK_ERR_MODEL, "TRANSPOSE_CONV needs 3 or 4 inputs (output_shape, weights, input, optional bias) and 1 output");
  const ek_tensor *shape = ek_input(ctx, op, 0), *f = ek_input(ctx, op, 1), *in = ek_input(ctx, op, 2);
  const ek_tensor *bias = ek_input(ctx, op, 3), *out = ek_output(ctx, op, 0);
  if (!shape || !f || !in || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "TRANSPOSE_CONV input, weights, shape or output tensor missing");
  if (in->type != EK_INT8 || out->type != EK_INT8 || f->type != EK_INT8)
    return ek_fail(ctx, op, EK_ERR_TYPE, "TRANSPOSE_CONV supports int8 input, weights and output only");
  if (in->ndim != 4 || f->ndim != 4 || out->ndim != 4) return ek_fail(ctx, op, EK_ERR_SHAPE, "TRANSPOSE_CONV tensors must be 4-D");
  int32_t os[4];
  if (shape->ndim != 1 || ek_const_i32(shape, os, 4) != 4)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "TRANSPOSE_CONV output_shape must be a constant int32 vector of 4 entries");
  for (int32_t d = 0; d < 4; ++d)
    if (os[d] != out->dims[d]) return ek_fail(ctx, op, EK_ERR_SHAPE, "TRANSPOSE_CONV output_shape differs from the output's shape");
  if (!ek_conv_is_q8_activation(in) || !ek_conv_is_q8_activation(out))
    return ek_fail(ctx, op, EK_ERR_MODEL, "TRANSPOSE_CONV input/output need a finite positive scale, an int8 zero point and matching bytes");
  const int32_t oc = f->dims[0], kh = f->dims[1], kw = f->dims[2], ic = f->dims[3];
  if (!f->data || ek_conv_elements(f) < 1 || f->bytes != ek_conv_elements(f))
    return ek_fail(ctx, op, EK_ERR_MODEL, "TRANSPOSE_CONV weights have no data or an inconsistent size");
  if (oc != tconv_channels(ctx, op)) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "TRANSPOSE_CONV has more than 65536 output channels");
  if (in->dims[3] != ic || out->dims[3] != oc || in->dims[0] != out->dims[0])
    return ek_fail(ctx, op, EK_ERR_SHAPE, "TRANSPOSE_CONV channels or batch of input, weights and output differ");
  if (ek_conv_elements(in) < 1 || ek_conv_elements(out) < 1) return ek_fail(ctx, op, EK_ERR_SHAPE, "TRANSPOSE_CONV tensors must not be empty");
  if (!ek_conv_scales_ok(f) || (f->num_scales != 1 && f->num_scales != oc) || (f->num_scales > 1 && !ek_conv_channel_axis_ok(f, oc)))
    return ek_fail(ctx, op, EK_ERR_MODEL, "TRANSPOSE_CONV weights need one scale or one per output channel, finite and >= 0");
  if (!ek_conv_zero_points_zero(f)) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "TRANSPOSE_CONV int8 weight zero points must be 0");
  if (bias && (bias->type != EK_INT32 || !bias->data || ek_conv_elements(bias) != oc || bias->bytes != 4 * oc || ((uintptr_t)bias->data & 3u)))
    return ek_fail(ctx, op, EK_ERR_SHAPE, "TRANSPOSE_CONV bias must hold one aligned int32 per output channel");
  const ek_op_params *p = &op->params;
  if (p->stride_h < 1 || p->stride_w < 1) return ek_fail(ctx, op, EK_ERR_MODEL, "TRANSPOSE_CONV strides must be >= 1");
  if (!ek_conv_activation_ok(p->activation))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "TRANSPOSE_CONV fused activation must be NONE, RELU, RELU_N1_TO_1 or RELU6");
  int32_t unused, pad_h = 0, pad_w = 0;
  if (!ek_conv_window(p->padding, out->dims[1], kh, p->stride_h, 1, &unused, &pad_h) ||
      !ek_conv_window(p->padding, out->dims[2], kw, p->stride_w, 1, &unused, &pad_w))
    return ek_fail(ctx, op, EK_ERR_SHAPE, "TRANSPOSE_CONV padding/stride give no valid window for this output");
  /* index arithmetic of eval in int32: input positions * stride + filter extent stay far below 2^31 */
  if ((int64_t)in->dims[1] * p->stride_h + kh > INT32_MAX / 2 || (int64_t)in->dims[2] * p->stride_w + kw > INT32_MAX / 2)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "TRANSPOSE_CONV input too large for its strides");
  if (!op->scratch && out->bytes > 0) return ek_fail(ctx, op, EK_ERR_INTERNAL, "TRANSPOSE_CONV scratch missing");
  tconv_data *d = (tconv_data *)op->user_data;
  tconv_channel *ch = (tconv_channel *)(void *)(d + 1);
  d->pad_h = pad_h, d->pad_w = pad_w, d->input_offset = -in->zero_point, d->output_offset = out->zero_point;
  d->channels = oc, d->has_bias = bias != (const ek_tensor *)0;
  if (!ek_conv_activation_range(p->activation, out, &d->act_min, &d->act_max))
    return ek_fail(ctx, op, EK_ERR_MODEL, "TRANSPOSE_CONV activation range does not fit the output scale");
  for (int32_t c = 0; c < oc; ++c) {
    const double eff = (double)in->scale * (double)ek_conv_scale_at(f, c) / (double)out->scale;
    if (!(eff >= 0.0) || !(eff < 1073741824.0))
      return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "TRANSPOSE_CONV effective output scale too large (>= 2^30)");
    int shift = 0;
    ek_quantize_multiplier(eff, &ch[c].multiplier, &shift);
    ch[c].shift = shift;
  }
  return EK_OK;
}

static ek_status tconv_eval(ek_context *ctx, ek_op *op) {
  const tconv_data *d = (const tconv_data *)op->user_data;
  const tconv_channel *ch = (const tconv_channel *)(const void *)(d + 1);
  const ek_tensor *f = ek_input(ctx, op, 1), *in = ek_input(ctx, op, 2), *bias = ek_input(ctx, op, 3);
  ek_tensor *out = ek_output(ctx, op, 0);
  const int8_t *x = (const int8_t *)in->data, *w = (const int8_t *)f->data;
  int8_t *y = (int8_t *)out->data;
  int32_t *acc = (int32_t *)op->scratch;
  const int32_t N = in->dims[0], H = in->dims[1], W = in->dims[2], IC = in->dims[3];
  const int32_t OH = out->dims[1], OW = out->dims[2], OC = d->channels, KH = f->dims[1], KW = f->dims[2];
  const int32_t sh = op->params.stride_h, sw = op->params.stride_w;
  memset(acc, 0, (size_t)out->bytes * 4u);
  for (int32_t b = 0; b < N; ++b)
    for (int32_t iy = 0; iy < H; ++iy)
      for (int32_t ix = 0; ix < W; ++ix) {
        const int8_t *px = x + (((size_t)b * H + iy) * W + ix) * IC;
        const int32_t oy0 = iy * sh - d->pad_h, ox0 = ix * sw - d->pad_w;
        for (int32_t ky = 0; ky < KH; ++ky) {
          const int32_t oy = oy0 + ky;
          if (oy < 0 || oy >= OH) continue;
          for (int32_t kx = 0; kx < KW; ++kx) {
            const int32_t ox = ox0 + kx;
            if (ox < 0 || ox >= OW) continue;
            int32_t *a = acc + (((size_t)b * OH + oy) * OW + ox) * OC;
            for (int32_t oc = 0; oc < OC; ++oc) {
              const int8_t *wr = w + (((size_t)oc * KH + ky) * KW + kx) * IC;
              int32_t s = a[oc];
              for (int32_t c = 0; c < IC; ++c) s = ek_wrap_add(s, (px[c] + d->input_offset) * wr[c]);
              a[oc] = s;
            }
          }
        }
      }
  const int32_t *bv = d->has_bias ? (const int32_t *)bias->data : (const int32_t *)0;
  const int32_t n = out->bytes;
  for (int32_t i = 0, oc = 0; i < n; ++i) {
    int32_t v = acc[i];
    if (bv) v = ek_wrap_add(v, bv[oc]);
    v = ek_mbqm(v, ch[oc].multiplier, ch[oc].shift);
    v = ek_wrap_add(v, d->output_offset);
    y[i] = ek_conv_clamp8(v, d->act_min, d->act_max);
    if (++oc == OC) oc = 0;
  }
  return EK_OK;
}

const ek_kernel ek_kernel_transpose_conv = {EK_OP_TRANSPOSE_CONV, "TRANSPOSE_CONV", EK_HOST_FN(tconv_persistent_bytes),
                                            EK_HOST_FN(tconv_scratch_bytes), EK_HOST_FN(tconv_prepare), tconv_eval, 0};
