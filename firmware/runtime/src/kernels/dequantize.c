/* DEQUANTIZE: int8 / uint8 / int16 -> float32, per-tensor or per-channel.
 *
 * Bit-exact with LiteRT BUILTIN_REF (tflite/kernels/dequantize.h): per-tensor
 * reference_integer_ops::Dequantize computes float(double(scale) * (q - zero_point)); per-channel
 * PerChannelDequantize computes scale[c] * (q - zero_point[c]) in float.  We compute both in single precision:
 * the double product of a 24-bit scale and a |q - zp| < 2^17 integer is exact, so the only rounding in
 * LiteRT's expression is the final conversion to float - the same single rounding one float multiply does
 * (IEEE-754, subnormals included; Cortex-M4F FPSCR.FZ is 0 after reset).  No software double on the device.
 */
#include "ek_kernels.h"

typedef struct dequantize_params {
  int32_t input_type;
  int32_t count;
  int32_t per_channel;
  float scale;
  int32_t zero_point;
  /* per channel: element index -> channel = (i / inner) % channels */
  int32_t inner, channels;
} dequantize_params;

static size_t dequantize_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(dequantize_params);
}

static int dequantize_valid_scale(float s) { return s == s && s >= -3.4028234e38f && s <= 3.4028234e38f; }

static ek_status dequantize_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 1 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, "DEQUANTIZE needs 1 input and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0);
  const ek_tensor *out = ek_output(ctx, op, 0);
  if (!in || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "DEQUANTIZE input or output tensor missing");
  if (in->type != EK_INT8 && in->type != EK_UINT8 && in->type != EK_INT16)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "DEQUANTIZE supports int8, uint8 and int16 inputs only");
  if (out->type != EK_FLOAT32) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "DEQUANTIZE output must be float32");
  if (!ek_same_shape(in, out)) return ek_fail(ctx, op, EK_ERR_SHAPE, "DEQUANTIZE output shape differs from the input shape");
  const int32_t count = ek_num_elements(in);
  const int32_t in_size = in->type == EK_INT16 ? 2 : 1;
  if (in->bytes != count * in_size || out->bytes != count * 4)
    return ek_fail(ctx, op, EK_ERR_MODEL, "DEQUANTIZE tensor size does not match its shape");
  if (in->num_scales < 1) return ek_fail(ctx, op, EK_ERR_MODEL, "DEQUANTIZE input must be quantized");
  dequantize_params *p = (dequantize_params *)op->user_data;
  p->input_type = in->type;
  p->count = count;
  p->per_channel = in->num_scales > 1;
  p->scale = in->scale;
  p->zero_point = in->zero_point;
  p->inner = 1;
  p->channels = 1;
  if (!dequantize_valid_scale(in->scale)) return ek_fail(ctx, op, EK_ERR_MODEL, "DEQUANTIZE scale must be finite");
  if (in->zero_point < -65536 || in->zero_point > 65535) return ek_fail(ctx, op, EK_ERR_MODEL, "DEQUANTIZE zero point out of range");
  if (p->per_channel) {
    const int32_t qd = in->quantized_dimension;
    if (qd < 0 || qd >= in->ndim) return ek_fail(ctx, op, EK_ERR_MODEL, "DEQUANTIZE quantized dimension out of range");
    if (in->dims[qd] != in->num_scales || !in->scales || !in->zero_points)
      return ek_fail(ctx, op, EK_ERR_MODEL, "DEQUANTIZE needs one scale and zero point per channel");
    for (int32_t c = 0; c < in->num_scales; ++c) {
      if (!dequantize_valid_scale(in->scales[c])) return ek_fail(ctx, op, EK_ERR_MODEL, "DEQUANTIZE scale must be finite");
      if (in->zero_points[c] < -65536 || in->zero_points[c] > 65535) return ek_fail(ctx, op, EK_ERR_MODEL, "DEQUANTIZE zero point out of range");
    }
    int64_t inner = 1;
    for (int32_t d = qd + 1; d < in->ndim; ++d) {
      inner *= in->dims[d] > 0 ? in->dims[d] : 0;
      if (inner > INT32_MAX) return ek_fail(ctx, op, EK_ERR_SHAPE, "DEQUANTIZE tensor too large");
    }
    if (inner == 0 && count > 0) return ek_fail(ctx, op, EK_ERR_SHAPE, "DEQUANTIZE shape invalid");
    p->inner = (int32_t)inner;
    p->channels = in->num_scales;
  }
  return EK_OK;
}

static inline int32_t dequantize_load(const dequantize_params *p, const void *x, int32_t i) {
  if (p->input_type == EK_INT8) return ((const int8_t *)x)[i];
  if (p->input_type == EK_UINT8) return ((const uint8_t *)x)[i];
  return ((const int16_t *)x)[i];
}

static ek_status dequantize_eval(ek_context *ctx, ek_op *op) {
  const dequantize_params *p = (const dequantize_params *)op->user_data;
  const ek_tensor *in = ek_input(ctx, op, 0);
  float *y = (float *)ek_output(ctx, op, 0)->data;
  if (!p->per_channel) {
    for (int32_t i = 0; i < p->count; ++i) y[i] = p->scale * (float)(dequantize_load(p, in->data, i) - p->zero_point);
    return EK_OK;
  }
  int32_t channel = 0, within = 0;
  for (int32_t i = 0; i < p->count; ++i) {
    y[i] = in->scales[channel] * (float)(dequantize_load(p, in->data, i) - (int32_t)in->zero_points[channel]);
    if (++within == p->inner) {
      within = 0;
      if (++channel == p->channels) channel = 0;
    }
  }
  return EK_OK;
}

/* edgekit-op: DEQUANTIZE | types: int8, uint8, int16 | versions: 1-3, 5 | fast path: none */
const ek_kernel ek_kernel_dequantize = {EK_OP_DEQUANTIZE, "DEQUANTIZE", EK_HOST_FN(dequantize_persistent_bytes), 0, EK_HOST_FN(dequantize_prepare), dequantize_eval, 0};
