/* DEPTH_TO_SPACE and SPACE_TO_DEPTH: NHWC data movement by blocks, any element type of 1, 2, 4 or 8 bytes.
 *
 * Bit-exact with LiteRT BUILTIN_REF (tflite/kernels/depth_to_space.cc + internal/reference/depth_to_space.h,
 * tflite/kernels/space_to_depth.cc + internal/reference/space_to_depth.h): 4-D input, block_size b >= 1;
 * DEPTH_TO_SPACE: output[n, h*b + by, w*b + bx, c] = input[n, h, w, (by*b + bx)*C_out + c], C_in = b*b*C_out;
 * SPACE_TO_DEPTH: output[n, h, w, (by*b + bx)*C + c] = input[n, h*b + by, w*b + bx, c], H and W divisible by b.
 * Both are one strided walk over the output in order (kernels/ek_strided.h: 6 dimensions n, h, by|w, ...).
 */
/* edgekit-op: DEPTH_TO_SPACE | types: int8, int16, int32, float32, uint8, int64 | versions: 1-2 | fast path: none */
/* edgekit-op: SPACE_TO_DEPTH | types: int8, int16, int32, float32, uint8, int64 | versions: 1-2 | fast path: none */
#include <stdint.h>
#include <string.h>

#include "ek_kernels.h"
#include "ek_strided.h"

static size_t space_depth_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(ek_strided);
}

static ek_status space_depth_prepare(ek_context *ctx, ek_op *op) {
  const int to_space = op->opcode == EK_OP_DEPTH_TO_SPACE;
  if (op->num_inputs != 1 || op->num_outputs != 1)
    return ek_fail(ctx, op, EK_ERR_MODEL, "DEPTH_TO_SPACE/SPACE_TO_DEPTH needs 1 input and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0), *out = ek_output(ctx, op, 0);
  if (!in || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "DEPTH_TO_SPACE/SPACE_TO_DEPTH input or output tensor missing");
  if (in->type != out->type) return ek_fail(ctx, op, EK_ERR_TYPE, "DEPTH_TO_SPACE/SPACE_TO_DEPTH input and output types differ");
  const int32_t elem = ek_type_size(in->type);
  if (elem == 0) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "DEPTH_TO_SPACE/SPACE_TO_DEPTH tensor type not supported");
  if (in->ndim != 4 || out->ndim != 4) return ek_fail(ctx, op, EK_ERR_SHAPE, "DEPTH_TO_SPACE/SPACE_TO_DEPTH needs 4-D NHWC tensors");
  const int32_t b = op->params.block_size;
  if (b < 1) return ek_fail(ctx, op, EK_ERR_SHAPE, "DEPTH_TO_SPACE/SPACE_TO_DEPTH block_size must be >= 1");
  const int32_t N = in->dims[0], H = in->dims[1], W = in->dims[2], C = in->dims[3];
  int32_t dims[6];
  int64_t st[6];
  if (to_space) {
    if (C % (b * b) != 0) return ek_fail(ctx, op, EK_ERR_SHAPE, "DEPTH_TO_SPACE input depth is not divisible by block_size^2");
    const int32_t co = C / (b * b);
    if (out->dims[0] != N || out->dims[1] != (int64_t)H * b || out->dims[2] != (int64_t)W * b || out->dims[3] != co)
      return ek_fail(ctx, op, EK_ERR_SHAPE, "DEPTH_TO_SPACE output shape is not [N, H*b, W*b, C/(b*b)]");
    /* output order n, h, by, w, bx, c */
    dims[0] = N, dims[1] = H, dims[2] = b, dims[3] = W, dims[4] = b, dims[5] = co;
    st[0] = (int64_t)H * W * C, st[1] = (int64_t)W * C, st[2] = (int64_t)b * co, st[3] = C, st[4] = co, st[5] = 1;
  } else {
    if (H % b != 0 || W % b != 0) return ek_fail(ctx, op, EK_ERR_SHAPE, "SPACE_TO_DEPTH height and width must be divisible by block_size");
    const int32_t ho = H / b, wo = W / b;
    if (out->dims[0] != N || out->dims[1] != ho || out->dims[2] != wo || out->dims[3] != (int64_t)C * b * b)
      return ek_fail(ctx, op, EK_ERR_SHAPE, "SPACE_TO_DEPTH output shape is not [N, H/b, W/b, C*b*b]");
    /* output order n, h, w, by, bx, c */
    dims[0] = N, dims[1] = ho, dims[2] = wo, dims[3] = b, dims[4] = b, dims[5] = C;
    st[0] = (int64_t)H * W * C, st[1] = (int64_t)b * W * C, st[2] = (int64_t)b * C, st[3] = (int64_t)W * C, st[4] = C, st[5] = 1;
  }
  if (!ek_strided_build((ek_strided *)op->user_data, elem, 6, dims, st, 0, in->bytes, out->bytes))
    return ek_fail(ctx, op, EK_ERR_SHAPE, "DEPTH_TO_SPACE/SPACE_TO_DEPTH tensor sizes do not match their shapes");
  return EK_OK;
}

static ek_status space_depth_eval(ek_context *ctx, ek_op *op) {
  const ek_tensor *in = ek_input(ctx, op, 0);
  ek_tensor *out = ek_output(ctx, op, 0);
  ek_strided_copy((const ek_strided *)op->user_data, (uint8_t *)out->data, (const uint8_t *)in->data);
  return EK_OK;
}

const ek_kernel ek_kernel_depth_to_space = {EK_OP_DEPTH_TO_SPACE, "DEPTH_TO_SPACE", EK_HOST_FN(space_depth_persistent_bytes), 0,
                                            EK_HOST_FN(space_depth_prepare), space_depth_eval, 0};
const ek_kernel ek_kernel_space_to_depth = {EK_OP_SPACE_TO_DEPTH, "SPACE_TO_DEPTH", EK_HOST_FN(space_depth_persistent_bytes), 0,
                                            EK_HOST_FN(space_depth_prepare), space_depth_eval, 0};
