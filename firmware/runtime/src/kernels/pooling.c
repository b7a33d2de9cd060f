/* AVERAGE_POOL_2D and MAX_POOL_2D, int8, SAME/VALID padding, strides, fused activation.
 *
 * Bit-exact with LiteRT's reference_integer_ops::AveragePool / MaxPool (BUILTIN_REF): windows clipped to
 * the image, average rounded half away from zero with integer division by the clipped window's element
 * count, then clamped to the activation range of the output. Like the reference, values are not
 * rescaled: the converter gives pooling outputs the input's scale and zero point. In a row-streamed group
 * (ctx->row_end > 0, ek_stream_group.c) it computes only output rows [row_begin, row_end), reading the input rows
 * their windows cover, with the same per-pixel arithmetic.
 */
#include "ek_conv_common.h"
#include "ek_stream.h"

typedef struct pool_data {
  int32_t pad_h, pad_w;
  int32_t act_min, act_max;
  int32_t sum32; /* average: window sums fit int32 */
  int32_t reserved;
} pool_data;

static size_t pool_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(pool_data);
}

static ek_status pool_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 1 || op->num_outputs != 1)
    return ek_fail(ctx, op, EK_ERR_MODEL, "pooling needs exactly 1 input and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0);
  const ek_tensor *out = ek_output(ctx, op, 0);
  if (!in || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "pooling input or output tensor missing");
  if (in->type != EK_INT8 || out->type != EK_INT8)
    return ek_fail(ctx, op, EK_ERR_TYPE, "pooling supports int8 input and output only");
  if (in->ndim != 4 || out->ndim != 4) return ek_fail(ctx, op, EK_ERR_SHAPE, "pooling input and output must be 4-D (NHWC)");
  if (!ek_conv_is_q8_activation(in) || !ek_conv_is_q8_activation(out))
    return ek_fail(ctx, op, EK_ERR_MODEL,
                   "pooling input/output need a finite positive scale, an int8 zero point and matching bytes");
  const ek_op_params *p = &op->params;
  if (!ek_conv_activation_ok(p->activation))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "pooling fused activation must be NONE, RELU, RELU_N1_TO_1 or RELU6");
  if (p->stride_h < 1 || p->stride_w < 1 || p->filter_h < 1 || p->filter_w < 1)
    return ek_fail(ctx, op, EK_ERR_MODEL, "pooling strides and filter sizes must be >= 1");
  int32_t oh, ow, pad_h, pad_w;
  if (!ek_conv_window(p->padding, in->dims[1], p->filter_h, p->stride_h, 1, &oh, &pad_h) ||
      !ek_conv_window(p->padding, in->dims[2], p->filter_w, p->stride_w, 1, &ow, &pad_w))
    return ek_fail(ctx, op, EK_ERR_SHAPE, "pooling padding/stride/filter give no valid output for this input");
  if (out->dims[0] != in->dims[0] || out->dims[1] != oh || out->dims[2] != ow || out->dims[3] != in->dims[3])
    return ek_fail(ctx, op, EK_ERR_SHAPE, "pooling output shape differs from the one the input and options give");
  pool_data *d = (pool_data *)op->user_data;
  if (!d) return ek_fail(ctx, op, EK_ERR_INTERNAL, "pooling persistent data missing");
  d->pad_h = pad_h;
  d->pad_w = pad_w;
  if (!ek_conv_activation_range(p->activation, out, &d->act_min, &d->act_max))
    return ek_fail(ctx, op, EK_ERR_MODEL, "pooling activation range does not fit the output scale");
  const int64_t window = (int64_t)(p->filter_h < in->dims[1] ? p->filter_h : in->dims[1]) *
                         (p->filter_w < in->dims[2] ? p->filter_w : in->dims[2]);
  d->sum32 = window * 128 < INT32_MAX;
  return EK_OK;
}

/* First input row/column of output position o's window (may be negative: padding). */
static inline int32_t pool_origin(int32_t o, int32_t stride, int32_t pad) { return o * stride - pad; }

static ek_status pool_eval(ek_context *ctx, ek_op *op, int is_max) {
  const pool_data *d = (const pool_data *)op->user_data;
  const ek_tensor *in = ek_input(ctx, op, 0);
  ek_tensor *out = ek_output(ctx, op, 0);
  const ek_op_params *p = &op->params;
  const int32_t n = in->dims[0], h = in->dims[1], w = in->dims[2], c = in->dims[3];
  const int32_t oh = out->dims[1], ow = out->dims[2];
  const int8_t *x = (const int8_t *)in->data;
  int8_t *y = (int8_t *)out->data;
  int32_t oy0 = 0, oy1 = oh;
#ifndef EK_NO_STREAM_GROUPS
  if (ctx->row_end > 0) { /* output rows [row_begin, row_end) of batch 0 (a row-streamed group: n is 1) */
    oy0 = ctx->row_begin;
    oy1 = ctx->row_end;
  }
#endif
  for (int32_t b = 0; b < n; ++b) {
    for (int32_t oy = oy0; oy < oy1; ++oy) {
      const int32_t iy0 = pool_origin(oy, p->stride_h, d->pad_h);
      const int32_t fy0 = iy0 < 0 ? -iy0 : 0;
      const int32_t fy1 = p->filter_h < h - iy0 ? p->filter_h : h - iy0;
      for (int32_t ox = 0; ox < ow; ++ox) {
        const int32_t ix0 = pool_origin(ox, p->stride_w, d->pad_w);
        const int32_t fx0 = ix0 < 0 ? -ix0 : 0;
        const int32_t fx1 = p->filter_w < w - ix0 ? p->filter_w : w - ix0;
        const int32_t count = (fy1 > fy0 && fx1 > fx0) ? (fy1 - fy0) * (fx1 - fx0) : 0;
        int8_t *yp = y + (((int64_t)b * oh + oy) * ow + ox) * c;
        const int8_t *xb = x + ((int64_t)b * h * w) * c;
        int32_t ch = 0;
        if (count > 0 && (is_max || count <= 256)) { /* four channels per word (sums of <= 256 int8 fit int16) */
          for (; ch + 4 <= c; ch += 4) {
            uint32_t m = 0x80808080u, s02 = 0, s13 = 0;
            for (int32_t fy = fy0; fy < fy1; ++fy) {
              const int8_t *row = xb + ((ptrdiff_t)(iy0 + fy) * w + (ix0 + fx0)) * c + ch;
              for (int32_t fx = fx0; fx < fx1; ++fx, row += c) {
                const uint32_t v = ek_load32(row);
                if (is_max) {
                  m = ek_max8(m, v);
                } else {
                  s02 = ek_sxtab16(s02, v);
                  s13 = ek_sxtab16_ror8(s13, v);
                }
              }
            }
            if (is_max) {
              for (int32_t j = 0; j < 4; ++j) yp[ch + j] = ek_conv_clamp8((int8_t)(m >> (8 * j)), d->act_min, d->act_max);
            } else {
              const int32_t sums[4] = {ek_lo16_of(s02), ek_lo16_of(s13), ek_hi16_of(s02), ek_hi16_of(s13)};
              for (int32_t j = 0; j < 4; ++j) {
                const int32_t sv = sums[j];
                yp[ch + j] = ek_conv_clamp8(sv > 0 ? (sv + count / 2) / count : (sv - count / 2) / count, d->act_min,
                                            d->act_max);
              }
            }
          }
        }
        for (; ch < c; ++ch) {
          int32_t v;
          if (is_max) {
            int32_t m = -128;
            for (int32_t fy = fy0; fy < fy1; ++fy) {
              const int64_t row = ((int64_t)(iy0 + fy) * w + ix0) * c + ch;
              for (int32_t fx = fx0; fx < fx1; ++fx) m = xb[row + (int64_t)fx * c] > m ? xb[row + (int64_t)fx * c] : m;
            }
            v = m;
          } else if (count == 0) {
            v = 0; /* cannot happen for a window that passed ek_conv_window; defined anyway */
          } else if (d->sum32) {
            int32_t s = 0;
            for (int32_t fy = fy0; fy < fy1; ++fy) {
              const int64_t row = ((int64_t)(iy0 + fy) * w + ix0) * c + ch;
              for (int32_t fx = fx0; fx < fx1; ++fx) s += xb[row + (int64_t)fx * c];
            }
            v = s > 0 ? (s + count / 2) / count : (s - count / 2) / count;
          } else {
            int64_t s = 0;
            for (int32_t fy = fy0; fy < fy1; ++fy) {
              const int64_t row = ((int64_t)(iy0 + fy) * w + ix0) * c + ch;
              for (int32_t fx = fx0; fx < fx1; ++fx) s += xb[row + (int64_t)fx * c];
            }
            v = (int32_t)(s > 0 ? (s + count / 2) / count : (s - count / 2) / count);
          }
          yp[ch] = ek_conv_clamp8(v, d->act_min, d->act_max);
        }
      }
    }
  }
  (void)ctx;
  return EK_OK;
}

static ek_status average_pool_eval(ek_context *ctx, ek_op *op) { return pool_eval(ctx, op, 0); }
static ek_status max_pool_eval(ek_context *ctx, ek_op *op) { return pool_eval(ctx, op, 1); }

/* Kernel access contract (firmware/runtime/README.md): raster, pixel by pixel, windows read in place. */
static int pool_overlap(const ek_context *ctx, const ek_op *op, int input_index, int32_t *d_max) {
  const pool_data *d = (const pool_data *)op->user_data;
  if (input_index != 0 || !d) return EK_OVERLAP_NONE;
  return ek_stream_raster(ek_input((ek_context *)ctx, op, 0), ek_output((ek_context *)ctx, op, 0),
                          op->params.stride_h, op->params.stride_w, d->pad_h, d->pad_w, 1, 0, d_max)
             ? EK_OVERLAP_UPTO
             : EK_OVERLAP_NONE;
}

/* edgekit-op: AVERAGE_POOL_2D | types: int8 | versions: 1-2 | fast path: none */
/* edgekit-op: MAX_POOL_2D | types: int8 | versions: 1-2 | fast path: none */
const ek_kernel ek_kernel_average_pool_2d = {EK_OP_AVERAGE_POOL_2D, "AVERAGE_POOL_2D", EK_HOST_FN(pool_persistent_bytes), EK_HOST_FN((size_t(*)(const ek_context *, const ek_op *))0), EK_HOST_FN(pool_prepare), average_pool_eval, EK_HOST_FN(pool_overlap)};
const ek_kernel ek_kernel_max_pool_2d = {EK_OP_MAX_POOL_2D, "MAX_POOL_2D", EK_HOST_FN(pool_persistent_bytes), EK_HOST_FN((size_t(*)(const ek_context *, const ek_op *))0), EK_HOST_FN(pool_prepare), max_pool_eval, EK_HOST_FN(pool_overlap)};
