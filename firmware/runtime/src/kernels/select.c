/* edgekit-op: SELECT | types: int8, int16, bool | versions: 1-4 | fast path: none */
/* edgekit-op: SELECT_V2 | types: int8, int16, bool | versions: 1-2 | fast path: none */
/* SELECT and SELECT_V2: out = condition ? x : y, condition bool, x / y / out of one type (raw values, no
 * requantization: the converter gives x, y and out one scale).
 *
 * As LiteRT BUILTIN_REF (tflite/kernels/select.cc, kernels/internal/reference/reference_ops.h Select,
 * RankOneSelect, BroadcastSelect*Slow):
 * - SELECT: condition, x and y of one shape (elementwise); or a scalar condition (all of x or all of y); or a
 *   rank-1 condition of x's first dimension (condition[i] picks slice i of x or y). x and y always of one shape.
 * - SELECT_V2: NumPy broadcasting of condition, x and y (up to 6 dimensions here).
 * Both are one walk over the output with a stride per operand and output dimension (0 where it broadcasts).
 * Same-shape x or y: element i is read before element i of the output is written, in increasing i (ek_stream
 * elementwise contract, d_max = 0; the bool condition too when elements are one byte).
 */
#include <string.h>

#include "ek_kernels.h"

typedef struct select_params {
  int32_t rank;                      /* output rank; 0: a scalar */
  int32_t total;                     /* output elements (0: nothing to do) */
  int32_t esize;                     /* bytes per element of x, y and out */
  int32_t shape[EK_MAX_DIMS];        /* output dims, [0] outermost */
  int32_t stride[3][EK_MAX_DIMS];    /* element strides of condition, x, y per output dim */
} select_params;

static size_t select_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(select_params);
}

#define SEL_MSG(op, tail) ((op)->opcode == EK_OP_SELECT ? "SELECT " tail : "SELECT_V2 " tail)

/* Strides of t aligned to the right of the output's dims (NumPy broadcasting); 0 if t does not broadcast. */
static int select_strides_right(const ek_tensor *t, const int32_t *shape, int32_t rank, int32_t *stride) {
  if (t->ndim > rank) return 0;
  int64_t acc = 1;
  for (int32_t d = rank - 1; d >= 0; --d) {
    const int32_t k = d - (rank - t->ndim);
    if (k < 0) {
      stride[d] = 0;
      continue;
    }
    if (t->dims[k] != shape[d] && t->dims[k] != 1) return 0;
    stride[d] = t->dims[k] == shape[d] ? (int32_t)acc : 0;
    if (shape[d] == 1) stride[d] = 0;
    acc *= t->dims[k];
  }
  return 1;
}

static ek_status select_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 3 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, SEL_MSG(op, "needs 3 inputs and 1 output"));
  const ek_tensor *c = ek_input(ctx, op, 0), *x = ek_input(ctx, op, 1), *y = ek_input(ctx, op, 2);
  const ek_tensor *out = ek_output(ctx, op, 0);
  if (!c || !x || !y || !out) return ek_fail(ctx, op, EK_ERR_MODEL, SEL_MSG(op, "input or output tensor missing"));
  if (c->type != EK_BOOL) return ek_fail(ctx, op, EK_ERR_TYPE, SEL_MSG(op, "condition must be bool"));
  if (x->type != y->type || out->type != x->type)
    return ek_fail(ctx, op, EK_ERR_TYPE, SEL_MSG(op, "x, y and the output must have one type"));
  if (x->type != EK_INT8 && x->type != EK_INT16 && x->type != EK_BOOL)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, SEL_MSG(op, "supports int8, int16 and bool values"));
  const int32_t esize = ek_type_size(x->type);
  if (c->bytes != ek_num_elements(c) || x->bytes != ek_num_elements(x) * esize || y->bytes != ek_num_elements(y) * esize ||
      out->bytes != ek_num_elements(out) * esize)
    return ek_fail(ctx, op, EK_ERR_MODEL, SEL_MSG(op, "tensor size does not match its shape"));
  if (c->ndim > EK_MAX_DIMS || x->ndim > EK_MAX_DIMS || y->ndim > EK_MAX_DIMS || out->ndim > EK_MAX_DIMS || c->ndim < 0 ||
      x->ndim < 0 || y->ndim < 0 || out->ndim < 0)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, SEL_MSG(op, "supports at most 6 dimensions"));
  select_params *p = (select_params *)op->user_data;
  memset(p, 0, sizeof *p);
  p->esize = esize;
  p->rank = out->ndim;
  for (int32_t d = 0; d < out->ndim; ++d) p->shape[d] = out->dims[d];
  p->total = ek_num_elements(out);
  if (op->opcode == EK_OP_SELECT) {
    if (!ek_same_shape(x, y) || !ek_same_shape(x, out))
      return ek_fail(ctx, op, EK_ERR_SHAPE, "SELECT x, y and the output must have one shape");
    if (ek_same_shape(c, x) || c->ndim == 0) {
      if (!select_strides_right(c, p->shape, p->rank, p->stride[0])) return ek_fail(ctx, op, EK_ERR_INTERNAL, "SELECT condition");
    } else if (c->ndim == 1 && x->ndim >= 1 && c->dims[0] == x->dims[0]) { /* RankOneSelect: along dim 0 */
      p->stride[0][0] = p->shape[0] == 1 ? 0 : 1;
    } else {
      return ek_fail(ctx, op, EK_ERR_SHAPE,
                     "SELECT condition must have x's shape, be a scalar, or be a vector of x's first dimension");
    }
  } else {
    int32_t rank = c->ndim > x->ndim ? c->ndim : x->ndim;
    if (y->ndim > rank) rank = y->ndim;
    if (out->ndim != rank) return ek_fail(ctx, op, EK_ERR_SHAPE, "SELECT_V2 output shape is not the broadcast of the input shapes");
    for (int32_t d = 0; d < rank; ++d) { /* the broadcast dim: the largest (any other must be 1 or equal) */
      int32_t want = 1;
      const ek_tensor *ts[3] = {c, x, y};
      for (int k = 0; k < 3; ++k) {
        const int32_t j = d - (rank - ts[k]->ndim);
        if (j < 0 || ts[k]->dims[j] == 1) continue;
        if (want != 1 && ts[k]->dims[j] != want) return ek_fail(ctx, op, EK_ERR_SHAPE, "SELECT_V2 input shapes do not broadcast");
        want = ts[k]->dims[j];
      }
      if (out->dims[d] != want) return ek_fail(ctx, op, EK_ERR_SHAPE, "SELECT_V2 output shape is not the broadcast of the input shapes");
    }
  }
  if (!select_strides_right(x, p->shape, p->rank, p->stride[1]) || !select_strides_right(y, p->shape, p->rank, p->stride[2]) ||
      (op->opcode == EK_OP_SELECT_V2 && !select_strides_right(c, p->shape, p->rank, p->stride[0])))
    return ek_fail(ctx, op, EK_ERR_SHAPE, SEL_MSG(op, "input shapes do not broadcast"));
  return EK_OK;
}

static ek_status select_eval(ek_context *ctx, ek_op *op) {
  const select_params *p = (const select_params *)op->user_data;
  if (p->total <= 0) return EK_OK;
  const uint8_t *c = (const uint8_t *)ek_input(ctx, op, 0)->data;
  const uint8_t *x = (const uint8_t *)ek_input(ctx, op, 1)->data, *y = (const uint8_t *)ek_input(ctx, op, 2)->data;
  uint8_t *out = (uint8_t *)ek_output(ctx, op, 0)->data;
  const int32_t es = p->esize;
  if (p->rank == 0) {
    memcpy(out, c[0] ? x : y, (size_t)es);
    return EK_OK;
  }
  const int32_t last = p->rank - 1, n = p->shape[last];
  const int32_t sc = p->stride[0][last], sx = p->stride[1][last], sy = p->stride[2][last];
  int32_t idx[EK_MAX_DIMS] = {0};
  int32_t oc = 0, ox = 0, oy = 0, oo = 0;
  for (;;) {
    for (int32_t i = 0; i < n; ++i) { /* element size 1 or 2: byte copies keep any alignment legal */
      const uint8_t *src = c[oc + i * sc] ? x + (size_t)(ox + i * sx) * es : y + (size_t)(oy + i * sy) * es;
      uint8_t *dst = out + (size_t)(oo + i) * es;
      dst[0] = src[0];
      if (es == 2) dst[1] = src[1];
    }
    oo += n;
    int32_t d = last - 1;
    for (; d >= 0; --d) {
      oc += p->stride[0][d];
      ox += p->stride[1][d];
      oy += p->stride[2][d];
      if (++idx[d] < p->shape[d]) break;
      oc -= p->stride[0][d] * p->shape[d];
      ox -= p->stride[1][d] * p->shape[d];
      oy -= p->stride[2][d] * p->shape[d];
      idx[d] = 0;
    }
    if (d < 0) return EK_OK;
  }
}

static int select_overlap(const ek_context *ctx, const ek_op *op, int input_index, int32_t *d_max) {
  const ek_tensor *t = ek_input((ek_context *)ctx, op, input_index), *out = ek_output((ek_context *)ctx, op, 0);
  if (input_index < 0 || input_index > 2 || !t || !out || !ek_same_shape(t, out) || t->bytes != out->bytes)
    return EK_OVERLAP_NONE;
  *d_max = 0;
  return EK_OVERLAP_UPTO;
}

const ek_kernel ek_kernel_select = {EK_OP_SELECT, "SELECT", EK_HOST_FN(select_persistent_bytes), 0, EK_HOST_FN(select_prepare),
                                    select_eval, EK_HOST_FN(select_overlap)};
const ek_kernel ek_kernel_select_v2 = {EK_OP_SELECT_V2, "SELECT_V2", EK_HOST_FN(select_persistent_bytes), 0,
                                       EK_HOST_FN(select_prepare), select_eval, EK_HOST_FN(select_overlap)};
