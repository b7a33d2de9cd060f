/* RESIZE_NEAREST_NEIGHBOR (any element type of 1, 2, 4 or 8 bytes) and RESIZE_BILINEAR (int8), NHWC.
 *
 * Bit-exact with LiteRT BUILTIN_REF:
 *  - RESIZE_NEAREST_NEIGHBOR: tflite/kernels/resize_nearest_neighbor.cc + internal/reference/resize_nearest_neighbor.h
 *    (GetNearestNeighbor: float scale = in / out, or (in - 1) / (out - 1) with align_corners and out > 1;
 *    offset 0.5 with half_pixel_centers; index = round((x + offset) * scale) with align_corners, else
 *    floor(...), then min(., in - 1) and, with half_pixel_centers, max(., 0)). The pixel is copied.
 *  - RESIZE_BILINEAR int8: tflite/kernels/resize_bilinear.cc + internal/reference/resize_bilinear.h, the int8
 *    overload (integer arithmetic in 1/1024 units: scale_10 = (1024 * in + out / 2) / out, or with align_corners
 *    (1024 * (in - 1) + (out - 1) / 2) / (out - 1); half_pixel_centers: x * scale_10 + scale_10 / 2 - 512;
 *    lower = max(v / 1024, 0), upper = min((v + 1023) / 1024, in - 1), C division truncating toward zero; the four
 *    64-bit weighted terms summed and rounded half away from zero by 2^20). No requantization (LiteRT does none).
 *    align_corners together with half_pixel_centers is refused, as LiteRT refuses it.
 * The size input must be a constant int32 [out_height, out_width] equal to the output's dims 1 and 2; batch and
 * depth pass through.
 */
/* edgekit-op: RESIZE_NEAREST_NEIGHBOR | types: int8, int16, int32, float32, uint8, int64 | versions: 1-4 | fast path: none */
/* edgekit-op: RESIZE_BILINEAR | types: int8 | versions: 1-4 | fast path: none */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ek_kernels.h"
#include "ek_strided.h"

#define RESIZE_MAX_EXTENT (1 << 20) /* keeps the 1/1024-unit positions inside int32 */

typedef struct resize_params {
  int32_t batches, in_h, in_w, depth, out_h, out_w, elem;
} resize_params;

static size_t resize_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(resize_params);
}

static ek_status resize_prepare(ek_context *ctx, ek_op *op) {
  const int bilinear = op->opcode == EK_OP_RESIZE_BILINEAR;
  if (op->num_inputs != 2 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, "RESIZE needs 2 inputs (input, size) and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0), *out = ek_output(ctx, op, 0);
  if (!in || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "RESIZE input or output tensor missing");
  if (in->type != out->type) return ek_fail(ctx, op, EK_ERR_TYPE, "RESIZE input and output types differ");
  const int32_t elem = ek_type_size(in->type);
  if (elem == 0 || (bilinear && in->type != EK_INT8))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, bilinear ? "RESIZE_BILINEAR supports int8 tensors" : "RESIZE_NEAREST_NEIGHBOR tensor type not supported");
  if (in->ndim != 4 || out->ndim != 4) return ek_fail(ctx, op, EK_ERR_SHAPE, "RESIZE needs 4-D NHWC tensors");
  int32_t size[2];
  const ek_tensor *sz = ek_input(ctx, op, 1);
  if (!sz || sz->ndim != 1 || ek_const_i32(sz, size, 2) != 2)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "RESIZE size must be a constant int32 vector [height, width]");
  if (bilinear && (op->params.flags & EK_FLAG_ALIGN_CORNERS) && (op->params.flags & EK_FLAG_HALF_PIXEL_CENTERS))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "RESIZE_BILINEAR with both align_corners and half_pixel_centers (LiteRT refuses it)");
  if (size[0] < 1 || size[1] < 1 || out->dims[1] != size[0] || out->dims[2] != size[1] || out->dims[0] != in->dims[0] ||
      out->dims[3] != in->dims[3])
    return ek_fail(ctx, op, EK_ERR_SHAPE, "RESIZE output shape is not [N, size[0], size[1], C]");
  for (int32_t d = 1; d <= 2; ++d)
    if (in->dims[d] < 1 || in->dims[d] > RESIZE_MAX_EXTENT || out->dims[d] > RESIZE_MAX_EXTENT)
      return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "RESIZE height and width must be 1..1048576");
  const int64_t in_n = (int64_t)in->dims[0] * in->dims[1] * in->dims[2] * in->dims[3];
  const int64_t out_n = (int64_t)out->dims[0] * out->dims[1] * out->dims[2] * out->dims[3];
  if (in_n * elem != in->bytes || out_n * elem != out->bytes) return ek_fail(ctx, op, EK_ERR_MODEL, "RESIZE tensor sizes do not match their shapes");
  resize_params *p = (resize_params *)op->user_data;
  p->batches = in->dims[0], p->in_h = in->dims[1], p->in_w = in->dims[2], p->depth = in->dims[3];
  p->out_h = out->dims[1], p->out_w = out->dims[2], p->elem = elem;
  return EK_OK;
}

/* GetNearestNeighbor (reference/resize_nearest_neighbor.h). */
static int32_t nearest(int32_t x, int32_t in_size, int32_t out_size, int align, int half) {
  const float scale = (align && out_size > 1) ? (float)(in_size - 1) / (float)(out_size - 1) : (float)in_size / (float)out_size;
  const float offset = half ? 0.5f : 0.0f;
  const float v = ((float)x + offset) * scale;
  int32_t r = align ? (int32_t)roundf(v) : (int32_t)floorf(v);
  if (r > in_size - 1) r = in_size - 1;
  if (half && r < 0) r = 0;
  return r;
}

static ek_status resize_nearest_eval(ek_context *ctx, ek_op *op) {
  const resize_params *p = (const resize_params *)op->user_data;
  const uint8_t *x = (const uint8_t *)ek_input(ctx, op, 0)->data;
  uint8_t *y = (uint8_t *)ek_output(ctx, op, 0)->data;
  const int align = (op->params.flags & EK_FLAG_ALIGN_CORNERS) != 0, half = (op->params.flags & EK_FLAG_HALF_PIXEL_CENTERS) != 0;
  const size_t pixel = (size_t)p->depth * (size_t)p->elem, row = (size_t)p->in_w * pixel;
  for (int32_t b = 0; b < p->batches; ++b) {
    const uint8_t *img = x + (size_t)b * (size_t)p->in_h * row;
    for (int32_t oy = 0; oy < p->out_h; ++oy) {
      const uint8_t *src = img + (size_t)nearest(oy, p->in_h, p->out_h, align, half) * row;
      for (int32_t ox = 0; ox < p->out_w; ++ox, y += pixel)
        memcpy(y, src + (size_t)nearest(ox, p->in_w, p->out_w, align, half) * pixel, pixel);
    }
  }
  return EK_OK;
}

static int32_t scale_10(int32_t in_size, int32_t out_size, int align) {
  if (align && out_size > 1) return (int32_t)(((int64_t)1024 * (in_size - 1) + (out_size - 1) / 2) / (out_size - 1));
  return (int32_t)(((int64_t)1024 * in_size + out_size / 2) / out_size);
}

/* ComputeInterpolationValues, integer overload. */
static void interp(int32_t v, int32_t s10, int half, int32_t in_size, int32_t *scaled, int32_t *lo, int32_t *hi) {
  *scaled = half ? v * s10 + s10 / 2 - (1 << 9) : v * s10;
  *lo = *scaled / 1024 > 0 ? *scaled / 1024 : 0;
  const int32_t up = (*scaled + 1023) / 1024;
  *hi = up < in_size - 1 ? up : in_size - 1;
}

static ek_status resize_bilinear_eval(ek_context *ctx, ek_op *op) {
  const resize_params *p = (const resize_params *)op->user_data;
  const int8_t *x = (const int8_t *)ek_input(ctx, op, 0)->data;
  int8_t *y = (int8_t *)ek_output(ctx, op, 0)->data;
  const int align = (op->params.flags & EK_FLAG_ALIGN_CORNERS) != 0, half = (op->params.flags & EK_FLAG_HALF_PIXEL_CENTERS) != 0;
  const int32_t hs = scale_10(p->in_h, p->out_h, align), ws = scale_10(p->in_w, p->out_w, align), C = p->depth;
  const size_t row = (size_t)p->in_w * (size_t)C;
  for (int32_t b = 0; b < p->batches; ++b) {
    const int8_t *img = x + (size_t)b * (size_t)p->in_h * row;
    for (int32_t oy = 0; oy < p->out_h; ++oy) {
      int32_t iy, y0, y1;
      interp(oy, hs, half, p->in_h, &iy, &y0, &y1);
      const int64_t dy = iy - 1024 * y0;
      for (int32_t ox = 0; ox < p->out_w; ++ox) {
        int32_t ix, x0, x1;
        interp(ox, ws, half, p->in_w, &ix, &x0, &x1);
        const int64_t dx = ix - 1024 * x0;
        const int8_t *a = img + (size_t)y0 * row + (size_t)x0 * C, *bb = img + (size_t)y1 * row + (size_t)x0 * C;
        const int8_t *c = img + (size_t)y0 * row + (size_t)x1 * C, *d = img + (size_t)y1 * row + (size_t)x1 * C;
        for (int32_t k = 0; k < C; ++k) {
          const int64_t v = (int64_t)a[k] * (1024 - dy) * (1024 - dx) + (int64_t)bb[k] * dy * (1024 - dx) +
                            (int64_t)c[k] * (1024 - dy) * dx + (int64_t)d[k] * dy * dx;
          const int64_t round = v > 0 ? (1 << 19) : -(1 << 19);
          *y++ = (int8_t)((v + round) / (1 << 20));
        }
      }
    }
  }
  return EK_OK;
}

const ek_kernel ek_kernel_resize_nearest_neighbor = {EK_OP_RESIZE_NEAREST_NEIGHBOR, "RESIZE_NEAREST_NEIGHBOR",
                                                     EK_HOST_FN(resize_persistent_bytes), 0, EK_HOST_FN(resize_prepare),
                                                     resize_nearest_eval, 0};
const ek_kernel ek_kernel_resize_bilinear = {EK_OP_RESIZE_BILINEAR, "RESIZE_BILINEAR", EK_HOST_FN(resize_persistent_bytes), 0,
                                             EK_HOST_FN(resize_prepare), resize_bilinear_eval, 0};
