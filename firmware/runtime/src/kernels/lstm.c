/* UNIDIRECTIONAL_SEQUENCE_LSTM, fully integer 8x8->16 (int8 input/output/weights and hidden state, int16 cell state
 * and gates, int32 biases): TFLite's integer path, tensorflow/lite/kernels/unidirectional_sequence_lstm.cc (Prepare:
 * an int8 input with 5 intermediates takes PopulateQuantizedLstmParams8x8_16; without layer norm the gate scales
 * are 2^-12 and only intermediates[4] (the hidden scale and zero point) is read; effective scales in float:
 * weight_scale * input_scale / 2^-12 and weight_scale * output_state_scale / 2^-12 per gate, hidden =
 * 2^-15 / hidden_scale * 2^-15; cell scale = 2^cell_scale (CheckedLog2, <= -9); the zero points are folded into
 * the biases: PrecomputeZeroPointTimesWeightWithBias) and tensorflow/lite/kernels/lstm_eval.cc (EvalInteger8x8_16,
 * LstmStepInteger8x8_16, CalculateLstmGateInteger8x8_16, UpdateLstmCellInteger, CalculateLstmOutputInteger8x8_16)
 * with tensorflow/lite/kernels/internal/reference/portable_tensor_utils.cc (MatrixBatchVectorMultiplyAccumulate,
 * ApplySigmoid = gemmlowp logistic on Q3.12, ApplyTanh<N> = gemmlowp tanh on QN.(15-N), CwiseMul, CwiseAdd,
 * CwiseClipping) and gemmlowp fixedpoint/fixedpoint.h (int16 instantiations).
 *
 * Per step and batch row: gate = clamp16(MBQM(bias' + W_x.x, s_x) + MBQM(bias_h' + W_h.h, s_h)) (each add
 * saturating to int16), forget/input/output = sigmoid(gate), cell = tanh<3>(gate); c = clamp16(rdbpot(f*c, 15) +
 * rdbpot(i*g, 30 + cell_scale)) then clipped; h = clamp8(MBQM(o * tanh<15+cell_scale>(c), s_hidden) + hidden_zp);
 * the output row is h.  Supported: no CIFG, no peephole, no projection, no layer norm, batch-major input
 * (time_major false); everything else is refused in prepare.  The output state (input 18) and cell state (input 19)
 * are variable tensors: the runtime keeps them in arena buffers never reused and zeroes them at init and reset
 * (firmware/runtime/README.md, "Resource variables"), so the state carries across invocations as in TFLite.
 */
/* edgekit-op: UNIDIRECTIONAL_SEQUENCE_LSTM | types: int8 | versions: 1-4 | fast path: none */
#include <math.h>
#include <string.h>

#include "ek_fixedpoint.h"
#include "ek_gemmlowp.h"
#include "ek_kernels.h"

enum { L_IN = 0, L_I2I = 1, L_I2F = 2, L_I2C = 3, L_I2O = 4, L_R2I = 5, L_R2F = 6, L_R2C = 7, L_R2O = 8,
       L_C2I = 9, L_C2F = 10, L_C2O = 11, L_BI = 12, L_BF = 13, L_BC = 14, L_BO = 15, L_PW = 16, L_PB = 17,
       L_HS = 18, L_CS = 19, L_LNI = 20, L_LNF = 21, L_LNC = 22, L_LNO = 23 };
enum { G_I = 0, G_F = 1, G_C = 2, G_O = 3 }; /* gate order in the data arrays */

typedef struct lstm_data {
  int32_t x_a[4], x_b[4], h_a[4], h_b[4];  /* input-to-gate and recurrent-to-gate multipliers per gate */
  int32_t hidden_a, hidden_b, hidden_zp;
  int32_t cell_scale;                       /* log2 of the cell state scale, in [-15, -9] */
  int32_t cell_clip;                        /* quantized cell clip, 0: none */
  int32_t batch, time, n_input, n_cell, n_output;
  /* followed by 8 x n_cell int32: input-side effective biases (bias - input_zp * row sums) for gates I,F,C,O, then
     recurrent-side ones (- output_state_zp * row sums) */
} lstm_data;

static int32_t lstm_cells(ek_context *ctx, const ek_op *op) {
  const ek_tensor *w = ek_input(ctx, op, L_I2O);
  if (!w || w->ndim != 2 || w->dims[0] <= 0 || w->dims[0] > (1 << 16)) return 0;
  return w->dims[0];
}

static size_t lstm_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  const int32_t n = lstm_cells((ek_context *)ctx, op);
  return n > 0 ? sizeof(lstm_data) + 8u * 4u * (size_t)n : 0;
}

/* 4 int16 gate rows and one int16 tanh row (one batch row at a time). */
static size_t lstm_scratch_bytes(const ek_context *ctx, const ek_op *op) {
  const int32_t n = lstm_cells((ek_context *)ctx, op);
  return n > 0 ? 5u * 2u * (size_t)n : 0;
}

/* ---- gemmlowp int16 fixed point (fixedpoint.h instantiated for int16_t) ---- */

static int16_t add16(int32_t a, int32_t b) { return (int16_t)(uint16_t)(uint32_t)(a + b); }
static int16_t sub16(int32_t a, int32_t b) { return (int16_t)(uint16_t)(uint32_t)(a - b); }
static int16_t neg16(int32_t a) { return (int16_t)(uint16_t)(uint32_t)(-a); }
static int16_t sat_add16(int32_t a, int32_t b) { return (int16_t)ek_clamp_i32(a + b, INT16_MIN, INT16_MAX); }
/* RescaleConstantInitializer: an int32 Q-constant rounding-shifted to 16 bits. */
static int16_t c16(int32_t v) { return (int16_t)ek_rdbpot(v, 16); }
/* SaturatingRoundingMultiplyByPOT<e> for e > 0. */
static int16_t sat_pot16(int16_t x, int e) {
  const int32_t threshold = (1 << (15 - e)) - 1;
  if (x > threshold) return INT16_MAX;
  if (x < -threshold) return INT16_MIN;
  return (int16_t)(uint16_t)((uint32_t)(int32_t)x << e);
}
static int16_t rounding_half_sum16(int16_t a, int16_t b) {
  const int32_t sum = (int32_t)a + (int32_t)b;
  return (int16_t)((sum + (sum >= 0 ? 1 : -1)) / 2);
}

static int16_t exp_on_interval16(int16_t a) {
  const int16_t constant_term = c16(1895147668), one_third = c16(715827883);
  const int16_t x = add16(a, 1 << 12); /* a + 1/8 in Q0.15 */
  const int16_t x2 = ek_srdhm16(x, x), x3 = ek_srdhm16(x2, x), x4 = ek_srdhm16(x2, x2);
  const int16_t x4_over_4 = ek_rdbpot16(x4, 2);
  const int16_t poly = ek_rdbpot16(add16(ek_srdhm16(add16(x4_over_4, x3), one_third), x2), 1);
  return sat_add16(constant_term, ek_srdhm16(constant_term, add16(x, poly)));
}

static int16_t exp_on_negative_values16(int16_t a, int integer_bits) {
  static const int32_t multipliers[7] = {1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242};
  const int fractional_bits = 15 - integer_bits;
  const int16_t one_quarter = (int16_t)(1 << (fractional_bits - 2));
  const int16_t mask = (int16_t)(one_quarter - 1);
  const int16_t a_mod = sub16(a & mask, one_quarter);
  int16_t result = exp_on_interval16(integer_bits > 0 ? sat_pot16(a_mod, integer_bits) : a_mod);
  const uint16_t remainder = (uint16_t)sub16(a_mod, a);
  for (int exponent = -2; exponent <= 4; ++exponent)
    if (integer_bits > exponent && ((remainder >> (fractional_bits + exponent)) & 1u))
      result = ek_srdhm16(result, c16(multipliers[exponent + 2]));
  if (integer_bits > 5 && a < c16(-(1 << (36 - integer_bits)))) result = 0;
  if (a == 0) result = INT16_MAX;
  return result;
}

/* one_over_one_plus_x_for_x_in_0_1 (minus_x = 0) and one_minus_x_over_one_plus_x_for_x_in_0_1 (minus_x = 1). */
static int16_t newton_division16(int16_t a, int minus_x) {
  const int16_t half_denominator = rounding_half_sum16(a, INT16_MAX);
  const int16_t f2_one = 1 << 13;
  int16_t x = add16(c16(1515870810), ek_srdhm16(half_denominator, c16(-1010580540)));
  for (int i = 0; i < 3; ++i) {
    const int16_t one_minus = sub16(f2_one, ek_srdhm16(half_denominator, x));
    x = add16(x, sat_pot16(ek_srdhm16(x, one_minus), 2));
  }
  return minus_x ? sat_pot16(sub16(x, f2_one), 2) : sat_pot16(x, 1);
}

static int16_t logistic16(int16_t a, int integer_bits) {
  if (a == 0) return c16(1 << 30);
  const int16_t abs_input = a > 0 ? a : neg16(a);
  const int16_t positive = newton_division16(exp_on_negative_values16(neg16(abs_input), integer_bits), 0);
  return a > 0 ? positive : sub16(INT16_MAX, positive);
}

static int16_t tanh16(int16_t a, int integer_bits) {
  if (a == 0) return 0;
  const int16_t n = a < 0 ? a : neg16(a);
  const int16_t t = newton_division16(exp_on_negative_values16(n, integer_bits + 1), 1); /* ExactMulByPot<1> */
  return a < 0 ? neg16(t) : t;
}

/* ---- prepare ---- */

static int per_tensor(const ek_tensor *t) { return t && t->num_scales == 1 && t->scale > 0.0f; }

static int is_matrix(const ek_tensor *t, int32_t rows, int32_t cols) {
  return t && t->type == EK_INT8 && t->is_constant && t->ndim == 2 && t->dims[0] == rows && t->dims[1] == cols &&
         t->bytes == rows * cols && per_tensor(t);
}

static int is_bias(const ek_tensor *t, int32_t n) {
  return t && t->type == EK_INT32 && t->is_constant && t->ndim == 1 && t->dims[0] == n && t->bytes == 4 * n;
}

/* CheckedLog2 (tensorflow/lite/kernels/internal/quantization_util.h), in float as TFLite. */
static int checked_log2(float x, int32_t *out) {
  const float l = logf(x) * (1.0f / logf(2.0f));
  const float r = roundf(l);
  *out = (int32_t)r;
  return fabsf(l - r) < 1e-3f;
}

static void multiplier(float s, int32_t *a, int32_t *b) {
  int shift;
  ek_quantize_multiplier((double)s, a, &shift);
  *b = shift;
}

static ek_status lstm_prepare(ek_context *ctx, ek_op *op) {
  lstm_data *d = (lstm_data *)op->user_data;
  if (op->num_inputs != 24 || op->num_outputs != 1)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "UNIDIRECTIONAL_SEQUENCE_LSTM needs 24 inputs and 1 output");
  const ek_tensor *in = ek_input(ctx, op, L_IN), *out = ek_output(ctx, op, 0);
  const ek_tensor *hs = ek_input(ctx, op, L_HS), *cs = ek_input(ctx, op, L_CS);
  if (!in || !out || !hs || !cs || !d || !ctx->tensors)
    return ek_fail(ctx, op, EK_ERR_MODEL, "UNIDIRECTIONAL_SEQUENCE_LSTM tensor missing");
  if (in->type != EK_INT8 || out->type != EK_INT8 || hs->type != EK_INT8 || cs->type != EK_INT16)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "UNIDIRECTIONAL_SEQUENCE_LSTM supports the fully integer 8x8->16 path only "
                   "(int8 input/output/output state, int16 cell state): quantize the model to int8 with a representative dataset");
  if (op->params.num_intermediates != 5 || op->params.intermediate_hidden < 0)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "UNIDIRECTIONAL_SEQUENCE_LSTM needs the 5 intermediates of TFLite's 8x8->16 integer LSTM");
  if (ek_input(ctx, op, L_I2I) == 0 || ek_input(ctx, op, L_R2I) == 0 || ek_input(ctx, op, L_BI) == 0)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "UNIDIRECTIONAL_SEQUENCE_LSTM with coupled input/forget gates (CIFG) is not supported");
  if (ek_input(ctx, op, L_C2I) || ek_input(ctx, op, L_C2F) || ek_input(ctx, op, L_C2O))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "UNIDIRECTIONAL_SEQUENCE_LSTM with peephole connections is not supported");
  if (ek_input(ctx, op, L_PW) || ek_input(ctx, op, L_PB))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "UNIDIRECTIONAL_SEQUENCE_LSTM with a projection layer is not supported");
  if (ek_input(ctx, op, L_LNI) || ek_input(ctx, op, L_LNF) || ek_input(ctx, op, L_LNC) || ek_input(ctx, op, L_LNO))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "UNIDIRECTIONAL_SEQUENCE_LSTM with layer normalization is not supported");
  if (op->params.time_major)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "UNIDIRECTIONAL_SEQUENCE_LSTM with time_major = true is not supported (batch-major only)");
  if (op->params.activation != EK_ACT_TANH)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "UNIDIRECTIONAL_SEQUENCE_LSTM supports a TANH cell activation only");
  if (!(op->params.cell_clip >= 0.0f))
    return ek_fail(ctx, op, EK_ERR_MODEL, "UNIDIRECTIONAL_SEQUENCE_LSTM cell_clip must be >= 0");
  if (hs->is_constant || cs->is_constant)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "UNIDIRECTIONAL_SEQUENCE_LSTM output and cell states must be variable tensors");
  if (in->ndim != 3 || out->ndim != 3)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "UNIDIRECTIONAL_SEQUENCE_LSTM input and output must be 3-D [batch, time, features]");
  const int32_t batch = in->dims[0], time = in->dims[1], n_input = in->dims[2];
  const int32_t n_cell = lstm_cells(ctx, op);
  const ek_tensor *r2o = ek_input(ctx, op, L_R2O);
  if (n_cell <= 0 || !r2o || r2o->ndim != 2 || batch <= 0 || time <= 0 || n_input <= 0)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "UNIDIRECTIONAL_SEQUENCE_LSTM shapes must be positive");
  const int32_t n_output = r2o->dims[1];
  if (n_output != n_cell)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "UNIDIRECTIONAL_SEQUENCE_LSTM output size must equal the cell count (no projection)");
  const ek_tensor *wx[4], *wh[4], *bias[4];
  for (int g = 0; g < 4; ++g) {
    wx[g] = ek_input(ctx, op, L_I2I + g);
    wh[g] = ek_input(ctx, op, L_R2I + g);
    bias[g] = ek_input(ctx, op, L_BI + g);
    if (!is_matrix(wx[g], n_cell, n_input) || !is_matrix(wh[g], n_cell, n_output) || !is_bias(bias[g], n_cell))
      return ek_fail(ctx, op, EK_ERR_SHAPE, "UNIDIRECTIONAL_SEQUENCE_LSTM weights must be constant per-tensor int8 "
                     "[cells, inputs] / [cells, outputs] and biases constant int32 [cells]");
  }
  if (out->dims[0] != batch || out->dims[1] != time || out->dims[2] != n_output || out->bytes != batch * time * n_output ||
      in->bytes != batch * time * n_input || ek_num_elements(hs) != batch * n_output || hs->bytes != batch * n_output ||
      ek_num_elements(cs) != batch * n_cell || cs->bytes != 2 * batch * n_cell)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "UNIDIRECTIONAL_SEQUENCE_LSTM input, output and state sizes are inconsistent");
  const ek_tensor *hidden = &ctx->tensors[op->params.intermediate_hidden];
  if (!per_tensor(in) || !per_tensor(hs) || !per_tensor(cs) || !per_tensor(hidden))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "UNIDIRECTIONAL_SEQUENCE_LSTM needs per-tensor quantization with positive "
                   "scales (input, states, intermediates[4])");
  int32_t cell_scale;
  if (!checked_log2(cs->scale, &cell_scale) || cell_scale > -9 || cell_scale < -15)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "UNIDIRECTIONAL_SEQUENCE_LSTM cell state scale must be a power of two in 2^-15..2^-9");
  if (op->scratch == (void *)0 || lstm_scratch_bytes(ctx, op) == 0)
    return ek_fail(ctx, op, EK_ERR_MEMORY, "UNIDIRECTIONAL_SEQUENCE_LSTM scratch missing");
  const float gate_scale = 1.0f / 4096.0f; /* 2^-12: no layer norm */
  for (int g = 0; g < 4; ++g) {
    multiplier(wx[g]->scale * in->scale / gate_scale, &d->x_a[g], &d->x_b[g]);
    multiplier(wh[g]->scale * hs->scale / gate_scale, &d->h_a[g], &d->h_b[g]);
  }
  const float hidden_scale = (float)(pow(2.0, -15) / (double)hidden->scale * pow(2.0, -15));
  multiplier(hidden_scale, &d->hidden_a, &d->hidden_b);
  d->hidden_zp = hidden->zero_point;
  d->cell_scale = cell_scale;
  d->cell_clip = 0;
  if (op->params.cell_clip > 0.0f)
    d->cell_clip = (int16_t)fminf(fmaxf(op->params.cell_clip / cs->scale, -32768.0f), 32767.0f);
  d->batch = batch;
  d->time = time;
  d->n_input = n_input;
  d->n_cell = n_cell;
  d->n_output = n_output;
  int32_t *eb = (int32_t *)(void *)(d + 1);
  for (int g = 0; g < 4; ++g) { /* PrecomputeZeroPointTimesWeightWithBias, wrap-around as int32 */
    const int8_t *w = (const int8_t *)wx[g]->data, *r = (const int8_t *)wh[g]->data;
    const int32_t *b = (const int32_t *)bias[g]->data;
    for (int32_t c = 0; c < n_cell; ++c) {
      int32_t sx = 0, sh = 0;
      for (int32_t k = 0; k < n_input; ++k) sx += w[(size_t)c * n_input + k];
      for (int32_t k = 0; k < n_output; ++k) sh += r[(size_t)c * n_output + k];
      eb[g * n_cell + c] = (int32_t)((uint32_t)b[c] + (uint32_t)sx * (uint32_t)(-in->zero_point));
      eb[(4 + g) * n_cell + c] = (int32_t)((uint32_t)sh * (uint32_t)(-hs->zero_point));
    }
  }
  return EK_OK;
}

/* ---- eval ---- */

/* MatrixBatchVectorMultiplyAccumulate (int8 x int8 -> int16, accumulating into gate with saturation). */
static void gate_matmul(const int8_t *v, int32_t n, const int8_t *w, const int32_t *bias, int32_t a, int32_t b,
                        int32_t n_cell, int16_t *gate) {
  for (int32_t c = 0; c < n_cell; ++c) {
    const int8_t *row = w + (size_t)c * n;
    int32_t acc = bias[c];
    for (int32_t k = 0; k < n; ++k) acc += (int32_t)v[k] * (int32_t)row[k];
    acc = ek_mbqm(acc, a, b) + gate[c];
    gate[c] = (int16_t)ek_clamp_i32(acc, INT16_MIN, INT16_MAX);
  }
}

static ek_status lstm_eval(ek_context *ctx, ek_op *op) {
  const lstm_data *d = (const lstm_data *)op->user_data;
  const int8_t *x = (const int8_t *)ek_input(ctx, op, L_IN)->data;
  int8_t *h = (int8_t *)ek_input(ctx, op, L_HS)->data;
  int16_t *cs = (int16_t *)ek_input(ctx, op, L_CS)->data;
  int8_t *y = (int8_t *)ek_output(ctx, op, 0)->data;
  const int8_t *wx[4], *wh[4];
  for (int g = 0; g < 4; ++g) {
    wx[g] = (const int8_t *)ek_input(ctx, op, L_I2I + g)->data;
    wh[g] = (const int8_t *)ek_input(ctx, op, L_R2I + g)->data;
  }
  const int32_t *eb = (const int32_t *)(const void *)(d + 1);
  const int32_t N = d->n_cell;
  int16_t *gates = (int16_t *)op->scratch; /* 4 x N, then N for tanh(c) */
  int16_t *th = gates + 4 * N;
  const int tanh_bits = 15 + d->cell_scale;
  for (int32_t b = 0; b < d->batch; ++b) {
    int8_t *hb = h + (size_t)b * d->n_output;
    int16_t *cb = cs + (size_t)b * N;
    for (int32_t t = 0; t < d->time; ++t) {
      const size_t step = (size_t)b * d->time + t;
      const int8_t *xt = x + step * d->n_input;
      for (int g = 0; g < 4; ++g) {
        int16_t *gate = gates + g * N;
        memset(gate, 0, (size_t)N * sizeof *gate);
        gate_matmul(xt, d->n_input, wx[g], eb + g * N, d->x_a[g], d->x_b[g], N, gate);
        gate_matmul(hb, d->n_output, wh[g], eb + (4 + g) * N, d->h_a[g], d->h_b[g], N, gate);
        for (int32_t c = 0; c < N; ++c) gate[c] = g == G_C ? tanh16(gate[c], 3) : logistic16(gate[c], 3);
      }
      const int16_t *ig = gates + G_I * N, *fg = gates + G_F * N, *cg = gates + G_C * N, *og = gates + G_O * N;
      for (int32_t c = 0; c < N; ++c) { /* UpdateLstmCellInteger */
        const int16_t kept = (int16_t)ek_rdbpot((int32_t)fg[c] * (int32_t)cb[c], 15);
        const int16_t added = (int16_t)ek_rdbpot((int32_t)ig[c] * (int32_t)cg[c], 30 + d->cell_scale);
        int32_t v = ek_clamp_i32((int32_t)kept + (int32_t)added, INT16_MIN, INT16_MAX);
        if (d->cell_clip > 0) v = ek_clamp_i32(v, -d->cell_clip, d->cell_clip);
        cb[c] = (int16_t)v;
      }
      for (int32_t c = 0; c < N; ++c) th[c] = tanh16(cb[c], tanh_bits);
      int8_t *yt = y + step * d->n_output;
      for (int32_t c = 0; c < N; ++c) { /* CalculateLstmOutputInteger8x8_16 (+ hidden_zp, as LiteRT) */
        const int32_t v = ek_mbqm((int32_t)og[c] * (int32_t)th[c], d->hidden_a, d->hidden_b) + d->hidden_zp;
        hb[c] = (int8_t)ek_clamp_i32(v, -128, 127);
      }
      memcpy(yt, hb, (size_t)d->n_output);
    }
  }
  return EK_OK;
}

const ek_kernel ek_kernel_unidirectional_sequence_lstm = {
    EK_OP_UNIDIRECTIONAL_SEQUENCE_LSTM, "UNIDIRECTIONAL_SEQUENCE_LSTM", EK_HOST_FN(lstm_persistent_bytes),
    EK_HOST_FN(lstm_scratch_bytes), EK_HOST_FN(lstm_prepare), lstm_eval, 0};
