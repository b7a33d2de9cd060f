/* LOGISTIC (sigmoid) and TANH: int8 -> int8 through a 256-entry lookup table built in prepare(); int16 -> int16
 * through LiteRT's fixed-point interpolation of a constant sigmoid table (both ops share it, hence one file).
 *
 * int8 LOGISTIC:
 * Bit-exact with LiteRT BUILTIN_REF: under kReference tflite/kernels/activations.cc SigmoidPrepare requires
 * output scale == 1/256 (exactly) and fills the table with LUTPopulate<int8_t> (kernels/internal/common.h):
 *   dequantized = input_scale * (q - input_zero_point)          (float)
 *   transformed = 1.0f / (1.0f + expf(-dequantized))             (float)
 *   lut[q] = clamp((int32)(round(transformed * (1 / output_scale)) + output_zero_point))
 * and SigmoidEval is a plain table lookup.
 *
 * expf: LiteRT calls the host libm; a microcontroller libm (newlib without double-precision hardware uses
 * its old single-precision expf) can differ by an ulp.  lut_expf (kernels/ek_lut.h) evaluates exp in double precision
 * with only + - * and exponent bit tricks, so it gives the same bits on every IEEE-754 target (software
 * double on Cortex-M4F included); its float result equals the correctly rounded exp for every float input
 * (checked exhaustively).  Build with -ffp-contract=off: a fused multiply-add would change the roundings.
 * LiteRT on Linux gets expf from glibc (2.28+), which is not correctly rounded for ~0.004% of floats; an
 * exhaustive run over all 2^32 float inputs v found exactly one where that changes a table entry
 * round(256 / (1 + exp(-v))): v = 0x1.000016p-7 (glibc's exp(-v) is one ulp above the correctly rounded value,
 * which moves the entry from 129 to 128).  lut_expf returns glibc's value at that single argument, so the
 * table equals LiteRT's for every input scale and zero point.
 *
 * int8 TANH (activations.cc TanhPrepare, kReference): LUTPopulate with std::tanh(float) (tanhf, see ek_lut.h on libm).
 *
 * int16 (16x8 models) LOGISTIC and TANH: LiteRT's kReference path, activations.cc SigmoidPrepare / TanhPrepare with
 * reference_integer_ops::Logistic / Tanh (kernels/internal/reference/integer_ops/logistic.h, tanh.h). Prepare:
 * zero points 0; CheckedLog2 (quantization_util.cc: log2 of the scale within 1e-3 of an integer) of the input scale
 * gives the power-of-two ("POT") case when input_left_shift = 12 + log2(scale) is 0 (LOGISTIC) or 0/1 (TANH):
 * multiplier 3 << input_left_shift, shift 0 (scale 2^-12, the one TFLite's 16x8 quantizer picks, is this case);
 * otherwise multiplier = scale * 4096 * 3 doubled (input_left_shift += 1) while <= 32767 / 2 and the shift <= 30,
 * truncated to int32. LOGISTIC's output scale must be exactly 1/32768, TANH's must pass CheckedLog2 with log2 -15.
 * Eval per element: v = (x * multiplier + round) >> shift (round = 2^(shift-1)), then linear interpolation in the
 * 256-entry sigmoid table below between entries |v| >> 9 and +1 by the low 9 bits (LOGISTIC) or |v| >> 8 by the low 8
 * bits (TANH, tanh(x) = 2 sigmoid(2x) - 1), saturating from entry 255 on, mirrored for v < 0.
 * Refused (LiteRT runs them with int32 overflow, undefined in C++): input scales whose multiplier is 0 (below about
 * 4e-14) or 65536 and more (above 65535 / 12288, about 5.33: x * multiplier leaves int32).
 * CheckedLog2 calls logf; glibc's and newlib's can differ by an ulp, which only matters for a scale within an ulp of
 * the 1e-3 boundary (prepared models take the host's decision).
 */
#include <math.h>

#include "ek_kernels.h"
#include "ek_lut.h"

/* int16 per-op data: the effective multiplier and right shift of eval (POT case already folded in). */
typedef struct sigmoid16_params {
  int32_t multiplier, shift;
} sigmoid16_params;

/* sigmoid(i / 24) in unsigned 0.16 fixed point, i = 0..255: the constant table LiteRT's int16 LOGISTIC and TANH
   interpolate (sigmoid_table_uint16, tensorflow/lite/kernels/internal/common.h). It is not a plain rounding of the
   function (44 entries are one above round(65536 * sigmoid(i / 24))), so it is data, not computed; every entry is
   an output of BUILTIN_REF (TANH at input scale 1/6144 maps x = 128 i onto entry i exactly, output = entry - 32768),
   which tests/firmware/test_kernels_int16_activations.py checks. */
static const uint16_t sigmoid16_table[256] = {
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794, 41432, 42064, 42688,
    43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443, 48964, 49475, 49975, 50464, 50942, 51409,
    51865, 52311, 52745, 53169, 53581, 53983, 54374, 54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433,
    57724, 58007, 58280, 58544, 58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110,
    61279, 61441, 61599, 61750, 61896, 62036, 62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990, 63090, 63186,
    63279, 63368, 63454, 63536, 63615, 63691, 63765, 63835, 63903, 63968, 64030, 64090, 64148, 64204, 64257, 64308,
    64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652, 64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900,
    64926, 64950, 64974, 64997, 65019, 65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208,
    65221, 65234, 65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360, 65367,
    65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433, 65438, 65442, 65445, 65449,
    65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474, 65476, 65479, 65481, 65483, 65485, 65488, 65489, 65491,
    65493, 65495, 65497, 65498, 65500, 65501, 65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513,
    65514, 65515, 65516, 65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524,
    65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529, 65529, 65530, 65530,
    65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532, 65532, 65532, 65532, 65533, 65533, 65533,
    65533, 65533, 65533, 65533, 65533, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65535};

static int sigmoid16_is_int16(const ek_context *ctx, const ek_op *op) {
  return op->num_inputs >= 1 && op->inputs[0] >= 0 && op->inputs[0] < ctx->num_tensors &&
         ctx->tensors[op->inputs[0]].type == EK_INT16;
}

/* int8: the 256-entry table (ek_lut8); int16: sigmoid16_params. */
static size_t sigmoid_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  return sigmoid16_is_int16(ctx, op) ? sizeof(sigmoid16_params) : sizeof(ek_lut8);
}

/* CheckedLog2 (tensorflow/lite/kernels/internal/quantization_util.cc), float arithmetic as there. */
static int sigmoid16_checked_log2(float x, int *log2_result) {
  const float x_log2 = logf(x) * (1.0f / logf(2.0f));
  const float x_log2_rounded = lut_roundf(x_log2);
  *log2_result = (int)x_log2_rounded;
  return fabsf(x_log2 - x_log2_rounded) < 1e-3f;
}

/* The int16 part of SigmoidPrepare / TanhPrepare (checks common to every unary op already made). */
static ek_status sigmoid16_prepare(ek_context *ctx, ek_op *op, int is_tanh) {
  const ek_tensor *in = ek_input(ctx, op, 0), *out = ek_output(ctx, op, 0);
  int out_log2 = 0;
  if (!is_tanh && (double)out->scale != 1.0 / 32768)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "LOGISTIC int16 output scale must be exactly 1/32768 (as LiteRT requires)");
  if (!sigmoid16_checked_log2(out->scale, &out_log2) || out_log2 != -15)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, is_tanh ? "TANH int16 output scale must be 2^-15 (as LiteRT requires)"
                                                        : "LOGISTIC int16 output scale must be exactly 1/32768 (as LiteRT requires)");
  int in_log2 = 0;
  const int pot = sigmoid16_checked_log2(in->scale, &in_log2);
  const int left_shift = 12 + in_log2; /* (15 - kInputIntegerBits) + log2(scale), kInputIntegerBits = 3 */
  sigmoid16_params *p = (sigmoid16_params *)op->user_data;
  if (pot && (left_shift == 0 || (is_tanh && left_shift == 1))) {
    p->multiplier = 3 << left_shift; /* eval's "power of two case": input_multiplier 0 in LiteRT's OpData */
    p->shift = 0;
    return EK_OK;
  }
  double multiplier = (double)in->scale * 4096.0 * 3.0;
  int shift = 0;
  while (multiplier <= 32767.0 / 2.0 && shift <= 30) {
    ++shift;
    multiplier *= 2.0;
  }
  if (!(multiplier < 65536.0))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED,
                   is_tanh ? "TANH int16 input scale above 65535/12288 (~5.33): LiteRT's int32 arithmetic overflows there"
                           : "LOGISTIC int16 input scale above 65535/12288 (~5.33): LiteRT's int32 arithmetic overflows there");
  p->multiplier = (int32_t)multiplier;
  p->shift = shift;
  if (p->multiplier == 0)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED,
                   is_tanh ? "TANH int16 input scale below ~4e-14: LiteRT's int32 arithmetic overflows there"
                           : "LOGISTIC int16 input scale below ~4e-14: LiteRT's int32 arithmetic overflows there");
  return EK_OK;
}

static ek_status logistic_prepare(ek_context *ctx, ek_op *op) {
  const ek_tensor *in, *out;
  EK_UNARY_CHECKS(ctx, op, "LOGISTIC", 2, 1, 3, in, out);
  if (in->type == EK_INT16) return sigmoid16_prepare(ctx, op, 0);
  if ((double)out->scale != 1.0 / 256)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "LOGISTIC int8 output scale must be exactly 1/256");
  ek_lut8 *p = (ek_lut8 *)op->user_data;
  const float inverse_scale = 1.0f / out->scale;
  for (int32_t q = -128; q <= 127; ++q) {
    const float dequantized = in->scale * (float)(q - in->zero_point);
    const float transformed = 1.0f / (1.0f + lut_expf(-dequantized));
    const float rescaled = lut_roundf(transformed * inverse_scale);
    int32_t quantized = (int32_t)(rescaled + (float)out->zero_point); /* rescaled is in [0, 256]: exact */
    quantized = quantized < -128 ? -128 : (quantized > 127 ? 127 : quantized);
    p->lut[(uint8_t)(int8_t)q] = (int8_t)quantized;
  }
  return EK_OK;
}

static float lut_tanh(float v, const void *arg) {
  (void)arg;
  return tanhf(v);
}

static ek_status tanh_prepare(ek_context *ctx, ek_op *op) {
  const ek_tensor *in, *out;
  EK_UNARY_CHECKS(ctx, op, "TANH", 2, 1, 3, in, out);
  if (in->type == EK_INT16) return sigmoid16_prepare(ctx, op, 1);
  ek_lut_populate(in->scale, in->zero_point, out->scale, out->zero_point, lut_tanh, 0, ((ek_lut8 *)op->user_data)->lut);
  return EK_OK;
}

/* x * multiplier + round cannot overflow: prepare keeps multiplier in [1, 65535], and <= 32767 when shift > 0. */
static inline int32_t sigmoid16_rescale(const sigmoid16_params *p, int32_t x) {
  const int32_t round = p->shift > 0 ? (int32_t)1 << (p->shift - 1) : 0;
  return (x * p->multiplier + round) >> p->shift;
}

/* reference_integer_ops::Logistic (int16). */
static inline int16_t logistic16_one(const sigmoid16_params *p, int32_t x) {
  const int32_t v = sigmoid16_rescale(p, x);
  const uint32_t a = (uint32_t)(v < 0 ? -v : v);
  const uint32_t uh = a >> 9;
  uint32_t r = (uint32_t)0x7FFF << 10; /* saturated */
  if (uh < 255) {
    const uint32_t ua = sigmoid16_table[uh], ub = sigmoid16_table[uh + 1];
    r = (ua << 9) + (a & 0x1FFu) * (ub - ua);
  }
  r = v >= 0 ? r + (1u << 9) : (1u << 25) - r + (1u << 9) - 1u;
  return (int16_t)(r >> 10); /* in [1, 32767] */
}

/* reference_integer_ops::Tanh (int16). */
static inline int16_t tanh16_one(const sigmoid16_params *p, int32_t x) {
  const int32_t v = sigmoid16_rescale(p, x);
  const uint32_t a = (uint32_t)(v < 0 ? -v : v);
  const uint32_t uh = a >> 8;
  uint32_t u = (uint32_t)0xFFFF << 8; /* saturated */
  if (uh < 255) {
    const uint32_t ua = sigmoid16_table[uh], ub = sigmoid16_table[uh + 1];
    u = (ua << 8) + (a & 0xFFu) * (ub - ua);
  }
  const int32_t r = (int32_t)u; /* < 2^24 */
  const int32_t s = v >= 0 ? r - (1 << 23) + (1 << 7) : -r + (1 << 23) + (1 << 7) - 1;
  return (int16_t)(s >> 8); /* arithmetic shift (as LiteRT on its targets); in [-32767, 32767] */
}

/* int16 inputs: ``one`` per element (constant at both call sites, so the compiler inlines it); int8: the table. */
static ek_status sigmoid_family_eval(ek_context *ctx, ek_op *op, int16_t (*one)(const sigmoid16_params *, int32_t)) {
  const ek_tensor *in = ek_input(ctx, op, 0);
  if (in->type != EK_INT16) return ek_lut_eval(ctx, op);
  const sigmoid16_params *p = (const sigmoid16_params *)op->user_data;
  const int16_t *x = (const int16_t *)in->data;
  int16_t *y = (int16_t *)ek_output(ctx, op, 0)->data;
  const int32_t n = in->bytes / 2;
  for (int32_t i = 0; i < n; ++i) y[i] = one(p, x[i]);
  return EK_OK;
}

static ek_status logistic_eval(ek_context *ctx, ek_op *op) { return sigmoid_family_eval(ctx, op, logistic16_one); }

static ek_status tanh_eval(ek_context *ctx, ek_op *op) { return sigmoid_family_eval(ctx, op, tanh16_one); }

/* edgekit-op: LOGISTIC | types: int8, int16 | versions: 1-3 | fast path: none */
const ek_kernel ek_kernel_logistic = {EK_OP_LOGISTIC, "LOGISTIC", EK_HOST_FN(sigmoid_persistent_bytes), 0, EK_HOST_FN(logistic_prepare), logistic_eval, 0};
/* edgekit-op: TANH | types: int8, int16 | versions: 1-3 | fast path: none */
const ek_kernel ek_kernel_tanh = {EK_OP_TANH, "TANH", EK_HOST_FN(sigmoid_persistent_bytes), 0, EK_HOST_FN(tanh_prepare), tanh_eval, EK_HOST_FN(ek_lut_overlap)};
