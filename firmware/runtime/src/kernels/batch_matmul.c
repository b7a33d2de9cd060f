/* edgekit-op: BATCH_MATMUL | types: int8 | versions: 1-4 | fast path: none */
/* BATCH_MATMUL, int8 x int8 -> int8: out[..., m, n] = sum_k (x[..., m, k] - zp_x) * (y[..., k, n] - zp_y),
 * rescaled; adj_x / adj_y transpose the last two dimensions of x / y; batch dimensions (ranks 2..5) broadcast
 * NumPy-style.
 *
 * Bit-exact with LiteRT BUILTIN_REF: tflite/kernels/batch_matmul.cc (Prepare: multiplier from
 * GetQuantizedConvolutionMultipler = double(s_x) * double(s_y) / double(s_out), QuantizeMultiplier; activation range
 * of NONE, i.e. int8; EvalInt8Int8 transposes y unless adj_y and x if adj_x, then reference_ops::BatchMatMul
 * (kernels/internal/reference/batch_matmul.h) with the operands swapped): each output is an exact int32 sum
 * (order-free), MultiplyByQuantizedMultiplier(sum) + zp_out, clamped. The kernel reads both operands in place with
 * strides (no transposed copies, no scratch). No overlap is declared: the output never shares memory with an input.
 */
#include "ek_fixedpoint.h"
#include "ek_kernels.h"

typedef struct bmm_params {
  int32_t rows, cols, depth;                /* M, N, K */
  int32_t batch[3];                         /* output batch dims (leading 1s for lower ranks) */
  int32_t x_batch_stride[3], y_batch_stride[3]; /* element strides per batch dim (0: broadcast) */
  int32_t x_row, x_k, y_k, y_col;           /* element strides of x along m, k and of y along k, n */
  int32_t x_offset, y_offset, out_offset;   /* -zp_x, -zp_y, zp_out */
  int32_t multiplier, shift;
} bmm_params;

static size_t bmm_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(bmm_params);
}

static int bmm_valid_scale(float s) { return s > 0.0f && s <= 3.4028234e38f; }

static ek_status bmm_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 2 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, "BATCH_MATMUL needs 2 inputs and 1 output");
  const ek_tensor *x = ek_input(ctx, op, 0), *y = ek_input(ctx, op, 1), *out = ek_output(ctx, op, 0);
  if (!x || !y || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "BATCH_MATMUL input or output tensor missing");
  if (x->type != EK_INT8 || y->type != EK_INT8 || out->type != EK_INT8)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "BATCH_MATMUL supports int8 x int8 -> int8 only");
  if (x->num_scales != 1 || y->num_scales != 1 || out->num_scales != 1)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "BATCH_MATMUL needs per-tensor quantized tensors");
  if (!bmm_valid_scale(x->scale) || !bmm_valid_scale(y->scale) || !bmm_valid_scale(out->scale))
    return ek_fail(ctx, op, EK_ERR_MODEL, "BATCH_MATMUL tensor scale must be positive and finite");
  if (x->zero_point < -128 || x->zero_point > 127 || y->zero_point < -128 || y->zero_point > 127 ||
      out->zero_point < -128 || out->zero_point > 127)
    return ek_fail(ctx, op, EK_ERR_MODEL, "BATCH_MATMUL int8 zero point outside [-128, 127]");
  if (x->ndim < 2 || x->ndim > 5 || y->ndim < 2 || y->ndim > 5)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "BATCH_MATMUL inputs must have 2 to 5 dimensions (as TFLite)");
  if (x->bytes != ek_num_elements(x) || y->bytes != ek_num_elements(y) || out->bytes != ek_num_elements(out))
    return ek_fail(ctx, op, EK_ERR_MODEL, "BATCH_MATMUL tensor size does not match its shape");
  const int adj_x = op->params.adj_x != 0, adj_y = op->params.adj_y != 0;
  const int32_t xr = x->dims[x->ndim - 2], xc = x->dims[x->ndim - 1];
  const int32_t yr = y->dims[y->ndim - 2], yc = y->dims[y->ndim - 1];
  const int32_t m = adj_x ? xc : xr, k = adj_x ? xr : xc, k2 = adj_y ? yc : yr, n = adj_y ? yr : yc;
  if (k != k2) return ek_fail(ctx, op, EK_ERR_SHAPE, "BATCH_MATMUL inner dimensions of the inputs differ");
  const int32_t rank = x->ndim > y->ndim ? x->ndim : y->ndim;
  if (out->ndim != rank || out->dims[rank - 2] != m || out->dims[rank - 1] != n)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "BATCH_MATMUL output shape must be the broadcast batch dims x [rows, cols]");
  bmm_params *p = (bmm_params *)op->user_data;
  p->rows = m;
  p->cols = n;
  p->depth = k;
  p->x_row = adj_x ? 1 : xc;
  p->x_k = adj_x ? xc : 1;
  p->y_k = adj_y ? 1 : yc;
  p->y_col = adj_y ? yc : 1;
  int64_t xs = (int64_t)xr * xc, ys = (int64_t)yr * yc; /* strides of the innermost batch dim */
  for (int32_t b = 2; b >= 0; --b) {                    /* batch dim b of 3, right-aligned */
    const int32_t d = rank - 2 - (3 - b);              /* output dim index */
    const int32_t jx = d - (rank - x->ndim), jy = d - (rank - y->ndim);
    const int32_t dx = d >= 0 && jx >= 0 ? x->dims[jx] : 1, dy = d >= 0 && jy >= 0 ? y->dims[jy] : 1;
    const int32_t want = d >= 0 ? out->dims[d] : 1;
    if ((dx != want && dx != 1) || (dy != want && dy != 1) || (dx != want && dy != want))
      return ek_fail(ctx, op, EK_ERR_SHAPE, "BATCH_MATMUL batch dimensions do not broadcast to the output's");
    p->batch[b] = want;
    p->x_batch_stride[b] = dx == 1 ? 0 : (int32_t)xs;
    p->y_batch_stride[b] = dy == 1 ? 0 : (int32_t)ys;
    xs *= dx;
    ys *= dy;
  }
  if ((int64_t)k * 255 * 255 > INT32_MAX) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "BATCH_MATMUL inner dimension too large for int32 sums");
  p->x_offset = -x->zero_point;
  p->y_offset = -y->zero_point;
  p->out_offset = out->zero_point;
  int shift = 0;
  ek_quantize_multiplier((double)x->scale * (double)y->scale / (double)out->scale, &p->multiplier, &shift);
  p->shift = shift;
  return EK_OK;
}

static ek_status bmm_eval(ek_context *ctx, ek_op *op) {
  const bmm_params *p = (const bmm_params *)op->user_data;
  const int8_t *x = (const int8_t *)ek_input(ctx, op, 0)->data, *y = (const int8_t *)ek_input(ctx, op, 1)->data;
  int8_t *out = (int8_t *)ek_output(ctx, op, 0)->data;
  const int32_t m = p->rows, n = p->cols, k = p->depth;
  for (int32_t b0 = 0; b0 < p->batch[0]; ++b0)
    for (int32_t b1 = 0; b1 < p->batch[1]; ++b1)
      for (int32_t b2 = 0; b2 < p->batch[2]; ++b2) {
        const int8_t *xb = x + b0 * p->x_batch_stride[0] + b1 * p->x_batch_stride[1] + b2 * p->x_batch_stride[2];
        const int8_t *yb = y + b0 * p->y_batch_stride[0] + b1 * p->y_batch_stride[1] + b2 * p->y_batch_stride[2];
        for (int32_t i = 0; i < m; ++i) {
          for (int32_t j = 0; j < n; ++j) {
            const int8_t *xr = xb + i * p->x_row, *yc = yb + j * p->y_col;
            int32_t acc = 0; /* |acc| <= k * 255^2 < 2^31 (prepare) */
            for (int32_t t = 0; t < k; ++t) acc += (xr[t * p->x_k] + p->x_offset) * (yc[t * p->y_k] + p->y_offset);
            out[i * n + j] = (int8_t)ek_clamp_i32(ek_mbqm(acc, p->multiplier, p->shift) + p->out_offset, INT8_MIN, INT8_MAX);
          }
        }
        out += m * n;
      }
  return EK_OK;
}

const ek_kernel ek_kernel_batch_matmul = {EK_OP_BATCH_MATMUL, "BATCH_MATMUL", EK_HOST_FN(bmm_persistent_bytes), 0,
                                          EK_HOST_FN(bmm_prepare), bmm_eval, 0};
