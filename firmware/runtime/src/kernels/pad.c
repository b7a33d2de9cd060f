/* PAD (constant padding), up to 5 dimensions as LiteRT's PadKernelMaxDimensionCount().
 *
 * Bit-exact with LiteRT BUILTIN_REF: tflite/kernels/pad.cc. Paddings: a constant [rank, 2] tensor of int32 or
 * int64 (values >= 0). Pad value for quantized int8/int16 (EvalInt): the output zero point, or the optional
 * third input (then its scale and zero point must equal the output's); for other types 0 or the third input.
 * Values are moved, never rescaled (input and output quantization are not compared, as in LiteRT). In a row-streamed
 * group (ctx->row_end > 0, 4-D, ek_stream_group.c) it writes only output rows [row_begin, row_end) (dimension 1),
 * each from input row r - top padding or the pad value, with the same per-row code.
 */
#include <string.h>

#include "ek_kernels.h"
#include "ek_stream.h"

enum { PAD_MAX_DIMS = 5 };

typedef struct pad_params {
  int32_t rank;
  int32_t elem;                         /* bytes per element */
  int32_t in_dims[PAD_MAX_DIMS], out_dims[PAD_MAX_DIMS], before[PAD_MAX_DIMS];
  uint8_t pad_value[8];                 /* one element */
} pad_params;

static size_t pad_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(pad_params);
}

static ek_status pad_prepare(ek_context *ctx, ek_op *op) {
  if ((op->num_inputs != 2 && op->num_inputs != 3) || op->num_outputs != 1)
    return ek_fail(ctx, op, EK_ERR_MODEL, "PAD needs 2 or 3 inputs and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0), *paddings = ek_input(ctx, op, 1);
  const ek_tensor *constant = op->num_inputs == 3 ? ek_input(ctx, op, 2) : (const ek_tensor *)0;
  const ek_tensor *out = ek_output(ctx, op, 0);
  if (!in || !paddings || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "PAD input, paddings or output tensor missing");
  if (in->type != out->type) return ek_fail(ctx, op, EK_ERR_TYPE, "PAD input and output types differ");
  const int32_t elem = ek_type_size(in->type);
  if (elem == 0) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "PAD tensor type not supported");
  if (in->ndim < 0 || in->ndim > PAD_MAX_DIMS) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "PAD supports at most 5 dimensions");
  if (paddings->type != EK_INT32 && paddings->type != EK_INT64)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "PAD paddings must be int32 or int64");
  if (!paddings->is_constant || (paddings->bytes > 0 && !paddings->data))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "PAD paddings must be a constant tensor");
  if (paddings->ndim != 2 || paddings->dims[0] != in->ndim || paddings->dims[1] != 2)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "PAD paddings must have shape [input rank, 2]");
  const int32_t pad_elem = paddings->type == EK_INT32 ? 4 : 8;
  if (paddings->bytes != in->ndim * 2 * pad_elem) return ek_fail(ctx, op, EK_ERR_MODEL, "PAD paddings size does not match its shape");
  if (out->ndim != in->ndim) return ek_fail(ctx, op, EK_ERR_SHAPE, "PAD output rank differs from the input rank");

  pad_params *p = (pad_params *)op->user_data;
  memset(p, 0, sizeof *p);
  p->rank = in->ndim;
  p->elem = elem;
  int64_t in_count = 1, out_count = 1;
  for (int32_t d = 0; d < in->ndim; ++d) {
    int64_t before = 0, after = 0;
    const uint8_t *raw = (const uint8_t *)paddings->data + (size_t)d * 2 * (size_t)pad_elem;
    if (pad_elem == 4) {
      int32_t v[2];
      memcpy(v, raw, sizeof v);
      before = v[0];
      after = v[1];
    } else {
      int64_t v[2];
      memcpy(v, raw, sizeof v);
      before = v[0];
      after = v[1];
    }
    if (before < 0 || after < 0) return ek_fail(ctx, op, EK_ERR_SHAPE, "PAD amounts must be >= 0");
    if (before > INT32_MAX || after > INT32_MAX) return ek_fail(ctx, op, EK_ERR_SHAPE, "PAD amount too large");
    if (in->dims[d] < 0) return ek_fail(ctx, op, EK_ERR_SHAPE, "PAD input has a negative dimension");
    const int64_t expected = (int64_t)in->dims[d] + before + after;
    if (expected > INT32_MAX || out->dims[d] != expected)
      return ek_fail(ctx, op, EK_ERR_SHAPE, "PAD output shape is not the input shape plus the paddings");
    p->in_dims[d] = in->dims[d];
    p->out_dims[d] = out->dims[d];
    p->before[d] = (int32_t)before;
    in_count *= in->dims[d];
    out_count *= out->dims[d];
    if (out_count > INT32_MAX) return ek_fail(ctx, op, EK_ERR_SHAPE, "PAD output too large");
  }
  if (in_count * elem != in->bytes || out_count * elem != out->bytes)
    return ek_fail(ctx, op, EK_ERR_MODEL, "PAD tensor sizes do not match their shapes");

  if (constant) {
    if (constant->type != in->type) return ek_fail(ctx, op, EK_ERR_TYPE, "PAD constant value type differs from the input type");
    if (constant->bytes != elem || !constant->data) return ek_fail(ctx, op, EK_ERR_SHAPE, "PAD constant value must have one element");
    if (!constant->is_constant) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "PAD constant value must be a constant tensor");
    if ((in->type == EK_INT8 || in->type == EK_INT16 || in->type == EK_UINT8) && in->num_scales > 0 &&
        (constant->zero_point != out->zero_point || constant->scale != out->scale))
      return ek_fail(ctx, op, EK_ERR_MODEL, "PAD constant value must be quantized like the output");
    memcpy(p->pad_value, constant->data, (size_t)elem);
  } else if ((in->type == EK_INT8 || in->type == EK_INT16 || in->type == EK_UINT8) && in->num_scales > 0) {
    const int32_t zp = out->zero_point;
    if (in->type == EK_INT8) {
      if (zp < INT8_MIN || zp > INT8_MAX) return ek_fail(ctx, op, EK_ERR_MODEL, "PAD output zero point outside the int8 range");
      const int8_t v = (int8_t)zp;
      memcpy(p->pad_value, &v, 1);
    } else if (in->type == EK_UINT8) {
      if (zp < 0 || zp > UINT8_MAX) return ek_fail(ctx, op, EK_ERR_MODEL, "PAD output zero point outside the uint8 range");
      p->pad_value[0] = (uint8_t)zp;
    } else {
      if (zp < INT16_MIN || zp > INT16_MAX) return ek_fail(ctx, op, EK_ERR_MODEL, "PAD output zero point outside the int16 range");
      const int16_t v = (int16_t)zp;
      memcpy(p->pad_value, &v, 2);
    }
  } /* else: zeros (memset above) */
  return EK_OK;
}

static void pad_fill(uint8_t *dst, const uint8_t *value, int32_t elem, int32_t count) {
  if (elem == 1) {
    memset(dst, value[0], (size_t)count);
    return;
  }
  for (int32_t i = 0; i < count; ++i) memcpy(dst + (size_t)i * (size_t)elem, value, (size_t)elem);
}

static ek_status pad_eval(ek_context *ctx, ek_op *op) {
  const pad_params *p = (const pad_params *)op->user_data;
  const uint8_t *x = (const uint8_t *)ek_input(ctx, op, 0)->data;
  uint8_t *y = (uint8_t *)ek_output(ctx, op, 0)->data;
  const int32_t e = p->elem;
  if (p->rank == 0) {
    memcpy(y, x, (size_t)e);
    return EK_OK;
  }
  const int32_t last = p->rank - 1;
  const int32_t out_row = p->out_dims[last], in_row = p->in_dims[last], before_last = p->before[last];
  const int32_t after_last = out_row - in_row - before_last;
  int32_t rows = 1;
  for (int32_t d = 0; d < last; ++d) rows *= p->out_dims[d];
  if (out_row == 0 || rows == 0) return EK_OK;
  int32_t idx[PAD_MAX_DIMS] = {0}; /* output index over the leading dimensions */
  int32_t r = 0;
#ifndef EK_NO_STREAM_GROUPS
  if (ctx->row_end > 0 && p->rank == 4) { /* output rows [row_begin, row_end) of batch 0 (a row-streamed group) */
    r = ctx->row_begin * p->out_dims[2];
    rows = ctx->row_end * p->out_dims[2];
    idx[1] = ctx->row_begin;
  }
#endif
  for (; r < rows; ++r) {
    uint8_t *dst = y + (size_t)r * (size_t)out_row * (size_t)e;
    int inside = in_row > 0;
    int32_t in_offset = 0; /* input row index */
    for (int32_t d = 0; d < last && inside; ++d) {
      const int32_t i = idx[d] - p->before[d];
      if (i < 0 || i >= p->in_dims[d]) inside = 0;
      in_offset = in_offset * p->in_dims[d] + i;
    }
    if (inside) {
      pad_fill(dst, p->pad_value, e, before_last);
      memcpy(dst + (size_t)before_last * (size_t)e, x + (size_t)in_offset * (size_t)in_row * (size_t)e, (size_t)in_row * (size_t)e);
      pad_fill(dst + (size_t)(before_last + in_row) * (size_t)e, p->pad_value, e, after_last);
    } else {
      pad_fill(dst, p->pad_value, e, out_row);
    }
    for (int32_t d = last - 1; d >= 0; --d) {
      if (++idx[d] < p->out_dims[d]) break;
      idx[d] = 0;
    }
  }
  return EK_OK;
}

/* Kernel access contract (firmware/runtime/README.md): rows (the last dimension) in increasing order; output row r
   is written (fill, copy of its input row, fill) while its input row and the later ones are still to be read, so its
   end must stay at or below the start of its input row: d_max = min over rows r with an input row i of
   i*in_row - (r+1)*out_row (rows after the last input row read nothing). A channel PAD (BlazeFace's skip branch)
   then sits just below its dying input instead of beside it. */
static int pad_overlap(const ek_context *ctx, const ek_op *op, int input_index, int32_t *d_max) {
  const pad_params *p = (const pad_params *)op->user_data;
  (void)ctx;
  if (input_index != 0 || !p || p->rank < 1) return EK_OVERLAP_NONE;
  const int32_t last = p->rank - 1;
  const int64_t in_row = (int64_t)p->in_dims[last] * p->elem, out_row = (int64_t)p->out_dims[last] * p->elem;
  int64_t rows = 1, best = EK_STREAM_NO_LIMIT;
  for (int32_t d = 0; d < last; ++d) rows *= p->out_dims[d];
  if (in_row == 0 || rows == 0) return EK_OVERLAP_NONE;
  int32_t idx[PAD_MAX_DIMS] = {0};
  for (int64_t r = 0; r < rows; ++r) {
    int inside = 1;
    int64_t i = 0;
    for (int32_t d = 0; d < last && inside; ++d) {
      const int32_t k = idx[d] - p->before[d];
      if (k < 0 || k >= p->in_dims[d]) inside = 0;
      i = i * p->in_dims[d] + k;
    }
    if (inside && i * in_row - (r + 1) * out_row < best) best = i * in_row - (r + 1) * out_row;
    for (int32_t d = last - 1; d >= 0; --d) {
      if (++idx[d] < p->out_dims[d]) break;
      idx[d] = 0;
    }
  }
  if (best >= EK_STREAM_NO_LIMIT) return EK_OVERLAP_NONE;
  *d_max = ek_stream_clamp(best);
  return EK_OVERLAP_UPTO;
}

/* edgekit-op: PAD | types: int8, uint8, int16, int32, int64, float16, float32, bool | versions: 1-4 | fast path: none */
const ek_kernel ek_kernel_pad = {EK_OP_PAD, "PAD", EK_HOST_FN(pad_persistent_bytes), 0, EK_HOST_FN(pad_prepare), pad_eval, EK_HOST_FN(pad_overlap)};
/* PADV2 (tflite/kernels/pad.cc, the same Eval): PAD with its constant_values input (3 inputs). */
/* edgekit-op: PADV2 | types: int8, int16, int32, float32, uint8, int64 | versions: 1-4 | fast path: none */
const ek_kernel ek_kernel_padv2 = {EK_OP_PADV2, "PADV2", EK_HOST_FN(pad_persistent_bytes), 0, EK_HOST_FN(pad_prepare), pad_eval, EK_HOST_FN(pad_overlap)};
