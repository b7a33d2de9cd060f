/* edgekit runtime: row-streamed op groups (fused tiling of residual blocks), shared by the host planner and the
 * prepared-model runner. See ek_stream_group.c. */
#ifndef EK_STREAM_GROUP_H
#define EK_STREAM_GROUP_H
#include "ek_kernels.h"

#define EKS_MAX_OPS 8 /* ops in one group (the runner keeps one group description on the stack) */

/* One op of a group, in the group's local tensor numbering: 0 = the group's input X, k + 1 = output of op k
   (the last op's output is the group's output Z). */
typedef struct eks_node {
  int32_t opcode;          /* EK_OP_CONV_2D, DEPTHWISE_CONV_2D, MAX_POOL_2D, AVERAGE_POOL_2D, PAD, PADV2, ADD, PRELU */
  int32_t nin;             /* activation inputs: 1 (conv, pool, pad, prelu) or 2 (add) */
  int32_t in[2];           /* local tensor ids */
  int32_t stride, pad, kh, dilation; /* rows: output row r reads input rows r*stride - pad + [0, (kh-1)*dilation]
                                        (PAD: stride 1, kh 1, pad = its top padding: rows in the padding read none) */
} eks_node;

typedef struct eks_graph {
  int32_t nops;
  eks_node node[EKS_MAX_OPS];
  int32_t rows[EKS_MAX_OPS + 1];      /* height of each local tensor */
  int32_t row_bytes[EKS_MAX_OPS + 1]; /* bytes of one row (W x C int8) */
} eks_graph;

/* What the schedule needs: window rows per internal tensor (local ids 1 .. nops-1), the largest Z-minus-X start
   difference that never overwrites an X row still to be read (aligned down to EK_ARENA_ALIGN by the caller), and the
   region bytes (windows, 16-byte aligned each, before the kernel scratch). */
typedef struct eks_needs {
  int32_t window_rows[EKS_MAX_OPS + 1];
  int64_t d_max;
  int32_t window_bytes;
} eks_needs;

/* The tensor facts a group needs, from either the host's ek_tensor or a prepared record. */
typedef struct eks_tensor_facts {
  const int32_t *dims;
  int32_t ndim, type, is_constant, bytes;
  const void *data; /* a constant's values (PAD's paddings), or NULL */
} eks_tensor_facts;
typedef int (*eks_tensor_fn)(const void *user, int32_t index, eks_tensor_facts *out); /* 0: no such tensor */

/* Builds the group of ops [0, nops) (opcode, inputs, output tensor indices, params each) and returns 0, or -1 when
   these ops cannot run row-streamed (op kinds, shapes, wiring: one activation input X from outside, each op's
   activation inputs are X or earlier outputs of the group). x_tensor receives X's index. */
int eks_build(eks_graph *g, int32_t nops, const int32_t *opcodes, const int32_t *const *inputs, const int32_t *num_inputs,
              const int32_t *outputs, const ek_op_params *const *params, eks_tensor_fn tensor, const void *user,
              int32_t *x_tensor);

/* Bytes of the windows of intermediates 1 .. nops-1 with these rows each, every window 16-byte aligned, laid out in
   that order at the start of the group's region (the kernels' scratch follows). Host and device both use it. */
int64_t eks_window_bytes(const eks_graph *g, const int32_t *window_rows);

/* Simulates the row schedule: fills needs. Returns 0, or -1 if the schedule cannot stream (a consumer needs rows
   behind its producer's window in a way no window bounds). */
int eks_simulate(const eks_graph *g, eks_needs *needs);

/* Runs one op k of the group for its output rows [r0, r1) (the caller positions the tensors' data). */
typedef ek_status (*eks_run_fn)(void *user, int32_t k, int32_t r0, int32_t r1, uint8_t *const *window_base,
                                const int32_t *window_row0);

/* Executes the schedule: windows (local ids 1 .. nops-1) at region + their offsets; run_op computes rows. */
ek_status eks_execute(const eks_graph *g, const eks_needs *needs, uint8_t *region, eks_run_fn run_op, void *user);

#endif
