/* SQUEEZE, EXPAND_DIMS, CAST, FILL, SHAPE, ZEROS_LIKE.
 *
 * SQUEEZE (tflite/kernels/squeeze.cc) and EXPAND_DIMS (tflite/kernels/expand_dims.cc) keep the bytes and relabel
 * the shape, like RESHAPE: the planner places the output on the input (ek_plan.c, is_reshape_like) and eval is a
 * no-op then (a copy otherwise). The output tensor's static shape is authoritative: it must be the input's with
 * extent-1 dimensions removed (SQUEEZE) or one inserted (EXPAND_DIMS); squeeze_dims and the axis input are not
 * needed for that.
 * CAST (tflite/kernels/cast.cc): element-wise between float32, int8, uint8, int16, int32, int64 and bool (to bool:
 * x != 0; float to integer truncates toward zero and saturates to the destination's range, NaN giving its maximum,
 * integer narrowing wraps: what LiteRT BUILTIN_REF measurably does). Quantization parameters are ignored, as in LiteRT.
 * FILL (tflite/kernels/fill.cc): inputs (dims, value): dims a constant int32/int64 vector equal to the output's
 * shape, value a scalar of the output's type copied to every element (int8/int16 need the output's scale and zero
 * point, as LiteRT checks).
 * SHAPE (tflite/kernels/shape.cc): the input's dims as an int32 or int64 vector (out_type = the output's type).
 * ZEROS_LIKE (tflite/kernels/zeros_like.cc): zero bytes of the input's shape and type (int32, int64, float32 in
 * LiteRT; other types are refused as there).
 */
/* edgekit-op: SQUEEZE | types: int8, int16, int32, float32, uint8, bool, int64 | versions: 1-2 | fast path: none */
/* edgekit-op: EXPAND_DIMS | types: int8, int16, int32, float32, uint8, bool, int64 | versions: 1-2 | fast path: none */
/* edgekit-op: CAST | types: float32, int8, uint8, int16, int32, int64, bool | versions: 1-6 | fast path: none */
/* edgekit-op: FILL | types: int8, int16, int32, int64, float32, bool | versions: 1-4 | fast path: none */
/* edgekit-op: SHAPE | types: int8, int16, int32, float32, uint8, bool, int64 | versions: 1 | fast path: none */
/* edgekit-op: ZEROS_LIKE | types: int32, int64, float32 | versions: 1 | fast path: none */
#include <stdint.h>
#include <string.h>

#include "ek_kernels.h"

static size_t no_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return 0;
}

/* b's dims are a's with one (extra = 1) extent-1 dimension inserted, or (extra = -1) any extent-1 ones removed. */
static int relabels(const ek_tensor *a, const ek_tensor *b, int extra) {
  const ek_tensor *longer = extra > 0 ? b : a, *shorter = extra > 0 ? a : b;
  if (extra > 0 && b->ndim != a->ndim + 1) return 0;
  if (shorter->ndim > longer->ndim) return 0;
  int32_t j = 0;
  for (int32_t i = 0; i < longer->ndim; ++i) {
    if (j < shorter->ndim && longer->dims[i] == shorter->dims[j]) {
      ++j;
    } else if (longer->dims[i] != 1) {
      return 0;
    }
  }
  return j == shorter->ndim;
}

static ek_status relabel_prepare(ek_context *ctx, ek_op *op, int extra, int inputs, const char *arity, const char *shape) {
  if (op->num_inputs != inputs || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, arity);
  const ek_tensor *in = ek_input(ctx, op, 0), *out = ek_output(ctx, op, 0);
  if (!in || !out) return ek_fail(ctx, op, EK_ERR_MODEL, arity);
  if (in->type != out->type) return ek_fail(ctx, op, EK_ERR_TYPE, "SQUEEZE/EXPAND_DIMS input and output types differ");
  if (!relabels(in, out, extra) || in->bytes != out->bytes) return ek_fail(ctx, op, EK_ERR_SHAPE, shape);
  return EK_OK;
}

static ek_status squeeze_prepare(ek_context *ctx, ek_op *op) {
  return relabel_prepare(ctx, op, -1, 1, "SQUEEZE needs 1 input and 1 output",
                         "SQUEEZE output shape is not the input's without extent-1 dimensions");
}

static ek_status expand_dims_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs == 2) {
    const ek_tensor *axis = ek_input(ctx, op, 1);
    if (!axis || (axis->type != EK_INT32 && axis->type != EK_INT64))
      return ek_fail(ctx, op, EK_ERR_TYPE, "EXPAND_DIMS axis must be int32 or int64");
  }
  return relabel_prepare(ctx, op, 1, 2, "EXPAND_DIMS needs 2 inputs (input, axis) and 1 output",
                         "EXPAND_DIMS output shape is not the input's with one extent-1 dimension inserted");
}

static ek_status relabel_eval(ek_context *ctx, ek_op *op) {
  const ek_tensor *in = ek_input(ctx, op, 0);
  ek_tensor *out = ek_output(ctx, op, 0);
  if (in->data != out->data && in->bytes > 0) memmove(out->data, in->data, (size_t)in->bytes);
  return EK_OK;
}

/* ---- CAST ---------------------------------------------------------------------------------------------------- */

static int cast_type(int32_t t) {
  return t == EK_FLOAT32 || t == EK_INT8 || t == EK_UINT8 || t == EK_INT16 || t == EK_INT32 || t == EK_INT64 || t == EK_BOOL;
}

static ek_status cast_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 1 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, "CAST needs 1 input and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0), *out = ek_output(ctx, op, 0);
  if (!in || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "CAST input or output tensor missing");
  if (!cast_type(in->type) || !cast_type(out->type))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "CAST supports float32, int8, uint8, int16, int32, int64 and bool");
  if (!ek_same_shape(in, out)) return ek_fail(ctx, op, EK_ERR_SHAPE, "CAST input and output shapes differ");
  const int32_t n = ek_num_elements(in);
  if ((int64_t)n * ek_type_size(in->type) != in->bytes || (int64_t)n * ek_type_size(out->type) != out->bytes)
    return ek_fail(ctx, op, EK_ERR_MODEL, "CAST tensor sizes do not match their shapes");
  return EK_OK;
}

/* Element i of x (type t) as a double / int64 (exact for every supported type but int64 -> double). */
static int64_t load_int(const uint8_t *x, int32_t t, int32_t i) {
  switch (t) {
    case EK_INT8: return ((const int8_t *)x)[i];
    case EK_UINT8: case EK_BOOL: return x[i];
    case EK_INT16: { int16_t v; memcpy(&v, x + 2 * i, 2); return v; }
    case EK_INT32: { int32_t v; memcpy(&v, x + 4 * i, 4); return v; }
    default: { int64_t v; memcpy(&v, x + 8 * i, 8); return v; }
  }
}

static void store_int(uint8_t *y, int32_t t, int32_t i, int64_t v) {
  switch (t) {
    case EK_INT8: ((int8_t *)y)[i] = (int8_t)v; break; /* wraps (gcc/clang), as LiteRT's static_cast */
    case EK_UINT8: y[i] = (uint8_t)v; break;
    case EK_BOOL: y[i] = v != 0; break;
    case EK_INT16: { const int16_t w = (int16_t)v; memcpy(y + 2 * i, &w, 2); break; }
    case EK_INT32: { const int32_t w = (int32_t)v; memcpy(y + 4 * i, &w, 4); break; }
    case EK_INT64: memcpy(y + 8 * i, &v, 8); break;
    default: { const float f = (float)v; memcpy(y + 4 * i, &f, 4); break; }
  }
}

/* float to integer as LiteRT's CAST does it (measured against BUILTIN_REF): truncation toward zero, saturated to
   the destination's range, NaN to its maximum. */
static int64_t saturate(float f, int32_t to) {
  const int64_t hi = to == EK_INT8 ? 127 : to == EK_UINT8 ? 255 : to == EK_INT16 ? 32767 : to == EK_INT32 ? INT32_MAX : INT64_MAX;
  const int64_t lo = to == EK_INT8 ? -128 : to == EK_UINT8 ? 0 : to == EK_INT16 ? -32768 : to == EK_INT32 ? INT32_MIN : INT64_MIN;
  const double d = (double)f;
  if (d != d || d >= (double)hi) return hi; /* (double)INT64_MAX rounds up to 2^63: >= catches it */
  if (d <= (double)lo) return lo;
  return (int64_t)d;
}

static ek_status cast_eval(ek_context *ctx, ek_op *op) {
  const ek_tensor *in = ek_input(ctx, op, 0);
  ek_tensor *out = ek_output(ctx, op, 0);
  const uint8_t *x = (const uint8_t *)in->data;
  uint8_t *y = (uint8_t *)out->data;
  const int32_t n = ek_num_elements(in), ti = in->type, to = out->type;
  for (int32_t i = 0; i < n; ++i) {
    if (ti == EK_FLOAT32) {
      float f;
      memcpy(&f, x + 4 * i, 4);
      if (to == EK_FLOAT32) memcpy(y + 4 * i, &f, 4);
      else if (to == EK_BOOL) y[i] = f != 0.0f;
      else store_int(y, to, i, saturate(f, to));
    } else {
      store_int(y, to, i, load_int(x, ti, i));
    }
  }
  return EK_OK;
}

/* ---- FILL ---------------------------------------------------------------------------------------------------- */

static ek_status fill_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 2 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, "FILL needs 2 inputs (dims, value) and 1 output");
  const ek_tensor *dims = ek_input(ctx, op, 0), *value = ek_input(ctx, op, 1), *out = ek_output(ctx, op, 0);
  if (!dims || !value || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "FILL dims, value or output tensor missing");
  if (!dims->is_constant || dims->ndim != 1 || (dims->type != EK_INT32 && dims->type != EK_INT64) || (dims->bytes > 0 && !dims->data))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "FILL dims must be a constant int32 or int64 vector");
  if (dims->dims[0] != out->ndim) return ek_fail(ctx, op, EK_ERR_SHAPE, "FILL dims length differs from the output's rank");
  const int32_t w = dims->type == EK_INT32 ? 4 : 8;
  if (dims->bytes != w * dims->dims[0]) return ek_fail(ctx, op, EK_ERR_MODEL, "FILL dims size differs from its shape");
  for (int32_t d = 0; d < out->ndim; ++d) {
    int64_t v;
    if (w == 4) { int32_t v32; memcpy(&v32, (const uint8_t *)dims->data + 4 * d, 4); v = v32; }
    else memcpy(&v, (const uint8_t *)dims->data + 8 * d, 8);
    if (v != out->dims[d]) return ek_fail(ctx, op, EK_ERR_SHAPE, "FILL dims differ from the output's shape");
  }
  if (value->type != out->type || ek_num_elements(value) != 1 || value->ndim != 0)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "FILL value must be a scalar of the output's type");
  const int32_t elem = ek_type_size(out->type);
  if (elem == 0 || out->type == EK_FLOAT16) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "FILL output type not supported");
  if (value->bytes != elem || (int64_t)ek_num_elements(out) * elem != out->bytes)
    return ek_fail(ctx, op, EK_ERR_MODEL, "FILL tensor sizes do not match their shapes");
  if ((out->type == EK_INT8 || out->type == EK_INT16) && (value->scale != out->scale || value->zero_point != out->zero_point))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "FILL int8/int16 value must have the output's scale and zero point (as LiteRT requires)");
  return EK_OK;
}

static ek_status fill_eval(ek_context *ctx, ek_op *op) {
  const ek_tensor *value = ek_input(ctx, op, 1);
  ek_tensor *out = ek_output(ctx, op, 0);
  const int32_t elem = value->bytes, n = out->bytes / (elem > 0 ? elem : 1);
  uint8_t *y = (uint8_t *)out->data;
  if (elem == 1) {
    if (n > 0) memset(y, *(const uint8_t *)value->data, (size_t)n);
  } else {
    for (int32_t i = 0; i < n; ++i) memcpy(y + (size_t)i * (size_t)elem, value->data, (size_t)elem);
  }
  return EK_OK;
}

/* ---- SHAPE --------------------------------------------------------------------------------------------------- */

typedef struct shape_params {
  int32_t ndim;
  int32_t dims[EK_MAX_DIMS];
} shape_params;

static size_t shape_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(shape_params);
}

static ek_status shape_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 1 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, "SHAPE needs 1 input and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0), *out = ek_output(ctx, op, 0);
  if (!in || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "SHAPE input or output tensor missing");
  if (out->type != EK_INT32 && out->type != EK_INT64) return ek_fail(ctx, op, EK_ERR_TYPE, "SHAPE output must be int32 or int64");
  if (out->ndim != 1 || out->dims[0] != in->ndim || out->bytes != ek_type_size(out->type) * in->ndim)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "SHAPE output must be a vector of one entry per input dimension");
  shape_params *p = (shape_params *)op->user_data;
  memset(p, 0, sizeof *p);
  p->ndim = in->ndim;
  for (int32_t d = 0; d < in->ndim; ++d) p->dims[d] = in->dims[d];
  return EK_OK;
}

static ek_status shape_eval(ek_context *ctx, ek_op *op) {
  const shape_params *p = (const shape_params *)op->user_data;
  ek_tensor *out = ek_output(ctx, op, 0);
  uint8_t *y = (uint8_t *)out->data;
  for (int32_t d = 0; d < p->ndim; ++d) store_int(y, out->type, d, p->dims[d]);
  return EK_OK;
}

/* ---- ZEROS_LIKE ---------------------------------------------------------------------------------------------- */

static ek_status zeros_like_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 1 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, "ZEROS_LIKE needs 1 input and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0), *out = ek_output(ctx, op, 0);
  if (!in || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "ZEROS_LIKE input or output tensor missing");
  if (in->type != EK_INT32 && in->type != EK_INT64 && in->type != EK_FLOAT32)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "ZEROS_LIKE supports int32, int64 and float32 (as LiteRT)");
  if (in->type != out->type || !ek_same_shape(in, out) || in->bytes != out->bytes)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "ZEROS_LIKE output differs from the input in type or shape");
  return EK_OK;
}

static ek_status zeros_like_eval(ek_context *ctx, ek_op *op) {
  ek_tensor *out = ek_output(ctx, op, 0);
  if (out->bytes > 0) memset(out->data, 0, (size_t)out->bytes);
  return EK_OK;
}

const ek_kernel ek_kernel_squeeze = {EK_OP_SQUEEZE, "SQUEEZE", EK_HOST_FN(no_persistent_bytes), 0, EK_HOST_FN(squeeze_prepare),
                                     relabel_eval, 0};
const ek_kernel ek_kernel_expand_dims = {EK_OP_EXPAND_DIMS, "EXPAND_DIMS", EK_HOST_FN(no_persistent_bytes), 0,
                                         EK_HOST_FN(expand_dims_prepare), relabel_eval, 0};
const ek_kernel ek_kernel_cast = {EK_OP_CAST, "CAST", EK_HOST_FN(no_persistent_bytes), 0, EK_HOST_FN(cast_prepare), cast_eval, 0};
const ek_kernel ek_kernel_fill = {EK_OP_FILL, "FILL", EK_HOST_FN(no_persistent_bytes), 0, EK_HOST_FN(fill_prepare), fill_eval, 0};
const ek_kernel ek_kernel_shape = {EK_OP_SHAPE, "SHAPE", EK_HOST_FN(shape_persistent_bytes), 0, EK_HOST_FN(shape_prepare),
                                   shape_eval, 0};
const ek_kernel ek_kernel_zeros_like = {EK_OP_ZEROS_LIKE, "ZEROS_LIKE", EK_HOST_FN(no_persistent_bytes), 0,
                                        EK_HOST_FN(zeros_like_prepare), zeros_like_eval, 0};
