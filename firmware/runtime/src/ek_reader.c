/* edgekit runtime core: TFLite flatbuffer reader, by hand (no generated code).
 *
 * Reads the model in place. Every offset, vector length, index, type, element
 * count and byte size is checked against the buffer length with overflow-safe
 * arithmetic before use; scalars are read with memcpy (no alignment faults);
 * data used in place (constant tensors, quantization vectors) is checked for
 * alignment. Schema: tensorflow/lite/schema/schema.fbs (field slots below).
 */
#include <string.h>

#include "ek_internal.h"

/* ---- flatbuffer primitives ------------------------------------------------ */

typedef struct fb {
  const uint8_t *p;
  size_t n;
} fb;

typedef struct fb_table {
  size_t pos;     /* table start */
  size_t vt;      /* vtable start */
  uint32_t vtlen; /* vtable bytes */
  uint32_t tlen;  /* table bytes (inline part) */
} fb_table;

static int in_bounds(const fb *b, size_t off, size_t size) { return off <= b->n && size <= b->n - off; }

static int rd_u8(const fb *b, size_t off, uint32_t *v) {
  if (!in_bounds(b, off, 1)) return 0;
  *v = b->p[off];
  return 1;
}
static int rd_u16(const fb *b, size_t off, uint32_t *v) {
  if (!in_bounds(b, off, 2)) return 0;
  *v = (uint32_t)b->p[off] | ((uint32_t)b->p[off + 1] << 8);
  return 1;
}
static int rd_u32(const fb *b, size_t off, uint32_t *v) {
  if (!in_bounds(b, off, 4)) return 0;
  *v = (uint32_t)b->p[off] | ((uint32_t)b->p[off + 1] << 8) | ((uint32_t)b->p[off + 2] << 16) |
       ((uint32_t)b->p[off + 3] << 24);
  return 1;
}
static int rd_u64(const fb *b, size_t off, uint64_t *v) {
  uint32_t lo, hi;
  if (!rd_u32(b, off, &lo) || !rd_u32(b, off + 4, &hi)) return 0;
  *v = (uint64_t)lo | ((uint64_t)hi << 32);
  return 1;
}
static int32_t as_i32(uint32_t v) {
  int32_t r;
  memcpy(&r, &v, sizeof r);
  return r;
}

/* Table at pos: soffset to its vtable, vtable and inline table within the buffer. */
static int fb_get_table(const fb *b, size_t pos, fb_table *t) {
  uint32_t soff_u, vtlen, tlen;
  if (!rd_u32(b, pos, &soff_u)) return 0;
  const int64_t vt = (int64_t)pos - (int64_t)as_i32(soff_u);
  if (vt < 0 || (uint64_t)vt > (uint64_t)b->n) return 0;
  if (!rd_u16(b, (size_t)vt, &vtlen) || !rd_u16(b, (size_t)vt + 2, &tlen)) return 0;
  if (vtlen < 4 || (vtlen & 1u) || !in_bounds(b, (size_t)vt, vtlen)) return 0;
  if (tlen < 4 || !in_bounds(b, pos, tlen)) return 0;
  t->pos = pos;
  t->vt = (size_t)vt;
  t->vtlen = vtlen;
  t->tlen = tlen;
  return 1;
}

/* Field `slot` of `size` bytes: 1 present (*pos set), 0 absent, -1 corrupt (outside the table). */
static int fb_field(const fb *b, const fb_table *t, int slot, uint32_t size, size_t *pos) {
  const uint32_t vo = 4u + 2u * (uint32_t)slot;
  uint32_t fo;
  if (vo + 2u > t->vtlen) return 0;
  if (!rd_u16(b, t->vt + vo, &fo)) return -1;
  if (fo == 0) return 0;
  if (fo < 4u || fo > t->tlen || size > t->tlen - fo) return -1;
  *pos = t->pos + fo;
  return 1;
}

/* Scalar fields with schema defaults: 1 ok, 0 corrupt. */
static int fb_u8(const fb *b, const fb_table *t, int slot, uint32_t dflt, uint32_t *v) {
  size_t pos;
  const int r = fb_field(b, t, slot, 1, &pos);
  if (r < 0) return 0;
  if (r == 0) { *v = dflt; return 1; }
  return rd_u8(b, pos, v);
}
static int fb_u32(const fb *b, const fb_table *t, int slot, uint32_t dflt, uint32_t *v) {
  size_t pos;
  const int r = fb_field(b, t, slot, 4, &pos);
  if (r < 0) return 0;
  if (r == 0) { *v = dflt; return 1; }
  return rd_u32(b, pos, v);
}
static int fb_i32(const fb *b, const fb_table *t, int slot, int32_t dflt, int32_t *v) {
  uint32_t u;
  if (!fb_u32(b, t, slot, (uint32_t)dflt, &u)) return 0;
  *v = as_i32(u);
  return 1;
}
static int fb_u64(const fb *b, const fb_table *t, int slot, uint64_t dflt, uint64_t *v) {
  size_t pos;
  const int r = fb_field(b, t, slot, 8, &pos);
  if (r < 0) return 0;
  if (r == 0) { *v = dflt; return 1; }
  return rd_u64(b, pos, v);
}
static int fb_f32(const fb *b, const fb_table *t, int slot, float dflt, float *v) {
  uint32_t u;
  size_t pos;
  const int r = fb_field(b, t, slot, 4, &pos);
  if (r < 0) return 0;
  if (r == 0) { *v = dflt; return 1; }
  if (!rd_u32(b, pos, &u)) return 0;
  memcpy(v, &u, sizeof *v);
  return 1;
}

/* Offset field: 1 present (*target set, inside the buffer), 0 absent, -1 corrupt. */
static int fb_ref(const fb *b, const fb_table *t, int slot, size_t *target) {
  size_t pos;
  uint32_t off;
  const int r = fb_field(b, t, slot, 4, &pos);
  if (r <= 0) return r;
  if (!rd_u32(b, pos, &off)) return -1;
  if (off == 0 || off > b->n - pos) return -1;
  *target = pos + off;
  return 1;
}

/* Vector at pos: count and data position, all elements inside the buffer. */
static int fb_vector_at(const fb *b, size_t pos, uint32_t elem_size, uint32_t *count, size_t *data) {
  uint32_t n;
  if (!rd_u32(b, pos, &n)) return 0;
  const size_t d = pos + 4;
  if ((size_t)n > (b->n - d) / elem_size) return 0; /* rd_u32 ensured d <= b->n */
  *count = n;
  *data = d;
  return 1;
}

/* Vector field: 1 present, 0 absent (count 0), -1 corrupt. */
static int fb_vector(const fb *b, const fb_table *t, int slot, uint32_t elem_size, uint32_t *count, size_t *data) {
  size_t pos;
  const int r = fb_ref(b, t, slot, &pos);
  *count = 0;
  *data = 0;
  if (r <= 0) return r;
  return fb_vector_at(b, pos, elem_size, count, data) ? 1 : -1;
}

/* Element i of a vector of tables. */
static int fb_vector_table(const fb *b, size_t data, uint32_t i, fb_table *t) {
  uint32_t off;
  const size_t pos = data + 4u * (size_t)i;
  if (!rd_u32(b, pos, &off)) return 0;
  if (off == 0 || off > b->n - pos) return 0;
  return fb_get_table(b, pos + off, t);
}

/* Sub-table field: 1 present, 0 absent, -1 corrupt. */
static int fb_subtable(const fb *b, const fb_table *t, int slot, fb_table *sub) {
  size_t pos;
  const int r = fb_ref(b, t, slot, &pos);
  if (r <= 0) return r;
  return fb_get_table(b, pos, sub) ? 1 : -1;
}

/* ---- schema slots --------------------------------------------------------- */

enum { MODEL_VERSION = 0, MODEL_OPERATOR_CODES = 1, MODEL_SUBGRAPHS = 2, MODEL_BUFFERS = 4 };
enum { OPCODE_DEPRECATED_BUILTIN = 0, OPCODE_VERSION = 2, OPCODE_BUILTIN = 3 };
enum { SUBGRAPH_TENSORS = 0, SUBGRAPH_INPUTS = 1, SUBGRAPH_OUTPUTS = 2, SUBGRAPH_OPERATORS = 3 };
enum {
  TENSOR_SHAPE = 0, TENSOR_TYPE = 1, TENSOR_BUFFER = 2, TENSOR_QUANTIZATION = 4, TENSOR_IS_VARIABLE = 5,
  TENSOR_SPARSITY = 6, TENSOR_EXTERNAL_BUFFER = 10
};
enum { QUANT_SCALE = 2, QUANT_ZERO_POINT = 3, QUANT_DETAILS_TYPE = 4, QUANT_QUANTIZED_DIMENSION = 6 };
enum { OPERATOR_OPCODE_INDEX = 0, OPERATOR_INPUTS = 1, OPERATOR_OUTPUTS = 2, OPERATOR_OPTIONS_TYPE = 3,
       OPERATOR_OPTIONS = 4, OPERATOR_INTERMEDIATES = 8 };
enum { BUFFER_DATA = 0, BUFFER_OFFSET = 1, BUFFER_SIZE = 2 };

/* BuiltinOptions union members we decode. */
enum {
  OPT_NONE = 0, OPT_CONV_2D = 1, OPT_DEPTHWISE_CONV_2D = 2, OPT_POOL_2D = 5, OPT_FULLY_CONNECTED = 8, OPT_SOFTMAX = 9,
  OPT_CONCATENATION = 10, OPT_ADD = 11, OPT_RESHAPE = 17, OPT_MUL = 21, OPT_PAD = 22, OPT_TRANSPOSE = 26,
  OPT_REDUCER = 27, OPT_DEQUANTIZE = 38, OPT_QUANTIZE = 89, OPT_HARD_SWISH = 91,
  OPT_LEAKY_RELU = 75,
  OPT_GELU = 116,
  OPT_SUB = 28,
  OPT_DIV = 29,
  OPT_L2_NORM = 12,
  OPT_BATCH_MATMUL = 101,
  OPT_SPLIT = 35, OPT_SPLIT_V = 79, OPT_UNPACK = 64, OPT_PACK = 59, OPT_STRIDED_SLICE = 32, OPT_SLICE = 48,
  OPT_SQUEEZE = 30, OPT_EXPAND_DIMS = 52, OPT_GATHER = 23, OPT_DEPTH_TO_SPACE = 94, OPT_SPACE_TO_DEPTH = 19,
  OPT_RESIZE_NEAREST_NEIGHBOR = 74, OPT_RESIZE_BILINEAR = 15, OPT_CAST = 37, OPT_FILL = 68, OPT_SHAPE = 55,
  OPT_ZEROS_LIKE = 67, OPT_TRANSPOSE_CONV = 49,
  OPT_MIRROR_PAD = 77,
  OPT_SVDF = 6,
  OPT_UNIDIRECTIONAL_SEQUENCE_LSTM = 71
};

#define TFLITE_SCHEMA_VERSION 3u
#define BUILTIN_CUSTOM 32

/* ---- header --------------------------------------------------------------- */

static ek_status read_fail(ek_read_error *err, ek_status status, int32_t op, const char *message) {
  if (err && err->status == EK_OK) {
    err->status = status;
    err->op_index = op;
    err->message = message;
  }
  return status;
}

static ek_status opcode_in(const fb *bp, const ek_model_view *mv, size_t ops_vec, uint32_t num_ops, uint32_t op_index,
                           int32_t *code, int32_t *version, ek_read_error *err);

/* Several subgraphs: only a main graph (subgraph 0) plus one init subgraph reached through a CALL_ONCE op (what the
   TFLite converter emits for resource variables) is accepted; the init subgraph's contents are checked with the
   variables (read_variables). Counts the main graph's VAR_HANDLE ops (the state holds one ek_var_init each). */
static ek_status check_subgraphs(const fb *b, ek_model_view *mv, ek_read_error *err) {
  uint32_t calls = 0;
  int32_t init = -1;
  mv->init_subgraph = -1;
  mv->num_var_handles = 0;
  for (uint32_t i = 0; i < mv->num_ops; ++i) {
    int32_t code;
    if (opcode_in(b, mv, mv->ops_vec, mv->num_ops, i, &code, (int32_t *)0, err) != EK_OK) return err->status;
    if (code == EK_OP_VAR_HANDLE) ++mv->num_var_handles;
    if (code != EK_OP_CALL_ONCE) continue;
    fb_table ot, o;
    int has;
    if (!fb_vector_table(b, mv->ops_vec, i, &ot) || (has = fb_subtable(b, &ot, OPERATOR_OPTIONS, &o)) < 0 ||
        (has > 0 && !fb_i32(b, &o, 0, 0, &init)))
      return read_fail(err, EK_ERR_MODEL, (int32_t)i, "corrupt model: CALL_ONCE options out of bounds");
    if (has == 0) init = 0;
    ++calls;
  }
  if (calls > 1)
    return read_fail(err, EK_ERR_UNSUPPORTED, -1, "model has more than one CALL_ONCE op; only one init subgraph is supported");
  if (calls == 1 && (init <= 0 || (uint32_t)init >= mv->num_subgraphs))
    return read_fail(err, EK_ERR_MODEL, -1, "CALL_ONCE's init_subgraph_index is not another subgraph of the model");
  for (uint32_t t = 0; t < mv->num_tensors; ++t) { /* variable tensors take an ek_var_init entry too */
    fb_table tt;
    uint32_t var;
    if (!fb_vector_table(b, mv->tensors_vec, t, &tt) || !fb_u8(b, &tt, TENSOR_IS_VARIABLE, 0, &var))
      return read_fail(err, EK_ERR_MODEL, -1, "corrupt model: tensor table out of bounds (truncated?)");
    mv->num_var_handles += var != 0;
  }
  if (mv->num_subgraphs > 1u + calls)
    return read_fail(err, EK_ERR_UNSUPPORTED, -1,
                     "model has subgraphs other than a CALL_ONCE init subgraph (control flow: IF / WHILE, or several "
                     "signatures); only a main graph plus a CALL_ONCE init subgraph (resource variables) is supported");
  mv->init_subgraph = calls ? init : -1;
  return EK_OK;
}

ek_status ek_read_header(const uint8_t *model, size_t len, ek_model_view *mv, ek_read_error *err) {
  const fb b = {model, len};
  fb_table m, sg;
  uint32_t root, version, num_subgraphs;
  size_t subgraphs;
  memset(mv, 0, sizeof *mv);
  if (!model || len < 8) return read_fail(err, EK_ERR_MODEL, -1, "model too small to be a TFLite flatbuffer (truncated?)");
  if (len > (size_t)INT32_MAX) return read_fail(err, EK_ERR_MODEL, -1, "model larger than 2 GiB");
  if (memcmp(model + 4, "TFL3", 4) != 0)
    return read_fail(err, EK_ERR_MODEL, -1, "not a TFLite model: file identifier is not 'TFL3'");
  if (!rd_u32(&b, 0, &root) || root < 8 || !fb_get_table(&b, root, &m))
    return read_fail(err, EK_ERR_MODEL, -1, "corrupt model: root table out of bounds (truncated?)");
  if (!fb_u32(&b, &m, MODEL_VERSION, 0, &version)) return read_fail(err, EK_ERR_MODEL, -1, "corrupt model: bad version field");
  if (version != TFLITE_SCHEMA_VERSION)
    return read_fail(err, EK_ERR_UNSUPPORTED, -1, "unsupported TFLite schema version (only version 3 is supported)");
  if (fb_vector(&b, &m, MODEL_SUBGRAPHS, 4, &num_subgraphs, &subgraphs) < 0)
    return read_fail(err, EK_ERR_MODEL, -1, "corrupt model: subgraphs vector out of bounds (truncated?)");
  if (num_subgraphs == 0) return read_fail(err, EK_ERR_MODEL, -1, "model has no subgraph");
  mv->subgraphs_vec = subgraphs;
  mv->num_subgraphs = num_subgraphs;
  if (!fb_vector_table(&b, subgraphs, 0, &sg))
    return read_fail(err, EK_ERR_MODEL, -1, "corrupt model: subgraph table out of bounds (truncated?)");
  if (fb_vector(&b, &m, MODEL_OPERATOR_CODES, 4, &mv->num_opcodes, &mv->opcodes_vec) < 0)
    return read_fail(err, EK_ERR_MODEL, -1, "corrupt model: operator_codes vector out of bounds (truncated?)");
  if (fb_vector(&b, &m, MODEL_BUFFERS, 4, &mv->num_buffers, &mv->buffers_vec) < 0)
    return read_fail(err, EK_ERR_MODEL, -1, "corrupt model: buffers vector out of bounds (truncated?)");
  if (fb_vector(&b, &sg, SUBGRAPH_TENSORS, 4, &mv->num_tensors, &mv->tensors_vec) < 0)
    return read_fail(err, EK_ERR_MODEL, -1, "corrupt model: tensors vector out of bounds (truncated?)");
  if (fb_vector(&b, &sg, SUBGRAPH_OPERATORS, 4, &mv->num_ops, &mv->ops_vec) < 0)
    return read_fail(err, EK_ERR_MODEL, -1, "corrupt model: operators vector out of bounds (truncated?)");
  if (fb_vector(&b, &sg, SUBGRAPH_INPUTS, 4, &mv->num_inputs, &mv->inputs_vec) < 0)
    return read_fail(err, EK_ERR_MODEL, -1, "corrupt model: subgraph inputs vector out of bounds (truncated?)");
  if (fb_vector(&b, &sg, SUBGRAPH_OUTPUTS, 4, &mv->num_outputs, &mv->outputs_vec) < 0)
    return read_fail(err, EK_ERR_MODEL, -1, "corrupt model: subgraph outputs vector out of bounds (truncated?)");
  if (mv->num_tensors > EK_MAX_TENSORS) return read_fail(err, EK_ERR_UNSUPPORTED, -1, "model has more than 65535 tensors");
  if (mv->num_ops > EK_MAX_OPS) return read_fail(err, EK_ERR_UNSUPPORTED, -1, "model has more than 65535 operators");
  if (mv->num_inputs > EK_MAX_IO) return read_fail(err, EK_ERR_UNSUPPORTED, -1, "model has more than 16 inputs");
  if (mv->num_outputs > EK_MAX_IO) return read_fail(err, EK_ERR_UNSUPPORTED, -1, "model has more than 16 outputs");
  if (mv->num_outputs == 0) return read_fail(err, EK_ERR_MODEL, -1, "model has no output tensor");
  return check_subgraphs(&b, mv, err);
}

/* Builtin code of operator op_index of the operators vector ops_vec (num_ops long). */
static ek_status opcode_in(const fb *bp, const ek_model_view *mv, size_t ops_vec, uint32_t num_ops, uint32_t op_index,
                           int32_t *code, int32_t *version, ek_read_error *err) {
  const fb b = *bp;
  fb_table op, oc;
  uint32_t opcode_index, deprecated;
  int32_t builtin, ver;
  const int32_t at = (int32_t)op_index;
  if (op_index >= num_ops || !fb_vector_table(&b, ops_vec, op_index, &op))
    return read_fail(err, EK_ERR_MODEL, at, "corrupt model: operator table out of bounds (truncated?)");
  if (!fb_u32(&b, &op, OPERATOR_OPCODE_INDEX, 0, &opcode_index))
    return read_fail(err, EK_ERR_MODEL, at, "corrupt model: bad operator opcode_index field");
  if (opcode_index >= mv->num_opcodes)
    return read_fail(err, EK_ERR_MODEL, at, "corrupt model: operator opcode_index out of range of operator_codes");
  if (!fb_vector_table(&b, mv->opcodes_vec, opcode_index, &oc))
    return read_fail(err, EK_ERR_MODEL, at, "corrupt model: operator code table out of bounds (truncated?)");
  if (!fb_u8(&b, &oc, OPCODE_DEPRECATED_BUILTIN, 0, &deprecated) || !fb_i32(&b, &oc, OPCODE_BUILTIN, 0, &builtin) ||
      !fb_i32(&b, &oc, OPCODE_VERSION, 1, &ver))
    return read_fail(err, EK_ERR_MODEL, at, "corrupt model: bad operator code fields");
  /* deprecated_builtin_code is an int8 in the schema; TFLite takes the max of both fields. */
  const int32_t dep = (int32_t)(int8_t)(uint8_t)deprecated;
  *code = dep > builtin ? dep : builtin;
  if (version) *version = ver;
  return EK_OK;
}

ek_status ek_read_opcode(const uint8_t *model, size_t len, const ek_model_view *mv, uint32_t op_index, int32_t *code,
                         int32_t *version, ek_read_error *err) {
  const fb b = {model, len};
  return opcode_in(&b, mv, mv->ops_vec, mv->num_ops, op_index, code, version, err);
}

/* ---- tensors -------------------------------------------------------------- */

typedef struct reader {
  fb b;
  ek_runtime *rt;
  const ek_model_view *mv;
  int is_variable; /* of the tensor read_tensor read last */
} reader;

static ek_status fail_tensor(reader *r, ek_status status, const char *message) {
  return ek_fail(&r->rt->ctx, (const ek_op *)0, status, message);
}

static ek_status read_quantization(reader *r, const fb_table *tt, ek_tensor *t) {
  fb_table q;
  const fb *b = &r->b;
  uint32_t n_scale, n_zp, details;
  size_t scales, zps;
  int32_t qdim;
  const int has = fb_subtable(b, tt, TENSOR_QUANTIZATION, &q);
  if (has < 0) return fail_tensor(r, EK_ERR_MODEL, "corrupt model: tensor quantization table out of bounds");
  if (has == 0) return EK_OK;
  if (fb_vector(b, &q, QUANT_SCALE, 4, &n_scale, &scales) < 0 || fb_vector(b, &q, QUANT_ZERO_POINT, 8, &n_zp, &zps) < 0)
    return fail_tensor(r, EK_ERR_MODEL, "corrupt model: quantization scale/zero_point vector out of bounds");
  if (!fb_u8(b, &q, QUANT_DETAILS_TYPE, 0, &details) || !fb_i32(b, &q, QUANT_QUANTIZED_DIMENSION, 0, &qdim))
    return fail_tensor(r, EK_ERR_MODEL, "corrupt model: bad quantization fields");
  if (details != 0) return fail_tensor(r, EK_ERR_UNSUPPORTED, "custom quantization details are not supported");
  if (n_scale == 0) return EK_OK; /* min/max only: not quantized */
  if (n_zp != n_scale)
    return fail_tensor(r, EK_ERR_MODEL, "quantization has a different number of scales and zero points");
  if (n_scale > 1) {
    if (qdim < 0 || qdim >= t->ndim)
      return fail_tensor(r, EK_ERR_MODEL, "quantized_dimension is outside the tensor's rank");
    if ((int64_t)n_scale != (int64_t)t->dims[qdim])
      return fail_tensor(r, EK_ERR_MODEL, "per-channel scale count does not match the quantized dimension's size");
  } else if (qdim < 0 || (t->ndim > 0 && qdim >= t->ndim)) {
    return fail_tensor(r, EK_ERR_MODEL, "quantized_dimension is outside the tensor's rank");
  }
  const uint8_t *sp = b->p + scales, *zp = b->p + zps;
  if (((uintptr_t)sp & 3u) != 0 || ((uintptr_t)zp & 7u) != 0)
    return fail_tensor(r, EK_ERR_MODEL,
                       "quantization vectors are misaligned for in-place access (place the model at a 16-byte aligned address)");
  t->scales = (const float *)(const void *)sp;
  t->zero_points = (const int64_t *)(const void *)zp;
  t->num_scales = (int32_t)n_scale;
  t->quantized_dimension = (int8_t)(t->ndim > 0 ? qdim : 0); /* validated < ndim <= 6; meaningless for scalars */
  for (uint32_t i = 0; i < n_scale; ++i) {
    const float s = t->scales[i];
    const int64_t z = t->zero_points[i];
    if (!(s >= 0.0f && s <= 3.0e38f)) return fail_tensor(r, EK_ERR_MODEL, "quantization scale is negative or not finite");
    if (z < INT32_MIN || z > INT32_MAX) return fail_tensor(r, EK_ERR_MODEL, "quantization zero point is out of int32 range");
  }
  t->scale = t->scales[0];
  t->zero_point = (int32_t)t->zero_points[0];
  return EK_OK;
}

/* Constant data of buffer `index`: pointer and size; NULL/0 when the buffer holds no data. */
static ek_status read_buffer(reader *r, uint32_t index, const uint8_t **data, size_t *size) {
  const fb *b = &r->b;
  fb_table bt;
  uint32_t count;
  size_t pos;
  uint64_t offset, ext_size;
  *data = (const uint8_t *)0;
  *size = 0;
  if (index == 0 && r->mv->num_buffers == 0) return EK_OK;
  if (index >= r->mv->num_buffers) return fail_tensor(r, EK_ERR_MODEL, "corrupt model: tensor buffer index out of range");
  if (!fb_vector_table(b, r->mv->buffers_vec, index, &bt))
    return fail_tensor(r, EK_ERR_MODEL, "corrupt model: buffer table out of bounds (truncated?)");
  const int has_data = fb_vector(b, &bt, BUFFER_DATA, 1, &count, &pos);
  if (has_data < 0) return fail_tensor(r, EK_ERR_MODEL, "corrupt model: buffer data out of bounds (truncated?)");
  if (!fb_u64(b, &bt, BUFFER_OFFSET, 0, &offset) || !fb_u64(b, &bt, BUFFER_SIZE, 0, &ext_size))
    return fail_tensor(r, EK_ERR_MODEL, "corrupt model: bad buffer offset/size fields");
  if (offset > 1) { /* data stored after the flatbuffer, offset relative to the model start */
    if (count != 0) return fail_tensor(r, EK_ERR_MODEL, "corrupt model: buffer has both inline and external data");
    if (offset > (uint64_t)b->n || ext_size > (uint64_t)b->n - offset)
      return fail_tensor(r, EK_ERR_MODEL, "buffer's external data lies beyond the end of the model (truncated?)");
    if (ext_size == 0) return EK_OK;
    *data = b->p + (size_t)offset;
    *size = (size_t)ext_size;
    return EK_OK;
  }
  if (count == 0) return EK_OK;
  *data = b->p + pos;
  *size = count;
  return EK_OK;
}

static ek_status read_tensor(reader *r, uint32_t i, ek_tensor *t) {
  const fb *b = &r->b;
  fb_table tt;
  uint32_t ndim, type, buffer, is_variable, external;
  size_t shape, sparsity;
  const uint8_t *data;
  size_t data_size;
  ek_status st;
  memset(t, 0, sizeof *t);
  if (!fb_vector_table(b, r->mv->tensors_vec, i, &tt))
    return fail_tensor(r, EK_ERR_MODEL, "corrupt model: tensor table out of bounds (truncated?)");
  if (fb_vector(b, &tt, TENSOR_SHAPE, 4, &ndim, &shape) < 0)
    return fail_tensor(r, EK_ERR_MODEL, "corrupt model: tensor shape out of bounds (truncated?)");
  if (ndim > EK_MAX_DIMS) return fail_tensor(r, EK_ERR_UNSUPPORTED, "tensor has more than 6 dimensions");
  t->ndim = (int8_t)ndim; /* <= EK_MAX_DIMS */
  int64_t elements = 1;
  for (uint32_t d = 0; d < ndim; ++d) {
    uint32_t v;
    if (!rd_u32(b, shape + 4u * d, &v)) return fail_tensor(r, EK_ERR_MODEL, "corrupt model: tensor shape out of bounds");
    const int32_t dim = as_i32(v);
    if (dim < 0) return fail_tensor(r, EK_ERR_UNSUPPORTED, "tensor has a negative (dynamic) dimension");
    t->dims[d] = dim;
    elements *= dim;
    if (elements > INT32_MAX) return fail_tensor(r, EK_ERR_UNSUPPORTED, "tensor is larger than 2 GiB");
  }
  if (!fb_u8(b, &tt, TENSOR_TYPE, EK_FLOAT32, &type) || !fb_u32(b, &tt, TENSOR_BUFFER, 0, &buffer) ||
      !fb_u8(b, &tt, TENSOR_IS_VARIABLE, 0, &is_variable) || !fb_u32(b, &tt, TENSOR_EXTERNAL_BUFFER, 0, &external))
    return fail_tensor(r, EK_ERR_MODEL, "corrupt model: bad tensor fields");
  const int32_t size = type == EK_RESOURCE ? 1 : ek_type_size((int32_t)type);
  if (size == 0) return fail_tensor(r, EK_ERR_UNSUPPORTED, "tensor element type is not supported");
  t->type = (int8_t)type; /* a type ek_type_size knows (< 128) or RESOURCE */
  if (elements * size > INT32_MAX) return fail_tensor(r, EK_ERR_UNSUPPORTED, "tensor is larger than 2 GiB");
  t->bytes = type == EK_RESOURCE ? 0 : (int32_t)(elements * size); /* a handle: its variable's bytes (read_variables) */
  r->is_variable = is_variable != 0; /* a state tensor (SVDF, LSTM): persistent, see read_variable_tensor */
  if (is_variable && type == EK_RESOURCE) return fail_tensor(r, EK_ERR_MODEL, "a RESOURCE tensor is marked variable");
  const int has_sparsity = fb_ref(b, &tt, TENSOR_SPARSITY, &sparsity);
  if (has_sparsity < 0) return fail_tensor(r, EK_ERR_MODEL, "corrupt model: tensor sparsity out of bounds");
  if (has_sparsity > 0) return fail_tensor(r, EK_ERR_UNSUPPORTED, "sparse tensors are not supported");
  if (external != 0) return fail_tensor(r, EK_ERR_UNSUPPORTED, "tensors in external buffer groups are not supported");
  st = read_quantization(r, &tt, t);
  if (st != EK_OK) return st;
  st = read_buffer(r, buffer, &data, &data_size);
  if (st != EK_OK) return st;
  if (data && t->type == EK_RESOURCE) return fail_tensor(r, EK_ERR_MODEL, "a RESOURCE tensor has constant data");
  if (data) {
    if (data_size != (size_t)t->bytes)
      return fail_tensor(r, EK_ERR_MODEL, "constant tensor's data size does not match its shape and type");
    const uintptr_t align = size > 8 ? 8u : (uintptr_t)size;
    if (((uintptr_t)data & (align - 1u)) != 0)
      return fail_tensor(r, EK_ERR_MODEL,
                         "constant tensor data is misaligned for in-place access (place the model at a 16-byte aligned address)");
    t->data = (void *)(uintptr_t)data; /* read-only: kernels never write constants */
    t->is_constant = 1;
  }
  return EK_OK;
}

/* ---- operators ------------------------------------------------------------ */

static int expected_options(int32_t opcode) {
  switch (opcode) {
    case EK_OP_CONV_2D: return OPT_CONV_2D;
    case EK_OP_DEPTHWISE_CONV_2D: return OPT_DEPTHWISE_CONV_2D;
    case EK_OP_AVERAGE_POOL_2D: case EK_OP_MAX_POOL_2D: return OPT_POOL_2D;
    case EK_OP_FULLY_CONNECTED: return OPT_FULLY_CONNECTED;
    case EK_OP_SOFTMAX: return OPT_SOFTMAX;
    case EK_OP_CONCATENATION: return OPT_CONCATENATION;
    case EK_OP_ADD: return OPT_ADD;
    case EK_OP_RESHAPE: return OPT_RESHAPE;
    case EK_OP_MUL: return OPT_MUL;
    case EK_OP_PAD: return OPT_PAD;
    case EK_OP_TRANSPOSE: return OPT_TRANSPOSE;
    case EK_OP_MEAN: return OPT_REDUCER;
    case EK_OP_DEQUANTIZE: return OPT_DEQUANTIZE;
    case EK_OP_QUANTIZE: return OPT_QUANTIZE;
    case EK_OP_HARD_SWISH: return OPT_HARD_SWISH;
    case EK_OP_LEAKY_RELU: return OPT_LEAKY_RELU;
    case EK_OP_GELU: return OPT_GELU;
    case EK_OP_SUB: return OPT_SUB;
    case EK_OP_DIV: return OPT_DIV;
    case EK_OP_L2_NORMALIZATION: return OPT_L2_NORM;
    case EK_OP_BATCH_MATMUL: return OPT_BATCH_MATMUL;
    case EK_OP_SUM: case EK_OP_REDUCE_MAX: case EK_OP_REDUCE_MIN: return OPT_REDUCER;
    case EK_OP_SPLIT: return OPT_SPLIT;
    case EK_OP_SPLIT_V: return OPT_SPLIT_V;
    case EK_OP_UNPACK: return OPT_UNPACK;
    case EK_OP_PACK: return OPT_PACK;
    case EK_OP_STRIDED_SLICE: return OPT_STRIDED_SLICE;
    case EK_OP_SLICE: return OPT_SLICE;
    case EK_OP_SQUEEZE: return OPT_SQUEEZE;
    case EK_OP_EXPAND_DIMS: return OPT_EXPAND_DIMS;
    case EK_OP_GATHER: return OPT_GATHER;
    case EK_OP_DEPTH_TO_SPACE: return OPT_DEPTH_TO_SPACE;
    case EK_OP_SPACE_TO_DEPTH: return OPT_SPACE_TO_DEPTH;
    case EK_OP_RESIZE_NEAREST_NEIGHBOR: return OPT_RESIZE_NEAREST_NEIGHBOR;
    case EK_OP_RESIZE_BILINEAR: return OPT_RESIZE_BILINEAR;
    case EK_OP_CAST: return OPT_CAST;
    case EK_OP_FILL: return OPT_FILL;
    case EK_OP_SHAPE: return OPT_SHAPE;
    case EK_OP_ZEROS_LIKE: return OPT_ZEROS_LIKE;
    case EK_OP_TRANSPOSE_CONV: return OPT_TRANSPOSE_CONV;
    case EK_OP_MIRROR_PAD: return OPT_MIRROR_PAD;
    case EK_OP_SVDF: return OPT_SVDF;
    case EK_OP_UNIDIRECTIONAL_SEQUENCE_LSTM: return OPT_UNIDIRECTIONAL_SEQUENCE_LSTM;
    default: return -1; /* options ignored */
  }
}

/* Small-integer field (bool/enum byte) into a byte parameter. */
static int fb_u8_param(const fb *b, const fb_table *t, int slot, uint32_t dflt, uint8_t *out) {
  uint32_t v;
  if (!fb_u8(b, t, slot, dflt, &v)) return 0;
  *out = (uint8_t)v; /* a ubyte field: < 256 */
  return 1;
}

/* int32 field into a 16-bit parameter; clears *fits (and stores 0) when the value does not fit. */
static int fb_i16_param(const fb *b, const fb_table *t, int slot, int32_t dflt, int16_t *out, int *fits) {
  int32_t v;
  if (!fb_i32(b, t, slot, dflt, &v)) return 0;
  if (v < INT16_MIN || v > INT16_MAX) {
    *fits = 0;
    v = 0;
  }
  *out = (int16_t)v;
  return 1;
}

/* SPLIT num_splits / PACK values_count / UNPACK num: must equal the op's output (input) count, as TFLite checks;
   clears *fits otherwise. */
static int fb_count_matches(const fb *b, const fb_table *t, int slot, int32_t count, int *fits) {
  int32_t v;
  if (!fb_i32(b, t, slot, 0, &v)) return 0;
  if (v != count) *fits = 0;
  return 1;
}

/* Decodes builtin_options into op->params (schema defaults for absent fields). Returns 0 if corrupt; clears
   *fits when a 32-bit option does not fit its 16-bit parameter. */
static int read_options(const fb *b, const fb_table *o, ek_op *op, int *fits) {
  ek_op_params *p = &op->params;
  switch (op->opcode) {
    case EK_OP_CONV_2D:
      return fb_u8_param(b, o, 0, EK_PAD_SAME, &p->padding) && fb_i16_param(b, o, 1, 0, &p->stride_w, fits) &&
             fb_i16_param(b, o, 2, 0, &p->stride_h, fits) && fb_u8_param(b, o, 3, EK_ACT_NONE, &p->activation) &&
             fb_i16_param(b, o, 4, 1, &p->dilation_w, fits) && fb_i16_param(b, o, 5, 1, &p->dilation_h, fits);
    case EK_OP_DEPTHWISE_CONV_2D:
      return fb_u8_param(b, o, 0, EK_PAD_SAME, &p->padding) && fb_i16_param(b, o, 1, 0, &p->stride_w, fits) &&
             fb_i16_param(b, o, 2, 0, &p->stride_h, fits) && fb_i16_param(b, o, 3, 0, &p->depth_multiplier, fits) &&
             fb_u8_param(b, o, 4, EK_ACT_NONE, &p->activation) && fb_i16_param(b, o, 5, 1, &p->dilation_w, fits) &&
             fb_i16_param(b, o, 6, 1, &p->dilation_h, fits);
    case EK_OP_AVERAGE_POOL_2D:
    case EK_OP_MAX_POOL_2D:
      return fb_u8_param(b, o, 0, EK_PAD_SAME, &p->padding) && fb_i16_param(b, o, 1, 0, &p->stride_w, fits) &&
             fb_i16_param(b, o, 2, 0, &p->stride_h, fits) && fb_i16_param(b, o, 3, 0, &p->filter_w, fits) &&
             fb_i16_param(b, o, 4, 0, &p->filter_h, fits) && fb_u8_param(b, o, 5, EK_ACT_NONE, &p->activation);
    case EK_OP_FULLY_CONNECTED:
      return fb_u8_param(b, o, 0, EK_ACT_NONE, &p->activation) && fb_u8_param(b, o, 1, 0, &p->weights_format) &&
             fb_u8_param(b, o, 2, 0, &p->keep_num_dims);
    case EK_OP_SOFTMAX:
      return fb_f32(b, o, 0, 0.0f, &p->beta);
    case EK_OP_CONCATENATION:
      return fb_i16_param(b, o, 0, 0, &p->axis, fits) && fb_u8_param(b, o, 1, EK_ACT_NONE, &p->activation);
    case EK_OP_ADD:
      return fb_u8_param(b, o, 0, EK_ACT_NONE, &p->activation) && fb_u8_param(b, o, 1, 1, &p->pot_scale_int16);
    case EK_OP_MUL:
      return fb_u8_param(b, o, 0, EK_ACT_NONE, &p->activation);
    case EK_OP_MEAN:
    case EK_OP_SUM:
    case EK_OP_REDUCE_MAX:
    case EK_OP_REDUCE_MIN:
      return fb_u8_param(b, o, 0, 0, &p->keep_dims);
    case EK_OP_LEAKY_RELU:
      return fb_f32(b, o, 0, 0.0f, &p->alpha);
    case EK_OP_GELU:
      return fb_u8_param(b, o, 0, 0, &p->approximate);
    case EK_OP_BATCH_MATMUL: /* BatchMatMulOptions: adj_x, adj_y (asymmetric_quantize_inputs: hybrid only) */
      return fb_u8_param(b, o, 0, 0, &p->adj_x) && fb_u8_param(b, o, 1, 0, &p->adj_y);
    case EK_OP_DIV: /* DivOptions: fused_activation_function */
    case EK_OP_L2_NORMALIZATION: /* L2NormOptions: fused_activation_function */
      return fb_u8_param(b, o, 0, EK_ACT_NONE, &p->activation);
    case EK_OP_SUB: /* SubOptions: fused_activation_function, pot_scale_int16 (default true) */
      return fb_u8_param(b, o, 0, EK_ACT_NONE, &p->activation) && fb_u8_param(b, o, 1, 1, &p->pot_scale_int16);
    case EK_OP_SPLIT:
    case EK_OP_SPLIT_V:
      return fb_count_matches(b, o, 0, op->num_outputs, fits);
    case EK_OP_UNPACK:
      return fb_count_matches(b, o, 0, op->num_outputs, fits) && fb_i16_param(b, o, 1, 0, &p->axis, fits);
    case EK_OP_PACK:
      return fb_count_matches(b, o, 0, op->num_inputs, fits) && fb_i16_param(b, o, 1, 0, &p->axis, fits);
    case EK_OP_STRIDED_SLICE: {
      int32_t m[5];
      uint32_t offset;
      for (int k = 0; k < 5; ++k)
        if (!fb_i32(b, o, k, 0, &m[k])) return 0;
      if (!fb_u8(b, o, 5, 0, &offset)) return 0;
      p->begin_mask = (uint8_t)m[0], p->end_mask = (uint8_t)m[1], p->ellipsis_mask = (uint8_t)m[2];
      p->new_axis_mask = (uint8_t)m[3], p->shrink_axis_mask = (uint8_t)m[4]; /* low 8 bits: see ek_op_params */
      p->flags = offset ? EK_FLAG_OFFSET : 0;
      return 1;
    }
    case EK_OP_GATHER: {
      int32_t bd;
      if (!fb_i16_param(b, o, 0, 0, &p->axis, fits) || !fb_i32(b, o, 1, 0, &bd)) return 0;
      if (bd < -128 || bd > 127) *fits = 0;
      p->batch_dims = (int8_t)(bd < -128 || bd > 127 ? 0 : bd);
      return 1;
    }
    case EK_OP_DEPTH_TO_SPACE:
    case EK_OP_SPACE_TO_DEPTH: {
      int32_t bs;
      if (!fb_i32(b, o, 0, 0, &bs)) return 0;
      if (bs < 0 || bs > 255) *fits = 0;
      p->block_size = (uint8_t)(bs < 0 || bs > 255 ? 0 : bs);
      return 1;
    }
    case EK_OP_RESIZE_BILINEAR:
    case EK_OP_RESIZE_NEAREST_NEIGHBOR: {
      const int first = op->opcode == EK_OP_RESIZE_BILINEAR ? 2 : 0; /* ResizeBilinearOptions: 2 deprecated fields first */
      uint32_t align, half;
      if (!fb_u8(b, o, first, 0, &align) || !fb_u8(b, o, first + 1, 0, &half)) return 0;
      p->flags = (uint8_t)((align ? EK_FLAG_ALIGN_CORNERS : 0) | (half ? EK_FLAG_HALF_PIXEL_CENTERS : 0));
      return 1;
    }
    case EK_OP_MIRROR_PAD: {
      uint32_t mode;
      if (!fb_u8(b, o, 0, 0, &mode)) return 0;
      p->flags = mode == 1 ? EK_FLAG_MIRROR_SYMMETRIC : 0;
      if (mode > 1) *fits = 0;
      return 1;
    }
    case EK_OP_TRANSPOSE_CONV:
      return fb_u8_param(b, o, 0, EK_PAD_SAME, &p->padding) && fb_i16_param(b, o, 1, 0, &p->stride_w, fits) &&
             fb_i16_param(b, o, 2, 0, &p->stride_h, fits) && fb_u8_param(b, o, 3, EK_ACT_NONE, &p->activation);
    case EK_OP_SVDF: /* SVDFOptions: rank, fused_activation_function, asymmetric_quantize_inputs */
      return fb_i16_param(b, o, 0, 0, &p->rank, fits) && fb_u8_param(b, o, 1, EK_ACT_NONE, &p->activation);
    case EK_OP_UNIDIRECTIONAL_SEQUENCE_LSTM: /* fused_activation_function, cell_clip, proj_clip (unused: no
                                                projection), time_major, ... */
      return fb_u8_param(b, o, 0, EK_ACT_NONE, &p->activation) && fb_f32(b, o, 1, 0.0f, &p->cell_clip) &&
             fb_u8_param(b, o, 3, 0, &p->time_major);
    default:
      return 1; /* RESHAPE (the kernel uses the output shape), PAD, TRANSPOSE, QUANTIZE, ...: nothing to decode */
  }
}

static void default_params(ek_op *op) {
  ek_op_params *p = &op->params;
  memset(p, 0, sizeof *p);
  p->padding = EK_PAD_SAME;
  p->dilation_w = 1;
  p->dilation_h = 1;
  p->pot_scale_int16 = 1;
  p->beta = 0.0f; /* TFLite: a SOFTMAX without options gets zeroed params */
  p->intermediate_hidden = -1;
}

static ek_status fail_op(reader *r, ek_op *op, ek_status status, const char *message) {
  return ek_fail(&r->rt->ctx, op, status, message);
}

/* Validates an operator's inputs/outputs vector and points *out at it in the model (little-endian int32, as the
   constants used in place). */
static ek_status read_index_vector(reader *r, ek_op *op, const fb_table *ot, int slot, const int32_t **out,
                                   int32_t max, int32_t *count, const char *too_many) {
  const fb *b = &r->b;
  uint32_t n;
  size_t data;
  if (fb_vector(b, ot, slot, 4, &n, &data) < 0)
    return fail_op(r, op, EK_ERR_MODEL, "corrupt model: operator inputs/outputs vector out of bounds");
  if (n > (uint32_t)max) return fail_op(r, op, EK_ERR_UNSUPPORTED, too_many);
  for (uint32_t k = 0; k < n; ++k) {
    uint32_t v;
    if (!rd_u32(b, data + 4u * k, &v)) return fail_op(r, op, EK_ERR_MODEL, "corrupt model: operator tensor index out of bounds");
    const int32_t idx = as_i32(v);
    if (idx < -1 || idx >= r->rt->ctx.num_tensors)
      return fail_op(r, op, EK_ERR_MODEL, "corrupt model: operator tensor index out of range");
  }
  if (n > 0 && ((uintptr_t)(b->p + data) & 3u) != 0)
    return fail_op(r, op, EK_ERR_MODEL,
                   "operator tensor index vector is misaligned for in-place access (place the model at a 16-byte aligned address)");
  *out = n > 0 ? (const int32_t *)(const void *)(b->p + data) : (const int32_t *)0;
  *count = (int32_t)n;
  return EK_OK;
}

static ek_status read_operator(reader *r, uint32_t i, ek_op *op, const ek_kernel **kernel) {
  const fb *b = &r->b;
  fb_table ot, opts;
  uint32_t options_type;
  ek_read_error err = {EK_OK, -1, (const char *)0};
  int32_t code, version;
  ek_status st;
  memset(op, 0, sizeof *op);
  op->index = (int32_t)i;
  default_params(op);
  if (ek_read_opcode(b->p, b->n, r->mv, i, &code, &version, &err) != EK_OK)
    return fail_op(r, op, err.status, err.message);
  op->opcode = code;
  op->version = version;
  *kernel = ek_find_kernel(code);
  if (!*kernel) {
    /* Compose "unsupported operator <NAME> (no kernel in this runtime build)" into the runtime's buffer. */
    char *m = r->rt->message_buf;
    const size_t cap = sizeof r->rt->message_buf;
    const char *parts[3] = {"unsupported operator ", ek_op_name(code), " (no kernel in this runtime build)"};
    size_t n = 0;
    for (int k = 0; k < 3; ++k)
      for (const char *s = parts[k]; *s && n + 1 < cap; ++s) m[n++] = *s;
    m[n] = '\0';
    return fail_op(r, op, EK_ERR_UNSUPPORTED, m);
  }
  if (!fb_vector_table(b, r->mv->ops_vec, i, &ot))
    return fail_op(r, op, EK_ERR_MODEL, "corrupt model: operator table out of bounds (truncated?)");
  st = read_index_vector(r, op, &ot, OPERATOR_INPUTS, &op->inputs, EK_MAX_OP_INPUTS, &op->num_inputs,
                         "operator has more than 24 inputs");
  if (st != EK_OK) return st;
  st = read_index_vector(r, op, &ot, OPERATOR_OUTPUTS, &op->outputs, EK_MAX_OP_OUTPUTS, &op->num_outputs,
                         "operator has more than 16 outputs");
  if (st != EK_OK) return st;
  const int no_output = code == EK_OP_ASSIGN_VARIABLE || code == EK_OP_CALL_ONCE; /* ops without outputs */
  if (no_output ? op->num_outputs != 0 : op->num_outputs < 1)
    return fail_op(r, op, EK_ERR_MODEL, no_output ? "operator must have no output tensor" : "operator has no output tensor");
  for (int32_t k = 0; k < op->num_outputs; ++k)
    if (op->outputs[k] < 0) return fail_op(r, op, EK_ERR_MODEL, "operator output tensor index is -1 (absent output)");
  if (!fb_u8(b, &ot, OPERATOR_OPTIONS_TYPE, OPT_NONE, &options_type))
    return fail_op(r, op, EK_ERR_MODEL, "corrupt model: bad builtin_options_type field");
  const int expected = expected_options(code);
  if (options_type != OPT_NONE && expected >= 0 && options_type != (uint32_t)expected)
    return fail_op(r, op, EK_ERR_MODEL, "operator's builtin_options are of the wrong type for its op code");
  const int has = fb_subtable(b, &ot, OPERATOR_OPTIONS, &opts);
  if (has < 0) return fail_op(r, op, EK_ERR_MODEL, "corrupt model: builtin_options table out of bounds");
  int fits = 1;
  if (has > 0 && options_type != OPT_NONE && expected >= 0 && !read_options(b, &opts, op, &fits))
    return fail_op(r, op, EK_ERR_MODEL, "corrupt model: builtin_options field out of bounds");
  if (!fits)
    return fail_op(r, op, EK_ERR_UNSUPPORTED,
                   "operator option out of range (stride, dilation, filter size, depth multiplier or axis outside "
                   "-32768..32767, block size > 255, batch_dims outside int8, or a split/pack count that differs from "
                   "the op's outputs/inputs)");
  op->params.keep_dims = op->params.keep_dims != 0; /* schema bools: any non-zero byte is true */
  op->params.keep_num_dims = op->params.keep_num_dims != 0;
  op->params.pot_scale_int16 = op->params.pot_scale_int16 != 0;
  op->params.approximate = op->params.approximate != 0;
  op->params.time_major = op->params.time_major != 0;
  if (code == EK_OP_UNIDIRECTIONAL_SEQUENCE_LSTM) { /* the kernel reads the hidden scale from intermediates[4] */
    uint32_t n, v;
    size_t data;
    if (fb_vector(b, &ot, OPERATOR_INTERMEDIATES, 4, &n, &data) < 0)
      return fail_op(r, op, EK_ERR_MODEL, "corrupt model: operator intermediates vector out of bounds");
    op->params.num_intermediates = (uint8_t)(n > 255u ? 255u : n);
    if (n >= 5) {
      if (!rd_u32(b, data + 16u, &v)) return fail_op(r, op, EK_ERR_MODEL, "corrupt model: operator intermediate out of bounds");
      const int32_t idx = as_i32(v);
      if (idx < 0 || idx >= r->rt->ctx.num_tensors)
        return fail_op(r, op, EK_ERR_MODEL, "corrupt model: operator intermediate tensor index out of range");
      op->params.intermediate_hidden = idx;
    }
  }
  return EK_OK;
}

/* ---- graph ---------------------------------------------------------------- */

static ek_status read_io(reader *r, size_t vec, uint32_t n, int32_t *out) {
  for (uint32_t k = 0; k < n; ++k) {
    uint32_t v;
    if (!rd_u32(&r->b, vec + 4u * k, &v)) return fail_tensor(r, EK_ERR_MODEL, "corrupt model: graph input/output out of bounds");
    const int32_t idx = as_i32(v);
    if (idx < 0 || idx >= r->rt->ctx.num_tensors)
      return fail_tensor(r, EK_ERR_MODEL, "corrupt model: graph input/output tensor index out of range");
    out[k] = idx;
  }
  return EK_OK;
}

static int32_t variable_of(const ek_runtime *rt, int32_t t);

/* Producer of each tensor, kept in tensor_plan[].first_op during the check (-2: none, -1: graph input). */
static ek_status check_graph(reader *r) {
  ek_runtime *rt = r->rt;
  ek_plan_entry *pe = rt->tensor_plan;
  for (int32_t t = 0; t < rt->ctx.num_tensors; ++t) pe[t].first_op = -2;
  for (int32_t k = 0; k < rt->num_inputs; ++k) {
    const int32_t t = rt->inputs[k];
    if (rt->ctx.tensors[t].is_constant) return fail_tensor(r, EK_ERR_MODEL, "a graph input is a constant tensor");
    if (pe[t].first_op != -2) return fail_tensor(r, EK_ERR_MODEL, "a tensor is listed twice as a graph input");
    pe[t].first_op = -1;
  }
  for (int32_t i = 0; i < rt->num_ops; ++i) {
    ek_op *op = &rt->ops[i];
    for (int32_t k = 0; k < op->num_inputs; ++k) {
      const int32_t t = op->inputs[k];
      if (t < 0 || rt->ctx.tensors[t].is_constant || variable_of(rt, t) >= 0) continue; /* state: persistent */
      if (pe[t].first_op == -2)
        return fail_op(r, op, EK_ERR_MODEL, "operator reads a tensor that is neither constant, a graph input nor produced by an earlier operator");
    }
    for (int32_t k = 0; k < op->num_outputs; ++k) {
      const int32_t o = op->outputs[k];
      if (rt->ctx.tensors[o].is_constant) return fail_op(r, op, EK_ERR_MODEL, "operator writes to a constant tensor");
      if (pe[o].first_op != -2)
        return fail_op(r, op, EK_ERR_MODEL, "operator output is already a graph input or written by another operator (or listed twice)");
      pe[o].first_op = i;
    }
  }
  for (int32_t k = 0; k < rt->num_outputs; ++k) {
    const int32_t t = rt->outputs[k];
    if (!rt->ctx.tensors[t].is_constant && pe[t].first_op == -2)
      return fail_tensor(r, EK_ERR_MODEL, "a graph output is never written (not an input, constant or operator output)");
  }
  return EK_OK;
}

/* ---- resource variables ---------------------------------------------------- */

/* A variable tensor (is_variable: an op's state, e.g. SVDF's activation state) is kept like a resource variable: an
   arena buffer alive over the whole graph, set to its initial value at init and on reset (its constant data if it
   has some, otherwise LiteRT's ResetVariableTensor value: the zero point for int8, 0 otherwise). */
static ek_status read_variable_tensor(reader *r, int32_t t) {
  ek_runtime *rt = r->rt;
  ek_tensor *x = &rt->ctx.tensors[t];
  const int32_t k = rt->ctx.num_var_init;
  if ((uint32_t)k >= r->mv->num_var_handles) return fail_tensor(r, EK_ERR_INTERNAL, "variable tensor count changed");
  if (x->is_constant) return fail_tensor(r, EK_ERR_UNSUPPORTED, "a variable tensor with constant data is not supported");
  ek_var_init *v = (ek_var_init *)&rt->ctx.var_init[k];
  v->tensor = t;
  v->src = -1;
  v->bytes = x->bytes;
  v->fill = x->type == EK_INT8 && x->num_scales > 0 ? (int32_t)(uint8_t)(int8_t)x->zero_point : 0;
  rt->tensor_plan[k].alias_of = -1; /* not a VAR_HANDLE (read_variables) */
  rt->ctx.num_var_init = k + 1;
  return EK_OK;
}

/* A VAR_HANDLE's (container, shared_name) as positions in the model (VarHandleOptions slots 0, 1). */
typedef struct var_name {
  size_t c, s;
  uint32_t clen, slen;
  int has_c;
} var_name;

static int handle_name(const fb *b, size_t ops_vec, uint32_t i, var_name *n) {
  fb_table ot, o;
  memset(n, 0, sizeof *n);
  if (!fb_vector_table(b, ops_vec, i, &ot)) return 0;
  const int has = fb_subtable(b, &ot, OPERATOR_OPTIONS, &o);
  if (has <= 0) return has == 0;
  const int hc = fb_vector(b, &o, 0, 1, &n->clen, &n->c), hs = fb_vector(b, &o, 1, 1, &n->slen, &n->s);
  n->has_c = hc > 0;
  return hc >= 0 && hs >= 0;
}

/* TFLM's MicroResourceVariables::FindId: equal shared names, and equal containers unless one is absent. */
static int same_variable(const fb *b, const var_name *x, const var_name *y) {
  if (x->slen != y->slen || (x->slen && memcmp(b->p + x->s, b->p + y->s, x->slen) != 0)) return 0;
  if (!x->has_c || !y->has_c) return 1;
  return x->clen == y->clen && (x->clen == 0 || memcmp(b->p + x->c, b->p + y->c, x->clen) == 0);
}

/* The variable whose handle is tensor t of the main graph, or -1. */
static int32_t variable_of(const ek_runtime *rt, int32_t t) {
  for (int32_t k = 0; k < rt->ctx.num_var_init; ++k)
    if (rt->ctx.var_init[k].tensor == t) return k;
  return -1;
}

/* Sizes variable k from a tensor that is assigned to it or read from it: every such tensor has the same bytes; the
   first assigned value's zero point is the default fill byte (TFLM: micro_resource_variable.cc Allocate). */
static ek_status size_variable(reader *r, ek_op *op, int32_t k, const ek_tensor *t, int assigned) {
  ek_var_init *v = (ek_var_init *)&r->rt->ctx.var_init[k];
  if (t->type == EK_RESOURCE) return fail_op(r, op, EK_ERR_TYPE, "a resource variable's value is itself a RESOURCE tensor");
  if (v->bytes >= 0 && v->bytes != t->bytes)
    return fail_op(r, op, EK_ERR_SHAPE, "a resource variable is read or assigned with different sizes");
  v->bytes = t->bytes;
  if (assigned && v->fill < 0) v->fill = t->num_scales > 0 ? (int32_t)(uint8_t)(int8_t)t->zero_point : 0;
  return EK_OK;
}

/* Init subgraph: VAR_HANDLE and ASSIGN_VARIABLE of constants only; each assignment becomes its variable's initial
   value (an init variable the main graph never names is dropped: nothing could read it). */
static ek_status read_init_subgraph(reader *r) {
  const fb *b = &r->b;
  ek_runtime *rt = r->rt;
  fb_table sg;
  ek_model_view iv = *r->mv;
  uint32_t nops, nt;
  size_t ops, tv;
  if (!fb_vector_table(b, r->mv->subgraphs_vec, (uint32_t)r->mv->init_subgraph, &sg) ||
      fb_vector(b, &sg, SUBGRAPH_TENSORS, 4, &nt, &tv) < 0 || fb_vector(b, &sg, SUBGRAPH_OPERATORS, 4, &nops, &ops) < 0)
    return fail_tensor(r, EK_ERR_MODEL, "corrupt model: CALL_ONCE init subgraph out of bounds");
  iv.tensors_vec = tv;
  iv.num_tensors = nt;
  reader ir = *r;
  ir.mv = &iv;
  for (uint32_t j = 0; j < nops; ++j) {
    ek_read_error err = {EK_OK, -1, (const char *)0};
    int32_t code;
    fb_table ot;
    uint32_t nin, h, v;
    size_t in;
    if (opcode_in(b, r->mv, ops, nops, j, &code, (int32_t *)0, &err) != EK_OK)
      return fail_tensor(r, err.status, "corrupt model: CALL_ONCE init subgraph operator out of bounds");
    if (code == EK_OP_VAR_HANDLE) continue;
    if (code != EK_OP_ASSIGN_VARIABLE)
      return fail_tensor(r, EK_ERR_UNSUPPORTED,
                         "the CALL_ONCE init subgraph computes values; only VAR_HANDLE and ASSIGN_VARIABLE of constants are supported");
    if (!fb_vector_table(b, ops, j, &ot) || fb_vector(b, &ot, OPERATOR_INPUTS, 4, &nin, &in) <= 0 || nin != 2 ||
        !rd_u32(b, in, &h) || !rd_u32(b, in + 4, &v) || h >= nt || v >= nt)
      return fail_tensor(r, EK_ERR_MODEL, "corrupt model: bad ASSIGN_VARIABLE in the CALL_ONCE init subgraph");
    /* the handle's VAR_HANDLE in the init subgraph, and the main graph's variable of that name */
    var_name name;
    int found = 0;
    for (uint32_t q = 0; q < nops && !found; ++q) {
      fb_table qt;
      uint32_t nout, o;
      size_t out;
      if (opcode_in(b, r->mv, ops, nops, q, &code, (int32_t *)0, &err) != EK_OK || code != EK_OP_VAR_HANDLE) continue;
      if (!fb_vector_table(b, ops, q, &qt) || fb_vector(b, &qt, OPERATOR_OUTPUTS, 4, &nout, &out) <= 0 || nout != 1 ||
          !rd_u32(b, out, &o) || !handle_name(b, ops, q, &name))
        return fail_tensor(r, EK_ERR_MODEL, "corrupt model: bad VAR_HANDLE in the CALL_ONCE init subgraph");
      found = o == h;
    }
    if (!found) return fail_tensor(r, EK_ERR_MODEL, "an init ASSIGN_VARIABLE's handle is not a VAR_HANDLE output");
    int32_t k = -1;
    for (int32_t m = 0; m < rt->ctx.num_var_init && k < 0; ++m) {
      var_name mn;
      if (rt->tensor_plan[m].alias_of < 0) continue; /* a variable tensor, not a handle */
      if (!handle_name(b, r->mv->ops_vec, (uint32_t)rt->tensor_plan[m].alias_of, &mn))
        return fail_tensor(r, EK_ERR_MODEL, "corrupt model: VAR_HANDLE options out of bounds");
      if (same_variable(b, &name, &mn)) k = m;
    }
    if (k < 0) continue;
    ek_tensor value;
    ek_status st = read_tensor(&ir, v, &value);
    if (st != EK_OK) return st;
    if (!value.is_constant)
      return fail_tensor(r, EK_ERR_UNSUPPORTED, "the CALL_ONCE init subgraph assigns a value that is not a constant");
    st = size_variable(r, (ek_op *)0, k, &value, 1);
    if (st != EK_OK) return st;
    ((ek_var_init *)&rt->ctx.var_init[k])->src = (int32_t)((const uint8_t *)value.data - b->p);
  }
  return EK_OK;
}

/* Resolves the main graph's VAR_HANDLE ops to variables (ctx.var_init, one per handle: two handles naming one
   variable are rejected), sizes them from what is assigned and read, gives each handle tensor its variable's bytes
   and reads the initial values of the CALL_ONCE init subgraph. Uses tensor_plan[k].alias_of as work memory (the
   VAR_HANDLE op of variable k); the planner re-initialises the plan. */
static ek_status read_variables(reader *r) {
  ek_runtime *rt = r->rt;
  const fb *b = &r->b;
  ek_var_init *vars = (ek_var_init *)rt->ctx.var_init;
  int32_t n = rt->ctx.num_var_init, first_handle = n, call_once = -1; /* after the variable tensors */
  for (int32_t i = 0; i < rt->num_ops; ++i) {
    ek_op *op = &rt->ops[i];
    if (op->opcode == EK_OP_CALL_ONCE && call_once < 0) call_once = i;
    for (int32_t k = 0; k < op->num_inputs; ++k) {
      const int32_t t = op->inputs[k];
      if (t >= 0 && rt->ctx.tensors[t].type == EK_RESOURCE &&
          !(k == 0 && (op->opcode == EK_OP_READ_VARIABLE || op->opcode == EK_OP_ASSIGN_VARIABLE)))
        return fail_op(r, op, EK_ERR_UNSUPPORTED, "a RESOURCE tensor is used by an op other than READ_VARIABLE / ASSIGN_VARIABLE");
    }
    if (op->num_outputs > 0 && (rt->ctx.tensors[op->outputs[0]].type == EK_RESOURCE) != (op->opcode == EK_OP_VAR_HANDLE))
      return fail_op(r, op, EK_ERR_TYPE, "only VAR_HANDLE produces a RESOURCE tensor, and its output must be one");
    if (op->opcode != EK_OP_VAR_HANDLE) continue;
    if ((uint32_t)n >= r->mv->num_var_handles) return fail_op(r, op, EK_ERR_INTERNAL, "VAR_HANDLE count changed");
    var_name name, other;
    if (!handle_name(b, r->mv->ops_vec, (uint32_t)i, &name))
      return fail_op(r, op, EK_ERR_MODEL, "corrupt model: VAR_HANDLE options out of bounds");
    for (int32_t m = 0; m < n; ++m) {
      if (rt->tensor_plan[m].alias_of < 0) continue; /* a variable tensor, not a handle */
      if (!handle_name(b, r->mv->ops_vec, (uint32_t)rt->tensor_plan[m].alias_of, &other))
        return fail_op(r, op, EK_ERR_MODEL, "corrupt model: VAR_HANDLE options out of bounds");
      if (same_variable(b, &name, &other))
        return fail_op(r, op, EK_ERR_UNSUPPORTED, "two VAR_HANDLE ops of the main graph name the same variable");
    }
    if ((call_once < 0 || call_once > i))
      return fail_op(r, op, EK_ERR_UNSUPPORTED,
                     "model uses resource variables without a CALL_ONCE init subgraph running first (not supported)");
    vars[n].tensor = op->outputs[0];
    vars[n].src = -1;
    vars[n].bytes = -1;
    vars[n].fill = -1;
    rt->tensor_plan[n].alias_of = i;
    rt->ctx.num_var_init = ++n;
  }
  for (int32_t i = 0; i < rt->num_ops; ++i) {
    ek_op *op = &rt->ops[i];
    const int read = op->opcode == EK_OP_READ_VARIABLE, assign = op->opcode == EK_OP_ASSIGN_VARIABLE;
    if (!read && !assign) continue;
    const int32_t k = op->num_inputs >= 1 ? variable_of(rt, op->inputs[0]) : -1;
    if (k < 0 || op->num_inputs != (assign ? 2 : 1) || (read && op->num_outputs != 1))
      return fail_op(r, op, EK_ERR_MODEL, "READ_VARIABLE / ASSIGN_VARIABLE needs a VAR_HANDLE output as its handle");
    const int32_t t = assign ? op->inputs[1] : op->outputs[0];
    if (t < 0) return fail_op(r, op, EK_ERR_MODEL, "ASSIGN_VARIABLE has no value");
    const ek_status st = size_variable(r, op, k, &rt->ctx.tensors[t], assign);
    if (st != EK_OK) return st;
  }
  if (r->mv->init_subgraph > 0) {
    const ek_status st = read_init_subgraph(r);
    if (st != EK_OK) return st;
  }
  for (int32_t k = first_handle; k < n; ++k) {
    if (vars[k].bytes < 0) vars[k].bytes = 0;
    if (vars[k].fill < 0) vars[k].fill = 0;
    rt->ctx.tensors[vars[k].tensor].bytes = vars[k].bytes;
  }
  for (int32_t k = 0; k < rt->num_outputs; ++k)
    if (rt->ctx.tensors[rt->outputs[k]].type == EK_RESOURCE)
      return fail_tensor(r, EK_ERR_UNSUPPORTED, "a graph output is a RESOURCE tensor");
  return EK_OK;
}

ek_status ek_read_graph(ek_runtime *rt, const ek_model_view *mv) {
  reader r;
  ek_status st;
  r.b.p = rt->model;
  r.b.n = rt->model_len;
  r.rt = rt;
  r.mv = mv;
  for (uint32_t i = 0; i < mv->num_tensors; ++i) {
    st = read_tensor(&r, i, &rt->ctx.tensors[i]);
    if (st != EK_OK) return st;
    if (r.is_variable) {
      st = read_variable_tensor(&r, (int32_t)i);
      if (st != EK_OK) return st;
    }
  }
  for (uint32_t i = 0; i < mv->num_ops; ++i) {
    st = read_operator(&r, i, &rt->ops[i], &rt->kernels[i]);
    if (st != EK_OK) return st;
  }
  rt->num_inputs = (int32_t)mv->num_inputs;
  rt->num_outputs = (int32_t)mv->num_outputs;
  st = read_io(&r, mv->inputs_vec, mv->num_inputs, rt->inputs);
  if (st != EK_OK) return st;
  st = read_io(&r, mv->outputs_vec, mv->num_outputs, rt->outputs);
  if (st != EK_OK) return st;
  st = check_graph(&r);
  if (st != EK_OK) return st;
  return read_variables(&r);
}

int32_t ek_model_opcodes(const void *model, size_t model_len, int32_t *codes, int32_t max_codes, ek_error *error) {
  ek_model_view mv;
  ek_read_error err = {EK_OK, -1, (const char *)0};
  if (ek_read_header((const uint8_t *)model, model_len, &mv, &err) == EK_OK) {
    for (uint32_t i = 0; i < mv.num_ops; ++i) {
      int32_t code;
      if (ek_read_opcode((const uint8_t *)model, model_len, &mv, i, &code, (int32_t *)0, &err) != EK_OK) break;
      if (codes && (int64_t)i < (int64_t)max_codes) codes[i] = code;
    }
  }
  if (error) {
    error->status = err.status;
    error->op_index = err.op_index;
    error->message = err.message ? err.message : "";
  }
  return err.status == EK_OK ? (int32_t)mv.num_ops : -1;
}
