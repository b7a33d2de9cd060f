/* edgekit-op: ARG_MAX | types: int8 | versions: 1-3 | fast path: none */
/* edgekit-op: ARG_MIN | types: int8 | versions: 1-3 | fast path: none */
/* ARG_MAX / ARG_MIN over one axis: the index (INT32 or INT64 output, as the output tensor says) of the largest /
 * smallest raw value along the axis, the first one on ties.
 *
 * As LiteRT BUILTIN_REF: tflite/kernels/arg_min_max.cc (axis from a constant int32/int64 tensor of one element,
 * negative axes wrap, output shape = input shape without the axis) and reference_ops::ArgMinMax
 * (kernels/internal/reference/arg_min_max.h: a strict comparison against the running best, so the first index wins).
 * The raw int8 values are compared (their order is the order of the real values). LiteRT has no int16 ARG_MAX.
 */
#include <string.h>

#include "ek_kernels.h"

typedef struct argmm_params {
  int32_t outer, axis_size, inner; /* input = [outer, axis_size, inner] */
  int32_t out64;                   /* output INT64 (else INT32) */
  int32_t is_max;
} argmm_params;

static size_t argmm_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(argmm_params);
}

#define ARG_MSG(op, tail) ((op)->opcode == EK_OP_ARG_MAX ? "ARG_MAX " tail : "ARG_MIN " tail)

static ek_status argmm_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 2 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, ARG_MSG(op, "needs 2 inputs and 1 output"));
  const ek_tensor *in = ek_input(ctx, op, 0), *axis = ek_input(ctx, op, 1), *out = ek_output(ctx, op, 0);
  if (!in || !axis || !out) return ek_fail(ctx, op, EK_ERR_MODEL, ARG_MSG(op, "input, axis or output tensor missing"));
  if (in->type != EK_INT8) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, ARG_MSG(op, "supports int8 inputs only"));
  if (out->type != EK_INT32 && out->type != EK_INT64) return ek_fail(ctx, op, EK_ERR_TYPE, ARG_MSG(op, "output must be int32 or int64"));
  if (axis->type != EK_INT32 && axis->type != EK_INT64) return ek_fail(ctx, op, EK_ERR_TYPE, ARG_MSG(op, "axis tensor must be int32 or int64"));
  if (!axis->is_constant || !axis->data) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, ARG_MSG(op, "axis tensor must be constant"));
  if (ek_num_elements(axis) != 1 || axis->bytes != ek_type_size(axis->type))
    return ek_fail(ctx, op, EK_ERR_SHAPE, ARG_MSG(op, "axis tensor must hold one value"));
  if (in->ndim < 1 || in->ndim > EK_MAX_DIMS) return ek_fail(ctx, op, EK_ERR_SHAPE, ARG_MSG(op, "input must have 1 to 6 dimensions"));
  int64_t a64;
  if (axis->type == EK_INT32) {
    int32_t v;
    memcpy(&v, axis->data, 4); /* the model buffer may be unaligned */
    a64 = v;
  } else {
    int64_t v;
    memcpy(&v, axis->data, 8);
    a64 = v;
  }
  if (a64 < 0) a64 += in->ndim;
  if (a64 < 0 || a64 >= in->ndim) return ek_fail(ctx, op, EK_ERR_SHAPE, ARG_MSG(op, "axis out of range"));
  const int32_t a = (int32_t)a64;
  if (out->ndim != in->ndim - 1) return ek_fail(ctx, op, EK_ERR_SHAPE, ARG_MSG(op, "output must have the input's shape without the axis"));
  int64_t outer = 1, inner = 1;
  for (int32_t d = 0, k = 0; d < in->ndim; ++d) {
    if (in->dims[d] < 0) return ek_fail(ctx, op, EK_ERR_SHAPE, ARG_MSG(op, "input has a negative dimension"));
    if (d == a) continue;
    if (out->dims[k++] != in->dims[d]) return ek_fail(ctx, op, EK_ERR_SHAPE, ARG_MSG(op, "output must have the input's shape without the axis"));
    if (d < a) outer *= in->dims[d];
    else inner *= in->dims[d];
  }
  const int64_t total = outer * inner * in->dims[a];
  if (total > INT32_MAX || (int64_t)in->bytes != total ||
      (int64_t)out->bytes != outer * inner * ek_type_size(out->type))
    return ek_fail(ctx, op, EK_ERR_MODEL, ARG_MSG(op, "tensor size does not match its shape"));
  if (in->dims[a] == 0 && outer * inner > 0)
    return ek_fail(ctx, op, EK_ERR_SHAPE, ARG_MSG(op, "axis has no elements"));
  argmm_params *p = (argmm_params *)op->user_data;
  p->outer = (int32_t)outer;
  p->axis_size = in->dims[a];
  p->inner = (int32_t)inner;
  p->out64 = out->type == EK_INT64;
  p->is_max = op->opcode == EK_OP_ARG_MAX;
  return EK_OK;
}

static ek_status argmm_eval(ek_context *ctx, ek_op *op) {
  const argmm_params *p = (const argmm_params *)op->user_data;
  const int8_t *x = (const int8_t *)ek_input(ctx, op, 0)->data;
  void *y = ek_output(ctx, op, 0)->data;
  const int32_t n = p->axis_size, inner = p->inner;
  for (int32_t o = 0; o < p->outer; ++o) {
    for (int32_t j = 0; j < inner; ++j) {
      const int32_t base = o * n * inner + j;
      int32_t best = x[base], at = 0;
      for (int32_t i = 1; i < n; ++i) {
        const int32_t v = x[base + i * inner];
        if (p->is_max ? v > best : v < best) {
          best = v;
          at = i;
        }
      }
      const int32_t k = o * inner + j;
      if (p->out64) ((int64_t *)y)[k] = at;
      else ((int32_t *)y)[k] = at;
    }
  }
  return EK_OK;
}

const ek_kernel ek_kernel_arg_max = {EK_OP_ARG_MAX, "ARG_MAX", EK_HOST_FN(argmm_persistent_bytes), 0, EK_HOST_FN(argmm_prepare),
                                     argmm_eval, 0};
const ek_kernel ek_kernel_arg_min = {EK_OP_ARG_MIN, "ARG_MIN", EK_HOST_FN(argmm_persistent_bytes), 0, EK_HOST_FN(argmm_prepare),
                                     argmm_eval, 0};
