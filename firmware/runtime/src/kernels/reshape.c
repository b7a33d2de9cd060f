/* RESHAPE: same bytes, new shape. A no-op when the planner placed the output on the input's bytes
 * (data pointers equal), otherwise a copy. Any element type; the optional shape input is not read (the output
 * tensor's static shape is authoritative), but input and output must hold the same number of elements.
 * Matches LiteRT (tflite/kernels/reshape.cc copies the bytes; quantization parameters pass through).
 */
#include <string.h>

#include "ek_kernels.h"

static size_t reshape_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return 0;
}

static ek_status reshape_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs < 1 || op->num_inputs > 2 || op->num_outputs != 1)
    return ek_fail(ctx, op, EK_ERR_MODEL, "RESHAPE needs 1 or 2 inputs and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0);
  const ek_tensor *out = ek_output(ctx, op, 0);
  if (!in || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "RESHAPE input or output tensor missing");
  if (in->type != out->type) return ek_fail(ctx, op, EK_ERR_TYPE, "RESHAPE input and output types differ");
  if (ek_num_elements(in) != ek_num_elements(out))
    return ek_fail(ctx, op, EK_ERR_SHAPE, "RESHAPE input and output element counts differ");
  if (in->bytes != out->bytes) return ek_fail(ctx, op, EK_ERR_SHAPE, "RESHAPE input and output sizes differ");
  return EK_OK;
}

static ek_status reshape_eval(ek_context *ctx, ek_op *op) {
  const ek_tensor *in = ek_input(ctx, op, 0);
  ek_tensor *out = ek_output(ctx, op, 0);
  if (in->data != out->data && in->bytes > 0) memmove(out->data, in->data, (size_t)in->bytes);
  return EK_OK;
}

/* edgekit-op: RESHAPE | types: int8, uint8, int16, int32, int64, float16, float32, bool | versions: 1 | fast path: none */
const ek_kernel ek_kernel_reshape = {EK_OP_RESHAPE, "RESHAPE", EK_HOST_FN(reshape_persistent_bytes), 0, EK_HOST_FN(reshape_prepare), reshape_eval, 0};
