/* edgekit runtime core: init (read -> size -> plan -> prepare) and invoke. No dynamic allocation:
 * everything lives in the caller's state and arena buffers.
 *
 * State buffer layout (from an 8-byte aligned base):
 *   ek_tensor[T] | ek_op[N] | const ek_kernel*[N] | ek_var_init[V] | dynamic region (per-op persistent kernel data)
 * (V = the main graph's VAR_HANDLE ops: the resource variables' init table, read by CALL_ONCE's prepare; the
 * variables themselves are arena buffers alive over the whole graph, see kernels/variables.c)
 * Init memory (only during init): the memory plan (ek_plan_entry[T] tensor plan + ek_plan_entry[N] scratch
 * plan) and the planner's work memory. It lives at the start of the caller's arena, which is unused until the
 * first invoke, when the arena is big enough; otherwise in the state's dynamic region, where the persistent
 * data overwrites it after binding. The sizes are pure functions of the model (host == device):
 *   arena_required = the planned arena (unchanged by the above)
 *   state_required = fixed part + persistent                         if arena_required >= plan + work
 *                    fixed part + max(persistent, plan + work)       otherwise
 * Given at least state_with_plan bytes, the plan is copied after the persistent data (after max(persistent,
 * work) in the second case) and stays readable (host tools); otherwise rt->tensor_plan and rt->scratch_plan
 * are NULL after init. A call without a big enough arena (a size query) plans in the state and asks for
 * fixed part + max(persistent, plan + work) bytes of it, then reports the sizes above.
 */
#include <string.h>

#include "ek_internal.h"

/* Stays the data pointer of zero-byte tensors when there is no arena at all (never dereferenced). */
static uint64_t ek_empty_arena[2];

static size_t align_up(size_t x, size_t a) { return (x + (a - 1u)) & ~(a - 1u); }

/* Adds b to *a; 0 on overflow. */
static int add_size(size_t *a, size_t b) {
  if (b > (size_t)-1 - *a) return 0;
  *a += b;
  return 1;
}

typedef struct state_layout {
  size_t tensors, ops, kernels, vars, fixed_end;
  size_t plan_bytes;           /* tensor plan + scratch plan, each 8-byte aligned */
  size_t scratch_plan_offset;  /* of the scratch plan within the plan */
} state_layout;

static state_layout layout_state(uint32_t num_tensors, uint32_t num_ops, uint32_t num_vars) {
  state_layout l;
  size_t off = 0;
  l.tensors = off;
  off += align_up((size_t)num_tensors * sizeof(ek_tensor), EK_STATE_ALIGN);
  l.ops = off;
  off += align_up((size_t)num_ops * sizeof(ek_op), EK_STATE_ALIGN);
  l.kernels = off;
  off += align_up((size_t)num_ops * sizeof(const ek_kernel *), EK_STATE_ALIGN);
  l.vars = off;
  off += align_up((size_t)num_vars * sizeof(ek_var_init), EK_STATE_ALIGN);
  l.fixed_end = off;
  l.scratch_plan_offset = align_up((size_t)num_tensors * sizeof(ek_plan_entry), EK_STATE_ALIGN);
  l.plan_bytes = l.scratch_plan_offset + align_up((size_t)num_ops * sizeof(ek_plan_entry), EK_STATE_ALIGN);
  return l;
}

/* Points rt->tensor_plan / rt->scratch_plan at a plan of layout l starting at mem. */
static void set_plan(ek_runtime *rt, uint8_t *mem, const state_layout *l) {
  rt->tensor_plan = (ek_plan_entry *)(void *)mem;
  rt->scratch_plan = (ek_plan_entry *)(void *)(mem + l->scratch_plan_offset);
}

/* Per-op persistent bytes, bounded so that sums cannot overflow on a 32-bit device. */
#define EK_MAX_OP_PERSISTENT ((size_t)1 << 24)
#define EK_MAX_OP_SCRATCH ((size_t)1 << 30)

static ek_status size_ops(ek_runtime *rt, size_t *persistent_total) {
  size_t total = 0;
  for (int32_t i = 0; i < rt->num_ops; ++i) {
    const ek_kernel *k = rt->kernels[i];
    ek_op *op = &rt->ops[i];
    const size_t pb = k->persistent_bytes ? k->persistent_bytes(&rt->ctx, op) : 0;
    const size_t sb = k->scratch_bytes ? k->scratch_bytes(&rt->ctx, op) : 0;
    if (rt->ctx.status != EK_OK) return rt->ctx.status; /* a size function may report a bad model */
    if (pb > EK_MAX_OP_PERSISTENT) return ek_fail(&rt->ctx, op, EK_ERR_MEMORY, "operator needs more than 16 MiB of persistent data");
    if (sb > EK_MAX_OP_SCRATCH) return ek_fail(&rt->ctx, op, EK_ERR_MEMORY, "operator needs more than 1 GiB of scratch");
    if (!add_size(&total, align_up(pb, EK_STATE_ALIGN)))
      return ek_fail(&rt->ctx, op, EK_ERR_MEMORY, "persistent data size overflows");
    rt->scratch_plan[i].bytes = (int32_t)sb;
  }
  *persistent_total = total;
  return EK_OK;
}

/* Points every planned tensor and scratch buffer into the arena and hands out persistent data. Reads the plan
   before zeroing the persistent data, which overwrites it unless it is kept. */
static ek_status bind_memory(ek_runtime *rt, uint8_t *arena_base, uint8_t *persistent, size_t persistent_len,
                             int keep_plan) {
  size_t used = 0;
  for (int32_t t = 0; t < rt->ctx.num_tensors; ++t) {
    ek_tensor *tensor = &rt->ctx.tensors[t];
    const int32_t off = rt->tensor_plan[t].offset;
    if (!tensor->is_constant) tensor->data = off >= 0 ? (void *)(arena_base + off) : (void *)0;
  }
  for (int32_t i = 0; i < rt->num_ops; ++i) {
    ek_op *op = &rt->ops[i];
    const ek_kernel *k = rt->kernels[i];
    const size_t pb = k->persistent_bytes ? k->persistent_bytes(&rt->ctx, op) : 0;
    const size_t need = align_up(pb, EK_STATE_ALIGN);
    if (pb > EK_MAX_OP_PERSISTENT || need > persistent_len - used)
      return ek_fail(&rt->ctx, op, EK_ERR_INTERNAL, "kernel persistent size changed between calls");
    op->user_data = pb ? (void *)(persistent + used) : (void *)0;
    used += need;
    op->scratch = rt->scratch_plan[i].bytes > 0 ? (void *)(arena_base + rt->scratch_plan[i].offset) : (void *)0;
  }
  if (!keep_plan) {
    rt->tensor_plan = (ek_plan_entry *)0;
    rt->scratch_plan = (ek_plan_entry *)0;
  }
  memset(persistent, 0, persistent_len);
  return EK_OK;
}

ek_status ek_init(ek_runtime *rt, const void *model, size_t model_len, void *state, size_t state_len, void *arena,
                  size_t arena_len) {
  return ek_init_opt(rt, model, model_len, state, state_len, arena, arena_len, EK_OPTIMIZE_SPEED);
}

static ek_status init_impl(ek_runtime *rt, const void *model, size_t model_len, void *state, size_t state_len,
                           void *arena, size_t arena_len, int32_t optimize, const uint8_t *int8_ops,
                           int32_t num_int8_ops);

ek_status ek_init_opt(ek_runtime *rt, const void *model, size_t model_len, void *state, size_t state_len, void *arena,
                      size_t arena_len, int32_t optimize) {
  return init_impl(rt, model, model_len, state, state_len, arena, arena_len, optimize, (const uint8_t *)0, 0);
}

#ifndef EK_PREPARED_ONLY
ek_status ek_init_opt_ops(ek_runtime *rt, const void *model, size_t model_len, void *state, size_t state_len,
                          void *arena, size_t arena_len, int32_t optimize, const uint8_t *int8_ops,
                          int32_t num_int8_ops) {
  return init_impl(rt, model, model_len, state, state_len, arena, arena_len, optimize, int8_ops,
                   num_int8_ops > 0 ? num_int8_ops : 0);
}
#endif

static ek_status init_impl(ek_runtime *rt, const void *model, size_t model_len, void *state, size_t state_len,
                           void *arena, size_t arena_len, int32_t optimize, const uint8_t *int8_ops,
                           int32_t num_int8_ops) {
  ek_model_view mv;
  ek_read_error err = {EK_OK, -1, (const char *)0};
  ek_status st;
  if (!rt) return EK_ERR_INTERNAL;
  memset(rt, 0, sizeof *rt);
  rt->ctx.optimize = optimize & 0xff;
  rt->ctx.plan_mve = (optimize & EK_OPTIMIZE_FOR_MVE) != 0;
#ifndef EK_PREPARED_ONLY
  rt->ctx.for_export = (optimize & EK_OPTIMIZE_FOR_EXPORT) != 0;
  rt->ctx.int8_weights = (optimize & EK_OPTIMIZE_INT8_WEIGHTS) != 0;
  rt->ctx.int8_ops = int8_ops;
  rt->ctx.num_int8_ops = int8_ops ? num_int8_ops : 0;
#else
  (void)int8_ops;
  (void)num_int8_ops;
#endif
  rt->ctx.error_op = -1;
  rt->ctx.error_message = "";
  rt->model = (const uint8_t *)model;
  rt->model_len = model_len;

  if (ek_read_header(rt->model, model_len, &mv, &err) != EK_OK)
    return ek_fail(&rt->ctx, (const ek_op *)0, err.status, err.message);

  /* State: fixed part from the counts, then the dynamic region (per-op persistent data). The memory plan and the
     planner's work memory ("init memory") live only during init: at the arena's start when the caller's arena can
     hold them (the arena is unused until the first invoke), otherwise in the state's dynamic region, which the
     persistent data overwrites once the plan is bound. Reading the graph needs the fixed part and the plan (its
     check uses the tensor plan as work memory). */
  const state_layout l = layout_state(mv.num_tensors, mv.num_ops, mv.num_var_handles);
  const uintptr_t sbase = state ? (uintptr_t)align_up((size_t)(uintptr_t)state, EK_STATE_ALIGN) : 0;
  const size_t spad = state ? (size_t)(sbase - (uintptr_t)state) : 0;
  const uintptr_t abase = arena ? (uintptr_t)align_up((size_t)(uintptr_t)arena, EK_ARENA_ALIGN) : 0;
  const size_t apad = arena ? (size_t)(abase - (uintptr_t)arena) : 0;
  const size_t avail = arena && arena_len >= apad ? arena_len - apad : 0; /* usable arena bytes */
  const int read_in_arena = avail >= l.plan_bytes && l.plan_bytes > 0;
  rt->state_required = spad + l.fixed_end + (read_in_arena ? 0 : l.plan_bytes);
  if (!state || state_len < rt->state_required)
    return ek_fail(&rt->ctx, (const ek_op *)0, EK_ERR_MEMORY, "state buffer too small (see state_required)");
  uint8_t *s = (uint8_t *)sbase;
  uint8_t *dyn = s + l.fixed_end;
  uint8_t *plan_mem = read_in_arena ? (uint8_t *)abase : dyn;
  rt->ctx.tensors = (ek_tensor *)(void *)(s + l.tensors);
  rt->ctx.num_tensors = (int32_t)mv.num_tensors;
  rt->ops = (ek_op *)(void *)(s + l.ops);
  rt->kernels = (const ek_kernel **)(void *)(s + l.kernels);
  rt->num_ops = (int32_t)mv.num_ops;
  rt->ctx.var_init = (const ek_var_init *)(void *)(s + l.vars);
  rt->ctx.num_var_init = 0; /* counted by the reader */
  rt->ctx.model = rt->model;
  memset(s, 0, l.fixed_end);
  memset(plan_mem, 0, l.plan_bytes);
  set_plan(rt, plan_mem, &l);

  st = ek_read_graph(rt, &mv);
  if (st != EK_OK) return st;

  size_t persistent = 0;
  st = size_ops(rt, &persistent); /* writes scratch_plan[].bytes */
  if (st != EK_OK) return st;
  rt->persistent_bytes = persistent;
  int32_t buffers = rt->num_ops; /* the planner's buffers: activations and scratches */
  for (int32_t t = 0; t < rt->ctx.num_tensors; ++t) buffers += !rt->ctx.tensors[t].is_constant;
  const size_t work = align_up(ek_plan_work_bytes(buffers), EK_STATE_ALIGN);
  const size_t fixed = spad + l.fixed_end;
  size_t init_bytes = l.plan_bytes; /* plan + work */
  size_t state_planning = fixed;    /* state needed to plan in the state: fixed + max(persistent, plan + work) */
  if (!add_size(&init_bytes, work) || !add_size(&state_planning, persistent > init_bytes ? persistent : init_bytes))
    return ek_fail(&rt->ctx, (const ek_op *)0, EK_ERR_MEMORY, "state size overflows");

  const int plan_in_arena = init_bytes > 0 && avail >= init_bytes;
  uint8_t *work_mem;
  if (plan_in_arena) { /* plan (already there) + work at the arena's start */
    work_mem = (uint8_t *)abase + l.plan_bytes;
  } else {
    if (state_len < state_planning) { /* e.g. a size query without an arena */
      rt->state_required = state_planning;
      return ek_fail(&rt->ctx, (const ek_op *)0, EK_ERR_MEMORY, "state buffer too small (see state_required)");
    }
    /* plan at the region's start, work after it; kept plans move after max(persistent, work) below */
    if (plan_mem != dyn) memmove(dyn, plan_mem, l.plan_bytes);
    plan_mem = dyn;
    set_plan(rt, plan_mem, &l);
    work_mem = dyn + l.plan_bytes;
  }
  st = ek_plan(rt, work_mem, work);
  if (st != EK_OK) return st;

  /* The sizes are pure functions of the model (host == device): the init memory goes to the arena when the
     arena the model needs anyway can hold it, otherwise it needs state. */
  const int arena_holds_init = rt->arena_required >= init_bytes;
  const size_t apart = arena_holds_init ? persistent : (persistent > work ? persistent : work); /* kept plan after */
  size_t with_plan = fixed;
  if (!add_size(&with_plan, apart) || !add_size(&with_plan, l.plan_bytes))
    return ek_fail(&rt->ctx, (const ek_op *)0, EK_ERR_MEMORY, "state size overflows");
  rt->state_required = arena_holds_init ? fixed + persistent : state_planning;
  rt->state_with_plan = with_plan;
  if (state_len < rt->state_required)
    return ek_fail(&rt->ctx, (const ek_op *)0, EK_ERR_MEMORY, "state buffer too small (see state_required)");

  uint8_t *arena_base = (uint8_t *)abase;
  if (rt->arena_required > 0) {
    if (avail < rt->arena_required)
      return ek_fail(&rt->ctx, (const ek_op *)0, EK_ERR_MEMORY, "arena buffer too small (see arena_required)");
  } else if (!arena) {
    arena_base = (uint8_t *)(void *)ek_empty_arena;
  }
  rt->arena = arena_base;
  rt->arena_len = arena ? arena_len - apad : 0;

  /* Success from here on implies: plan in the arena (arena_holds_init) or in the state (plan_in_arena == 0). */
  const int keep_plan = state_len >= with_plan;
  if (keep_plan) {
    memmove(dyn + apart, plan_mem, l.plan_bytes);
    set_plan(rt, dyn + apart, &l);
  }
  st = bind_memory(rt, arena_base, dyn, persistent, keep_plan);
  if (st != EK_OK) return st;
  for (int32_t i = 0; i < rt->num_ops; ++i) {
    ek_op *op = &rt->ops[i];
    const ek_kernel *k = rt->kernels[i];
    st = k->prepare ? k->prepare(&rt->ctx, op) : EK_OK;
    if (st != EK_OK || rt->ctx.status != EK_OK) {
      ek_fail(&rt->ctx, op, st, "operator prepare failed"); /* keeps the kernel's own message if it gave one */
      return rt->ctx.status;
    }
  }
  ek_reset_state_tensors(rt);
  rt->ready = 1;
  return EK_OK;
}

ek_status ek_required_bytes(const void *model, size_t model_len, void *work, size_t work_len, size_t *state_bytes,
                            size_t *arena_bytes, ek_error *error) {
  ek_runtime rt;
  ek_status st = ek_init(&rt, model, model_len, work, work_len, (void *)0, 0);
  /* Failing only for lack of an arena still means the state fit and the plan is known. */
  const int sized = st == EK_OK || (st == EK_ERR_MEMORY && rt.state_required <= work_len && rt.state_required > 0);
  if (state_bytes) *state_bytes = rt.state_required;
  if (arena_bytes) *arena_bytes = sized ? rt.arena_required : 0;
  if (sized) st = EK_OK;
  if (error) {
    *error = ek_last_error(&rt);
    if (sized) {
      error->status = EK_OK;
      error->op_index = -1;
      error->message = "";
    }
  }
  return st;
}

ek_status ek_invoke(ek_runtime *rt) {
  if (!rt) return EK_ERR_INTERNAL;
  if (!rt->ready) {
    return rt->ctx.status != EK_OK ? rt->ctx.status
                                   : ek_fail(&rt->ctx, (const ek_op *)0, EK_ERR_INTERNAL, "runtime not initialised");
  }
  if (rt->num_stream_groups > 0)
    return ek_fail(&rt->ctx, (const ek_op *)0, EK_ERR_INTERNAL,
                   "planned with row-streamed groups: run its prepared model (ek_export_prepared)");
  for (int32_t i = 0; i < rt->num_ops; ++i) {
    ek_op *op = &rt->ops[i];
    if (rt->hook) rt->hook(rt->hook_user, i, op->opcode, 0);
    const ek_status st = rt->kernels[i]->eval(&rt->ctx, op);
    if (rt->hook) rt->hook(rt->hook_user, i, op->opcode, 1);
    if (st != EK_OK || rt->ctx.status != EK_OK) {
      ek_fail(&rt->ctx, op, st, "operator eval failed");
      return rt->ctx.status;
    }
  }
  return EK_OK;
}

/* Variable tensors (op state, not resource variables: those are CALL_ONCE's) back to their initial value. */
void ek_reset_state_tensors(ek_runtime *rt) {
  for (int32_t k = 0; k < rt->ctx.num_var_init; ++k) {
    const ek_var_init *v = &rt->ctx.var_init[k];
    ek_tensor *t = &rt->ctx.tensors[v->tensor];
    if (t->type != EK_RESOURCE && t->data && v->bytes > 0) memset(t->data, v->fill & 0xff, (size_t)v->bytes);
  }
}

void ek_reset_variables(ek_runtime *rt) {
  if (!rt || !rt->ready) return;
  rt->ctx.call_once_done = 0; /* the next invoke's CALL_ONCE writes every variable's initial value again */
  ek_reset_state_tensors(rt);
}

size_t ek_variables_bytes(const ek_runtime *rt) {
  size_t total = 0;
  if (!rt || !rt->ctx.var_init) return 0;
  for (int32_t k = 0; k < rt->ctx.num_var_init; ++k) total += align_up((size_t)rt->ctx.var_init[k].bytes, EK_ARENA_ALIGN);
  return total;
}

void ek_set_op_hook(ek_runtime *rt, ek_op_hook hook, void *user) {
  if (!rt) return;
  rt->hook = hook;
  rt->hook_user = user;
}

ek_error ek_last_error(const ek_runtime *rt) {
  ek_error e;
  e.status = rt ? rt->ctx.status : EK_ERR_INTERNAL;
  e.op_index = rt ? rt->ctx.error_op : -1;
  e.message = rt && rt->ctx.error_message ? rt->ctx.error_message : "";
  return e;
}

int32_t ek_num_inputs(const ek_runtime *rt) { return rt && rt->ready ? rt->num_inputs : 0; }
int32_t ek_num_outputs(const ek_runtime *rt) { return rt && rt->ready ? rt->num_outputs : 0; }

ek_tensor *ek_get_input(ek_runtime *rt, int32_t i) {
  if (!rt || !rt->ready || i < 0 || i >= rt->num_inputs) return (ek_tensor *)0;
  return &rt->ctx.tensors[rt->inputs[i]];
}

ek_tensor *ek_get_output(ek_runtime *rt, int32_t i) {
  if (!rt || !rt->ready || i < 0 || i >= rt->num_outputs) return (ek_tensor *)0;
  return &rt->ctx.tensors[rt->outputs[i]];
}

ek_tensor *ek_get_tensor(ek_runtime *rt, int32_t i) {
  if (!rt || !rt->ctx.tensors || i < 0 || i >= rt->ctx.num_tensors) return (ek_tensor *)0;
  return &rt->ctx.tensors[i];
}
