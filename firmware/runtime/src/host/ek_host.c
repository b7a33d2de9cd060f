/* Host-only helpers for the Python binding (edgekit/firmware/host_runtime.py): struct sizes so the
 * ctypes mirrors can be checked, kernel lookup, and read access to the runtime's fields without
 * mirroring ek_runtime in Python. Not part of device builds. */
#include <stddef.h>

#include "ek_runtime.h"

size_t ek_host_sizeof_runtime(void) { return sizeof(ek_runtime); }
size_t ek_host_sizeof_tensor(void) { return sizeof(ek_tensor); }
size_t ek_host_sizeof_plan_entry(void) { return sizeof(ek_plan_entry); }
int ek_host_has_kernel(int32_t opcode) { return ek_find_kernel(opcode) != (const ek_kernel *)0; }

/* out[0..6] = state_required, arena_required, persistent_bytes, num_tensors, num_ops, ready, state_with_plan. */
int ek_host_info(const ek_runtime *rt, int64_t *out) {
  out[0] = (int64_t)rt->state_required;
  out[1] = (int64_t)rt->arena_required;
  out[2] = (int64_t)rt->persistent_bytes;
  out[3] = rt->ctx.tensors ? rt->ctx.num_tensors : 0;
  out[4] = rt->ops ? rt->num_ops : 0;
  out[5] = rt->ready;
  out[6] = (int64_t)rt->state_with_plan;
  return 0;
}

const ek_plan_entry *ek_host_tensor_plan(const ek_runtime *rt) { return rt->tensor_plan; }
const ek_plan_entry *ek_host_scratch_plan(const ek_runtime *rt) { return rt->scratch_plan; }
int32_t ek_host_opcode(const ek_runtime *rt, int32_t i) { return i >= 0 && i < rt->num_ops ? rt->ops[i].opcode : -1; }
int32_t ek_host_input_index(const ek_runtime *rt, int32_t i) { return i >= 0 && i < rt->num_inputs ? rt->inputs[i] : -1; }
int32_t ek_host_output_index(const ek_runtime *rt, int32_t i) {
  return i >= 0 && i < rt->num_outputs ? rt->outputs[i] : -1;
}

size_t ek_host_sizeof_prepared(void) { return sizeof(ek_prepared); }
