/* SVDF, full integer (int8 input/output, int8 feature weights, int16 time weights and state, int32 bias): TFLite's
 * integer path, tensorflow/lite/kernels/internal/reference/svdf.h EvalIntegerSVDF and tensorflow/lite/kernels/svdf.cc
 * (Prepare: effective_scale_1 = input_scale * weights_feature_scale / state_scale, effective_scale_2 = state_scale
 * * weights_time_scale / output_scale, computed in float and quantized with QuantizeMultiplier; the int8 path
 * requires a RELU activation; TFLM: tensorflow/lite/micro/kernels/svdf_common.cc, same arithmetic).
 *
 * Per invoke, for each batch b and filter f: state[b][f][memory-1] = clamp_int16(MBQM(sum_c wf[f][c] * (x[b][c] -
 * input_zp), scale_1)); scratch[f] = sum_m wt[f][m] * state[b][f][m]; out[u] = bias[u] + sum_r scratch[u*rank + r];
 * y = clamp_int8(MBQM(out, scale_2) + output_zp); then every filter's state row shifts left by one (0 enters).
 * The state (input 4) is a variable tensor: the runtime keeps it in an arena buffer never reused and zeroes it at
 * init and reset (firmware/runtime/README.md, "Resource variables").
 */
/* edgekit-op: SVDF | types: int8 | versions: 1-4 | fast path: none */
#include <string.h>

#include "ek_fixedpoint.h"
#include "ek_kernels.h"

typedef struct svdf_data {
  int32_t scale_1_a, scale_1_b, scale_2_a, scale_2_b;
  int32_t input_zp, output_zp;
  int32_t batch, input, filters, units, memory, rank;
} svdf_data;

static size_t svdf_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(svdf_data);
}

/* Shapes from the tensors (checked in prepare): filters x memory int32 scratch + batch x units int32 sums. */
static size_t svdf_scratch_bytes(const ek_context *ctx, const ek_op *op) {
  ek_context *c = (ek_context *)ctx;
  const ek_tensor *in = ek_input(c, op, 0), *wf = ek_input(c, op, 1), *out = ek_output(c, op, 0);
  if (!in || !wf || !out || in->ndim != 2 || wf->ndim != 2 || out->ndim != 2) return 0;
  const int64_t n = (int64_t)in->dims[0] * wf->dims[0] + (int64_t)out->dims[0] * out->dims[1];
  return n > 0 && n < (1 << 26) ? (size_t)n * 4u : 0;
}

static int per_tensor(const ek_tensor *t) { return t->num_scales == 1 && t->scale > 0.0f; }

static ek_status svdf_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 5 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, "SVDF needs 5 inputs and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0), *wf = ek_input(ctx, op, 1), *wt = ek_input(ctx, op, 2);
  const ek_tensor *bias = ek_input(ctx, op, 3), *st = ek_input(ctx, op, 4), *out = ek_output(ctx, op, 0);
  svdf_data *d = (svdf_data *)op->user_data;
  if (!in || !wf || !wt || !st || !out || !d) return ek_fail(ctx, op, EK_ERR_MODEL, "SVDF tensor missing");
  if (in->type != EK_INT8 || wf->type != EK_INT8 || wt->type != EK_INT16 || st->type != EK_INT16 || out->type != EK_INT8 ||
      (bias && bias->type != EK_INT32))
    return ek_fail(ctx, op, EK_ERR_TYPE, "SVDF supports the integer path only: int8 input/output/feature weights, int16 time weights and state, int32 bias");
  if (!wf->is_constant || !wt->is_constant || (bias && !bias->is_constant) || st->is_constant)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "SVDF weights and bias must be constant and its state a variable tensor");
  if (op->params.activation != EK_ACT_RELU) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "integer SVDF needs a RELU activation (as TFLite)");
  const int32_t rank = op->params.rank;
  if (in->ndim != 2 || wf->ndim != 2 || wt->ndim != 2 || st->ndim != 2 || out->ndim != 2)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "SVDF tensors must be 2-D");
  const int32_t batch = in->dims[0], n_in = in->dims[1], filters = wf->dims[0], memory = wt->dims[1];
  if (rank <= 0 || filters <= 0 || filters % rank != 0 || memory <= 0 || batch <= 0 || n_in <= 0)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "SVDF rank must divide the filter count (and sizes be positive)");
  const int32_t units = filters / rank;
  if (wf->dims[1] != n_in || wt->dims[0] != filters || st->dims[0] != batch ||
      (int64_t)st->dims[1] != (int64_t)memory * filters || out->dims[0] != batch || out->dims[1] != units ||
      (bias && (bias->ndim != 1 || bias->dims[0] != units)))
    return ek_fail(ctx, op, EK_ERR_SHAPE, "SVDF shapes are inconsistent");
  if (!per_tensor(in) || !per_tensor(wf) || !per_tensor(wt) || !per_tensor(st) || !per_tensor(out))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "SVDF needs per-tensor quantization with positive scales");
  if (in->zero_point < -128 || in->zero_point > 127 || out->zero_point < -128 || out->zero_point > 127)
    return ek_fail(ctx, op, EK_ERR_MODEL, "SVDF zero point outside int8");
  if (ek_num_elements(st) * 2 != st->bytes || ek_num_elements(out) != out->bytes)
    return ek_fail(ctx, op, EK_ERR_MODEL, "SVDF tensor sizes do not match their shapes");
  if (op->scratch == (void *)0 || svdf_scratch_bytes(ctx, op) == 0) return ek_fail(ctx, op, EK_ERR_MEMORY, "SVDF scratch missing");
  const float s1 = in->scale * wf->scale / st->scale, s2 = st->scale * wt->scale / out->scale; /* float, as svdf.cc */
  int shift;
  ek_quantize_multiplier((double)s1, &d->scale_1_a, &shift);
  d->scale_1_b = shift;
  ek_quantize_multiplier((double)s2, &d->scale_2_a, &shift);
  d->scale_2_b = shift;
  d->input_zp = in->zero_point;
  d->output_zp = out->zero_point;
  d->batch = batch;
  d->input = n_in;
  d->filters = filters;
  d->units = units;
  d->memory = memory;
  d->rank = rank;
  return EK_OK;
}

static ek_status svdf_eval(ek_context *ctx, ek_op *op) {
  const svdf_data *d = (const svdf_data *)op->user_data;
  const int8_t *x = (const int8_t *)ek_input(ctx, op, 0)->data;
  const int8_t *wf = (const int8_t *)ek_input(ctx, op, 1)->data;
  const int16_t *wt = (const int16_t *)ek_input(ctx, op, 2)->data;
  const ek_tensor *bias_t = ek_input(ctx, op, 3);
  const int32_t *bias = bias_t ? (const int32_t *)bias_t->data : (const int32_t *)0;
  int16_t *state = (int16_t *)ek_input(ctx, op, 4)->data;
  int8_t *y = (int8_t *)ek_output(ctx, op, 0)->data;
  int32_t *scratch = (int32_t *)op->scratch;          /* batch x filters */
  int32_t *sums = scratch + d->batch * d->filters;    /* batch x units */
  const int32_t M = d->memory, F = d->filters;
  for (int32_t b = 0; b < d->batch; ++b) { /* feature matmul into each filter's newest state column */
    for (int32_t f = 0; f < F; ++f) {
      const int8_t *w = wf + (size_t)f * d->input, *v = x + (size_t)b * d->input;
      int32_t acc = 0;
      for (int32_t c = 0; c < d->input; ++c) acc += (int32_t)w[c] * ((int32_t)v[c] - d->input_zp);
      acc = ek_mbqm(acc, d->scale_1_a, d->scale_1_b);
      state[((size_t)b * F + f) * M + (M - 1)] = (int16_t)ek_clamp_i32(acc, -32768, 32767);
    }
  }
  for (int32_t b = 0; b < d->batch; ++b) /* time: dot product of each filter's state row with its time weights */
    for (int32_t f = 0; f < F; ++f) {
      const int16_t *s = state + ((size_t)b * F + f) * M, *w = wt + (size_t)f * M;
      int32_t acc = 0;
      for (int32_t m = 0; m < M; ++m) acc += (int32_t)w[m] * (int32_t)s[m];
      scratch[b * F + f] = acc;
    }
  for (int32_t b = 0; b < d->batch; ++b) /* bias, reduce over rank, rescale */
    for (int32_t u = 0; u < d->units; ++u) {
      int32_t acc = bias ? bias[u] : 0;
      for (int32_t r = 0; r < d->rank; ++r) acc += scratch[b * F + u * d->rank + r];
      sums[b * d->units + u] = acc;
      const int32_t v = ek_mbqm(acc, d->scale_2_a, d->scale_2_b) + d->output_zp;
      y[b * d->units + u] = (int8_t)ek_clamp_i32(v, -128, 127);
    }
  for (int32_t b = 0; b < d->batch; ++b) /* shift every state row left by one; 0 enters on the right */
    for (int32_t f = 0; f < F; ++f) {
      int16_t *s = state + ((size_t)b * F + f) * M;
      memmove(s, s + 1, (size_t)(M - 1) * sizeof *s);
      s[M - 1] = 0;
    }
  return EK_OK;
}

const ek_kernel ek_kernel_svdf = {EK_OP_SVDF, "SVDF", EK_HOST_FN(svdf_persistent_bytes), EK_HOST_FN(svdf_scratch_bytes),
                                  EK_HOST_FN(svdf_prepare), svdf_eval, 0};
