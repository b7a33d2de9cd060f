/* edgekit int8 runtime: public C API (C99, no dynamic allocation).
 *
 * The model is a TFLite flatbuffer held in memory (e.g. an `alignas(16) const
 * unsigned char` array in flash).  It is read in place and validated: every
 * offset, length, index, type and byte size is bounds-checked, so a corrupt
 * model yields an error, never an out-of-bounds access.
 *
 * Memory is provided by the caller in two buffers:
 *   state: the runtime's bookkeeping — one ek_tensor per tensor, one ek_op per
 *          operator and the per-op persistent kernel data.
 *          Any alignment (aligned internally).
 *   arena: activations and per-op scratch, laid out by the offline planner
 *          (ek_plan.c).  The plan is a pure function of the model, so the
 *          host computes the same offsets the device will use.
 *   During init the memory plan and the planner's work memory live at the
 *   arena's start (unused until the first invoke) when the model's arena can
 *   hold them, else in the state's kernel-data space (state_required then
 *   includes them; see ek_interp.c).
 *
 * Typical device use (sizes computed on the host at generation time):
 *
 *   static ek_runtime rt;
 *   static uint8_t state[EK_MODEL_STATE_BYTES];
 *   static uint8_t arena[EK_MODEL_ARENA_BYTES] __attribute__((aligned(16)));
 *   if (ek_init(&rt, model, model_len, state, sizeof state, arena, sizeof arena) != EK_OK) {
 *     ek_error e = ek_last_error(&rt);  // status, op index (-1 if none), static message
 *   }
 *   int8_t *in = (int8_t *)ek_get_input(&rt, 0)->data;   ... fill ...
 *   ek_invoke(&rt);
 *   const ek_tensor *out = ek_get_output(&rt, 0);
 *
 * Finding the sizes (host, or a device with spare RAM): call ek_init with a
 * too-small (even empty) state/arena; it fails with EK_ERR_MEMORY and sets
 * rt.state_required / rt.arena_required.  Retry with buffers of those sizes.
 * Without an arena, planning needs a larger state than the final
 * state_required (the plan is made in the state); once it has run,
 * state_required and arena_required are the final sizes.
 * ek_required_bytes() wraps that loop for a caller-given work buffer.
 */
#ifndef EK_RUNTIME_H
#define EK_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "ek_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

#define EK_RUNTIME_VERSION 1
#define EK_ARENA_ALIGN 16       /* every planned buffer offset is a multiple of this */
#define EK_MAX_IO 16            /* graph inputs / outputs */
#define EK_MAX_TENSORS 65535    /* reader limits (a model beyond them is rejected) */
#define EK_MAX_OPS 65535

/* Called at the begin (phase 0) and end (phase 1) of every operator's eval. */
typedef void (*ek_op_hook)(void *user, int32_t op_index, int32_t opcode, int phase);

/* Last error: status, op index (-1 if not about one op), static message (never NULL). */
typedef struct ek_error {
  ek_status status;
  int32_t op_index;
  const char *message;
} ek_error;

/* Memory plan entry of one buffer (tensor or per-op scratch). */
typedef struct ek_plan_entry {
  int32_t offset;      /* byte offset in the arena; -1 if not in the arena (constant / unused) */
  int32_t bytes;       /* bytes of the buffer (unpadded) */
  int32_t first_op;    /* first op during which it is alive (-1: from before op 0, i.e. graph input;
                          -2: never used). For an alias root, the lifetime covers its aliases. */
  int32_t last_op;     /* last op during which it is alive (num_ops: graph output, alive to the end) */
  int32_t alias_of;    /* tensor index whose memory this tensor shares (in-place RESHAPE), or -1 */
} ek_plan_entry;

/* The runtime object. Small and fixed-size: declare it statically; the
   variable-size parts live in the caller's state buffer. Treat fields as read-only. */
typedef struct ek_runtime {
  ek_context ctx;               /* tensors, num_tensors, error status/op/message */
  const uint8_t *model;
  size_t model_len;
  ek_op *ops;
  const ek_kernel **kernels;    /* num_ops entries: the kernel of each op */
  int32_t num_ops;
  int32_t num_inputs, num_outputs;
  int32_t inputs[EK_MAX_IO];    /* graph input tensor indices */
  int32_t outputs[EK_MAX_IO];   /* graph output tensor indices */
  ek_plan_entry *tensor_plan;   /* num_tensors entries; NULL after init unless state_len >= state_with_plan */
  ek_plan_entry *scratch_plan;  /* num_ops entries (bytes 0 / offset -1 when the op needs none); likewise */
  uint8_t *arena;
  size_t arena_len;
  size_t state_required;        /* bytes of state this model needs (valid once known; see above) */
  size_t arena_required;        /* bytes of arena the plan needs (valid after planning) */
  size_t persistent_bytes;      /* of state_required: per-op kernel data */
  size_t state_with_plan;       /* bytes of state with which the memory plan stays readable after init
                                   (host tools; a device needs only state_required). Valid with state_required. */
  ek_op_hook hook;
  void *hook_user;
  int32_t ready;                /* 1 after a successful ek_init */
  /* Host, after ek_plan_overlapped planned row-streamed groups (ek_stream_group.c): per op, stream_group[i] > 0 for
     a group's first op (1 + that many ops), -1 for its later ops, 0 otherwise; stream_info[i] is the first op's
     scratch region bytes, the k-th later op's the window rows of op k-1's output. Both point into the planner's work memory (keep it
     until ek_export_prepared). Such a runtime only exports: ek_invoke refuses it. */
  int32_t *stream_group, *stream_info;
  int32_t num_stream_groups;
  char message_buf[96];         /* holds composed messages (e.g. naming an unsupported op) */
} ek_runtime;

/* Parse, validate, plan and prepare. Returns EK_OK or the first error (see ek_last_error).
   `model` must stay valid and unchanged while rt is used; its start must be 16-byte aligned
   for in-place access of int32/float constants (misalignment is reported, not faulted on).
   state/arena may be NULL with length 0 to query sizes. */
ek_status ek_init(ek_runtime *rt, const void *model, size_t model_len, void *state, size_t state_len, void *arena,
                  size_t arena_len);

/* ek_init choosing kernel variants for EK_OPTIMIZE_SPEED (what ek_init does), _BALANCED or _RAM. */
ek_status ek_init_opt(ek_runtime *rt, const void *model, size_t model_len, void *state, size_t state_len, void *arena,
                      size_t arena_len, int32_t optimize);

#ifndef EK_PREPARED_ONLY
/* ek_init_opt for a prepared-model export (EK_OPTIMIZE_FOR_EXPORT) choosing per op which weights stay int8:
   int8_ops[i] != 0 keeps op i's weights int8 (as EK_OPTIMIZE_INT8_WEIGHTS does for every op), the others take their
   re-laid-out copies (--weights auto's flash budget). int8_ops (num_int8_ops entries, op indices beyond it take their
   copies; NULL: as ek_init_opt) must stay valid until the export. Host only. */
ek_status ek_init_opt_ops(ek_runtime *rt, const void *model, size_t model_len, void *state, size_t state_len,
                          void *arena, size_t arena_len, int32_t optimize, const uint8_t *int8_ops,
                          int32_t num_int8_ops);
#endif

/* Sizes query: runs ek_init on `work` (used as scratch state; any size, bigger is faster to converge)
   without an arena. On success sets *state_bytes and *arena_bytes (the sizes ek_init needs). Returns
   EK_ERR_MEMORY with *state_bytes set to the work bytes needed to plan when work_len is smaller than
   that (at least the final state size); other errors as ek_init. */
ek_status ek_required_bytes(const void *model, size_t model_len, void *work, size_t work_len, size_t *state_bytes,
                            size_t *arena_bytes, ek_error *error);

/* Run one inference on the inputs currently in the arena. Write every input before each call: the planner
   reuses an input's bytes once its last reader has run. Outputs stay valid until the next call. */
ek_status ek_invoke(ek_runtime *rt);

/* Resource variables (models with VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE and a CALL_ONCE init subgraph):
   they live in arena buffers the planner never reuses, so they keep their values from one ek_invoke to the next.
   ek_reset_variables makes the next invoke start from the initial values again (its CALL_ONCE runs again), as a
   freshly initialised runtime. ek_variables_bytes: the arena bytes they take (each padded to 16), 0 without. */
void ek_reset_variables(ek_runtime *rt);
size_t ek_variables_bytes(const ek_runtime *rt);

/* Per-operator hook (NULL to remove); called around each op's eval. */
void ek_set_op_hook(ek_runtime *rt, ek_op_hook hook, void *user);

ek_error ek_last_error(const ek_runtime *rt);
const char *ek_status_name(ek_status status);

int32_t ek_num_inputs(const ek_runtime *rt);
int32_t ek_num_outputs(const ek_runtime *rt);
ek_tensor *ek_get_input(ek_runtime *rt, int32_t i);   /* NULL if out of range */
ek_tensor *ek_get_output(ek_runtime *rt, int32_t i);  /* NULL if out of range */
ek_tensor *ek_get_tensor(ek_runtime *rt, int32_t i);  /* NULL if out of range */

/* ---- host tools: overlapped plan and prepared models (ek_plan.c, ek_prepared.c) ---- */

/* One planned overlap: op `op`'s output may start d_max bytes after its input `input` (op -1 ends the list). */
typedef struct ek_overlap_info {
  int32_t op, input, d_max, exact;
} ek_overlap_info;

/* Work bytes ek_plan_overlapped needs for this (initialised) runtime. */
size_t ek_plan_overlapped_work_bytes(const ek_runtime *rt);
/* Re-plans an initialised runtime (initialised with state >= state_with_plan) letting outputs overlap the inputs
   that die at their op as the kernels allow (ek_kernel.overlap), and moves activations and scratch to the new
   offsets in the same arena. rt->arena_required becomes the new, smaller or equal, size. Fills up to max_info
   entries of info (may be NULL). */
ek_status ek_plan_overlapped(ek_runtime *rt, void *work, size_t work_len, ek_overlap_info *info, int32_t max_info);

/* Writes the prepared form of an initialised runtime (usually after ek_plan_overlapped) into out: a pointer-free,
   versioned, checksummed blob (see ek_prepared.c and README "Prepared models"). *len receives its size; with
   out NULL or cap too small, returns EK_ERR_MEMORY after setting *len. */
ek_status ek_export_prepared(ek_runtime *rt, void *out, size_t cap, size_t *len);

/* ---- device: run a prepared model (no flatbuffer reader, no planner) ---- */

typedef struct ek_prepared {
  ek_context ctx;               /* tensor records decoded on demand into the caller's state (ctx.slots) */
  const uint8_t *blob;
  uint8_t *arena;
  uint32_t arena_bytes;
  int32_t num_ops, num_inputs, num_outputs;
  ek_op op;                     /* the operator being run */
  ek_op_hook hook;
  void *hook_user;
  int32_t ready;
} ek_prepared;

/* State bytes ek_prepared_init needs for this blob (a few tensor records), 0 if it is not a prepared model. */
size_t ek_prepared_state_bytes(const void *blob, size_t blob_len);
/* Validates the blob (magic, version, length, checksum, the model's length and checksum, every offset, index and
   size; a corrupt blob is rejected, never run) and binds it to model, state and arena. The model and the blob
   must be 16-byte aligned and stay unchanged. */
ek_status ek_prepared_init(ek_prepared *p, const void *model, size_t model_len, const void *blob, size_t blob_len,
                           void *state, size_t state_len, void *arena, size_t arena_len);
ek_status ek_prepared_invoke(ek_prepared *p);
/* Input/output records (data points into the arena). Each stays valid while p is. */
ek_tensor *ek_prepared_input(ek_prepared *p, int32_t i);
ek_tensor *ek_prepared_output(ek_prepared *p, int32_t i);
void ek_prepared_set_op_hook(ek_prepared *p, ek_op_hook hook, void *user);
/* Resource variables start again from their initial values at the next ek_prepared_invoke (see ek_reset_variables). */
void ek_prepared_reset(ek_prepared *p);
ek_error ek_prepared_last_error(const ek_prepared *p);

/* Lists the builtin code of every operator (max(deprecated_builtin_code, builtin_code), 32 = CUSTOM)
   without needing kernels, so a host tool can report all unsupported ops at once. Writes up to
   max_codes codes and returns the number of operators, or -1 with *error set if the model is malformed.
   Needs no state buffer. */
int32_t ek_model_opcodes(const void *model, size_t model_len, int32_t *codes, int32_t max_codes, ek_error *error);

#ifdef __cplusplus
}
#endif
#endif
