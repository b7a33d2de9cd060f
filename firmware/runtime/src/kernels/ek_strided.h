/* Strided copies for the data-movement kernels (STRIDED_SLICE, SLICE, DEPTH_TO_SPACE, SPACE_TO_DEPTH).
 *
 * An ek_strided walks the output in order (row-major over dims[0..rank)) and reads the input element at
 * base + sum_d i_d * stride[d] (bytes; strides may be negative). prepare() builds it with ek_strided_check, which
 * proves every byte read lies inside the input and that the walk writes exactly the output's bytes, so eval's
 * ek_strided_copy cannot leave either tensor. Extent-1 dimensions are dropped and an innermost run of
 * contiguous elements is copied with memcpy.
 */
#ifndef EK_STRIDED_H
#define EK_STRIDED_H

#include <stdint.h>
#include <string.h>

#include "ek_kernels.h"

#define EK_STRIDED_MAX_DIMS 8

typedef struct ek_strided {
  int32_t rank;  /* dimensions kept (extent > 1); 0 with count 1: one element */
  int32_t elem;  /* bytes per element */
  int32_t count; /* elements written */
  int32_t base;  /* byte offset of the first element read */
  int32_t dims[EK_STRIDED_MAX_DIMS];
  int32_t strides[EK_STRIDED_MAX_DIMS]; /* bytes */
} ek_strided;

/* Builds s from a walk of `rank` dimensions (base and strides in elements). Returns 0 if a read can leave
   [0, in_bytes), if the walk's element count * elem differs from out_bytes, or if a figure overflows. */
static inline int ek_strided_build(ek_strided *s, int32_t elem, int32_t rank, const int32_t *dims, const int64_t *strides,
                                   int64_t base, int32_t in_bytes, int32_t out_bytes) {
  memset(s, 0, sizeof *s);
  if (rank < 0 || rank > EK_STRIDED_MAX_DIMS || elem <= 0) return 0;
  int64_t count = 1, lo = base, hi = base;
  for (int32_t d = 0; d < rank; ++d) {
    if (dims[d] < 0) return 0;
    count *= dims[d];
    if (count > INT32_MAX) return 0;
  }
  s->elem = elem;
  s->count = (int32_t)count;
  if ((int64_t)count * elem != out_bytes) return 0;
  if (count == 0) return 1;
  for (int32_t d = 0; d < rank; ++d) {
    if (dims[d] == 1) continue;
    const int64_t span = (int64_t)(dims[d] - 1) * strides[d];
    if (span < -((int64_t)1 << 40) || span > ((int64_t)1 << 40)) return 0;
    if (span < 0) lo += span; else hi += span;
    s->dims[s->rank] = dims[d];
    s->strides[s->rank] = (int32_t)0; /* set below once the range is known to fit */
    s->rank++;
  }
  if (lo < 0 || (hi + 1) * elem > in_bytes) return 0;
  int32_t k = 0;
  for (int32_t d = 0; d < rank; ++d)
    if (dims[d] != 1) s->strides[k++] = (int32_t)(strides[d] * elem); /* |stride * elem| <= in_bytes */
  s->base = (int32_t)(base * elem);
  return 1;
}

/* Copies s->count elements from src (walked as s says) to dst, in order. */
static inline void ek_strided_copy(const ek_strided *s, uint8_t *dst, const uint8_t *src) {
  if (s->count == 0) return;
  const int32_t elem = s->elem;
  if (s->rank == 0) {
    memcpy(dst, src + s->base, (size_t)elem);
    return;
  }
  const int32_t last = s->rank - 1, n = s->dims[last], step = s->strides[last];
  int32_t idx[EK_STRIDED_MAX_DIMS] = {0};
  const uint8_t *row = src + s->base;
  for (;;) {
    if (step == elem) {
      memcpy(dst, row, (size_t)n * (size_t)elem);
      dst += (size_t)n * (size_t)elem;
    } else if (elem == 1) {
      const uint8_t *p = row;
      for (int32_t i = 0; i < n; ++i, p += step) *dst++ = *p;
    } else {
      const uint8_t *p = row;
      for (int32_t i = 0; i < n; ++i, p += step, dst += elem) memcpy(dst, p, (size_t)elem);
    }
    int32_t d = last - 1;
    for (; d >= 0; --d) { /* odometer over the outer dimensions */
      row += s->strides[d];
      if (++idx[d] < s->dims[d]) break;
      row -= (intptr_t)s->strides[d] * s->dims[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

/* Reads a constant int32 vector (or scalar) input of at most max entries into v; returns the count or -1. */
static inline int32_t ek_const_i32(const ek_tensor *t, int32_t *v, int32_t max) {
  if (!t || t->type != EK_INT32 || !t->is_constant || t->ndim > 1) return -1;
  const int32_t n = t->ndim == 0 ? 1 : t->dims[0];
  if (n < 0 || n > max || t->bytes != 4 * n || (n > 0 && !t->data)) return -1;
  if (n > 0) memcpy(v, t->data, 4u * (size_t)n);
  return n;
}

/* Row-major element strides of t (dims[d] >= 0 checked); returns 0 if the element count overflows. */
static inline int ek_elem_strides(const ek_tensor *t, int64_t *strides) {
  int64_t s = 1;
  for (int32_t d = t->ndim - 1; d >= 0; --d) {
    if (t->dims[d] < 0) return 0;
    strides[d] = s;
    s *= t->dims[d];
    if (s > INT32_MAX) return 0;
  }
  return 1;
}

#endif
