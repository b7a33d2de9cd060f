/* Overlap helpers for ek_kernel.overlap: the largest output_offset - input_offset (d_max, bytes) a kernel's
 * access pattern allows when the input dies at the op. See "Kernel access contract" in
 * firmware/runtime/README.md. Private to src/kernels; host-side planning only (not on the device's hot path).
 */
#ifndef EK_STREAM_H
#define EK_STREAM_H

#include "ek_kernels.h"

#define EK_STREAM_NO_LIMIT ((int64_t)1 << 40) /* no pixel constrains d_max */

static inline int32_t ek_stream_clamp(int64_t v) {
  return v > INT32_MAX ? INT32_MAX : (v < -INT32_MAX ? -INT32_MAX : (int32_t)v);
}

static inline int32_t ek_stream_clip(int32_t v, int32_t hi) { return v < 0 ? 0 : (v > hi ? hi : v); }

/* Raster groups of `group` output pixels (batch, oy, ox), restarting at each batch. Window origin of output
   (oy, ox): (oy * stride_h - pad_h, ox * stride_w - pad_w), clipped to the image. `copied`: the kernel copies a
   group's inputs before writing the group. Returns 0 if the shapes are not 4-D NHWC. */
static inline int ek_stream_raster(const ek_tensor *in, const ek_tensor *out, int32_t stride_h, int32_t stride_w,
                                   int32_t pad_h, int32_t pad_w, int32_t group, int copied, int32_t *d_max) {
  if (!in || !out || in->ndim != 4 || out->ndim != 4 || group < 1 || stride_h < 1 || stride_w < 1) return 0;
  const int64_t n = out->dims[0], oh = out->dims[1], ow = out->dims[2], h = in->dims[1], w = in->dims[2];
  if (n != in->dims[0] || h < 1 || w < 1 || oh < 1 || ow < 1) return 0;
  const int64_t in_px = in->bytes / (n * h * w), out_px = out->bytes / (n * oh * ow);
  const int64_t per = oh * ow;
  int64_t best = EK_STREAM_NO_LIMIT;
  /* Walk pixels backwards keeping the smallest input pixel any later output pixel still needs. */
  for (int64_t b = n - 1; b >= 0; --b) {
    /* min needed input pixel (linear) of the pixels after q; the next batch needs pixels from (b + 1) * h * w */
    int64_t suffix = b + 1 < n ? (b + 1) * h * w : EK_STREAM_NO_LIMIT;
    int64_t after_group = suffix;
    for (int64_t q = per - 1; q >= 0; --q) {
      const int64_t oy = q / ow, ox = q - oy * ow;
      const int64_t iy = ek_stream_clip((int32_t)(oy * stride_h - pad_h), (int32_t)(h - 1));
      const int64_t ix = ek_stream_clip((int32_t)(ox * stride_w - pad_w), (int32_t)(w - 1));
      const int64_t need = b * h * w + iy * w + ix;
      if (q % group == 0) { /* q starts a group [q, q1) */
        const int64_t q1 = q + group < per ? q + group : per;
        const int64_t own = need < suffix ? need : suffix;
        const int64_t limit_px = copied ? after_group : own; /* inputs that must survive the group's writes */
        if (limit_px < EK_STREAM_NO_LIMIT) {
          const int64_t d = limit_px * in_px - (b * per + q1) * out_px;
          if (d < best) best = d;
        }
        suffix = own;
        after_group = suffix;
        continue;
      }
      if (need < suffix) suffix = need;
    }
  }
  *d_max = ek_stream_clamp(best);
  return 1;
}

/* Rows copied: row b of the input is read completely before any byte of output row b is written. */
static inline int ek_stream_rows(int64_t rows, int64_t in_row, int64_t out_row, int32_t *d_max) {
  if (rows < 1) return 0;
  const int64_t diff = in_row - out_row;
  *d_max = ek_stream_clamp(diff >= 0 ? diff : rows * diff);
  return 1;
}

/* Rows read while written (e.g. a dot product per output unit): output row b may only overlap earlier input rows. */
static inline int ek_stream_rows_live(int64_t rows, int64_t in_row, int64_t out_row, int32_t *d_max) {
  if (rows < 1) return 0;
  int64_t best = EK_STREAM_NO_LIMIT;
  for (int64_t b = 0; b < rows; ++b) {
    const int64_t d = b * in_row - (b + 1) * out_row;
    if (d < best) best = d;
  }
  *d_max = ek_stream_clamp(best);
  return 1;
}

#endif
