/* EXP, LOG, SQRT, GELU and ELU, int8 -> int8, through a 256-entry table built in prepare() (kernels/ek_lut.h).
 *
 * Bit-exact with LiteRT BUILTIN_REF:
 * - EXP (tensorflow/lite/kernels/exp.cc): LUTPopulate with std::exp(float); lut_expf equals glibc's expf for every
 *   float (ek_lut.h, logistic.c), so this table is the same on every target.
 * - LOG (tensorflow/lite/kernels/elementwise.cc LogLUTPrepare): LUTPopulate with v <= 0 ? output_min : std::log(v),
 *   output_min = (float)(-128 - zp_out) * output_scale.
 * - SQRT (elementwise.cc SqrtEvalQuantized, per element there, tabulated here): y = clamp((int)(sqrtf(d) /
 *   output_scale) + zp_out) with d = input_scale * (q - zp_in) -- a truncation, not a rounding. LiteRT fails the
 *   invoke when some d < 0 ("Sqrt is only defined for non-negative values"); eval cannot fail, so those inputs give
 *   -128 here.
 * - GELU (tensorflow/lite/kernels/gelu.cc with reference/gelu.h GeluTransform / GeluTransformApproximate):
 *   LUTPopulate with 0.5f * x * erfcf(x * (float)-M_SQRT1_2), or with approximate = true
 *   0.5f * x * (1.f + tanhf((float)(M_2_SQRTPI * M_SQRT1_2) * (x + 0.044715f * x * x * x))).
 * - ELU: not in LiteRT's BUILTIN_REF resolver; TensorFlow Lite Micro's elu.cc (the oracle here: its python
 *   interpreter) fills the table with PopulateLookupTable and v < 0 ? std::exp(v) - 1.0f : v (float).
 * TANH (the same kind of table for int8) lives in logistic.c with LOGISTIC: their int16 paths share one constant table.
 * Verified: tests/firmware/test_kernels_unary.py compares all 256 inputs on many seeded scales and zero points.
 */
#include <math.h>

#include "ek_kernels.h"
#include "ek_lut.h"

static float lut_exp(float v, const void *arg) {
  (void)arg;
  return lut_expf(v);
}

static float lut_log(float v, const void *arg) {
  if (v <= 0.0f) return *(const float *)arg;
  return logf(v);
}

static float lut_elu(float v, const void *arg) {
  (void)arg;
  return v < 0.0f ? lut_expf(v) - 1.0f : v;
}

static float lut_gelu(float v, const void *arg) {
  (void)arg;
  return 0.5f * v * erfcf(v * -0.70710678118654752440f);
}

static float lut_gelu_approximate(float v, const void *arg) {
  (void)arg;
  const float sqrt_2_over_pi = (float)(1.12837916709551257390 * 0.70710678118654752440); /* M_2_SQRTPI * M_SQRT1_2 */
  return 0.5f * v * (1.0f + tanhf(sqrt_2_over_pi * (v + 0.044715f * v * v * v)));
}

static ek_status exp_prepare(ek_context *ctx, ek_op *op) {
  const ek_tensor *in, *out;
  EK_UNARY_INT8_CHECKS(ctx, op, "EXP", 2, in, out);
  ek_lut_populate(in->scale, in->zero_point, out->scale, out->zero_point, lut_exp, 0, ((ek_lut8 *)op->user_data)->lut);
  return EK_OK;
}

static ek_status log_prepare(ek_context *ctx, ek_op *op) {
  const ek_tensor *in, *out;
  EK_UNARY_INT8_CHECKS(ctx, op, "LOG", 2, in, out);
  const float output_min = (float)(-128 - out->zero_point) * out->scale;
  ek_lut_populate(in->scale, in->zero_point, out->scale, out->zero_point, lut_log, &output_min,
                  ((ek_lut8 *)op->user_data)->lut);
  return EK_OK;
}

static ek_status sqrt_prepare(ek_context *ctx, ek_op *op) {
  const ek_tensor *in, *out;
  EK_UNARY_INT8_CHECKS(ctx, op, "SQRT", 1, in, out);
  ek_lut8 *t = (ek_lut8 *)op->user_data;
  for (int32_t q = -128; q <= 127; ++q) {
    const float d = in->scale * (float)(q - in->zero_point);
    int32_t y = -128;
    if (d >= 0.0f) /* int + int as LiteRT computes it on x86 (two's complement wrap-around, no trap) */
      y = (int32_t)((uint32_t)ek_lut_f2i(sqrtf(d) / out->scale) + (uint32_t)out->zero_point);
    t->lut[(uint8_t)(int8_t)q] = ek_lut_clamp8(y);
  }
  return EK_OK;
}

static ek_status elu_prepare(ek_context *ctx, ek_op *op) {
  const ek_tensor *in, *out;
  EK_UNARY_INT8_CHECKS(ctx, op, "ELU", 1, in, out);
  ek_lut_populate(in->scale, in->zero_point, out->scale, out->zero_point, lut_elu, 0, ((ek_lut8 *)op->user_data)->lut);
  return EK_OK;
}

static ek_status gelu_prepare(ek_context *ctx, ek_op *op) {
  const ek_tensor *in, *out;
  EK_UNARY_INT8_CHECKS(ctx, op, "GELU", 2, in, out);
  ek_lut_populate(in->scale, in->zero_point, out->scale, out->zero_point,
                  op->params.approximate ? lut_gelu_approximate : lut_gelu, 0, ((ek_lut8 *)op->user_data)->lut);
  return EK_OK;
}

/* edgekit-op: EXP | types: int8 | versions: 1-2 | fast path: none */
const ek_kernel ek_kernel_exp = {EK_OP_EXP, "EXP", EK_HOST_FN(ek_lut_persistent_bytes), 0, EK_HOST_FN(exp_prepare), ek_lut_eval, EK_HOST_FN(ek_lut_overlap)};
/* edgekit-op: LOG | types: int8 | versions: 1-2 | fast path: none */
const ek_kernel ek_kernel_log = {EK_OP_LOG, "LOG", EK_HOST_FN(ek_lut_persistent_bytes), 0, EK_HOST_FN(log_prepare), ek_lut_eval, EK_HOST_FN(ek_lut_overlap)};
/* edgekit-op: SQRT | types: int8 | versions: 1 | fast path: none */
const ek_kernel ek_kernel_sqrt = {EK_OP_SQRT, "SQRT", EK_HOST_FN(ek_lut_persistent_bytes), 0, EK_HOST_FN(sqrt_prepare), ek_lut_eval, EK_HOST_FN(ek_lut_overlap)};
/* edgekit-op: ELU | types: int8 | versions: 1 | fast path: none */
const ek_kernel ek_kernel_elu = {EK_OP_ELU, "ELU", EK_HOST_FN(ek_lut_persistent_bytes), 0, EK_HOST_FN(elu_prepare), ek_lut_eval, EK_HOST_FN(ek_lut_overlap)};
/* edgekit-op: GELU | types: int8 | versions: 1-2 | fast path: none */
const ek_kernel ek_kernel_gelu = {EK_OP_GELU, "GELU", EK_HOST_FN(ek_lut_persistent_bytes), 0, EK_HOST_FN(gelu_prepare), ek_lut_eval, EK_HOST_FN(ek_lut_overlap)};
