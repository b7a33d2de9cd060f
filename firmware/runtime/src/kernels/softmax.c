/* SOFTMAX over the last dimension, int8 input, int8 (or int16) output.
 *
 * Bit-exact with LiteRT BUILTIN_REF: under kReference tflite/kernels/activations.cc SoftmaxPrepare uses
 * PreprocessSoftmaxScaling(beta, input_scale, 5) and diff_min = -CalculateInputRadius(5, left_shift)
 * (quantization_util.cc, double precision), and SoftmaxEval runs reference_ops::Softmax
 * (kernels/internal/reference/softmax.h): gemmlowp fixed point exp_on_negative_values (Q5.26 in), a Q12.19
 * sum, GetReciprocal, and a rounding shift to the output bits.  No lookup table is involved on this path.
 * Output constraints as in SoftmaxPrepare: int8 output needs zero point -128 and scale 1/256 (+-0.1%).
 * The int16 output is compiled only where a model may need it (SOFTMAX_INT16 below, as FULLY_CONNECTED's 16x8 path).
 */
#include "ek_fixedpoint.h"
#include "ek_gemmlowp.h"
#include "ek_kernels.h"

enum { SOFTMAX_SCALED_DIFF_INTEGER_BITS = 5, SOFTMAX_ACCUMULATION_INTEGER_BITS = 12 };

/* int16 output: in every build except a model's own device build that does not need it (ek_kernels.h, EK_MODEL_PATHS). */
#if !defined(EK_MODEL_PATHS) || defined(EK_NEED_SOFTMAX_INT16)
#define SOFTMAX_INT16 1
#else
#define SOFTMAX_INT16 0
#endif
#define SOFTMAX_INT16_MISSING "SOFTMAX int16 output not built in (EK_NEED_SOFTMAX_INT16): regenerate for this model"

typedef struct softmax_params {
  int32_t input_multiplier;
  int32_t input_left_shift;
  int32_t diff_min;
  int32_t outer;  /* rows */
  int32_t depth;  /* last dimension */
  int32_t output_int16;
} softmax_params;

static size_t softmax_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(softmax_params);
}

static ek_status softmax_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 1 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, "SOFTMAX needs 1 input and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0);
  const ek_tensor *out = ek_output(ctx, op, 0);
  if (!in || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "SOFTMAX input or output tensor missing");
  if (in->type != EK_INT8 || (out->type != EK_INT8 && out->type != EK_INT16))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "SOFTMAX supports int8 input with int8 or int16 output only");
  if (!SOFTMAX_INT16 && out->type == EK_INT16) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, SOFTMAX_INT16_MISSING);
  if (in->num_scales != 1 || out->num_scales != 1)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "SOFTMAX needs per-tensor quantized tensors");
  if (in->ndim < 1 || in->ndim > EK_MAX_DIMS) return ek_fail(ctx, op, EK_ERR_SHAPE, "SOFTMAX input needs 1 to 6 dimensions");
  if (!ek_same_shape(in, out)) return ek_fail(ctx, op, EK_ERR_SHAPE, "SOFTMAX output shape differs from the input shape");
  if (!(in->scale > 0.0f) || !(in->scale <= 3.4028234e38f))
    return ek_fail(ctx, op, EK_ERR_MODEL, "SOFTMAX input scale must be positive and finite");
  if (out->type == EK_INT8) {
    /* TF_LITE_ENSURE_EQ(zero_point, -128); TF_LITE_ENSURE_NEAR(scale, 1.f / 256, 0.001f * 1.f / 256) in float */
    const float target = 1.0f / 256.0f, tolerance = 0.001f * 1.0f / 256.0f;
    const float delta = out->scale > target ? out->scale - target : target - out->scale;
    if (out->zero_point != -128 || !(delta <= tolerance))
      return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "SOFTMAX int8 output must have scale 1/256 and zero point -128");
  }
  const double beta = (double)op->params.beta;
  /* PreprocessSoftmaxScaling (double rounding build): min(beta * scale * 2^26, 2^31 - 1), then
     QuantizeMultiplierGreaterThanOne, which CHECK-fails (TFLite aborts) unless the multiplier is > 1. */
  double real = beta * (double)in->scale * (double)(1 << (31 - SOFTMAX_SCALED_DIFF_INTEGER_BITS));
  const double max_real = (double)((1ll << 31) - 1);
  if (real > max_real) real = max_real;
  if (!(real > 1.0)) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "SOFTMAX beta * input scale too small (TFLite rejects it too)");
  softmax_params *p = (softmax_params *)op->user_data;
  int shift = 0;
  ek_quantize_multiplier(real, &p->input_multiplier, &shift);
  if (shift < 0 || shift > 31) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "SOFTMAX input multiplier out of range");
  p->input_left_shift = shift;
  /* CalculateInputRadius(5, shift, 31) = floor(31 * 2^26 / 2^shift); diff_min = -1.0 * radius */
  const double max_input_rescaled = 1.0 * ((1 << SOFTMAX_SCALED_DIFF_INTEGER_BITS) - 1) *
                                    (double)(1ll << (31 - SOFTMAX_SCALED_DIFF_INTEGER_BITS)) / (double)(1ll << shift);
  p->diff_min = -(int32_t)max_input_rescaled; /* non-negative value: truncation == floor */
  p->depth = in->dims[in->ndim - 1];
  int64_t outer = 1;
  for (int32_t i = 0; i < in->ndim - 1; ++i) {
    if (in->dims[i] < 0) return ek_fail(ctx, op, EK_ERR_SHAPE, "SOFTMAX input has a negative dimension");
    outer *= in->dims[i];
    if (outer > INT32_MAX) return ek_fail(ctx, op, EK_ERR_SHAPE, "SOFTMAX input too large");
  }
  if (p->depth < 0) return ek_fail(ctx, op, EK_ERR_SHAPE, "SOFTMAX input has a negative dimension");
  p->outer = (int32_t)outer;
  p->output_int16 = out->type == EK_INT16;
  const int64_t count = outer * (int64_t)p->depth;
  if (in->bytes != count || out->bytes != count * (p->output_int16 ? 2 : 1))
    return ek_fail(ctx, op, EK_ERR_MODEL, "SOFTMAX tensor size does not match its shape");
  return EK_OK;
}

/* exp(diff * beta * scale) in Q0.31, or 0 when the difference is below diff_min (the kernel skips those). */
static inline int32_t softmax_exp(const softmax_params *p, int32_t diff) {
  const int32_t rescaled = ek_mbqm_greater_than_one(diff, p->input_multiplier, p->input_left_shift);
  return ek_gl_exp_on_negative_values(rescaled, SOFTMAX_SCALED_DIFF_INTEGER_BITS);
}

static ek_status softmax_eval(ek_context *ctx, ek_op *op) {
  const softmax_params *p = (const softmax_params *)op->user_data;
  if (p->outer == 0 || p->depth == 0) return EK_OK;
  const int8_t *in = (const int8_t *)ek_input(ctx, op, 0)->data;
  void *out = ek_output(ctx, op, 0)->data;
  const int32_t depth = p->depth;
  if (!SOFTMAX_INT16 && p->output_int16) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, ek_path_missing);
  const int out16 = SOFTMAX_INT16 && p->output_int16;
  const int bits = out16 ? 16 : 8;
  const int32_t out_min = out16 ? INT16_MIN : INT8_MIN, out_max = out16 ? INT16_MAX : INT8_MAX;
  for (int32_t i = 0; i < p->outer; ++i) {
    const int8_t *row = in + (size_t)i * (size_t)depth;
    int32_t max_in_row = INT8_MIN;
    for (int32_t c = 0; c < depth; ++c) max_in_row = row[c] > max_in_row ? row[c] : max_in_row;
    int32_t sum_of_exps = 0; /* Q12.19, wrapping add as gemmlowp's FixedPoint operator+ */
    for (int32_t c = 0; c < depth; ++c) {
      const int32_t diff = (int32_t)row[c] - max_in_row;
      if (diff >= p->diff_min) sum_of_exps = ek_gl_add(sum_of_exps, ek_rdbpot(softmax_exp(p, diff), SOFTMAX_ACCUMULATION_INTEGER_BITS));
    }
    int num_bits_over_unit = 0;
    const int32_t shifted_scale = ek_gl_get_reciprocal(sum_of_exps, SOFTMAX_ACCUMULATION_INTEGER_BITS, &num_bits_over_unit);
    int exponent = num_bits_over_unit + 31 - bits;
    if (exponent < 0) exponent = 0;   /* TFLite CHECK-fails here; only reachable when the Q12.19 sum wraps */
    if (exponent > 31) exponent = 31;
    /* read row[c] before writing output element c: safe when the planner runs softmax in place */
    for (int32_t c = 0; c < depth; ++c) {
      const int32_t diff = (int32_t)row[c] - max_in_row;
      int32_t value = out_min;
      if (diff >= p->diff_min) {
        const int32_t unsat = ek_rdbpot(ek_srdhm(shifted_scale, softmax_exp(p, diff)), exponent);
        value = ek_clamp_i32(ek_gl_add(unsat, out_min), out_min, out_max);
      }
      const size_t o = (size_t)i * (size_t)depth + (size_t)c;
      if (out16) ((int16_t *)out)[o] = (int16_t)value;
      else ((int8_t *)out)[o] = (int8_t)value;
    }
  }
  return EK_OK;
}

/* edgekit-op: SOFTMAX | types: int8 | versions: 1-2 | fast path: none */
const ek_kernel ek_kernel_softmax = {EK_OP_SOFTMAX, "SOFTMAX", EK_HOST_FN(softmax_persistent_bytes), 0, EK_HOST_FN(softmax_prepare), softmax_eval, 0};
