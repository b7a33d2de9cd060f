/* edgekit-op: SUM | types: int8 | versions: 1-2 | fast path: none */
/* edgekit-op: REDUCE_MAX | types: int8 | versions: 1-3 | fast path: none */
/* edgekit-op: REDUCE_MIN | types: int8 | versions: 1-3 | fast path: none */
/* MEAN, int8, over any set of axes (constant int32 axis tensor), keep_dims true or false.
 *
 * Bit-exact with LiteRT BUILTIN_REF: under kReference tflite/kernels/reduce.cc EvalMean sends every int8
 * input to reference_ops::QuantizedMeanOrSum (kernels/internal/reference/reduce.h; the 4-D
 * keep_dims/axes {1,2} special case exists only for kGenericOptimized): multiplier/shift from
 * QuantizeMultiplier(double(input_scale) / double(output_scale)) in PrepareMeanOrSum, an int32 sum of the raw
 * values, the 1/num_elements factor folded into the multiplier ((multiplier << s) / n, s = min(floor(log2 n),
 * 32, 31 + shift)), then MultiplyByQuantizedMultiplier(sum - zp_in * n) + zp_out, clamped.
 * An input with no elements gives zeros (InitializeMeanOutput).
 *
 * The same file runs the other int8 reductions over the same axes / keep_dims handling and walk:
 * - SUM: QuantizedMeanOrSum with compute_sum (no 1/n fold): MultiplyByQuantizedMultiplier(sum - zp_in * n,
 *   QuantizeMultiplier(in_scale / out_scale)) + zp_out, clamped (TFLM reduce_common.cc EvalSumHelper; LiteRT's
 *   default resolver gives the same outputs). Not BUILTIN_REF: LiteRT's reference SUM (reduce.cc EvalSum,
 *   kReference) reads int8 data as uint8 (GetTensorData<uint8_t>) and gives wrong sums for negative values.
 * - REDUCE_MAX / REDUCE_MIN: reduce.cc EvalGeneric (reference ReduceGeneric): the raw int8 max / min, -128 / 127
 *   for an empty reduction; the input and output quantization must be equal (reduce.cc checks it too).
 */
#include <string.h>

#include "ek_fixedpoint.h"
#include "ek_gemmlowp.h"
#include "ek_kernels.h"

typedef struct mean_params {
  int32_t num_kept, num_reduced;
  int32_t kept_dims[EK_MAX_DIMS], kept_strides[EK_MAX_DIMS];       /* element strides in the input */
  int32_t reduced_dims[EK_MAX_DIMS], reduced_strides[EK_MAX_DIMS];
  int32_t num_outputs;
  int32_t empty_input;
  int32_t input_zero_point, output_zero_point;
  int32_t multiplier, shift;  /* with 1/num_reduced folded in */
  int64_t num_reduced_elements;
  int32_t kind; /* the opcode: EK_OP_MEAN, EK_OP_SUM, EK_OP_REDUCE_MAX or EK_OP_REDUCE_MIN */
} mean_params;

/* "<OP> tail" for the four reductions of this file (static strings for ek_fail). */
#define RED_MSG(op, tail)                                                                                              \
  ((op)->opcode == EK_OP_SUM ? "SUM " tail                                                                            \
   : (op)->opcode == EK_OP_REDUCE_MAX ? "REDUCE_MAX " tail                                                            \
   : (op)->opcode == EK_OP_REDUCE_MIN ? "REDUCE_MIN " tail                                                            \
                                      : "MEAN " tail)

static size_t mean_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(mean_params);
}

static ek_status mean_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 2 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, RED_MSG(op, "needs 2 inputs and 1 output"));
  const ek_tensor *in = ek_input(ctx, op, 0), *axis = ek_input(ctx, op, 1);
  const ek_tensor *out = ek_output(ctx, op, 0);
  if (!in || !axis || !out) return ek_fail(ctx, op, EK_ERR_MODEL, RED_MSG(op, "input, axis or output tensor missing"));
  if (in->type != EK_INT8 || out->type != EK_INT8) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, RED_MSG(op, "supports int8 only"));
  if (in->num_scales != 1 || out->num_scales != 1) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, RED_MSG(op, "needs per-tensor quantized tensors"));
  if (!(in->scale > 0.0f) || !(in->scale <= 3.4028234e38f) || !(out->scale > 0.0f) || !(out->scale <= 3.4028234e38f))
    return ek_fail(ctx, op, EK_ERR_MODEL, RED_MSG(op, "tensor scale must be positive and finite"));
  if (in->zero_point < -128 || in->zero_point > 127 || out->zero_point < -128 || out->zero_point > 127)
    return ek_fail(ctx, op, EK_ERR_MODEL, RED_MSG(op, "int8 zero point outside [-128, 127]"));
  if (axis->type != EK_INT32) return ek_fail(ctx, op, EK_ERR_TYPE, RED_MSG(op, "axis tensor must be int32"));
  if (!axis->is_constant || (axis->bytes > 0 && !axis->data))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, RED_MSG(op, "axis tensor must be constant"));
  if (axis->ndim > 1) return ek_fail(ctx, op, EK_ERR_SHAPE, RED_MSG(op, "axis tensor must be a scalar or a vector"));
  if (in->ndim < 0 || in->ndim > EK_MAX_DIMS) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, RED_MSG(op, "supports at most 6 dimensions"));
  const int32_t rank = in->ndim;
  const int32_t num_axis = axis->bytes / 4;
  int reduced[EK_MAX_DIMS] = {0};
  if (rank > 0) { /* ResolveAxisForShape: negative axes wrap, duplicates collapse; a rank-0 input ignores axes */
    int32_t values[EK_MAX_DIMS * 4];
    if (num_axis > (int32_t)(sizeof values / sizeof values[0])) return ek_fail(ctx, op, EK_ERR_SHAPE, RED_MSG(op, "has too many axes"));
    memcpy(values, axis->data, (size_t)num_axis * 4); /* the model buffer may be unaligned */
    for (int32_t i = 0; i < num_axis; ++i) {
      int32_t a = values[i];
      if (a < 0) a += rank;
      if (a < 0 || a >= rank) return ek_fail(ctx, op, EK_ERR_SHAPE, RED_MSG(op, "axis out of range"));
      reduced[a] = 1;
    }
  }
  /* expected output shape */
  int32_t expected[EK_MAX_DIMS];
  int32_t expected_rank = 0;
  for (int32_t d = 0; d < rank; ++d) {
    if (in->dims[d] < 0) return ek_fail(ctx, op, EK_ERR_SHAPE, RED_MSG(op, "input has a negative dimension"));
    if (!reduced[d]) expected[expected_rank++] = in->dims[d];
    else if (op->params.keep_dims) expected[expected_rank++] = 1;
  }
  if (out->ndim != expected_rank) return ek_fail(ctx, op, EK_ERR_SHAPE, RED_MSG(op, "output rank does not match axes and keep_dims"));
  for (int32_t d = 0; d < expected_rank; ++d)
    if (out->dims[d] != expected[d]) return ek_fail(ctx, op, EK_ERR_SHAPE, RED_MSG(op, "output shape does not match axes and keep_dims"));

  mean_params *p = (mean_params *)op->user_data;
  memset(p, 0, sizeof *p);
  int64_t stride = 1, num_outputs = 1, num_reduced = 1;
  for (int32_t d = rank - 1; d >= 0; --d) { /* index 0 = innermost dimension */
    if (reduced[d]) {
      p->reduced_dims[p->num_reduced] = in->dims[d];
      p->reduced_strides[p->num_reduced++] = (int32_t)stride;
      num_reduced *= in->dims[d];
    } else {
      p->kept_dims[p->num_kept] = in->dims[d];
      p->kept_strides[p->num_kept++] = (int32_t)stride;
      num_outputs *= in->dims[d];
    }
    stride *= in->dims[d];
    if (stride > INT32_MAX) return ek_fail(ctx, op, EK_ERR_SHAPE, RED_MSG(op, "input too large"));
  }
  if (stride != in->bytes) return ek_fail(ctx, op, EK_ERR_SHAPE, RED_MSG(op, "input size does not match its shape"));
  p->empty_input = stride == 0;
  p->num_outputs = ek_num_elements(out);
  if (out->bytes != p->num_outputs || (!p->empty_input && num_outputs != p->num_outputs))
    return ek_fail(ctx, op, EK_ERR_SHAPE, RED_MSG(op, "output size does not match"));
  p->kind = op->opcode;
  if (p->kind == EK_OP_REDUCE_MAX || p->kind == EK_OP_REDUCE_MIN) { /* raw values: one quantization in and out */
    if (in->scale != out->scale || in->zero_point != out->zero_point)
      return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, RED_MSG(op, "needs the same scale and zero point on input and output (TFLite checks it too)"));
    return EK_OK;
  }
  p->input_zero_point = in->zero_point;
  p->output_zero_point = out->zero_point;
  p->num_reduced_elements = num_reduced;

  int32_t multiplier = 0;
  int shift = 0;
  ek_quantize_multiplier((double)in->scale / (double)out->scale, &multiplier, &shift);
  if (shift > 31) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, RED_MSG(op, "output scale too small for the input scale"));
  if (!p->empty_input && num_reduced > 0 && p->kind == EK_OP_MEAN) { /* SUM: no 1/n fold */
    int s = 63 - ek_clz64((uint64_t)num_reduced);
    if (s > 32) s = 32;
    if (s > 31 + shift) s = 31 + shift;
    multiplier = (int32_t)(((int64_t)multiplier << s) / num_reduced);
    shift -= s;
  }
  p->multiplier = multiplier;
  p->shift = shift;
  return EK_OK;
}

static ek_status mean_eval(ek_context *ctx, ek_op *op) {
  const mean_params *p = (const mean_params *)op->user_data;
  const int8_t *x = (const int8_t *)ek_input(ctx, op, 0)->data;
  int8_t *y = (int8_t *)ek_output(ctx, op, 0)->data;
  const int32_t kind = p->kind;
  if (p->empty_input) { /* MEAN/SUM: zeros; MAX/MIN: the reducer's initial value */
    const int fill = kind == EK_OP_REDUCE_MAX ? INT8_MIN : kind == EK_OP_REDUCE_MIN ? INT8_MAX : 0;
    if (p->num_outputs > 0) memset(y, fill, (size_t)p->num_outputs);
    return EK_OK;
  }
  const int32_t zp_times_n = (int32_t)(uint32_t)((uint64_t)(int64_t)p->input_zero_point * (uint64_t)p->num_reduced_elements);
  int32_t kidx[EK_MAX_DIMS] = {0};
  int32_t base = 0;
  for (int32_t o = 0; o < p->num_outputs; ++o) {
    /* sum over the reduced dimensions (int32, wrapping like TFLite's WrappingAdd) */
    uint32_t sum = 0;
    int32_t best = kind == EK_OP_REDUCE_MAX ? INT8_MIN : INT8_MAX; /* REDUCE_MAX / REDUCE_MIN */
    int32_t ridx[EK_MAX_DIMS] = {0};
    int32_t off = base;
    const int32_t n0 = p->num_reduced > 0 ? p->reduced_dims[0] : 1, s0 = p->num_reduced > 0 ? p->reduced_strides[0] : 0;
    for (;;) {
      const int8_t *r = x + off;
      if (kind == EK_OP_REDUCE_MAX) {
        for (int32_t i = 0; i < n0; ++i) best = r[i * s0] > best ? r[i * s0] : best;
      } else if (kind == EK_OP_REDUCE_MIN) {
        for (int32_t i = 0; i < n0; ++i) best = r[i * s0] < best ? r[i * s0] : best;
      } else {
        for (int32_t i = 0; i < n0; ++i) sum += (uint32_t)(int32_t)r[i * s0];
      }
      int32_t d = 1;
      for (; d < p->num_reduced; ++d) {
        off += p->reduced_strides[d];
        if (++ridx[d] < p->reduced_dims[d]) break;
        off -= p->reduced_strides[d] * p->reduced_dims[d];
        ridx[d] = 0;
      }
      if (d >= p->num_reduced) break;
    }
    if (kind == EK_OP_REDUCE_MAX || kind == EK_OP_REDUCE_MIN) {
      y[o] = (int8_t)best;
    } else {
      const int32_t shifted_sum = (int32_t)(sum - (uint32_t)zp_times_n);
      const int32_t value = ek_mbqm(shifted_sum, p->multiplier, p->shift) + p->output_zero_point;
      y[o] = (int8_t)ek_clamp_i32(value, INT8_MIN, INT8_MAX);
    }
    /* next output element: odometer over the kept dimensions, innermost first */
    for (int32_t d = 0; d < p->num_kept; ++d) {
      base += p->kept_strides[d];
      if (++kidx[d] < p->kept_dims[d]) break;
      base -= p->kept_strides[d] * p->kept_dims[d];
      kidx[d] = 0;
    }
  }
  return EK_OK;
}

/* edgekit-op: MEAN | types: int8 | versions: 1-2 | fast path: none */
const ek_kernel ek_kernel_mean = {EK_OP_MEAN, "MEAN", EK_HOST_FN(mean_persistent_bytes), 0, EK_HOST_FN(mean_prepare), mean_eval, 0};
const ek_kernel ek_kernel_sum = {EK_OP_SUM, "SUM", EK_HOST_FN(mean_persistent_bytes), 0, EK_HOST_FN(mean_prepare), mean_eval, 0};
const ek_kernel ek_kernel_reduce_max = {EK_OP_REDUCE_MAX, "REDUCE_MAX", EK_HOST_FN(mean_persistent_bytes), 0, EK_HOST_FN(mean_prepare),
                                        mean_eval, 0};
const ek_kernel ek_kernel_reduce_min = {EK_OP_REDUCE_MIN, "REDUCE_MIN", EK_HOST_FN(mean_persistent_bytes), 0, EK_HOST_FN(mean_prepare),
                                        mean_eval, 0};
