/* NumPy-style broadcasting for the binary elementwise kernels (ADD, MUL); private to src/kernels.
 *
 * Same semantics as TFLite's CalculateShapeForBroadcast + BroadcastBinaryOpSimple (up to EK_MAX_DIMS): shapes
 * are right-aligned, each dimension pair is equal or one of them is 1.  prepare() fuses adjacent dimensions
 * that iterate the same way, so same-shape inputs become one flat loop and the common "[N,H,W,C] op [C]" case
 * two loops.  Eval walks the fused loops with an odometer and hands each innermost row to a row function.
 */
#ifndef EK_BROADCAST_H
#define EK_BROADCAST_H

#include <stdint.h>

#include "ek_kernels.h"

typedef struct ek_broadcast_plan {
  int32_t rank;                 /* fused loops; 0 = empty output (nothing to do) */
  int32_t shape[EK_MAX_DIMS];   /* extent per fused loop, [0] = innermost */
  int32_t a_stride[EK_MAX_DIMS];
  int32_t b_stride[EK_MAX_DIMS];
  int32_t o_stride[EK_MAX_DIMS];
} ek_broadcast_plan;

typedef enum { EK_BCAST_OK = 0, EK_BCAST_INCOMPATIBLE = 1, EK_BCAST_OUTPUT_SHAPE = 2, EK_BCAST_RANK = 3 } ek_bcast_status;

/* Checks a and b broadcast to exactly out's shape and fills plan (element strides). */
static inline ek_bcast_status ek_broadcast_prepare(const ek_tensor *a, const ek_tensor *b, const ek_tensor *out,
                                                   ek_broadcast_plan *plan) {
  if (a->ndim < 0 || b->ndim < 0 || out->ndim < 0 || a->ndim > EK_MAX_DIMS || b->ndim > EK_MAX_DIMS ||
      out->ndim > EK_MAX_DIMS)
    return EK_BCAST_RANK;
  const int32_t rank = a->ndim > b->ndim ? a->ndim : b->ndim;
  if (out->ndim != rank) return EK_BCAST_OUTPUT_SHAPE;
  int32_t da[EK_MAX_DIMS], db[EK_MAX_DIMS], dout[EK_MAX_DIMS];
  int empty = 0;
  for (int32_t i = 0; i < rank; ++i) {
    const int32_t ia = i - (rank - a->ndim), ib = i - (rank - b->ndim);
    da[i] = ia >= 0 ? a->dims[ia] : 1;
    db[i] = ib >= 0 ? b->dims[ib] : 1;
    if (da[i] < 0 || db[i] < 0) return EK_BCAST_INCOMPATIBLE;
    if (da[i] != db[i] && da[i] != 1 && db[i] != 1) return EK_BCAST_INCOMPATIBLE;
    dout[i] = da[i] == 1 ? db[i] : da[i];
    if (out->dims[i] != dout[i]) return EK_BCAST_OUTPUT_SHAPE;
    if (dout[i] == 0) empty = 1;
  }
  plan->rank = 0;
  if (empty) return EK_BCAST_OK;
  int64_t total = 1; /* every dim >= 1 here; the output has the most elements of the three */
  for (int32_t i = 0; i < rank; ++i) {
    total *= dout[i];
    if (total > INT32_MAX) return EK_BCAST_RANK;
  }
  if (rank == 0) { /* scalar op scalar */
    plan->rank = 1;
    plan->shape[0] = 1;
    plan->a_stride[0] = plan->b_stride[0] = plan->o_stride[0] = 1;
    return EK_BCAST_OK;
  }
  int64_t acc_a = 1, acc_b = 1, acc_o = 1;
  int32_t n = -1;
  for (int32_t i = rank - 1; i >= 0; --i) {
    const int32_t sa = (da[i] == 1 && dout[i] != 1) ? 0 : (int32_t)acc_a;
    const int32_t sb = (db[i] == 1 && dout[i] != 1) ? 0 : (int32_t)acc_b;
    const int32_t so = (int32_t)acc_o;
    /* A dimension fuses into the current (inner) loop when every operand keeps walking the same way: an
       operand that does not move in the inner loop must not move here either, and one that moves contiguously
       must continue contiguously (its inner loop then spans exactly acc elements). Extent-1 dims always fuse. */
    int fuse = 0;
    if (n >= 0) {
      const int fa = dout[i] == 1 || (plan->a_stride[n] == 0 ? sa == 0 : sa == (int32_t)acc_a);
      const int fb = dout[i] == 1 || (plan->b_stride[n] == 0 ? sb == 0 : sb == (int32_t)acc_b);
      fuse = fa && fb;
    }
    if (fuse) {
      plan->shape[n] *= dout[i];
    } else {
      ++n;
      plan->a_stride[n] = sa;
      plan->b_stride[n] = sb;
      plan->o_stride[n] = so;
      plan->shape[n] = dout[i];
    }
    acc_a *= da[i];
    acc_b *= db[i];
    acc_o *= dout[i];
  }
  plan->rank = n + 1;
  return EK_BCAST_OK;
}

/* Row function: n outputs from a (step 0 or 1) and b (step 0 or 1). */
typedef void (*ek_broadcast_row_fn)(const void *params, const int8_t *a, int32_t a_step, const int8_t *b,
                                    int32_t b_step, int8_t *out, int32_t n);

static inline void ek_broadcast_run(const ek_broadcast_plan *plan, const void *params, const int8_t *a,
                                    const int8_t *b, int8_t *out, ek_broadcast_row_fn row) {
  if (plan->rank <= 0) return;
  int32_t idx[EK_MAX_DIMS] = {0};
  int32_t oa = 0, ob = 0, oo = 0;
  for (;;) {
    row(params, a + oa, plan->a_stride[0], b + ob, plan->b_stride[0], out + oo, plan->shape[0]);
    int32_t d = 1;
    for (; d < plan->rank; ++d) {
      oa += plan->a_stride[d];
      ob += plan->b_stride[d];
      oo += plan->o_stride[d];
      if (++idx[d] < plan->shape[d]) break;
      oa -= plan->a_stride[d] * plan->shape[d];
      ob -= plan->b_stride[d] * plan->shape[d];
      oo -= plan->o_stride[d] * plan->shape[d];
      idx[d] = 0;
    }
    if (d >= plan->rank) return;
  }
}

/* ---- exact fast requantization for the int8 binary kernels --------------------------------------------
 *
 * TFLite's SaturatingRoundingDoublingHighMul(a, m) is floor((a*m + 2^30) / 2^31) (its negative nudge
 * 1 - 2^30 with truncating division is the same floor) except for a == m == INT32_MIN. For |2a| < 2^31 that
 * equals floor((2a*m + 2^31) / 2^32), i.e. one Cortex-M SMMULR of 2a and m.
 * RoundingDivideByPOT(z, e) for 1 <= e <= 31 is (z + 2^(e-1) + (z < 0 ? -1 : 0)) >> e (arithmetic shift),
 * as long as the sum does not overflow; adding zp * 2^e inside folds a following "+ zp" in exactly.
 * Callers use these only where prepare() proved the operand bounds (see add.c / mul.c). */

/* floor((a * b + 2^31) / 2^32): SMMULR. */
static inline int32_t ek_smmulr(int32_t a, int32_t b) {
#if defined(__ARM_FEATURE_DSP) && defined(__GNUC__)
  int32_t r;
  __asm__("smmulr %0, %1, %2" : "=r"(r) : "r"(a), "r"(b));
  return r;
#else
  return (int32_t)(((int64_t)a * (int64_t)b + ((int64_t)1 << 31)) >> 32);
#endif
}

/* RoundingDivideByPOT(z, e) + bias / 2^e with round-half-away-from-zero, for e >= 1, bias = 2^(e-1) + zp*2^e
   and z + bias - 1 free of overflow. (>> of a negative int32 is arithmetic on every compiler we target, as
   ek_fixedpoint.h's ek_rdbpot assumes too.) */
static inline int32_t ek_rdbpot_biased(int32_t z, int32_t bias, int e) {
  return (z + bias + (z >> 31)) >> e;
}

#endif
