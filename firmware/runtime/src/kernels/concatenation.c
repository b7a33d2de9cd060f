/* CONCATENATION along any axis, up to EK_MAX_OP_INPUTS inputs, any element type of 1, 2, 4 or 8 bytes.
 *
 * Bit-exact with LiteRT BUILTIN_REF (tflite/kernels/concatenation.cc): all inputs have the output's rank and
 * type and equal dims except on the axis; no fused activation. For int8, LiteRT refuses inputs whose scale or
 * zero point differ from the output's ("no re-scaling needed for Int8 quantized kernel") and then only copies
 * bytes; we refuse the same models. int16 needs zero points 0, as in LiteRT.
 */
#include <string.h>

#include "ek_kernels.h"

typedef struct concatenation_params {
  int32_t outer;                          /* product of the dims before the axis */
  int32_t chunk[EK_MAX_OP_INPUTS];        /* bytes each input contributes per outer step */
  int32_t out_chunk;                      /* sum of chunk[] */
} concatenation_params;

static size_t concatenation_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(concatenation_params);
}

static ek_status concatenation_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs < 1 || op->num_inputs > EK_MAX_OP_INPUTS || op->num_outputs != 1)
    return ek_fail(ctx, op, EK_ERR_MODEL, "CONCATENATION needs 1 to 8 inputs and 1 output");
  const ek_tensor *out = ek_output(ctx, op, 0);
  const ek_tensor *t0 = ek_input(ctx, op, 0);
  if (!out || !t0) return ek_fail(ctx, op, EK_ERR_MODEL, "CONCATENATION input or output tensor missing");
  const int32_t rank = t0->ndim;
  if (rank < 1 || rank > EK_MAX_DIMS) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "CONCATENATION needs inputs with 1 to 6 dimensions");
  int32_t axis = op->params.axis;
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return ek_fail(ctx, op, EK_ERR_SHAPE, "CONCATENATION axis out of range");
  if (op->params.activation != EK_ACT_NONE)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "CONCATENATION with a fused activation is not supported (LiteRT rejects it too)");
  const int32_t elem = ek_type_size(t0->type);
  if (elem == 0) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "CONCATENATION tensor type not supported");
  if (out->type != t0->type) return ek_fail(ctx, op, EK_ERR_TYPE, "CONCATENATION output type differs from the inputs");
  if (out->ndim != rank) return ek_fail(ctx, op, EK_ERR_SHAPE, "CONCATENATION output rank differs from the inputs");

  concatenation_params *p = (concatenation_params *)op->user_data;
  memset(p, 0, sizeof *p);
  int64_t inner = 1, outer = 1, sum_axis = 0;
  for (int32_t d = 0; d < rank; ++d) {
    if (t0->dims[d] < 0) return ek_fail(ctx, op, EK_ERR_SHAPE, "CONCATENATION input has a negative dimension");
    if (d < axis) outer *= t0->dims[d];
    if (d > axis) inner *= t0->dims[d];
    if (outer > INT32_MAX || inner > INT32_MAX) return ek_fail(ctx, op, EK_ERR_SHAPE, "CONCATENATION tensor too large");
  }
  for (int32_t i = 0; i < op->num_inputs; ++i) {
    const ek_tensor *t = ek_input(ctx, op, i);
    if (!t) return ek_fail(ctx, op, EK_ERR_MODEL, "CONCATENATION input tensor missing");
    if (t->type != t0->type) return ek_fail(ctx, op, EK_ERR_TYPE, "CONCATENATION inputs have different types");
    if (t->ndim != rank) return ek_fail(ctx, op, EK_ERR_SHAPE, "CONCATENATION inputs have different ranks");
    for (int32_t d = 0; d < rank; ++d) {
      if (d == axis) continue;
      if (t->dims[d] != t0->dims[d]) return ek_fail(ctx, op, EK_ERR_SHAPE, "CONCATENATION inputs differ outside the axis");
    }
    if (t->dims[axis] < 0) return ek_fail(ctx, op, EK_ERR_SHAPE, "CONCATENATION input has a negative dimension");
    if (t0->type == EK_INT8 && (t->scale != out->scale || t->zero_point != out->zero_point || t->num_scales > 1))
      return ek_fail(ctx, op, EK_ERR_UNSUPPORTED,
                     "CONCATENATION int8 inputs must have the output's scale and zero point (LiteRT rejects rescaling too)");
    if (t0->type == EK_UINT8 && (t->scale != out->scale || t->zero_point != out->zero_point))
      return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "CONCATENATION uint8 inputs with rescaling are not supported");
    if (t0->type == EK_INT16 && t->zero_point != 0) return ek_fail(ctx, op, EK_ERR_MODEL, "CONCATENATION int16 inputs need zero point 0");
    sum_axis += t->dims[axis];
    const int64_t axis_elements = (int64_t)t->dims[axis] * inner; /* both < 2^31: fits */
    if (axis_elements > INT32_MAX) return ek_fail(ctx, op, EK_ERR_SHAPE, "CONCATENATION tensor too large");
    const int64_t chunk = axis_elements * elem;
    if (chunk > INT32_MAX || chunk * outer != t->bytes)
      return ek_fail(ctx, op, EK_ERR_MODEL, "CONCATENATION input size does not match its shape");
    p->chunk[i] = (int32_t)chunk;
    p->out_chunk += (int32_t)chunk;
  }
  if (t0->type == EK_INT16 && out->zero_point != 0) return ek_fail(ctx, op, EK_ERR_MODEL, "CONCATENATION int16 output needs zero point 0");
  for (int32_t d = 0; d < rank; ++d) {
    const int64_t expected = d == axis ? sum_axis : t0->dims[d];
    if (out->dims[d] != expected) return ek_fail(ctx, op, EK_ERR_SHAPE, "CONCATENATION output shape does not match the inputs");
  }
  if ((int64_t)p->out_chunk * outer != out->bytes) return ek_fail(ctx, op, EK_ERR_MODEL, "CONCATENATION output size does not match its shape");
  p->outer = (int32_t)outer;
  return EK_OK;
}

static ek_status concatenation_eval(ek_context *ctx, ek_op *op) {
  const concatenation_params *p = (const concatenation_params *)op->user_data;
  uint8_t *y = (uint8_t *)ek_output(ctx, op, 0)->data;
  for (int32_t i = 0; i < op->num_inputs; ++i) {
    const uint8_t *x = (const uint8_t *)ek_input(ctx, op, i)->data;
    const size_t chunk = (size_t)p->chunk[i];
    if (chunk == 0) continue;
    uint8_t *dst = y;
    for (int32_t o = 0; o < p->outer; ++o, x += chunk, dst += p->out_chunk) memcpy(dst, x, chunk);
    y += chunk;
  }
  return EK_OK;
}

/* edgekit-op: CONCATENATION | types: int8, uint8, int16, int32, int64, float16, float32, bool | versions: 1-3 | fast path: none */
const ek_kernel ek_kernel_concatenation = {EK_OP_CONCATENATION, "CONCATENATION", EK_HOST_FN(concatenation_persistent_bytes), 0, EK_HOST_FN(concatenation_prepare), concatenation_eval, 0};
