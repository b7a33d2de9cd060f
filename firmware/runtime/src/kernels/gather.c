/* GATHER along any axis with batch_dims, any element type of 1, 2, 4 or 8 bytes; positions int16, int32 or int64.
 *
 * Bit-exact with LiteRT BUILTIN_REF (tflite/kernels/gather.cc + internal/optimized Gather, which equals
 * internal/reference/gather.h): axis in [-rank, rank), batch_dims in [-rank(positions), rank(positions)] (negative
 * ones wrap), batch_dims <= axis, the first batch_dims dims of input and positions equal; output shape =
 * input[:axis] + positions[batch_dims:] + input[axis+1:]. For batch b, outer index o and position i the output
 * row (the input dims after axis) is input[b, o, positions[b, i]]. A position outside [0, axis extent) makes
 * LiteRT's invoke fail; here, a constant one is refused at prepare and a run-time one fails eval with the
 * same message ("gather index out of bounds"), writing nothing past the output.
 */
/* GATHER_ND (tflite/kernels/gather_nd.cc + internal/reference/reference_ops.h GatherNd/GatherNdHelper): indices
 * [..., K] (int16/int32/int64), K <= rank(params); output = indices.shape[:-1] + params.shape[K:]; slice i starts
 * at sum_j indices[i, j] * (product of params dims after j) and must lie inside params (LiteRT checks the flat
 * position, not each index: the same check here, at prepare for constant indices, else at eval).
 */
/* edgekit-op: GATHER | types: int8, int16, int32, float32, uint8, bool, int64 | versions: 1-7 | fast path: none */
/* edgekit-op: GATHER_ND | types: int8, int16, int32, float32, uint8, bool, int64 | versions: 1-5 | fast path: none */
#include <stdint.h>
#include <string.h>

#include "ek_kernels.h"

typedef struct gather_params {
  int32_t batches, outer, coords, axis_size;
  int32_t inner;     /* bytes per gathered row */
  int32_t pos_size;  /* bytes per position: 2, 4 or 8 */
} gather_params;

static size_t gather_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(gather_params);
}

static int64_t position(const uint8_t *p, int32_t size, int64_t i) {
  if (size == 2) { int16_t v; memcpy(&v, p + 2 * i, 2); return v; }
  if (size == 4) { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
  int64_t v;
  memcpy(&v, p + 8 * i, 8);
  return v;
}

static ek_status gather_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 2 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, "GATHER needs 2 inputs (input, positions) and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0), *pos = ek_input(ctx, op, 1), *out = ek_output(ctx, op, 0);
  if (!in || !pos || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "GATHER input, positions or output tensor missing");
  if (in->type != out->type) return ek_fail(ctx, op, EK_ERR_TYPE, "GATHER input and output types differ");
  const int32_t elem = ek_type_size(in->type);
  if (elem == 0) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "GATHER tensor type not supported");
  const int32_t psize = pos->type == EK_INT16 ? 2 : pos->type == EK_INT32 ? 4 : pos->type == EK_INT64 ? 8 : 0;
  if (psize == 0) return ek_fail(ctx, op, EK_ERR_TYPE, "GATHER positions must be int16, int32 or int64");
  int32_t axis = op->params.axis, bd = op->params.batch_dims;
  if (axis < 0) axis += in->ndim;
  if (axis < 0 || axis >= in->ndim) return ek_fail(ctx, op, EK_ERR_SHAPE, "GATHER axis out of range");
  if (bd < 0) bd += pos->ndim;
  if (bd > axis || bd < 0 || bd >= in->ndim || bd > pos->ndim) return ek_fail(ctx, op, EK_ERR_SHAPE, "GATHER batch_dims out of range");
  int64_t batches = 1, outer = 1, coords = 1, inner = elem;
  for (int32_t d = 0; d < bd; ++d) {
    if (in->dims[d] != pos->dims[d]) return ek_fail(ctx, op, EK_ERR_SHAPE, "GATHER batch dims of input and positions differ");
    batches *= in->dims[d];
  }
  for (int32_t d = bd; d < axis; ++d) outer *= in->dims[d];
  for (int32_t d = bd; d < pos->ndim; ++d) coords *= pos->dims[d];
  for (int32_t d = axis + 1; d < in->ndim; ++d) inner *= in->dims[d];
  if (batches > INT32_MAX || outer > INT32_MAX || coords > INT32_MAX || inner > INT32_MAX)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "GATHER tensors too large");
  const int32_t out_rank = in->ndim + pos->ndim - 1 - bd;
  if (out->ndim != out_rank) return ek_fail(ctx, op, EK_ERR_SHAPE, "GATHER output rank differs from the computed one");
  int32_t k = 0;
  for (int32_t d = 0; d < axis; ++d)
    if (out->dims[k++] != in->dims[d]) return ek_fail(ctx, op, EK_ERR_SHAPE, "GATHER output shape differs from the computed one");
  for (int32_t d = bd; d < pos->ndim; ++d)
    if (out->dims[k++] != pos->dims[d]) return ek_fail(ctx, op, EK_ERR_SHAPE, "GATHER output shape differs from the computed one");
  for (int32_t d = axis + 1; d < in->ndim; ++d)
    if (out->dims[k++] != in->dims[d]) return ek_fail(ctx, op, EK_ERR_SHAPE, "GATHER output shape differs from the computed one");
  if (batches * outer * in->dims[axis] * inner != in->bytes || batches * outer * coords * inner != out->bytes ||
      batches * coords * psize != pos->bytes)
    return ek_fail(ctx, op, EK_ERR_MODEL, "GATHER tensor sizes do not match their shapes");
  if (pos->is_constant) {
    if (pos->bytes > 0 && !pos->data) return ek_fail(ctx, op, EK_ERR_MODEL, "GATHER constant positions without data");
    for (int64_t i = 0; i < batches * coords; ++i) {
      const int64_t v = position((const uint8_t *)pos->data, psize, i);
      if (v < 0 || v >= in->dims[axis]) return ek_fail(ctx, op, EK_ERR_SHAPE, "gather index out of bounds");
    }
  }
  gather_params *p = (gather_params *)op->user_data;
  p->batches = (int32_t)batches, p->outer = (int32_t)outer, p->coords = (int32_t)coords;
  p->axis_size = in->dims[axis], p->inner = (int32_t)inner, p->pos_size = psize;
  return EK_OK;
}

static ek_status gather_eval(ek_context *ctx, ek_op *op) {
  const gather_params *p = (const gather_params *)op->user_data;
  const ek_tensor *in = ek_input(ctx, op, 0), *pos = ek_input(ctx, op, 1);
  ek_tensor *out = ek_output(ctx, op, 0);
  const uint8_t *x = (const uint8_t *)in->data, *ps = (const uint8_t *)pos->data;
  uint8_t *y = (uint8_t *)out->data;
  const size_t inner = (size_t)p->inner;
  const int64_t n = (int64_t)p->batches * p->coords;
  for (int64_t i = 0; i < n; ++i) { /* LiteRT checks every position before writing */
    const int64_t v = position(ps, p->pos_size, i);
    if (v < 0 || v >= p->axis_size) return ek_fail(ctx, op, EK_ERR_SHAPE, "gather index out of bounds");
  }
  for (int32_t b = 0; b < p->batches; ++b)
    for (int32_t o = 0; o < p->outer; ++o) {
      const uint8_t *src = x + ((size_t)b * (size_t)p->outer + (size_t)o) * (size_t)p->axis_size * inner;
      for (int32_t c = 0; c < p->coords; ++c) {
        const int64_t v = position(ps, p->pos_size, (int64_t)b * p->coords + c);
        memcpy(y, src + (size_t)v * inner, inner);
        y += inner;
      }
    }
  return EK_OK;
}

typedef struct gather_nd_params {
  int32_t slices, nd, slice_bytes, pos_size, elem, flat; /* flat: params elements */
  int32_t counts[EK_MAX_DIMS];                          /* elements per step of index j */
} gather_nd_params;

static size_t gather_nd_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(gather_nd_params);
}

/* Element offset of slice i, or -1 when it leaves params. */
static int64_t gather_nd_from(const gather_nd_params *p, const uint8_t *idx, int64_t i) {
  int64_t from = 0;
  for (int32_t j = 0; j < p->nd; ++j) from += position(idx, p->pos_size, i * p->nd + j) * p->counts[j];
  const int64_t slice = p->elem ? p->slice_bytes / p->elem : 0;
  return from < 0 || from + slice > p->flat ? -1 : from;
}

static ek_status gather_nd_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 2 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, "GATHER_ND needs 2 inputs (params, indices) and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0), *pos = ek_input(ctx, op, 1), *out = ek_output(ctx, op, 0);
  if (!in || !pos || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "GATHER_ND params, indices or output tensor missing");
  if (in->type != out->type) return ek_fail(ctx, op, EK_ERR_TYPE, "GATHER_ND params and output types differ");
  const int32_t elem = ek_type_size(in->type);
  if (elem == 0) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "GATHER_ND tensor type not supported");
  const int32_t psize = pos->type == EK_INT16 ? 2 : pos->type == EK_INT32 ? 4 : pos->type == EK_INT64 ? 8 : 0;
  if (psize == 0) return ek_fail(ctx, op, EK_ERR_TYPE, "GATHER_ND indices must be int16, int32 or int64");
  if (pos->ndim < 1 || in->ndim < 1) return ek_fail(ctx, op, EK_ERR_SHAPE, "GATHER_ND params and indices need at least 1 dimension");
  const int32_t nd = pos->dims[pos->ndim - 1];
  if (nd > in->ndim) return ek_fail(ctx, op, EK_ERR_SHAPE, "GATHER_ND index depth exceeds the params rank");
  int64_t slices = 1, slice = 1, flat = 1;
  for (int32_t d = 0; d + 1 < pos->ndim; ++d) slices *= pos->dims[d];
  for (int32_t d = 0; d < in->ndim; ++d) flat *= in->dims[d];
  for (int32_t d = nd; d < in->ndim; ++d) slice *= in->dims[d];
  if (slices > INT32_MAX || flat > INT32_MAX || flat * elem != in->bytes || slices * nd * psize != pos->bytes)
    return ek_fail(ctx, op, EK_ERR_MODEL, "GATHER_ND tensor sizes do not match their shapes");
  if (out->ndim != pos->ndim - 1 + in->ndim - nd) return ek_fail(ctx, op, EK_ERR_SHAPE, "GATHER_ND output rank differs from the computed one");
  for (int32_t d = 0; d < out->ndim; ++d) {
    const int32_t want = d < pos->ndim - 1 ? pos->dims[d] : in->dims[nd + d - (pos->ndim - 1)];
    if (out->dims[d] != want) return ek_fail(ctx, op, EK_ERR_SHAPE, "GATHER_ND output shape differs from the computed one");
  }
  if (slices * slice * elem != out->bytes) return ek_fail(ctx, op, EK_ERR_MODEL, "GATHER_ND output size differs from its shape");
  gather_nd_params *p = (gather_nd_params *)op->user_data;
  memset(p, 0, sizeof *p);
  p->slices = (int32_t)slices, p->nd = nd, p->slice_bytes = (int32_t)(slice * elem), p->pos_size = psize;
  p->elem = elem, p->flat = (int32_t)flat;
  int64_t remain = flat;
  for (int32_t j = 0; j < nd; ++j) {
    remain = in->dims[j] ? remain / in->dims[j] : 0;
    p->counts[j] = (int32_t)remain;
  }
  if (pos->is_constant) {
    if (pos->bytes > 0 && !pos->data) return ek_fail(ctx, op, EK_ERR_MODEL, "GATHER_ND constant indices without data");
    for (int64_t i = 0; i < slices; ++i)
      if (gather_nd_from(p, (const uint8_t *)pos->data, i) < 0) return ek_fail(ctx, op, EK_ERR_SHAPE, "gather_nd index out of bounds");
  }
  return EK_OK;
}

static ek_status gather_nd_eval(ek_context *ctx, ek_op *op) {
  const gather_nd_params *p = (const gather_nd_params *)op->user_data;
  const uint8_t *x = (const uint8_t *)ek_input(ctx, op, 0)->data, *idx = (const uint8_t *)ek_input(ctx, op, 1)->data;
  uint8_t *y = (uint8_t *)ek_output(ctx, op, 0)->data;
  for (int64_t i = 0; i < p->slices; ++i) /* every slice checked before any byte is written */
    if (gather_nd_from(p, idx, i) < 0) return ek_fail(ctx, op, EK_ERR_SHAPE, "gather_nd index out of bounds");
  for (int64_t i = 0; i < p->slices; ++i)
    memcpy(y + (size_t)i * (size_t)p->slice_bytes, x + (size_t)gather_nd_from(p, idx, i) * (size_t)p->elem, (size_t)p->slice_bytes);
  return EK_OK;
}

const ek_kernel ek_kernel_gather_nd = {EK_OP_GATHER_ND, "GATHER_ND", EK_HOST_FN(gather_nd_persistent_bytes), 0,
                                       EK_HOST_FN(gather_nd_prepare), gather_nd_eval, 0};
const ek_kernel ek_kernel_gather = {EK_OP_GATHER, "GATHER", EK_HOST_FN(gather_persistent_bytes), 0, EK_HOST_FN(gather_prepare),
                                    gather_eval, 0};
