/* SPLIT, SPLIT_V, UNPACK (one input, several outputs) and PACK (several inputs, one output): pure data movement
 * along one axis, any element type of 1, 2, 4 or 8 bytes, up to 6 dimensions, up to EK_MAX_OP_OUTPUTS outputs
 * (EK_MAX_OP_INPUTS inputs for PACK).
 *
 * Bit-exact with LiteRT BUILTIN_REF, which copies bytes:
 *  - SPLIT (tflite/kernels/split.cc): inputs (axis, input); axis a constant int32 scalar in [-rank, rank), the axis
 *    extent divisible by num_splits = number of outputs; every output = the input's shape with axis extent / n.
 *  - SPLIT_V (tflite/kernels/split_v.cc): inputs (input, size_splits, axis); size_splits a constant int32 vector of
 *    one entry per output, at most one -1 (the rest of the axis), summing to the axis extent.
 *  - UNPACK (tflite/kernels/unpack.cc): outputs = the axis extent (num), each the input's shape without the axis.
 *  - PACK (tflite/kernels/pack.cc): values_count inputs of one shape, output rank + 1 with the new axis at `axis`
 *    in [-(rank + 1), rank]; int8/uint8 inputs must share the output's scale and zero point (LiteRT checks it).
 * Quantization parameters of SPLIT/SPLIT_V/UNPACK outputs are not read (LiteRT copies bytes whatever they are).
 * The reader has checked num_splits / num / values_count against the op's output / input count.
 */
/* edgekit-op: SPLIT | types: int8, int16, int32, float32, uint8, bool, int64 | versions: 1-4 | fast path: none */
/* edgekit-op: SPLIT_V | types: int8, int16, int32, float32, uint8, bool, int64 | versions: 1-3 | fast path: none */
/* edgekit-op: UNPACK | types: int8, int16, int32, float32, uint8, bool, int64 | versions: 1-4 | fast path: none */
/* edgekit-op: PACK | types: int8, int16, int32, float32, uint8, bool, int64 | versions: 1-4 | fast path: none */
#include <stdint.h>
#include <string.h>

#include "ek_kernels.h"
#include "ek_strided.h"

#define SP_MAX_PARTS (EK_MAX_OP_OUTPUTS > EK_MAX_OP_INPUTS ? EK_MAX_OP_OUTPUTS : EK_MAX_OP_INPUTS)

typedef struct parts_params {
  int32_t outer;                /* product of the dims before the axis */
  int32_t whole;                /* bytes of the unsplit tensor per outer step */
  int32_t parts;
  int32_t chunk[SP_MAX_PARTS];  /* bytes part k holds per outer step */
} parts_params;

static size_t parts_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(parts_params);
}

/* outer (product of dims before axis) and inner (product after, times elem) of t; 0 on overflow. */
static int outer_inner(const ek_tensor *t, int32_t axis, int32_t elem, int64_t *outer, int64_t *inner) {
  *outer = 1, *inner = elem;
  for (int32_t d = 0; d < t->ndim; ++d) {
    if (t->dims[d] < 0) return 0;
    if (d < axis) *outer *= t->dims[d];
    if (d > axis) *inner *= t->dims[d];
    if (*outer > INT32_MAX || *inner > INT32_MAX) return 0;
  }
  return 1;
}

/* Common checks of one part tensor against the whole: type, and dims equal to `want` (rank `rank`). */
static int part_shape_is(const ek_tensor *t, const int32_t *want, int32_t rank) {
  if (t->ndim != rank) return 0;
  for (int32_t d = 0; d < rank; ++d)
    if (t->dims[d] != want[d]) return 0;
  return 1;
}

/* SPLIT / SPLIT_V / UNPACK: fills the params once the axis and the part sizes along it are known
   (sizes[k] = extent of part k on the axis; keep_axis 0 for UNPACK, whose outputs drop it). */
static ek_status split_common(ek_context *ctx, ek_op *op, const ek_tensor *in, int32_t axis, const int32_t *sizes,
                              int keep_axis, const char *name) {
  (void)name;
  const int32_t elem = ek_type_size(in->type);
  if (elem == 0) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "SPLIT/UNPACK tensor type not supported");
  int64_t outer, inner;
  if (!outer_inner(in, axis, elem, &outer, &inner)) return ek_fail(ctx, op, EK_ERR_SHAPE, "SPLIT/UNPACK input too large");
  if (outer * in->dims[axis] * inner != in->bytes) return ek_fail(ctx, op, EK_ERR_MODEL, "SPLIT/UNPACK input size differs from its shape");
  parts_params *p = (parts_params *)op->user_data;
  memset(p, 0, sizeof *p);
  p->outer = (int32_t)outer;
  p->whole = (int32_t)(in->dims[axis] * inner);
  p->parts = op->num_outputs;
  for (int32_t k = 0; k < op->num_outputs; ++k) {
    const ek_tensor *o = ek_output(ctx, op, k);
    if (!o) return ek_fail(ctx, op, EK_ERR_MODEL, "SPLIT/UNPACK output tensor missing");
    if (o->type != in->type) return ek_fail(ctx, op, EK_ERR_TYPE, "SPLIT/UNPACK output type differs from the input's");
    int32_t want[EK_MAX_DIMS], r = 0;
    for (int32_t d = 0; d < in->ndim; ++d) {
      if (d == axis && !keep_axis) continue;
      want[r++] = d == axis ? sizes[k] : in->dims[d];
    }
    if (!part_shape_is(o, want, r)) return ek_fail(ctx, op, EK_ERR_SHAPE, "SPLIT/UNPACK output shape is not the input's part");
    p->chunk[k] = (int32_t)(sizes[k] * inner);
    if ((int64_t)p->chunk[k] * outer != o->bytes) return ek_fail(ctx, op, EK_ERR_MODEL, "SPLIT/UNPACK output size differs from its shape");
  }
  return EK_OK;
}

static ek_status axis_of(ek_context *ctx, ek_op *op, int32_t axis, int32_t rank, int32_t *out) {
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return ek_fail(ctx, op, EK_ERR_SHAPE, "axis out of range for the input's rank");
  *out = axis;
  return EK_OK;
}

static ek_status split_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 2 || op->num_outputs < 1) return ek_fail(ctx, op, EK_ERR_MODEL, "SPLIT needs 2 inputs (axis, input) and outputs");
  const ek_tensor *in = ek_input(ctx, op, 1);
  int32_t axis_v;
  if (!in) return ek_fail(ctx, op, EK_ERR_MODEL, "SPLIT input tensor missing");
  if (ek_const_i32(ek_input(ctx, op, 0), &axis_v, 1) != 1)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "SPLIT axis must be a constant int32 scalar");
  int32_t axis = 0;
  ek_status st = axis_of(ctx, op, axis_v, in->ndim, &axis);
  if (st != EK_OK) return st;
  if (in->dims[axis] % op->num_outputs != 0) return ek_fail(ctx, op, EK_ERR_SHAPE, "SPLIT axis extent is not divisible by num_splits");
  int32_t sizes[EK_MAX_OP_OUTPUTS];
  for (int32_t k = 0; k < op->num_outputs; ++k) sizes[k] = in->dims[axis] / op->num_outputs;
  return split_common(ctx, op, in, axis, sizes, 1, "SPLIT");
}

static ek_status split_v_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 3 || op->num_outputs < 1)
    return ek_fail(ctx, op, EK_ERR_MODEL, "SPLIT_V needs 3 inputs (input, size_splits, axis) and outputs");
  const ek_tensor *in = ek_input(ctx, op, 0);
  int32_t axis_v, sizes[EK_MAX_OP_OUTPUTS];
  if (!in) return ek_fail(ctx, op, EK_ERR_MODEL, "SPLIT_V input tensor missing");
  if (ek_const_i32(ek_input(ctx, op, 2), &axis_v, 1) != 1)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "SPLIT_V axis must be a constant int32 scalar");
  const ek_tensor *ss = ek_input(ctx, op, 1);
  if (!ss || ss->ndim != 1 || ek_const_i32(ss, sizes, EK_MAX_OP_OUTPUTS) != op->num_outputs)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "SPLIT_V size_splits must be a constant int32 vector with one entry per output");
  int32_t axis = 0;
  ek_status st = axis_of(ctx, op, axis_v, in->ndim, &axis);
  if (st != EK_OK) return st;
  int64_t sum = 0;
  int32_t minus = -1;
  for (int32_t k = 0; k < op->num_outputs; ++k) {
    if (sizes[k] == -1) {
      if (minus >= 0) return ek_fail(ctx, op, EK_ERR_SHAPE, "SPLIT_V size_splits has more than one -1");
      minus = k;
    } else if (sizes[k] < 0) {
      return ek_fail(ctx, op, EK_ERR_SHAPE, "SPLIT_V size_splits has a negative entry");
    } else {
      sum += sizes[k];
    }
  }
  if (minus >= 0) {
    if (sum > in->dims[axis]) return ek_fail(ctx, op, EK_ERR_SHAPE, "SPLIT_V size_splits exceed the axis extent");
    sizes[minus] = (int32_t)(in->dims[axis] - sum);
  } else if (sum != in->dims[axis]) {
    return ek_fail(ctx, op, EK_ERR_SHAPE, "SPLIT_V size_splits do not add up to the axis extent");
  }
  return split_common(ctx, op, in, axis, sizes, 1, "SPLIT_V");
}

static ek_status unpack_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 1 || op->num_outputs < 1) return ek_fail(ctx, op, EK_ERR_MODEL, "UNPACK needs 1 input and outputs");
  const ek_tensor *in = ek_input(ctx, op, 0);
  if (!in) return ek_fail(ctx, op, EK_ERR_MODEL, "UNPACK input tensor missing");
  int32_t axis = 0;
  ek_status st = axis_of(ctx, op, op->params.axis, in->ndim, &axis);
  if (st != EK_OK) return st;
  if (in->dims[axis] != op->num_outputs) return ek_fail(ctx, op, EK_ERR_SHAPE, "UNPACK needs one output per element of the axis");
  int32_t sizes[EK_MAX_OP_OUTPUTS];
  for (int32_t k = 0; k < op->num_outputs; ++k) sizes[k] = 1;
  return split_common(ctx, op, in, axis, sizes, 0, "UNPACK");
}

static ek_status split_eval(ek_context *ctx, ek_op *op) {
  const parts_params *p = (const parts_params *)op->user_data;
  const uint8_t *x = (const uint8_t *)ek_input(ctx, op, op->opcode == EK_OP_SPLIT ? 1 : 0)->data;
  for (int32_t k = 0, at = 0; k < p->parts; at += p->chunk[k], ++k) {
    uint8_t *y = (uint8_t *)ek_output(ctx, op, k)->data;
    const size_t n = (size_t)p->chunk[k];
    if (n == 0) continue;
    for (int32_t o = 0; o < p->outer; ++o) memcpy(y + (size_t)o * n, x + (size_t)o * (size_t)p->whole + (size_t)at, n);
  }
  return EK_OK;
}

static ek_status pack_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs < 1 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, "PACK needs inputs and 1 output");
  const ek_tensor *t0 = ek_input(ctx, op, 0), *out = ek_output(ctx, op, 0);
  if (!t0 || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "PACK input or output tensor missing");
  const int32_t rank = t0->ndim;
  if (rank + 1 > EK_MAX_DIMS) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "PACK output would have more than 6 dimensions");
  int32_t axis = 0;
  ek_status st = axis_of(ctx, op, op->params.axis, rank + 1, &axis);
  if (st != EK_OK) return st;
  const int32_t elem = ek_type_size(t0->type);
  if (elem == 0) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "PACK tensor type not supported");
  if (out->type != t0->type) return ek_fail(ctx, op, EK_ERR_TYPE, "PACK output type differs from the inputs'");
  int32_t want[EK_MAX_DIMS];
  for (int32_t d = 0, r = 0; d <= rank; ++d) want[d] = d == axis ? op->num_inputs : t0->dims[r++];
  if (!part_shape_is(out, want, rank + 1)) return ek_fail(ctx, op, EK_ERR_SHAPE, "PACK output shape is not the inputs' stacked on the axis");
  int64_t outer, inner;
  if (!outer_inner(out, axis, elem, &outer, &inner)) return ek_fail(ctx, op, EK_ERR_SHAPE, "PACK output too large");
  if (outer * op->num_inputs * inner != out->bytes) return ek_fail(ctx, op, EK_ERR_MODEL, "PACK output size differs from its shape");
  const int quantized = t0->type == EK_INT8 || t0->type == EK_UINT8;
  for (int32_t k = 0; k < op->num_inputs; ++k) {
    const ek_tensor *t = ek_input(ctx, op, k);
    if (!t) return ek_fail(ctx, op, EK_ERR_MODEL, "PACK input tensor missing");
    if (t->type != t0->type || !part_shape_is(t, t0->dims, rank))
      return ek_fail(ctx, op, EK_ERR_SHAPE, "PACK inputs differ in type or shape");
    if (outer * inner != t->bytes) return ek_fail(ctx, op, EK_ERR_MODEL, "PACK input size differs from its shape");
    if (quantized && (t->scale != out->scale || t->zero_point != out->zero_point))
      return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "PACK int8 inputs must have the output's scale and zero point (as LiteRT requires)");
  }
  parts_params *p = (parts_params *)op->user_data;
  memset(p, 0, sizeof *p);
  p->outer = (int32_t)outer;
  p->whole = (int32_t)(op->num_inputs * inner);
  p->parts = op->num_inputs;
  for (int32_t k = 0; k < op->num_inputs; ++k) p->chunk[k] = (int32_t)inner;
  return EK_OK;
}

static ek_status pack_eval(ek_context *ctx, ek_op *op) {
  const parts_params *p = (const parts_params *)op->user_data;
  uint8_t *y = (uint8_t *)ek_output(ctx, op, 0)->data;
  for (int32_t k = 0, at = 0; k < p->parts; at += p->chunk[k], ++k) {
    const uint8_t *x = (const uint8_t *)ek_input(ctx, op, k)->data;
    const size_t n = (size_t)p->chunk[k];
    if (n == 0) continue;
    for (int32_t o = 0; o < p->outer; ++o) memcpy(y + (size_t)o * (size_t)p->whole + (size_t)at, x + (size_t)o * n, n);
  }
  return EK_OK;
}

const ek_kernel ek_kernel_split = {EK_OP_SPLIT, "SPLIT", EK_HOST_FN(parts_persistent_bytes), 0, EK_HOST_FN(split_prepare),
                                   split_eval, 0};
const ek_kernel ek_kernel_split_v = {EK_OP_SPLIT_V, "SPLIT_V", EK_HOST_FN(parts_persistent_bytes), 0,
                                     EK_HOST_FN(split_v_prepare), split_eval, 0};
const ek_kernel ek_kernel_unpack = {EK_OP_UNPACK, "UNPACK", EK_HOST_FN(parts_persistent_bytes), 0,
                                    EK_HOST_FN(unpack_prepare), split_eval, 0};
const ek_kernel ek_kernel_pack = {EK_OP_PACK, "PACK", EK_HOST_FN(parts_persistent_bytes), 0, EK_HOST_FN(pack_prepare),
                                  pack_eval, 0};
