/* MIRROR_PAD, REFLECT and SYMMETRIC, any element type of 1-8 bytes, up to 6 dimensions.
 *
 * Bit-exact with LiteRT BUILTIN_REF (tflite/kernels/mirror_pad.cc, GetInputDimension: offset 1 for REFLECT, 0 for
 * SYMMETRIC; an output index left of the input maps to (left + offset - 1) - min(i, left - 1), one right of it to
 * (size - 1 - offset) - min(i - left - size, size - 1 - offset)). Paddings: a constant int32/int64 [rank, 2]
 * tensor, each entry in [0, size - offset] (what TensorFlow allows). Values are copied, never rescaled.
 */
/* edgekit-op: MIRROR_PAD | types: int8, int16, int32, float32, uint8, int64 | versions: 1-3 | fast path: none */
#include <stdint.h>
#include <string.h>

#include "ek_kernels.h"

typedef struct mirror_pad_params {
  int32_t rank, elem, offset;
  int32_t in_dims[EK_MAX_DIMS], out_dims[EK_MAX_DIMS], left[EK_MAX_DIMS];
} mirror_pad_params;

static size_t mirror_pad_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(mirror_pad_params);
}

static ek_status mirror_pad_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 2 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, "MIRROR_PAD needs 2 inputs (input, paddings) and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0), *pads = ek_input(ctx, op, 1), *out = ek_output(ctx, op, 0);
  if (!in || !pads || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "MIRROR_PAD input, paddings or output tensor missing");
  if (in->type != out->type) return ek_fail(ctx, op, EK_ERR_TYPE, "MIRROR_PAD input and output types differ");
  const int32_t elem = ek_type_size(in->type);
  if (elem == 0) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "MIRROR_PAD tensor type not supported");
  const int32_t rank = in->ndim, w = pads->type == EK_INT32 ? 4 : pads->type == EK_INT64 ? 8 : 0;
  if (w == 0 || !pads->is_constant || pads->ndim != 2 || pads->dims[0] != rank || pads->dims[1] != 2 ||
      pads->bytes != 2 * rank * w || (rank > 0 && !pads->data))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "MIRROR_PAD paddings must be a constant int32/int64 [rank, 2] tensor");
  if (out->ndim != rank) return ek_fail(ctx, op, EK_ERR_SHAPE, "MIRROR_PAD output rank differs from the input's");
  mirror_pad_params *p = (mirror_pad_params *)op->user_data;
  memset(p, 0, sizeof *p);
  p->rank = rank, p->elem = elem, p->offset = (op->params.flags & EK_FLAG_MIRROR_SYMMETRIC) ? 0 : 1;
  int64_t in_n = 1, out_n = 1;
  for (int32_t d = 0; d < rank; ++d) {
    int64_t lr[2];
    for (int k = 0; k < 2; ++k) {
      if (w == 4) { int32_t v; memcpy(&v, (const uint8_t *)pads->data + 4 * (2 * d + k), 4); lr[k] = v; }
      else memcpy(&lr[k], (const uint8_t *)pads->data + 8 * (2 * d + k), 8);
    }
    const int64_t size = in->dims[d];
    if (lr[0] < 0 || lr[1] < 0 || lr[0] > size - p->offset || lr[1] > size - p->offset || size < 1)
      return ek_fail(ctx, op, EK_ERR_SHAPE, "MIRROR_PAD paddings must be in [0, dim] (SYMMETRIC) or [0, dim - 1] (REFLECT)");
    if (out->dims[d] != size + lr[0] + lr[1]) return ek_fail(ctx, op, EK_ERR_SHAPE, "MIRROR_PAD output shape differs from input + paddings");
    p->in_dims[d] = (int32_t)size, p->out_dims[d] = out->dims[d], p->left[d] = (int32_t)lr[0];
    in_n *= size, out_n *= out->dims[d];
  }
  if (in_n * elem != in->bytes || out_n * elem != out->bytes) return ek_fail(ctx, op, EK_ERR_MODEL, "MIRROR_PAD tensor sizes do not match their shapes");
  return EK_OK;
}

/* GetInputDimension (mirror_pad.cc). */
static int32_t source_index(int32_t i, int32_t left, int32_t size, int32_t offset) {
  if (i < left) {
    const int32_t original = left + offset - 1;
    return original - (i < original - offset ? i : original - offset);
  }
  i -= left;
  if (i >= size) {
    i -= size;
    const int32_t original = size - (1 + offset);
    return original - (i < original ? i : original);
  }
  return i;
}

static ek_status mirror_pad_eval(ek_context *ctx, ek_op *op) {
  const mirror_pad_params *p = (const mirror_pad_params *)op->user_data;
  const uint8_t *x = (const uint8_t *)ek_input(ctx, op, 0)->data;
  uint8_t *y = (uint8_t *)ek_output(ctx, op, 0)->data;
  int32_t idx[EK_MAX_DIMS] = {0};
  int64_t total = 1;
  for (int32_t d = 0; d < p->rank; ++d) total *= p->out_dims[d];
  for (int64_t n = 0; n < total; ++n) {
    int64_t src = 0;
    for (int32_t d = 0; d < p->rank; ++d) src = src * p->in_dims[d] + source_index(idx[d], p->left[d], p->in_dims[d], p->offset);
    memcpy(y, x + (size_t)src * (size_t)p->elem, (size_t)p->elem);
    y += p->elem;
    for (int32_t d = p->rank - 1; d >= 0; --d) {
      if (++idx[d] < p->out_dims[d]) break;
      idx[d] = 0;
    }
  }
  return EK_OK;
}

const ek_kernel ek_kernel_mirror_pad = {EK_OP_MIRROR_PAD, "MIRROR_PAD", EK_HOST_FN(mirror_pad_persistent_bytes), 0,
                                        EK_HOST_FN(mirror_pad_prepare), mirror_pad_eval, 0};
