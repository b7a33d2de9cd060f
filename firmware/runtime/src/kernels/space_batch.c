/* SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND (4-D NHWC) and BROADCAST_TO: data movement, any element type of 1-8 bytes.
 *
 * Bit-exact with LiteRT BUILTIN_REF:
 *  - SPACE_TO_BATCH_ND: tflite/kernels/space_to_batch_nd.cc + internal/reference/space_to_batch_nd.h (output batch
 *    out_b takes input batch out_b % N at block offset (shift_h, shift_w) = ((out_b / N) / bw, (out_b / N) % bw);
 *    padded pixels are memset to the output zero point byte, as the reference does for every type).
 *  - BATCH_TO_SPACE_ND: tflite/kernels/batch_to_space_nd.cc + internal/reference/batch_to_space_nd.h (input batch b
 *    goes to output batch b % N_out at offset b / N_out = (oh, ow) in the block; cropped pixels are dropped).
 *  block_shape a constant int32 [2] (>= 1), paddings / crops a constant int32 [2, 2] (>= 0); the 3-D forms are
 *  refused (LiteRT extends them differently for the two ops).
 *  - BROADCAST_TO: tflite/kernels/broadcast_to.cc + internal/reference/broadcast_to.h (NumPy rules: the input's
 *    dims, right-aligned, are 1 or equal to the target's); shape a constant int32/int64 vector equal to the
 *    output's shape. One strided walk with stride 0 on the broadcast dims (kernels/ek_strided.h).
 */
/* edgekit-op: SPACE_TO_BATCH_ND | types: int8, int16, int32, float32, uint8, int64 | versions: 1-4 | fast path: none */
/* edgekit-op: BATCH_TO_SPACE_ND | types: int8, int16, int32, float32, uint8, int64 | versions: 1-4 | fast path: none */
/* edgekit-op: BROADCAST_TO | types: int8, int16, int32, float32, uint8, bool, int64 | versions: 2-3 | fast path: none */
#include <stdint.h>
#include <string.h>

#include "ek_kernels.h"
#include "ek_strided.h"

typedef struct space_batch_params {
  int32_t in_n, in_h, in_w, out_n, out_h, out_w;
  int32_t bh, bw, top, left; /* padding or crops */
  int32_t pixel;             /* bytes per pixel: depth * element size */
  int32_t pad_byte;          /* SPACE_TO_BATCH_ND: low byte of the output zero point */
} space_batch_params;

static size_t space_batch_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(space_batch_params);
}

static ek_status space_batch_prepare(ek_context *ctx, ek_op *op) {
  const int to_batch = op->opcode == EK_OP_SPACE_TO_BATCH_ND;
  if (op->num_inputs != 3 || op->num_outputs != 1)
    return ek_fail(ctx, op, EK_ERR_MODEL, "SPACE_TO_BATCH_ND/BATCH_TO_SPACE_ND need 3 inputs (input, block_shape, paddings/crops) and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0), *out = ek_output(ctx, op, 0), *bs = ek_input(ctx, op, 1), *pc = ek_input(ctx, op, 2);
  if (!in || !out || !bs || !pc) return ek_fail(ctx, op, EK_ERR_MODEL, "SPACE_TO_BATCH_ND/BATCH_TO_SPACE_ND tensor missing");
  if (in->type != out->type) return ek_fail(ctx, op, EK_ERR_TYPE, "SPACE_TO_BATCH_ND/BATCH_TO_SPACE_ND input and output types differ");
  const int32_t elem = ek_type_size(in->type);
  if (elem == 0) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "SPACE_TO_BATCH_ND/BATCH_TO_SPACE_ND tensor type not supported");
  if (in->ndim != 4 || out->ndim != 4) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "SPACE_TO_BATCH_ND/BATCH_TO_SPACE_ND support 4-D NHWC tensors");
  int32_t block[2], pads[4];
  if (bs->ndim != 1 || ek_const_i32(bs, block, 2) != 2)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "block_shape must be a constant int32 vector of 2 entries");
  if (!pc->is_constant || pc->type != EK_INT32 || pc->ndim != 2 || pc->dims[0] != 2 || pc->dims[1] != 2 || pc->bytes != 16 || !pc->data)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "paddings/crops must be a constant int32 [2, 2] tensor");
  memcpy(pads, pc->data, 16);
  if (block[0] < 1 || block[1] < 1 || block[0] > 65535 || block[1] > 65535)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "block_shape entries must be 1..65535");
  for (int k = 0; k < 4; ++k)
    if (pads[k] < 0 || pads[k] > 65535) return ek_fail(ctx, op, EK_ERR_SHAPE, "paddings/crops must be 0..65535");
  const int64_t bb = (int64_t)block[0] * block[1];
  int64_t want[4];
  if (to_batch) {
    const int64_t ph = (int64_t)in->dims[1] + pads[0] + pads[1], pw = (int64_t)in->dims[2] + pads[2] + pads[3];
    if (ph % block[0] != 0 || pw % block[1] != 0)
      return ek_fail(ctx, op, EK_ERR_SHAPE, "SPACE_TO_BATCH_ND padded height/width not divisible by block_shape");
    want[0] = in->dims[0] * bb, want[1] = ph / block[0], want[2] = pw / block[1], want[3] = in->dims[3];
  } else {
    if (in->dims[0] % bb != 0) return ek_fail(ctx, op, EK_ERR_SHAPE, "BATCH_TO_SPACE_ND batch not divisible by the block size");
    want[0] = in->dims[0] / bb, want[1] = (int64_t)in->dims[1] * block[0] - pads[0] - pads[1];
    want[2] = (int64_t)in->dims[2] * block[1] - pads[2] - pads[3], want[3] = in->dims[3];
    if (want[1] < 0 || want[2] < 0) return ek_fail(ctx, op, EK_ERR_SHAPE, "BATCH_TO_SPACE_ND crops exceed the output");
  }
  for (int d = 0; d < 4; ++d)
    if (out->dims[d] != want[d]) return ek_fail(ctx, op, EK_ERR_SHAPE, "SPACE_TO_BATCH_ND/BATCH_TO_SPACE_ND output shape differs from the computed one");
  const int64_t in_n = (int64_t)in->dims[0] * in->dims[1] * in->dims[2] * in->dims[3];
  const int64_t out_n = (int64_t)out->dims[0] * out->dims[1] * out->dims[2] * out->dims[3];
  if (in_n * elem != in->bytes || out_n * elem != out->bytes)
    return ek_fail(ctx, op, EK_ERR_MODEL, "SPACE_TO_BATCH_ND/BATCH_TO_SPACE_ND tensor sizes do not match their shapes");
  space_batch_params *p = (space_batch_params *)op->user_data;
  p->in_n = in->dims[0], p->in_h = in->dims[1], p->in_w = in->dims[2];
  p->out_n = out->dims[0], p->out_h = out->dims[1], p->out_w = out->dims[2];
  p->bh = block[0], p->bw = block[1], p->top = pads[0], p->left = pads[2];
  p->pixel = in->dims[3] * elem;
  p->pad_byte = (int32_t)(uint8_t)out->zero_point;
  return EK_OK;
}

static ek_status space_to_batch_eval(ek_context *ctx, ek_op *op) {
  const space_batch_params *p = (const space_batch_params *)op->user_data;
  const uint8_t *x = (const uint8_t *)ek_input(ctx, op, 0)->data;
  uint8_t *y = (uint8_t *)ek_output(ctx, op, 0)->data;
  const size_t pixel = (size_t)p->pixel;
  for (int32_t ob = 0; ob < p->out_n; ++ob) {
    const int32_t ib = ob % p->in_n, shift_w = (ob / p->in_n) % p->bw, shift_h = (ob / p->in_n) / p->bw;
    for (int32_t oy = 0; oy < p->out_h; ++oy) {
      const int64_t iy = (int64_t)oy * p->bh + shift_h - p->top;
      for (int32_t ox = 0; ox < p->out_w; ++ox, y += pixel) {
        const int64_t ix = (int64_t)ox * p->bw + shift_w - p->left;
        if (iy < 0 || iy >= p->in_h || ix < 0 || ix >= p->in_w) {
          if (pixel) memset(y, p->pad_byte, pixel);
        } else {
          memcpy(y, x + (((size_t)ib * (size_t)p->in_h + (size_t)iy) * (size_t)p->in_w + (size_t)ix) * pixel, pixel);
        }
      }
    }
  }
  return EK_OK;
}

static ek_status batch_to_space_eval(ek_context *ctx, ek_op *op) {
  const space_batch_params *p = (const space_batch_params *)op->user_data;
  const uint8_t *x = (const uint8_t *)ek_input(ctx, op, 0)->data;
  uint8_t *y = (uint8_t *)ek_output(ctx, op, 0)->data;
  const size_t pixel = (size_t)p->pixel;
  if (p->out_n == 0) return EK_OK;
  for (int32_t ib = 0; ib < p->in_n; ++ib) {
    const int32_t ob = ib % p->out_n, off = ib / p->out_n;
    for (int32_t iy = 0; iy < p->in_h; ++iy) {
      const int64_t oy = (int64_t)iy * p->bh + off / p->bw - p->top;
      if (oy < 0 || oy >= p->out_h) continue;
      for (int32_t ix = 0; ix < p->in_w; ++ix) {
        const int64_t ox = (int64_t)ix * p->bw + off % p->bw - p->left;
        if (ox < 0 || ox >= p->out_w) continue;
        memcpy(y + (((size_t)ob * (size_t)p->out_h + (size_t)oy) * (size_t)p->out_w + (size_t)ox) * pixel,
               x + (((size_t)ib * (size_t)p->in_h + (size_t)iy) * (size_t)p->in_w + (size_t)ix) * pixel, pixel);
      }
    }
  }
  return EK_OK;
}

/* ---- BROADCAST_TO -------------------------------------------------------------------------------------------- */

static size_t broadcast_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(ek_strided);
}

static ek_status broadcast_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 2 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, "BROADCAST_TO needs 2 inputs (input, shape) and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0), *shape = ek_input(ctx, op, 1), *out = ek_output(ctx, op, 0);
  if (!in || !shape || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "BROADCAST_TO input, shape or output tensor missing");
  if (in->type != out->type) return ek_fail(ctx, op, EK_ERR_TYPE, "BROADCAST_TO input and output types differ");
  const int32_t elem = ek_type_size(in->type);
  if (elem == 0) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "BROADCAST_TO tensor type not supported");
  if (!shape->is_constant || shape->ndim != 1 || shape->dims[0] != out->ndim || (shape->type != EK_INT32 && shape->type != EK_INT64) ||
      shape->bytes != ek_type_size(shape->type) * out->ndim || (shape->bytes > 0 && !shape->data))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "BROADCAST_TO shape must be a constant int32/int64 vector of the output's rank");
  for (int32_t d = 0; d < out->ndim; ++d) {
    int64_t v;
    if (shape->type == EK_INT32) { int32_t v32; memcpy(&v32, (const uint8_t *)shape->data + 4 * d, 4); v = v32; }
    else memcpy(&v, (const uint8_t *)shape->data + 8 * d, 8);
    if (v != out->dims[d]) return ek_fail(ctx, op, EK_ERR_SHAPE, "BROADCAST_TO shape differs from the output's shape");
  }
  if (in->ndim > out->ndim) return ek_fail(ctx, op, EK_ERR_SHAPE, "BROADCAST_TO input has more dimensions than the target");
  int64_t in_strides[EK_MAX_DIMS], steps[EK_MAX_DIMS];
  if (!ek_elem_strides(in, in_strides)) return ek_fail(ctx, op, EK_ERR_SHAPE, "BROADCAST_TO input too large");
  const int32_t lead = out->ndim - in->ndim;
  for (int32_t d = 0; d < out->ndim; ++d) {
    if (d < lead) { steps[d] = 0; continue; }
    const int32_t id = in->dims[d - lead];
    if (id != out->dims[d] && id != 1) return ek_fail(ctx, op, EK_ERR_SHAPE, "BROADCAST_TO input dims are not 1 or the target's");
    steps[d] = id == 1 ? 0 : in_strides[d - lead];
  }
  if (!ek_strided_build((ek_strided *)op->user_data, elem, out->ndim, out->dims, steps, 0, in->bytes, out->bytes))
    return ek_fail(ctx, op, EK_ERR_SHAPE, "BROADCAST_TO tensor sizes do not match their shapes");
  return EK_OK;
}

static ek_status broadcast_eval(ek_context *ctx, ek_op *op) {
  const ek_tensor *in = ek_input(ctx, op, 0);
  ek_tensor *out = ek_output(ctx, op, 0);
  ek_strided_copy((const ek_strided *)op->user_data, (uint8_t *)out->data, (const uint8_t *)in->data);
  return EK_OK;
}

const ek_kernel ek_kernel_space_to_batch_nd = {EK_OP_SPACE_TO_BATCH_ND, "SPACE_TO_BATCH_ND", EK_HOST_FN(space_batch_persistent_bytes), 0,
                                               EK_HOST_FN(space_batch_prepare), space_to_batch_eval, 0};
const ek_kernel ek_kernel_batch_to_space_nd = {EK_OP_BATCH_TO_SPACE_ND, "BATCH_TO_SPACE_ND", EK_HOST_FN(space_batch_persistent_bytes), 0,
                                               EK_HOST_FN(space_batch_prepare), batch_to_space_eval, 0};
const ek_kernel ek_kernel_broadcast_to = {EK_OP_BROADCAST_TO, "BROADCAST_TO", EK_HOST_FN(broadcast_persistent_bytes), 0,
                                          EK_HOST_FN(broadcast_prepare), broadcast_eval, 0};
