/* edgekit runtime: prepared models.
 *
 * A prepared model is everything fixed once the model is known — tensor and op records, the memory plan, the
 * kernels' per-op data (per-channel multipliers/shifts, folded biases, ...) — computed on the host by the same C
 * code (ek_init + ek_plan_overlapped + the kernels' prepare) and written by ek_export_prepared as one pointer-free
 * blob (offsets only), kept in flash next to the .tflite (whose constants it references in place). On the device
 * ek_prepared_init validates it (magic, version, length, checksum, the model's length and checksum, every offset,
 * index and size) and ek_prepared_invoke runs the kernels' eval on it: no flatbuffer reader, no planner, and RAM
 * is the arena plus a few tensor records decoded on demand (ek_input / ek_output) into the caller's state.
 *
 * Blob layout (little-endian, 16-byte aligned start):
 *   header (EKP_HEADER_WORDS int32) | ekp_tensor[num_tensors] | ekp_op[num_ops] | int32 inputs[], outputs[] |
 *   data (op index arrays, 4-byte aligned; per-op kernel data, 8-byte aligned)
 * See firmware/runtime/README.md ("Prepared models").
 */
#include <string.h>

#include "ek_internal.h"
#include "ek_stream_group.h"

#define EKP_MAGIC 0x4D504B45u /* "EKPM" */
#define EKP_VERSION 3u /* 2: row-streamed groups (ekp_op.group); 3: ops with several outputs (H_MAX_OP_OUTPUTS) and
                              resource variables (RESOURCE tensors, ops without outputs) */
enum {
  H_MAGIC, H_VERSION, H_TOTAL, H_CHECKSUM, H_MODEL_LEN, H_MODEL_SUM, H_ARENA, H_TENSORS, H_OPS, H_INPUTS, H_OUTPUTS,
  H_TENSORS_OFF, H_OPS_OFF, H_IO_OFF, H_DATA_OFF, H_DATA_LEN, H_MAX_OP_INPUTS, H_PARAMS_SIZE, H_TENSOR_REC, H_OP_REC,
  H_OPTIMIZE, H_MAX_OP_OUTPUTS, EKP_HEADER_WORDS
};
#define EKP_FOR_MVE 0x100u /* H_OPTIMIZE flag: overlaps planned for Helium kernels (safe on every target) */
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1) && !defined(EK_CONV_NO_MVE)
#define EKP_THIS_MVE 1 /* same condition as EK_CONV_MVE (ek_conv_common.h) */
#else
#define EKP_THIS_MVE 0
#endif

typedef struct ekp_op {
  int32_t opcode, index, version, num_inputs, num_outputs;
  int32_t inputs_off, outputs_off; /* int32 arrays in the blob */
  ek_op_params params;
  int32_t user_off, user_len;       /* per-op kernel data in the blob (user_len 0: none) */
  int32_t scratch_off, scratch_len; /* in the arena (scratch_len 0: none) */
  int32_t group; /* 0: a plain op. > 0: the first op of a row-streamed group of 1 + `group` ops (its scratch is the
                    group's region: windows, then the kernels' scratch). -1: the k-th later op of a group, run by the
                    first; its scratch_off holds the window rows of the group's k-th intermediate (op k-1's output). */
} ekp_op;

typedef char ekp_tensor_size_check[sizeof(ekp_tensor) == 64 ? 1 : -1];
/* ek_op_params and ekp_op hold fixed-width fields only: the same layout on the host and every 32-bit target (the
   header records both sizes and the device checks them). */

/* FNV-1a, 32 bits. */
static uint32_t fnv1a(uint32_t h, const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}
#define FNV_START 2166136261u

static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Checksum of the blob with its checksum word taken as 0. */
static uint32_t blob_checksum(const uint8_t *b, size_t len) {
  static const uint8_t zero[4] = {0, 0, 0, 0};
  uint32_t h = fnv1a(FNV_START, b, 4u * H_CHECKSUM);
  h = fnv1a(h, zero, 4);
  return fnv1a(h, b + 4u * (H_CHECKSUM + 1), len - 4u * (H_CHECKSUM + 1));
}

/* The kernels' skips_input (ek_kernels.h), weak: 0 where the kernel is not linked. */
#if defined(__GNUC__)
#define EKP_WEAK __attribute__((weak))
#else
#define EKP_WEAK
#endif
int ek_fully_connected_skips_input(const void *user_data, int input_index) EKP_WEAK;
int ek_conv_2d_skips_input(const void *user_data, int input_index) EKP_WEAK;

static int skips_input(int32_t opcode, const void *user_data, int input_index) {
  int (*f)(const void *, int) = opcode == EK_OP_FULLY_CONNECTED ? ek_fully_connected_skips_input
                                : opcode == EK_OP_CONV_2D     ? ek_conv_2d_skips_input
                                                              : 0;
  return f && user_data && f(user_data, input_index);
}

/* ---- device side ------------------------------------------------------------------------------------------- */

static ek_status bad(ek_prepared *p, const char *message) {
  return ek_fail(&p->ctx, (const ek_op *)0, EK_ERR_MODEL, message);
}

#if defined(__GNUC__) /* called from many checks: one copy is smaller than each inlined (flash) */
#define EK_NOINLINE_PREP __attribute__((noinline))
#else
#define EK_NOINLINE_PREP
#endif

/* [off, off + len) inside [0, limit) with off aligned to `align` (a power of two: a mask, no 64-bit division). */
EK_NOINLINE_PREP static int in_range(int64_t off, int64_t len, int64_t limit, int64_t align) {
  return off >= 0 && len >= 0 && off <= limit && len <= limit - off && (off & (align - 1)) == 0;
}

/* One message per kind of tensor-record fault, not one per check (flash on the device): a blob that passed the
   checksum has them only if a bug or another edgekit version wrote it, and the fix is the same (regenerate it). */
#define BAD_TENSOR_SHAPE "prepared model: bad tensor record (shape, type or bytes)"
#define BAD_TENSOR_WHERE "prepared model: tensor record outside the arena or the model"
#define BAD_TENSOR_QUANT "prepared model: bad tensor record (flags or quantization)"
#define BAD_WIRING "prepared model: operator wiring out of range" /* index arrays, input or output indices */

EK_NOINLINE_PREP static ek_status check_tensor(ek_prepared *p, const ekp_tensor *r, size_t model_len, size_t arena_bytes) {
  if (r->ndim < 0 || r->ndim > EK_MAX_DIMS || r->bytes < 0) return bad(p, BAD_TENSOR_SHAPE);
  const int resource = r->type == EK_RESOURCE; /* a variable: its bytes in the arena, whatever its (scalar) shape */
  const int32_t size = resource ? 1 : ek_type_size(r->type);
  if (size <= 0) return bad(p, BAD_TENSOR_SHAPE);
  if (resource && r->where != EKP_WHERE_ARENA && r->bytes > 0) return bad(p, BAD_TENSOR_WHERE);
  int64_t elements = 1;
  for (int32_t d = 0; d < r->ndim; ++d) {
    if (r->dims[d] < 0) return bad(p, BAD_TENSOR_SHAPE);
    elements *= r->dims[d];
    if (elements > INT32_MAX) return bad(p, BAD_TENSOR_SHAPE);
  }
  if (!resource && elements * size != r->bytes) return bad(p, BAD_TENSOR_SHAPE);
  const int64_t align = size >= 8 ? 8 : size;
  if (r->where == EKP_WHERE_ARENA) {
    if (!in_range(r->offset, r->bytes, (int64_t)arena_bytes, 1) || r->offset % EK_ARENA_ALIGN != 0 || r->is_constant)
      return bad(p, BAD_TENSOR_WHERE);
  } else if (r->where == EKP_WHERE_MODEL) {
    if (!in_range(r->offset, r->bytes, (int64_t)model_len, align) || !r->is_constant)
      return bad(p, BAD_TENSOR_WHERE);
  } else if (r->where != EKP_WHERE_NONE) {
    return bad(p, BAD_TENSOR_WHERE);
  }
  if ((r->flags & ~0xff03) != 0 || ((r->flags & EKP_STATE) && r->where != EKP_WHERE_ARENA)) /* EKP_UNREAD: per op */
    return bad(p, BAD_TENSOR_QUANT);
  if (r->num_scales < 0 || (r->ndim > 0 && (r->quantized_dimension < 0 || r->quantized_dimension >= r->ndim)) ||
      (r->ndim == 0 && r->quantized_dimension != 0))
    return bad(p, BAD_TENSOR_QUANT);
  if (r->scales_off != -1 && !in_range(r->scales_off, (int64_t)r->num_scales * 4, (int64_t)model_len, 4))
    return bad(p, BAD_TENSOR_QUANT);
  if (r->zero_points_off != -1 && !in_range(r->zero_points_off, (int64_t)r->num_scales * 8, (int64_t)model_len, 8))
    return bad(p, BAD_TENSOR_QUANT);
  return EK_OK;
}

/* ---- row-streamed groups (ek_stream_group.c) ------------------------------------------------------------- */
#ifndef EK_NO_STREAM_GROUPS

typedef struct group_view { /* what eks_build reads: the blob's records (and the model's constants) */
  const ekp_tensor *tensors;
  int32_t num_tensors;
  const uint8_t *model;
} group_view;

static int record_facts(const void *user, int32_t index, eks_tensor_facts *out) {
  const group_view *v = (const group_view *)user;
  if (index < 0 || index >= v->num_tensors) return 0;
  const ekp_tensor *r = &v->tensors[index];
  out->dims = r->dims;
  out->ndim = r->ndim;
  out->type = r->type;
  out->is_constant = r->is_constant;
  out->bytes = r->bytes;
  out->data = r->where == EKP_WHERE_MODEL ? (const void *)(v->model + r->offset) : (const void *)0; /* checked */
  return 1;
}

/* The group starting at ops[first] as an eks_graph (0, or -1 if its records do not describe a streamable group). */
static int group_graph(const uint8_t *b, const ekp_op *ops, int32_t first, const group_view *v, eks_graph *g,
                       int32_t *x_tensor) {
  const int32_t n = 1 + ops[first].group;
  if (n > EKS_MAX_OPS) return -1;
  int32_t opcodes[EKS_MAX_OPS], nin[EKS_MAX_OPS], outs[EKS_MAX_OPS];
  const int32_t *ins[EKS_MAX_OPS];
  const ek_op_params *params[EKS_MAX_OPS];
  for (int32_t k = 0; k < n; ++k) {
    const ekp_op *r = &ops[first + k];
    opcodes[k] = r->opcode;
    nin[k] = r->num_inputs;
    ins[k] = (const int32_t *)(const void *)(b + r->inputs_off);
    outs[k] = *(const int32_t *)(const void *)(b + r->outputs_off);
    params[k] = &r->params;
  }
  return eks_build(g, n, opcodes, ins, nin, outs, params, record_facts, v, x_tensor);
}

/* Checks every group: members follow their first op, the schedule streams, the stored windows hold what it needs
   and fit the first op's scratch region with the kernels' scratch after them. */
static ek_status check_groups(ek_prepared *p, const uint8_t *b, const ekp_op *ops, uint32_t N, const group_view *v) {
  for (uint32_t i = 0; i < N; ++i) {
    const ekp_op *r = &ops[i];
    if (r->group == 0) continue;
    if (r->group < 0 || (uint32_t)r->group >= N - i || r->group + 1 > EKS_MAX_OPS)
      return bad(p, "prepared model: bad row-streamed group");
    eks_graph g;
    eks_needs needs;
    int32_t x = -1;
    if (group_graph(b, ops, (int32_t)i, v, &g, &x) != 0 || eks_simulate(&g, &needs) != 0)
      return bad(p, "prepared model: a row-streamed group cannot stream");
    int32_t rows[EKS_MAX_OPS + 1] = {0};
    for (int32_t k = 1; k <= r->group; ++k) {
      const ekp_op *m = &ops[i + (uint32_t)k];
      if (m->group != -1 || m->scratch_len != 0) return bad(p, "prepared model: bad row-streamed group member");
      rows[k] = m->scratch_off;
      if (rows[k] < needs.window_rows[k] || rows[k] > g.rows[k])
        return bad(p, "prepared model: row-streamed window too small");
    }
    if (eks_window_bytes(&g, rows) > r->scratch_len)
      return bad(p, "prepared model: row-streamed windows exceed the group's scratch");
    const int32_t z = *(const int32_t *)(const void *)(b + ops[i + (uint32_t)r->group].outputs_off);
    if (v->tensors[x].where != EKP_WHERE_ARENA || v->tensors[z].where != EKP_WHERE_ARENA)
      return bad(p, "prepared model: a row-streamed group's input or output is not in the arena");
    i += (uint32_t)r->group;
  }
  return EK_OK;
}

#else /* built without groups (-DEK_NO_STREAM_GROUPS): a blob with groups is refused, never misrun */
static ek_status check_groups(ek_prepared *p, const uint8_t *b, const ekp_op *ops, uint32_t N, const void *v) {
  (void)b;
  (void)v;
  for (uint32_t i = 0; i < N; ++i)
    if (ops[i].group != 0)
      return ek_fail(&p->ctx, (const ek_op *)0, EK_ERR_UNSUPPORTED,
                     "prepared model uses row-streamed groups; this runtime was built without them (EK_NO_STREAM_GROUPS)");
  return EK_OK;
}
#endif

size_t ek_prepared_state_bytes(const void *blob, size_t blob_len) {
  const uint8_t *b = (const uint8_t *)blob;
  if (!b || blob_len < 4u * EKP_HEADER_WORDS) return 0;
  /* (a wrapped sum of out-of-range counts is harmless: ek_prepared_init rejects those counts first) */
  const uint32_t slots = rd32(b + 4 * H_MAX_OP_INPUTS) + rd32(b + 4 * H_MAX_OP_OUTPUTS) + rd32(b + 4 * H_INPUTS) +
                         rd32(b + 4 * H_OUTPUTS);
  if (slots > 64u * EK_MAX_IO) return 0;
  return (size_t)slots * sizeof(ek_tensor) + EK_STATE_ALIGN;
}

ek_status ek_prepared_init(ek_prepared *p, const void *model, size_t model_len, const void *blob, size_t blob_len,
                           void *state, size_t state_len, void *arena, size_t arena_len) {
  if (!p) return EK_ERR_INTERNAL;
  memset(p, 0, sizeof *p);
  p->ctx.error_op = -1;
  p->ctx.error_message = "";
  const uint8_t *b = (const uint8_t *)blob;
  if (!b || ((uintptr_t)b & 15u) != 0) return bad(p, "prepared model missing or not 16-byte aligned");
  if (!model || ((uintptr_t)model & 15u) != 0) return bad(p, "model missing or not 16-byte aligned");
  if (blob_len < 4u * EKP_HEADER_WORDS || rd32(b) != EKP_MAGIC) return bad(p, "not a prepared edgekit model (magic)");
  if (rd32(b + 4 * H_VERSION) != EKP_VERSION)
    return ek_fail(&p->ctx, (const ek_op *)0, EK_ERR_UNSUPPORTED, "prepared model version not supported by this runtime");
  if (rd32(b + 4 * H_TOTAL) != blob_len) return bad(p, "prepared model length differs from its header");
  if (rd32(b + 4 * H_PARAMS_SIZE) != sizeof(ek_op_params) || rd32(b + 4 * H_TENSOR_REC) != sizeof(ekp_tensor) ||
      rd32(b + 4 * H_OP_REC) != sizeof(ekp_op))
    return ek_fail(&p->ctx, (const ek_op *)0, EK_ERR_UNSUPPORTED, "prepared model record layout differs from this runtime");
  if (blob_checksum(b, blob_len) != rd32(b + 4 * H_CHECKSUM))
    return bad(p, "prepared model checksum mismatch (corrupt)");
  if (rd32(b + 4 * H_MODEL_LEN) != model_len || fnv1a(FNV_START, (const uint8_t *)model, model_len) != rd32(b + 4 * H_MODEL_SUM))
    return bad(p, "prepared model was made for another model (length or checksum differ)");
  const uint32_t T = rd32(b + 4 * H_TENSORS), N = rd32(b + 4 * H_OPS);
  const uint32_t NI = rd32(b + 4 * H_INPUTS), NO = rd32(b + 4 * H_OUTPUTS), max_in = rd32(b + 4 * H_MAX_OP_INPUTS);
  const uint32_t max_out = rd32(b + 4 * H_MAX_OP_OUTPUTS);
  const uint32_t arena_bytes = rd32(b + 4 * H_ARENA);
  if (T > EK_MAX_TENSORS || N > EK_MAX_OPS || NI > EK_MAX_IO || NO > EK_MAX_IO || max_in > EK_MAX_OP_INPUTS || max_out > EK_MAX_OP_OUTPUTS ||
      arena_bytes > INT32_MAX || (rd32(b + 4 * H_OPTIMIZE) & ~EKP_FOR_MVE) > EK_OPTIMIZE_RAM)
    return bad(p, "prepared model counts out of range");
  if (EKP_THIS_MVE && !(rd32(b + 4 * H_OPTIMIZE) & EKP_FOR_MVE))
    return ek_fail(&p->ctx, (const ek_op *)0, EK_ERR_UNSUPPORTED,
                   "prepared model was planned for a target without Helium; prepare it for this board");
  const int64_t len = (int64_t)blob_len;
  const int64_t t_off = rd32(b + 4 * H_TENSORS_OFF), o_off = rd32(b + 4 * H_OPS_OFF), io_off = rd32(b + 4 * H_IO_OFF);
  const int64_t d_off = rd32(b + 4 * H_DATA_OFF), d_len = rd32(b + 4 * H_DATA_LEN);
  if (!in_range(t_off, (int64_t)T * (int64_t)sizeof(ekp_tensor), len, 8) ||
      !in_range(o_off, (int64_t)N * (int64_t)sizeof(ekp_op), len, 8) || !in_range(io_off, 4 * ((int64_t)NI + NO), len, 4) ||
      !in_range(d_off, d_len, len, 8))
    return bad(p, "prepared model sections out of range");
  const size_t need_state = ek_prepared_state_bytes(b, blob_len);
  if (!state || state_len < need_state)
    return ek_fail(&p->ctx, (const ek_op *)0, EK_ERR_MEMORY, "state buffer too small (see ek_prepared_state_bytes)");
  uint8_t *abase = arena ? (uint8_t *)(((uintptr_t)arena + (EK_ARENA_ALIGN - 1)) & ~(uintptr_t)(EK_ARENA_ALIGN - 1)) : 0;
  const size_t apad = arena ? (size_t)(abase - (uint8_t *)arena) : 0;
  if (arena_bytes > 0 && (!arena || arena_len < apad || arena_len - apad < arena_bytes))
    return ek_fail(&p->ctx, (const ek_op *)0, EK_ERR_MEMORY, "arena buffer too small (see the prepared model's arena)");

  const ekp_tensor *tr = (const ekp_tensor *)(const void *)(b + t_off);
  for (uint32_t t = 0; t < T; ++t) {
    const ek_status st = check_tensor(p, &tr[t], model_len, arena_bytes);
    if (st != EK_OK) return st;
  }
  const int32_t *io = (const int32_t *)(const void *)(b + io_off);
  for (uint32_t k = 0; k < NI + NO; ++k)
    if (io[k] < 0 || (uint32_t)io[k] >= T || tr[io[k]].where != EKP_WHERE_ARENA) return bad(p, "prepared model: bad graph input/output");
  const ekp_op *ops = (const ekp_op *)(const void *)(b + o_off);
  for (uint32_t i = 0; i < N; ++i) {
    const ekp_op *r = &ops[i];
    if (!ek_find_kernel(r->opcode))
      return ek_fail(&p->ctx, (const ek_op *)0, EK_ERR_UNSUPPORTED, "prepared model uses an operator not linked in");
    const int no_output = r->opcode == EK_OP_ASSIGN_VARIABLE || r->opcode == EK_OP_CALL_ONCE;
    if (r->num_inputs < 0 || (uint32_t)r->num_inputs > max_in ||
        (no_output ? r->num_outputs != 0 : (uint32_t)r->num_outputs - 1u >= max_out))
      return bad(p, "prepared model: bad operator arity");
    if (!in_range(r->inputs_off, 4 * (int64_t)r->num_inputs, len, 4) || r->inputs_off < d_off ||
        !in_range(r->outputs_off, 4 * (int64_t)r->num_outputs, len, 4) || r->outputs_off < d_off)
      return bad(p, BAD_WIRING);
    if ((r->user_len != 0 && (!in_range(r->user_off, r->user_len, len, 8) || r->user_off < d_off)) || r->user_len < 0)
      return bad(p, "prepared model: operator data out of range");
    const int32_t *ins = (const int32_t *)(const void *)(b + r->inputs_off);
    const int32_t *outs = (const int32_t *)(const void *)(b + r->outputs_off);
    for (int32_t k = 0; k < r->num_inputs; ++k) {
      if (ins[k] < -1 || ins[k] >= (int32_t)T) return bad(p, BAD_WIRING);
      /* a constant left out (EKP_UNREAD) only where the op's kernel says its data makes it skip that input */
      if (ins[k] >= 0 && (tr[ins[k]].flags & EKP_UNREAD) &&
          !skips_input(r->opcode, r->user_len > 0 ? b + r->user_off : (const uint8_t *)0, (int)k))
        return bad(p, BAD_TENSOR_WHERE);
    }
    for (int32_t k = 0; k < r->num_outputs; ++k)
      if (outs[k] < 0 || outs[k] >= (int32_t)T || tr[outs[k]].where == EKP_WHERE_MODEL)
        return bad(p, BAD_WIRING);
    if ((r->scratch_len != 0 && (!in_range(r->scratch_off, r->scratch_len, (int64_t)arena_bytes, EK_ARENA_ALIGN))) ||
        r->scratch_len < 0)
      return bad(p, "prepared model: operator scratch outside the arena");
    if (r->group == -1 && (i == 0 || ops[i - 1].group == 0))
      return bad(p, "prepared model: row-streamed group member without its group");
  }
#ifndef EK_NO_STREAM_GROUPS
  const group_view view = {tr, (int32_t)T, (const uint8_t *)model};
  const ek_status gst = check_groups(p, b, ops, N, &view);
#else
  const ek_status gst = check_groups(p, b, ops, N, (const void *)0);
#endif
  if (gst != EK_OK) return gst;

  uint8_t *s = (uint8_t *)(((uintptr_t)state + (EK_STATE_ALIGN - 1)) & ~(uintptr_t)(EK_STATE_ALIGN - 1));
  p->ctx.slots = (ek_tensor *)(void *)s;
  p->ctx.out_slot = (int32_t)max_in;
  p->ctx.num_tensors = (int32_t)T;
  p->ctx.optimize = (int32_t)(rd32(b + 4 * H_OPTIMIZE) & 0xffu);
  p->ctx.plan_mve = (rd32(b + 4 * H_OPTIMIZE) & EKP_FOR_MVE) != 0;
  p->ctx.prep_tensors = (const uint8_t *)tr;
  p->ctx.prep_blob = b;
  p->ctx.prep_model = (const uint8_t *)model;
  p->ctx.model = (const uint8_t *)model;
  p->ctx.prep_arena = abase;
  p->blob = b;
  p->arena = abase;
  p->arena_bytes = arena_bytes;
  p->num_ops = (int32_t)N;
  p->num_inputs = (int32_t)NI;
  p->num_outputs = (int32_t)NO;
  p->ready = 1;
  ek_prepared_reset(p);
  return EK_OK;
}

/* Points p->op at record r (its scratch at `scratch`). */
static void load_op(ek_prepared *p, const ekp_op *r, void *scratch) {
  const uint8_t *b = p->blob;
  ek_op *op = &p->op;
  op->opcode = r->opcode;
  op->index = r->index;
  op->version = r->version;
  op->num_inputs = r->num_inputs;
  op->num_outputs = r->num_outputs;
  op->inputs = (const int32_t *)(const void *)(b + r->inputs_off);
  op->outputs = (const int32_t *)(const void *)(b + r->outputs_off);
  op->params = r->params;
  op->user_data = r->user_len ? (void *)(uintptr_t)(b + r->user_off) : (void *)0;
  op->scratch = scratch;
}

#ifndef EK_NO_STREAM_GROUPS
typedef struct group_run {
  ek_prepared *p;
  const ekp_op *ops; /* the group's records */
  const eks_graph *g;
  uint8_t *kernel_scratch;
} group_run;

/* Address of row 0 of a windowed tensor whose window starts at `win` with row `row0`. Computed as an integer: the
   kernels only touch rows inside the window (eks_simulate bounds them), never this address itself. */
static void *window_origin(uint8_t *win, int32_t row0, int32_t row_bytes) {
  return (void *)((uintptr_t)win - (uintptr_t)row0 * (uintptr_t)row_bytes);
}

/* eks_run_fn: runs op k of the group for output rows [r0, r1) on tensor views over the windows. */
static ek_status group_run_op(void *user, int32_t k, int32_t r0, int32_t r1, uint8_t *const *win, const int32_t *row0) {
  group_run *gr = (group_run *)user;
  ek_prepared *p = gr->p;
  ek_context *ctx = &p->ctx;
  const ekp_op *r = &gr->ops[k];
  load_op(p, r, gr->kernel_scratch);
  ek_op *op = &p->op;
  for (int32_t i = 0; i < op->num_inputs; ++i)
    if (op->inputs[i] >= 0) (void)ek_prepared_tensor(ctx, op->inputs[i], i);
  (void)ek_prepared_tensor(ctx, op->outputs[0], ctx->out_slot);
  const eks_node *n = &gr->g->node[k];
  for (int32_t i = 0; i < n->nin; ++i) {
    const int32_t t = n->in[i];
    if (t > 0) ctx->slots[i].data = window_origin(win[t], row0[t], gr->g->row_bytes[t]);
  }
  if (k + 1 < gr->g->nops) ctx->slots[ctx->out_slot].data = window_origin(win[k + 1], row0[k + 1], gr->g->row_bytes[k + 1]);
  ctx->frozen = 1;
  ctx->row_begin = r0;
  ctx->row_end = r1;
  const ek_status st = ek_find_kernel(r->opcode)->eval(ctx, op);
  ctx->frozen = 0;
  ctx->row_begin = 0;
  ctx->row_end = 0;
  return st;
}

/* Runs the group whose first record is ops[0] (validated by check_groups at init). */
static ek_status run_group(ek_prepared *p, const ekp_op *ops) {
  const group_view view = {(const ekp_tensor *)(const void *)p->ctx.prep_tensors, p->ctx.num_tensors, p->ctx.prep_model};
  eks_graph g;
  eks_needs needs;
  int32_t x = -1;
  if (group_graph(p->blob, ops, 0, &view, &g, &x) != 0) return EK_ERR_INTERNAL;
  memset(&needs, 0, sizeof needs);
  for (int32_t k = 1; k < g.nops; ++k) needs.window_rows[k] = ops[k].scratch_off;
  uint8_t *region = p->arena + ops[0].scratch_off;
  group_run gr = {p, ops, &g, region + eks_window_bytes(&g, needs.window_rows)}; /* kernel scratch after windows */
  return eks_execute(&g, &needs, region, group_run_op, &gr);
}

#endif

ek_status ek_prepared_invoke(ek_prepared *p) {
  if (!p) return EK_ERR_INTERNAL;
  if (!p->ready)
    return p->ctx.status != EK_OK ? p->ctx.status : ek_fail(&p->ctx, (const ek_op *)0, EK_ERR_INTERNAL, "runtime not initialised");
  const uint8_t *b = p->blob;
  const ekp_op *ops = (const ekp_op *)(const void *)(b + rd32(b + 4 * H_OPS_OFF));
  ek_op *op = &p->op;
  for (int32_t i = 0; i < p->num_ops; ++i) {
    const ekp_op *r = &ops[i];
#ifndef EK_NO_STREAM_GROUPS
    if (r->group > 0) { /* the group's ops run together, row by row; the hook sees it as its first op */
      load_op(p, r, (void *)0);
      if (p->hook) p->hook(p->hook_user, i, r->opcode, 0);
      const ek_status st = run_group(p, r);
      if (p->hook) p->hook(p->hook_user, i, r->opcode, 1);
      if (st != EK_OK || p->ctx.status != EK_OK) {
        ek_fail(&p->ctx, op, st != EK_OK ? st : p->ctx.status, "row-streamed group failed");
        return p->ctx.status;
      }
      i += r->group;
      continue;
    }
#endif
    const ek_kernel *k = ek_find_kernel(r->opcode);
    load_op(p, r, r->scratch_len ? (void *)(p->arena + r->scratch_off) : (void *)0);
    if (p->hook) p->hook(p->hook_user, i, op->opcode, 0);
    const ek_status st = k->eval(&p->ctx, op);
    if (p->hook) p->hook(p->hook_user, i, op->opcode, 1);
    if (st != EK_OK || p->ctx.status != EK_OK) {
      ek_fail(&p->ctx, op, st, "operator eval failed");
      return p->ctx.status;
    }
  }
  return EK_OK;
}

static ek_tensor *io_tensor(ek_prepared *p, int32_t which) {
  const int32_t *io = (const int32_t *)(const void *)(p->blob + rd32(p->blob + 4 * H_IO_OFF));
  return ek_prepared_tensor(&p->ctx, io[which], p->ctx.out_slot + (int32_t)rd32(p->blob + 4 * H_MAX_OP_OUTPUTS) + which);
}

ek_tensor *ek_prepared_input(ek_prepared *p, int32_t i) {
  if (!p || !p->ready || i < 0 || i >= p->num_inputs) return (ek_tensor *)0;
  return io_tensor(p, i);
}

ek_tensor *ek_prepared_output(ek_prepared *p, int32_t i) {
  if (!p || !p->ready || i < 0 || i >= p->num_outputs) return (ek_tensor *)0;
  return io_tensor(p, p->num_inputs + i);
}

void ek_prepared_reset(ek_prepared *p) {
  if (!p || !p->ready) return;
  p->ctx.call_once_done = 0; /* the next invoke's CALL_ONCE writes every variable's initial value again */
  const ekp_tensor *tr = (const ekp_tensor *)(const void *)p->ctx.prep_tensors;
  for (int32_t t = 0; t < p->ctx.num_tensors; ++t) /* variable tensors (op state), validated in the arena */
    if ((tr[t].flags & EKP_STATE) && tr[t].bytes > 0) memset(p->arena + tr[t].offset, (tr[t].flags >> 8) & 0xff, (size_t)tr[t].bytes);
}

void ek_prepared_set_op_hook(ek_prepared *p, ek_op_hook hook, void *user) {
  if (!p) return;
  p->hook = hook;
  p->hook_user = user;
}

ek_error ek_prepared_last_error(const ek_prepared *p) {
  ek_error e;
  e.status = p ? p->ctx.status : EK_ERR_INTERNAL;
  e.op_index = p ? p->ctx.error_op : -1;
  e.message = p && p->ctx.error_message ? p->ctx.error_message : "";
  return e;
}

/* ---- host side: export ------------------------------------------------------------------------------------- */

static size_t up(size_t x, size_t a) { return (x + a - 1u) & ~(a - 1u); }

static void wr32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

ek_status ek_export_prepared(ek_runtime *rt, void *out, size_t cap, size_t *len) {
  if (!rt || !rt->ready || !len) return EK_ERR_INTERNAL;
  const int32_t T = rt->ctx.num_tensors, N = rt->num_ops;
  int32_t max_in = 0, max_out = 1;
  size_t data = 0;
  for (int32_t i = 0; i < N; ++i) {
    const ek_op *op = &rt->ops[i];
    const ek_kernel *k = rt->kernels[i];
    if (op->num_inputs > max_in) max_in = op->num_inputs;
    if (op->num_outputs > max_out) max_out = op->num_outputs;
    data = up(data + 4u * (size_t)(op->num_inputs + op->num_outputs), 8);
    data = up(data + (k->persistent_bytes ? k->persistent_bytes(&rt->ctx, op) : 0), 8);
  }
  const size_t t_off = up(4u * EKP_HEADER_WORDS, 16);
  const size_t o_off = t_off + (size_t)T * sizeof(ekp_tensor);
  const size_t io_off = o_off + (size_t)N * sizeof(ekp_op);
  const size_t d_off = up(io_off + 4u * (size_t)(rt->num_inputs + rt->num_outputs), 16);
  const size_t total = up(d_off + data, 16);
  *len = total;
  if (total > INT32_MAX) return ek_fail(&rt->ctx, (const ek_op *)0, EK_ERR_MEMORY, "prepared model exceeds 2 GiB");
  if (!out || cap < total) return EK_ERR_MEMORY;
  uint8_t *b = (uint8_t *)out;
  memset(b, 0, total);
  const uint8_t *model = rt->model;
  ekp_tensor *tr = (ekp_tensor *)(void *)(b + t_off);
  for (int32_t t = 0; t < T; ++t) {
    const ek_tensor *x = &rt->ctx.tensors[t];
    ekp_tensor *r = &tr[t];
    const uint8_t *d = (const uint8_t *)x->data;
    if (x->is_constant && d && d >= model && d <= model + rt->model_len) {
      r->where = EKP_WHERE_MODEL;
      r->offset = (int32_t)(d - model);
    } else if (!x->is_constant && d && rt->arena && d >= rt->arena && d <= rt->arena + rt->arena_required) {
      r->where = EKP_WHERE_ARENA;
      r->offset = (int32_t)(d - rt->arena);
    } else {
      r->where = EKP_WHERE_NONE;
      r->offset = 0;
    }
    memcpy(r->dims, x->dims, sizeof r->dims);
    r->bytes = x->bytes;
    r->scale = x->scale;
    r->zero_point = x->zero_point;
    r->scales_off = x->scales ? (int32_t)((const uint8_t *)x->scales - model) : -1;
    r->zero_points_off = x->zero_points ? (int32_t)((const uint8_t *)x->zero_points - model) : -1;
    r->num_scales = x->num_scales;
    r->ndim = x->ndim;
    r->type = x->type;
    r->quantized_dimension = x->quantized_dimension;
    r->is_constant = x->is_constant;
    for (int32_t k = 0; k < rt->ctx.num_var_init; ++k)
      if (rt->ctx.var_init[k].tensor == t && x->type != EK_RESOURCE && r->where == EKP_WHERE_ARENA)
        r->flags = EKP_STATE | (int32_t)((uint32_t)(rt->ctx.var_init[k].fill & 0xff) << 8);
  }
  ekp_op *orr = (ekp_op *)(void *)(b + o_off);
  size_t at = d_off;
  for (int32_t i = 0; i < N; ++i) {
    const ek_op *op = &rt->ops[i];
    const ek_kernel *k = rt->kernels[i];
    ekp_op *r = &orr[i];
    r->opcode = op->opcode;
    r->index = op->index;
    r->version = op->version;
    r->num_inputs = op->num_inputs;
    r->num_outputs = op->num_outputs;
    r->inputs_off = (int32_t)at;
    if (op->num_inputs > 0) memcpy(b + at, op->inputs, 4u * (size_t)op->num_inputs); /* NULL without inputs */
    r->outputs_off = (int32_t)(at + 4u * (size_t)op->num_inputs);
    if (op->num_outputs > 0) memcpy(b + r->outputs_off, op->outputs, 4u * (size_t)op->num_outputs);
    at = up(at + 4u * (size_t)(op->num_inputs + op->num_outputs), 8);
    r->params = op->params;
    const size_t pb = k->persistent_bytes ? k->persistent_bytes(&rt->ctx, op) : 0;
    r->user_off = (int32_t)at;
    r->user_len = (int32_t)pb;
    if (pb) memcpy(b + at, op->user_data, pb);
    at = up(at + pb, 8);
    const int32_t grp = rt->stream_group ? rt->stream_group[i] : 0;
    const size_t sb = grp > 0 ? (size_t)rt->stream_info[i] : grp < 0 ? 0 : k->scratch_bytes ? k->scratch_bytes(&rt->ctx, op) : 0;
    r->scratch_off = op->scratch && sb ? (int32_t)((uint8_t *)op->scratch - rt->arena) : 0;
    r->scratch_len = op->scratch ? (int32_t)sb : 0;
    r->group = grp;
    if (grp < 0) r->scratch_off = rt->stream_info[i]; /* window rows of the previous op's output */
  }
  for (int32_t t = 0; t < T; ++t) { /* constants every reader skips: EKP_UNREAD (a compacted model drops their bytes) */
    ekp_tensor *r = &tr[t];
    int readers = 0, skipped = 0;
    for (int32_t i = 0; r->where == EKP_WHERE_MODEL && i < N; ++i) {
      const ek_op *op = &rt->ops[i];
      for (int32_t k = 0; k < op->num_inputs; ++k) {
        if (op->inputs[k] != t) continue;
        ++readers;
        skipped += skips_input(op->opcode, op->user_data, (int)k);
      }
    }
    if (readers > 0 && skipped == readers) {
      r->where = EKP_WHERE_NONE;
      r->offset = 0;
      r->scales_off = r->zero_points_off = -1;
      r->flags |= EKP_UNREAD;
    }
  }
  int32_t *io = (int32_t *)(void *)(b + io_off);
  for (int32_t k = 0; k < rt->num_inputs; ++k) io[k] = rt->inputs[k];
  for (int32_t k = 0; k < rt->num_outputs; ++k) io[rt->num_inputs + k] = rt->outputs[k];
  const uint32_t header[EKP_HEADER_WORDS] = {
      EKP_MAGIC, EKP_VERSION, (uint32_t)total, 0, (uint32_t)rt->model_len,
      fnv1a(FNV_START, model, rt->model_len), (uint32_t)rt->arena_required, (uint32_t)T, (uint32_t)N,
      (uint32_t)rt->num_inputs, (uint32_t)rt->num_outputs, (uint32_t)t_off, (uint32_t)o_off, (uint32_t)io_off,
      (uint32_t)d_off, (uint32_t)(total - d_off), (uint32_t)max_in, (uint32_t)sizeof(ek_op_params),
      (uint32_t)sizeof(ekp_tensor), (uint32_t)sizeof(ekp_op),
      (uint32_t)rt->ctx.optimize | (rt->ctx.plan_mve ? EKP_FOR_MVE : 0u), (uint32_t)max_out};
  for (int32_t w = 0; w < EKP_HEADER_WORDS; ++w) wr32(b + 4 * w, header[w]);
  wr32(b + 4 * H_CHECKSUM, blob_checksum(b, total));
  return EK_OK;
}
