/* TRANSPOSE, any element type of 1, 2, 4 or 8 bytes, up to EK_MAX_DIMS dimensions.
 *
 * Bit-exact with LiteRT BUILTIN_REF (tflite/kernels/transpose.cc: the permutation is a constant int32 vector
 * with one entry per input dimension, entries in [-rank, rank), negative ones wrap, no duplicates; output dim i
 * = input dim perm[i]).  Pure data movement: quantization parameters pass through untouched, as in LiteRT.
 */
#include <stdint.h>
#include <string.h>

#include "ek_kernels.h"

typedef struct transpose_params {
  int32_t rank;  /* after dropping extent-1 output dimensions; 0 = one element or empty */
  int32_t elem;
  int32_t count; /* elements */
  int32_t out_dims[EK_MAX_DIMS];
  int32_t in_strides[EK_MAX_DIMS]; /* input element stride of each output dimension */
} transpose_params;

static size_t transpose_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(transpose_params);
}

static ek_status transpose_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 2 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, "TRANSPOSE needs 2 inputs and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0), *perm = ek_input(ctx, op, 1);
  const ek_tensor *out = ek_output(ctx, op, 0);
  if (!in || !perm || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "TRANSPOSE input, permutation or output tensor missing");
  if (in->type != out->type) return ek_fail(ctx, op, EK_ERR_TYPE, "TRANSPOSE input and output types differ");
  const int32_t elem = ek_type_size(in->type);
  if (elem == 0) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "TRANSPOSE tensor type not supported");
  if (in->ndim < 0 || in->ndim > EK_MAX_DIMS) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "TRANSPOSE supports at most 6 dimensions");
  if (perm->type != EK_INT32) return ek_fail(ctx, op, EK_ERR_TYPE, "TRANSPOSE permutation must be int32");
  if (!perm->is_constant || (perm->bytes > 0 && !perm->data))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "TRANSPOSE permutation must be a constant tensor");
  const int32_t rank = in->ndim;
  if (perm->ndim != 1 || perm->dims[0] != rank || perm->bytes != rank * 4)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "TRANSPOSE permutation must have one entry per input dimension");
  if (out->ndim != rank) return ek_fail(ctx, op, EK_ERR_SHAPE, "TRANSPOSE output rank differs from the input rank");
  int32_t pv[EK_MAX_DIMS];
  memcpy(pv, perm->data, (size_t)rank * 4);
  int32_t in_strides[EK_MAX_DIMS];
  int64_t stride = 1;
  for (int32_t d = rank - 1; d >= 0; --d) {
    if (in->dims[d] < 0) return ek_fail(ctx, op, EK_ERR_SHAPE, "TRANSPOSE input has a negative dimension");
    in_strides[d] = (int32_t)(stride > INT32_MAX ? INT32_MAX : stride);
    stride *= in->dims[d];
    if (stride > INT32_MAX) return ek_fail(ctx, op, EK_ERR_SHAPE, "TRANSPOSE input too large");
  }
  if (stride * elem != in->bytes || out->bytes != in->bytes)
    return ek_fail(ctx, op, EK_ERR_MODEL, "TRANSPOSE tensor sizes do not match their shapes");
  transpose_params *p = (transpose_params *)op->user_data;
  memset(p, 0, sizeof *p);
  p->elem = elem;
  p->count = (int32_t)stride;
  unsigned seen = 0;
  for (int32_t i = 0; i < rank; ++i) {
    int32_t a = pv[i];
    if (a < -rank || a >= rank) return ek_fail(ctx, op, EK_ERR_SHAPE, "TRANSPOSE permutation entry out of range");
    if (a < 0) a += rank;
    if (seen & (1u << a)) return ek_fail(ctx, op, EK_ERR_SHAPE, "TRANSPOSE permutation has a repeated entry");
    seen |= 1u << a;
    if (out->dims[i] != in->dims[a]) return ek_fail(ctx, op, EK_ERR_SHAPE, "TRANSPOSE output shape is not the permuted input shape");
    if (out->dims[i] != 1) { /* extent-1 dimensions do not move anything */
      p->out_dims[p->rank] = out->dims[i];
      p->in_strides[p->rank] = in_strides[a];
      p->rank++;
    }
  }
  return EK_OK;
}

#define EK_TRANSPOSE_LOOP(T)                                                              \
  do {                                                                                    \
    const T *src = (const T *)x;                                                          \
    T *dst = (T *)y;                                                                      \
    const int32_t n0 = p->out_dims[last], s0 = p->in_strides[last];                      \
    for (;;) {                                                                            \
      for (int32_t i = 0; i < n0; ++i) *dst++ = src[off + i * s0];                        \
      int32_t d = last - 1;                                                               \
      for (; d >= 0; --d) {                                                               \
        off += p->in_strides[d];                                                          \
        if (++idx[d] < p->out_dims[d]) break;                                             \
        off -= p->in_strides[d] * p->out_dims[d];                                         \
        idx[d] = 0;                                                                       \
      }                                                                                   \
      if (d < 0) break;                                                                   \
    }                                                                                     \
  } while (0)

static ek_status transpose_eval(ek_context *ctx, ek_op *op) {
  const transpose_params *p = (const transpose_params *)op->user_data;
  const void *x = ek_input(ctx, op, 0)->data;
  void *y = ek_output(ctx, op, 0)->data;
  if (p->count == 0) return EK_OK;
  if (p->rank == 0) { /* a single element */
    memcpy(y, x, (size_t)p->elem);
    return EK_OK;
  }
  const int32_t last = p->rank - 1;
  int32_t idx[EK_MAX_DIMS] = {0};
  int32_t off = 0;
  const int aligned = (((uintptr_t)x | (uintptr_t)y) & (uintptr_t)(p->elem - 1)) == 0;
  switch (aligned ? p->elem : 0) {
    case 1: EK_TRANSPOSE_LOOP(uint8_t); break;
    case 2: EK_TRANSPOSE_LOOP(uint16_t); break;
    case 4: EK_TRANSPOSE_LOOP(uint32_t); break;
    case 8: EK_TRANSPOSE_LOOP(uint64_t); break;
    default: { /* unaligned wide elements: byte copies */
      const uint8_t *src = (const uint8_t *)x;
      uint8_t *dst = (uint8_t *)y;
      const size_t e = (size_t)p->elem;
      for (;;) {
        for (int32_t i = 0; i < p->out_dims[last]; ++i, dst += e) memcpy(dst, src + (size_t)(off + i * p->in_strides[last]) * e, e);
        int32_t d = last - 1;
        for (; d >= 0; --d) {
          off += p->in_strides[d];
          if (++idx[d] < p->out_dims[d]) break;
          off -= p->in_strides[d] * p->out_dims[d];
          idx[d] = 0;
        }
        if (d < 0) break;
      }
    }
  }
  return EK_OK;
}

/* edgekit-op: TRANSPOSE | types: int8, uint8, int16, int32, int64, float16, float32, bool | versions: 1-6 | fast path: none */
const ek_kernel ek_kernel_transpose = {EK_OP_TRANSPOSE, "TRANSPOSE", EK_HOST_FN(transpose_persistent_bytes), 0, EK_HOST_FN(transpose_prepare), transpose_eval, 0};
