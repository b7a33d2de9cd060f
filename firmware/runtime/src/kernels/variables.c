/* Resource variables: VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE and CALL_ONCE (state kept across invocations,
 * e.g. the ring buffers of a streaming keyword model).
 *
 * Semantics as TFLite Micro (tensorflow/lite/micro/kernels/var_handle.cc, read_variable.cc, assign_variable.cc,
 * call_once.cc, micro_resource_variable.cc) and LiteRT (tensorflow/lite/kernels/var_handle.cc, read_variable.cc,
 * assign_variable.cc, call_once.cc): a variable is identified by (container, shared_name); READ_VARIABLE copies
 * the variable's bytes into its output, ASSIGN_VARIABLE copies its value input's bytes into the variable, both
 * byte for byte (no requantization); CALL_ONCE runs its init subgraph on the first invoke only.
 *
 * How edgekit holds them (firmware/runtime/README.md, "Resource variables"): the reader resolves every VAR_HANDLE
 * of the main graph to one variable and gives its handle tensor (type RESOURCE) the variable's bytes (equal to
 * every assigned value's and read output's bytes); the planner keeps each handle tensor alive over the whole graph,
 * so its arena bytes are never shared with anything and persist from one invoke to the next. The init subgraph
 * (VAR_HANDLE + ASSIGN_VARIABLE of constants, what the converter emits for tf.Variable initial values) becomes a
 * table: CALL_ONCE copies each initial value (or, for a variable it does not assign, fills the variable with
 * TFLM's default byte, the first assigned value's zero point) into the variables the first time it runs after
 * init or a reset (ek_reset_variables / ek_prepared_reset). Its table lives in its per-op data (flash in a
 * prepared model); the "has run" flag lives in the context (RAM).
 */
/* edgekit-op: CALL_ONCE | types: none | versions: 1 | fast path: none */
/* edgekit-op: VAR_HANDLE | types: resource | versions: 1 | fast path: none */
/* edgekit-op: READ_VARIABLE | types: any | versions: 1 | fast path: none */
/* edgekit-op: ASSIGN_VARIABLE | types: any | versions: 1 | fast path: none */
#include <string.h>

#include "ek_kernels.h"

typedef struct call_once_data {
  int32_t count, reserved;
  ek_var_init entry[1]; /* count entries */
} call_once_data;

static size_t no_persistent(const ek_context *ctx, const ek_op *op) {
  (void)ctx;
  (void)op;
  return 0;
}

/* ---- VAR_HANDLE ---- */

static ek_status var_handle_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 0 || op->num_outputs != 1) return ek_fail(ctx, op, EK_ERR_MODEL, "VAR_HANDLE needs no input and 1 output");
  const ek_tensor *h = ek_output(ctx, op, 0);
  if (!h || h->type != EK_RESOURCE) return ek_fail(ctx, op, EK_ERR_TYPE, "VAR_HANDLE output must be a RESOURCE tensor");
  if (h->bytes > 0 && !h->data) return ek_fail(ctx, op, EK_ERR_INTERNAL, "VAR_HANDLE variable has no memory");
  return EK_OK;
}

static ek_status var_handle_eval(ek_context *ctx, ek_op *op) {
  (void)ctx;
  (void)op;
  return EK_OK; /* the handle tensor is the variable's memory */
}

/* ---- READ_VARIABLE ---- */

static ek_status read_variable_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 1 || op->num_outputs != 1)
    return ek_fail(ctx, op, EK_ERR_MODEL, "READ_VARIABLE needs 1 input and 1 output");
  const ek_tensor *h = ek_input(ctx, op, 0);
  const ek_tensor *out = ek_output(ctx, op, 0);
  if (!h || !out || h->type != EK_RESOURCE) return ek_fail(ctx, op, EK_ERR_TYPE, "READ_VARIABLE input must be a variable handle");
  if (out->type == EK_RESOURCE || out->is_constant) return ek_fail(ctx, op, EK_ERR_TYPE, "READ_VARIABLE output must be an activation");
  if (out->bytes != h->bytes)
    return ek_fail(ctx, op, EK_ERR_SHAPE, "READ_VARIABLE output size differs from the variable's (its assigned values')");
  return EK_OK;
}

static ek_status read_variable_eval(ek_context *ctx, ek_op *op) {
  const ek_tensor *h = ek_input(ctx, op, 0);
  ek_tensor *out = ek_output(ctx, op, 0);
  if (h->bytes > 0) memcpy(out->data, h->data, (size_t)h->bytes);
  return EK_OK;
}

/* ---- ASSIGN_VARIABLE ---- */

static ek_status assign_variable_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 2 || op->num_outputs != 0)
    return ek_fail(ctx, op, EK_ERR_MODEL, "ASSIGN_VARIABLE needs 2 inputs and no output");
  const ek_tensor *h = ek_input(ctx, op, 0);
  const ek_tensor *v = ek_input(ctx, op, 1);
  if (!h || !v || h->type != EK_RESOURCE) return ek_fail(ctx, op, EK_ERR_TYPE, "ASSIGN_VARIABLE input 0 must be a variable handle");
  if (v->type == EK_RESOURCE) return ek_fail(ctx, op, EK_ERR_TYPE, "ASSIGN_VARIABLE value must not be a handle");
  if (v->bytes != h->bytes) return ek_fail(ctx, op, EK_ERR_SHAPE, "ASSIGN_VARIABLE value size differs from the variable's");
  if (v->bytes > 0 && !v->data) return ek_fail(ctx, op, EK_ERR_MODEL, "ASSIGN_VARIABLE value has no data");
  return EK_OK;
}

static ek_status assign_variable_eval(ek_context *ctx, ek_op *op) {
  ek_tensor *h = ek_input(ctx, op, 0);
  void *dst = h->data; /* read before decoding input 1 (a prepared model decodes into slots) */
  const ek_tensor *v = ek_input(ctx, op, 1);
  if (v->bytes > 0 && dst != v->data) memmove(dst, v->data, (size_t)v->bytes);
  return EK_OK;
}

/* ---- CALL_ONCE ---- */

static size_t call_once_persistent_bytes(const ek_context *ctx, const ek_op *op) {
  (void)op;
  return 8u + (size_t)(ctx->num_var_init > 0 ? ctx->num_var_init : 0) * sizeof(ek_var_init);
}

static ek_status call_once_prepare(ek_context *ctx, ek_op *op) {
  if (op->num_inputs != 0 || op->num_outputs != 0) return ek_fail(ctx, op, EK_ERR_MODEL, "CALL_ONCE needs no inputs and no outputs");
  call_once_data *d = (call_once_data *)op->user_data;
  if (!d) return ek_fail(ctx, op, EK_ERR_INTERNAL, "CALL_ONCE has no data");
  d->count = ctx->num_var_init;
  d->reserved = 0;
  for (int32_t i = 0; i < ctx->num_var_init; ++i) {
    const ek_var_init *e = &ctx->var_init[i];
    if (e->tensor < 0 || e->tensor >= ctx->num_tensors) return ek_fail(ctx, op, EK_ERR_INTERNAL, "CALL_ONCE variable index out of range");
    const ek_tensor *h = &ctx->tensors[e->tensor];
    if (h->type != EK_RESOURCE || h->bytes != e->bytes || (e->bytes > 0 && !h->data))
      return ek_fail(ctx, op, EK_ERR_INTERNAL, "CALL_ONCE variable differs from its handle");
    d->entry[i] = *e;
  }
  return EK_OK;
}

static ek_status call_once_eval(ek_context *ctx, ek_op *op) {
  if (ctx->call_once_done) return EK_OK;
  const call_once_data *d = (const call_once_data *)op->user_data;
  for (int32_t i = 0; i < d->count; ++i) {
    const ek_var_init *e = &d->entry[i];
    if (e->tensor < 0 || e->tensor >= ctx->num_tensors) continue; /* prepared and checksummed: never taken */
    const ek_tensor *h = ctx->tensors ? &ctx->tensors[e->tensor] : ek_prepared_tensor(ctx, e->tensor, ctx->out_slot);
    if (h->bytes != e->bytes || e->bytes <= 0) continue;
    if (e->src >= 0)
      memcpy(h->data, ctx->model + e->src, (size_t)e->bytes);
    else
      memset(h->data, e->fill & 0xff, (size_t)e->bytes);
  }
  ctx->call_once_done = 1;
  return EK_OK;
}

const ek_kernel ek_kernel_var_handle = {EK_OP_VAR_HANDLE, "VAR_HANDLE", EK_HOST_FN(no_persistent), 0, EK_HOST_FN(var_handle_prepare), var_handle_eval, 0};
const ek_kernel ek_kernel_read_variable = {EK_OP_READ_VARIABLE, "READ_VARIABLE", EK_HOST_FN(no_persistent), 0, EK_HOST_FN(read_variable_prepare), read_variable_eval, 0};
const ek_kernel ek_kernel_assign_variable = {EK_OP_ASSIGN_VARIABLE, "ASSIGN_VARIABLE", EK_HOST_FN(no_persistent), 0, EK_HOST_FN(assign_variable_prepare), assign_variable_eval, 0};
const ek_kernel ek_kernel_call_once = {EK_OP_CALL_ONCE, "CALL_ONCE", EK_HOST_FN(call_once_persistent_bytes), 0, EK_HOST_FN(call_once_prepare), call_once_eval, 0};
