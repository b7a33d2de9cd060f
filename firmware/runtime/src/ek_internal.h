/* edgekit runtime core: declarations shared by ek_reader.c, ek_plan.c and ek_interp.c (not public). */
#ifndef EK_INTERNAL_H
#define EK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "ek_runtime.h"

#define EK_STATE_ALIGN 8u

/* Where the parts of a validated model header live (byte positions in the flatbuffer). */
typedef struct ek_model_view {
  size_t opcodes_vec; uint32_t num_opcodes;  /* vector of OperatorCode tables (data position) */
  size_t buffers_vec; uint32_t num_buffers;  /* vector of Buffer tables */
  size_t tensors_vec; uint32_t num_tensors;  /* vector of Tensor tables */
  size_t ops_vec; uint32_t num_ops;          /* vector of Operator tables */
  size_t inputs_vec; uint32_t num_inputs;    /* vector of int32 */
  size_t outputs_vec; uint32_t num_outputs;  /* vector of int32 */
  size_t subgraphs_vec; uint32_t num_subgraphs;
  int32_t init_subgraph;                     /* the CALL_ONCE op's init subgraph, or -1 (ek_reader.c) */
  uint32_t num_var_handles;                  /* VAR_HANDLE ops of the main graph (ek_var_init entries in the state) */
} ek_model_view;

/* Errors of the reader before an ek_runtime exists (ek_model_opcodes). */
typedef struct ek_read_error {
  ek_status status;
  int32_t op_index;
  const char *message;
} ek_read_error;

/* ek_reader.c */
ek_status ek_read_header(const uint8_t *model, size_t len, ek_model_view *mv, ek_read_error *err);
/* Builtin code of operator op_index (validates the Operator and OperatorCode tables on the way). */
ek_status ek_read_opcode(const uint8_t *model, size_t len, const ek_model_view *mv, uint32_t op_index, int32_t *code,
                         int32_t *version, ek_read_error *err);
/* Fills rt->ctx.tensors, rt->ops, rt->kernels, rt->inputs/outputs from the model and validates the graph.
   The arrays must already point into the state buffer. */
ek_status ek_read_graph(ek_runtime *rt, const ek_model_view *mv);

/* ek_interp.c: variable tensors (op state) set to their initial values (init, reset, after re-planning). */
void ek_reset_state_tensors(ek_runtime *rt);

/* ek_plan.c */
/* Planner work memory for num_buffers buffers (non-constant tensors + ops), a multiple of 8 bytes. */
size_t ek_plan_work_bytes(int32_t num_buffers);
/* Plans the arena. Needs rt->scratch_plan[i].bytes set per op; fills rt->tensor_plan, rt->scratch_plan
   and rt->arena_required. */
ek_status ek_plan(ek_runtime *rt, void *work, size_t work_len);

/* Prepared models (ek_prepared.c; decoded by ek_prepared_tensor in ek_util.c). */
enum { EKP_WHERE_NONE = 0, EKP_WHERE_ARENA = 1, EKP_WHERE_MODEL = 2 };
typedef struct ekp_tensor { /* 64 bytes */
  int32_t where, offset;
  int32_t dims[EK_MAX_DIMS];
  int32_t bytes;
  float scale;
  int32_t zero_point;
  int32_t scales_off, zero_points_off; /* in the model, or -1 */
  int32_t num_scales;
  int8_t ndim, type, quantized_dimension;
  uint8_t is_constant;
  int32_t flags; /* EKP_STATE: a variable tensor (op state): set to `fill` at init and reset; bits 8-15: fill */
} ekp_tensor;
#define EKP_STATE 1
/* EKP_UNREAD: a constant every op reading it skips (ek_kernel.skips_input: it uses a re-laid-out or folded copy): left
   out of the model references (where NONE, no scales or zero points), so a compacted model need not keep its bytes */
#define EKP_UNREAD 2


/* ek_util.c */
/* ek_type_size: declared in ek_kernels.h */

#endif
