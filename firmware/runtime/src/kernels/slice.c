/* STRIDED_SLICE and SLICE: pure data movement, any element type of 1, 2, 4 or 8 bytes, up to 6 dimensions.
 *
 * STRIDED_SLICE follows LiteRT tflite/kernels/strided_slice.cc (BuildStridedSliceParams: ellipsis_mask expanded
 * over the dimensions the begin/end/strides vectors leave out, new_axis_mask as inserted extent-1 dimensions, an
 * index past the vectors taken whole; ResizeOutputTensor's shape rule) and
 * tflite/kernels/internal/reference/strided_slice.h (StartForAxis / EndForAxis: negative indices wrap, clamp to
 * [0, size] forward or [-1, size - 1] backward, begin/end masks, shrink_axis_mask taking one element, `offset`
 * making end relative to begin). begin, end and strides must be constant int32 vectors of equal length (at most 8
 * entries); the output's static shape must equal the computed one. SLICE follows tflite/kernels/slice.cc (begin and
 * size constant int32 or int64, size -1 = to the end, begin + size within the dimension). Quantization parameters
 * pass through, as in LiteRT (bytes are copied).
 */
/* edgekit-op: STRIDED_SLICE | types: int8, int16, int32, float32, uint8, bool, int64 | versions: 1-8 | fast path: none */
/* edgekit-op: SLICE | types: int8, int16, int32, float32, uint8, bool, int64 | versions: 1-6 | fast path: none */
#include <stdint.h>
#include <string.h>

#include "ek_kernels.h"
#include "ek_strided.h"

#define SS_MAX_INDICES 8

static size_t slice_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return sizeof(ek_strided);
}

static int bit(uint32_t mask, int32_t i) { return i < 32 && ((mask >> i) & 1u) != 0; }

static int32_t clamp(int32_t v, int32_t lo, int32_t hi) { return v > hi ? hi : v < lo ? lo : v; }

static ek_status strided_slice_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 4 || op->num_outputs != 1)
    return ek_fail(ctx, op, EK_ERR_MODEL, "STRIDED_SLICE needs 4 inputs (input, begin, end, strides) and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0), *out = ek_output(ctx, op, 0);
  if (!in || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "STRIDED_SLICE input or output tensor missing");
  if (in->type != out->type) return ek_fail(ctx, op, EK_ERR_TYPE, "STRIDED_SLICE input and output types differ");
  const int32_t elem = ek_type_size(in->type);
  if (elem == 0) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "STRIDED_SLICE tensor type not supported");
  int32_t begin[SS_MAX_INDICES], end[SS_MAX_INDICES], strides[SS_MAX_INDICES];
  const int32_t nb = ek_const_i32(ek_input(ctx, op, 1), begin, SS_MAX_INDICES);
  const int32_t ne = ek_const_i32(ek_input(ctx, op, 2), end, SS_MAX_INDICES);
  const int32_t ns = ek_const_i32(ek_input(ctx, op, 3), strides, SS_MAX_INDICES);
  if (nb < 0 || ne < 0 || ns < 0)
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "STRIDED_SLICE begin, end and strides must be constant int32 vectors of at most 8 entries");
  if (nb != ne || nb != ns) return ek_fail(ctx, op, EK_ERR_SHAPE, "STRIDED_SLICE begin, end and strides differ in length");
  const ek_op_params *pa = &op->params;
  const uint32_t ellipsis = pa->ellipsis_mask, new_axis = pa->new_axis_mask;
  const int offset = (pa->flags & EK_FLAG_OFFSET) != 0;
  if (offset && (pa->ellipsis_mask || pa->new_axis_mask || nb != in->ndim))
    return ek_fail(ctx, op, EK_ERR_UNSUPPORTED,
                   "STRIDED_SLICE with offset needs one index per input dimension and no ellipsis or new-axis mask");
  const int32_t in_dims = in->ndim;
  int32_t num_add_axis = 0;
  for (int32_t i = 0; i < nb; ++i)
    if (!bit(ellipsis, i) && bit(new_axis, i)) num_add_axis++;
  const int32_t eff = in_dims + num_add_axis;
  if (eff > EK_MAX_DIMS) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "STRIDED_SLICE with more than 6 dimensions (after new axes)");
  /* effective ellipsis and new-axis masks (LiteRT BuildStridedSliceParams) */
  uint32_t eff_ellipsis = 0, eff_new_axis = 0;
  int32_t ellipsis_start = eff, expanded = 0;
  for (int32_t i = 0; i < eff;) {
    if (bit(ellipsis, i)) {
      ellipsis_start = i;
      int32_t stop = i + 1 + num_add_axis + in_dims - nb;
      if (stop > eff) stop = eff;
      if (stop < i + 1) stop = i + 1;
      expanded = stop - ellipsis_start - 1;
      for (; i < stop; ++i) eff_ellipsis |= 1u << i;
      continue;
    }
    if (i - expanded >= 0 && bit(new_axis, i - expanded)) eff_new_axis |= 1u << i;
    ++i;
  }
  int32_t shape[EK_MAX_DIMS], st[EK_MAX_DIMS], sp[EK_MAX_DIMS], sd[EK_MAX_DIMS];
  uint32_t bmask = 0, emask = 0, smask = 0;
  int32_t added_ellipsis = 0, added_axes = 0;
  for (int32_t i = 0; i < eff; ++i) {
    st[i] = 0, sp[i] = 0, sd[i] = 1;
    const int new_dim = (eff_ellipsis & (1u << i)) == 0 && (eff_new_axis & (1u << i)) != 0;
    if (!new_dim && (i - added_axes < 0 || i - added_axes >= in_dims))
      return ek_fail(ctx, op, EK_ERR_SHAPE, "STRIDED_SLICE masks do not fit the input");
    if (eff_ellipsis & (1u << i)) {
      added_ellipsis = i - ellipsis_start > 0 ? i - ellipsis_start : 0;
      bmask |= 1u << i, emask |= 1u << i;
      shape[i] = in->dims[i - added_axes];
    } else if (eff_new_axis & (1u << i)) {
      sp[i] = 1;
      shape[i] = 1;
      added_axes++;
    } else if (i >= nb + expanded) {
      bmask |= 1u << i, emask |= 1u << i;
      shape[i] = in->dims[i - added_axes];
    } else {
      const int32_t o = i - added_ellipsis;
      if (o < 0 || o >= nb) return ek_fail(ctx, op, EK_ERR_SHAPE, "STRIDED_SLICE masks do not fit the index vectors");
      st[i] = begin[o], sp[i] = end[o], sd[i] = strides[o];
      if (bit(pa->begin_mask, o)) bmask |= 1u << i;
      if (bit(pa->end_mask, o)) emask |= 1u << i;
      if (bit(pa->shrink_axis_mask, o)) smask |= 1u << i;
      shape[i] = in->dims[i - added_axes];
    }
  }
  /* input element strides over the effective shape (new axes have extent 1) */
  int64_t in_strides[EK_MAX_DIMS], acc = 1;
  for (int32_t i = eff - 1; i >= 0; --i) {
    if (shape[i] < 0) return ek_fail(ctx, op, EK_ERR_SHAPE, "STRIDED_SLICE input has a negative dimension");
    in_strides[i] = acc;
    acc *= shape[i];
    if (acc > INT32_MAX) return ek_fail(ctx, op, EK_ERR_SHAPE, "STRIDED_SLICE input too large");
  }
  if (acc * elem != in->bytes) return ek_fail(ctx, op, EK_ERR_MODEL, "STRIDED_SLICE input size differs from its shape");
  int32_t count[EK_MAX_DIMS], out_shape[EK_MAX_DIMS], out_rank = 0;
  int64_t steps[EK_MAX_DIMS], base = 0;
  for (int32_t i = 0; i < eff; ++i) {
    const int32_t size = shape[i], stride = sd[i];
    if (stride == 0) return ek_fail(ctx, op, EK_ERR_SHAPE, "STRIDED_SLICE stride is 0");
    if (stride == INT32_MIN) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "STRIDED_SLICE stride INT32_MIN is not supported");
    /* StartForAxis */
    int64_t s = st[i];
    if (s < 0) s += size;
    s = stride > 0 ? clamp((int32_t)s, 0, size) : clamp((int32_t)s, -1, size - 1);
    if (bmask & (1u << i)) s = stride > 0 ? 0 : size - 1;
    /* EndForAxis */
    int64_t e;
    const int shrink = (smask & (1u << i)) != 0;
    if (shrink) {
      e = s >= size ? s : s + 1;
    } else {
      e = sp[i];
      if (offset) e += s;
      if (e < 0) e += size;
      if (e > INT32_MAX) e = INT32_MAX;
      if (e < INT32_MIN) e = INT32_MIN;
      e = stride > 0 ? clamp((int32_t)e, 0, size) : clamp((int32_t)e, -1, size - 1);
      if (emask & (1u << i)) e = stride > 0 ? size : -1;
    }
    /* the output extent: ceil((e - s) / stride), 0 if negative (ResizeOutputTensor; with `offset` LiteRT takes
       end itself as the extent before dividing, which equals e - s whenever the slice stays inside) */
    int64_t n = e - s;
    if ((n < 0) != (stride < 0)) n = 0;
    else if (stride < 0) n = (n + 1) / stride + 1;
    else n = n == 0 ? 0 : (n - 1) / stride + 1;
    if (n < 0 || n > INT32_MAX) return ek_fail(ctx, op, EK_ERR_SHAPE, "STRIDED_SLICE output extent overflows");
    if (shrink && n != 1) /* LiteRT's loop then writes nothing and leaves the (scalar-sized) output unset */
      return ek_fail(ctx, op, EK_ERR_UNSUPPORTED,
                     "STRIDED_SLICE shrinks an axis to no element (negative stride or begin past the end): LiteRT leaves its output unwritten");
    if (!shrink) {
      int64_t shape_n = n;
      if (offset) { /* LiteRT: the output extent comes from end alone */
        int64_t d = sp[i];
        if ((d < 0) != (stride < 0)) shape_n = 0;
        else if (stride < 0) shape_n = (d + 1) / stride + 1;
        else shape_n = d == 0 ? 0 : (d - 1) / stride + 1;
        if (shape_n != n)
          return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "STRIDED_SLICE with offset reaches past the input (LiteRT writes fewer elements than its output holds)");
      }
      out_shape[out_rank++] = (int32_t)n;
    }
    count[i] = (int32_t)n;
    steps[i] = (int64_t)stride * in_strides[i];
    if (n > 0) base += s * in_strides[i];
  }
  if (out->ndim != out_rank) return ek_fail(ctx, op, EK_ERR_SHAPE, "STRIDED_SLICE output rank differs from the computed shape");
  for (int32_t d = 0; d < out_rank; ++d)
    if (out->dims[d] != out_shape[d]) return ek_fail(ctx, op, EK_ERR_SHAPE, "STRIDED_SLICE output shape differs from the computed shape");
  if (!ek_strided_build((ek_strided *)op->user_data, elem, eff, count, steps, base, in->bytes, out->bytes))
    return ek_fail(ctx, op, EK_ERR_SHAPE, "STRIDED_SLICE reads outside its input or writes a size other than its output's");
  return EK_OK;
}

/* SLICE's begin/size input (int32 or int64, constant) into v; the count or -1. */
static int32_t const_index(const ek_tensor *t, int64_t *v, int32_t max) {
  if (!t || !t->is_constant || t->ndim != 1 || t->dims[0] < 0 || t->dims[0] > max) return -1;
  const int32_t n = t->dims[0];
  if (t->type == EK_INT32 && t->bytes == 4 * n && (n == 0 || t->data)) {
    for (int32_t i = 0; i < n; ++i) {
      int32_t x;
      memcpy(&x, (const uint8_t *)t->data + 4 * i, 4);
      v[i] = x;
    }
    return n;
  }
  if (t->type == EK_INT64 && t->bytes == 8 * n && (n == 0 || t->data)) {
    if (n > 0) memcpy(v, t->data, 8u * (size_t)n);
    return n;
  }
  return -1;
}

static ek_status slice_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 3 || op->num_outputs != 1)
    return ek_fail(ctx, op, EK_ERR_MODEL, "SLICE needs 3 inputs (input, begin, size) and 1 output");
  const ek_tensor *in = ek_input(ctx, op, 0), *out = ek_output(ctx, op, 0);
  if (!in || !out) return ek_fail(ctx, op, EK_ERR_MODEL, "SLICE input or output tensor missing");
  if (in->type != out->type) return ek_fail(ctx, op, EK_ERR_TYPE, "SLICE input and output types differ");
  const int32_t elem = ek_type_size(in->type);
  if (elem == 0) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "SLICE tensor type not supported");
  int64_t begin[EK_MAX_DIMS], size[EK_MAX_DIMS], strides[EK_MAX_DIMS];
  const int32_t nb = const_index(ek_input(ctx, op, 1), begin, EK_MAX_DIMS);
  const int32_t ns = const_index(ek_input(ctx, op, 2), size, EK_MAX_DIMS);
  if (nb < 0 || ns < 0) return ek_fail(ctx, op, EK_ERR_UNSUPPORTED, "SLICE begin and size must be constant int32 or int64 vectors");
  if (nb != in->ndim || ns != in->ndim) return ek_fail(ctx, op, EK_ERR_SHAPE, "SLICE begin and size need one entry per input dimension");
  if (!ek_elem_strides(in, strides)) return ek_fail(ctx, op, EK_ERR_SHAPE, "SLICE input too large");
  if (out->ndim != in->ndim) return ek_fail(ctx, op, EK_ERR_SHAPE, "SLICE output rank differs from the input's");
  int32_t count[EK_MAX_DIMS];
  int64_t base = 0;
  for (int32_t d = 0; d < in->ndim; ++d) {
    const int64_t dim = in->dims[d];
    int64_t n = size[d];
    if (n == -1) n = dim - begin[d];
    if (begin[d] < 0 || n < 0 || begin[d] > dim || begin[d] + n > dim)
      return ek_fail(ctx, op, EK_ERR_SHAPE, "SLICE begin/size out of the input's range");
    if (out->dims[d] != n) return ek_fail(ctx, op, EK_ERR_SHAPE, "SLICE output shape differs from size");
    count[d] = (int32_t)n;
    if (n > 0) base += begin[d] * strides[d];
  }
  if (!ek_strided_build((ek_strided *)op->user_data, elem, in->ndim, count, strides, base, in->bytes, out->bytes))
    return ek_fail(ctx, op, EK_ERR_SHAPE, "SLICE reads outside its input or writes a size other than its output's");
  return EK_OK;
}

static ek_status slice_eval(ek_context *ctx, ek_op *op) {
  const ek_tensor *in = ek_input(ctx, op, 0);
  ek_tensor *out = ek_output(ctx, op, 0);
  ek_strided_copy((const ek_strided *)op->user_data, (uint8_t *)out->data, (const uint8_t *)in->data);
  return EK_OK;
}

const ek_kernel ek_kernel_strided_slice = {EK_OP_STRIDED_SLICE, "STRIDED_SLICE", EK_HOST_FN(slice_persistent_bytes), 0,
                                           EK_HOST_FN(strided_slice_prepare), slice_eval, 0};
const ek_kernel ek_kernel_slice = {EK_OP_SLICE, "SLICE", EK_HOST_FN(slice_persistent_bytes), 0, EK_HOST_FN(slice_prepare),
                                   slice_eval, 0};
