/* edgekit runtime core: offline arena planner.
 *
 * Buffers: every non-constant tensor an op or the graph uses (alive from its producing op, or from the
 * start for graph inputs, to its last consumer, or to the end for graph outputs) and every op's scratch
 * (alive during that op only). A RESHAPE's output shares its input's memory (in place) when both are
 * activations of the same byte size; the shared buffer lives for the union of both lifetimes.
 *
 * Packing: each buffer is placed at the lowest (first-fit) or tightest (best-fit) gap among the buffers
 * already placed whose lifetimes overlap its own, visiting buffers in one of several orders (size,
 * first use, lifetime length, size x lifetime, last use). Every order x fit combination is tried
 * (fewer for very large graphs) and the smallest arena wins; ties go to the earlier combination. The
 * first combination is TFLM's greedy planner (size-descending first-fit), so we are never worse
 * than it. All orders are total (ties broken by buffer id): the plan is deterministic and identical
 * on host and device. Offsets are multiples of EK_ARENA_ALIGN.
 */
#include <string.h>

#include "ek_internal.h"
#include "ek_stream_group.h"

typedef struct pbuf {
  int32_t id;     /* tensor index, or num_tensors + op index for scratch */
  int32_t size;   /* padded to EK_ARENA_ALIGN */
  int32_t first;  /* first op alive (-1: from the start) */
  int32_t last;   /* last op alive (num_ops: to the end) */
  int32_t offset; /* offset in the combination being tried */
  int32_t best;   /* offset in the best combination so far */
} pbuf;

#define UNUSED_OP (-2)
#define NUM_ORDERS 5
#define NUM_FITS 2
#define MAX_BUFFERS_ALL_STRATEGIES 2048 /* above this, only TFLM's combination (planning is O(B^2) per try) */

size_t ek_plan_work_bytes(int32_t num_buffers) {
  return (size_t)num_buffers * (sizeof(pbuf) + 2u * sizeof(int32_t));
}

/* ---- orders --------------------------------------------------------------- */

typedef int (*pbuf_before)(const pbuf *a, const pbuf *b);

#define TIE(a, b) ((a)->id < (b)->id)
static int64_t area(const pbuf *p) { return (int64_t)p->size * (int64_t)(p->last - p->first + 1); }

static int by_size(const pbuf *a, const pbuf *b) {
  if (a->size != b->size) return a->size > b->size;
  if (a->first != b->first) return a->first < b->first;
  return TIE(a, b);
}
static int by_first_use(const pbuf *a, const pbuf *b) {
  if (a->first != b->first) return a->first < b->first;
  if (a->size != b->size) return a->size > b->size;
  return TIE(a, b);
}
static int by_lifetime(const pbuf *a, const pbuf *b) {
  const int32_t la = a->last - a->first, lb = b->last - b->first;
  if (la != lb) return la > lb;
  if (a->size != b->size) return a->size > b->size;
  return TIE(a, b);
}
static int by_area(const pbuf *a, const pbuf *b) {
  const int64_t aa = area(a), ab = area(b);
  if (aa != ab) return aa > ab;
  if (a->size != b->size) return a->size > b->size;
  return TIE(a, b);
}
static int by_last_use(const pbuf *a, const pbuf *b) {
  if (a->last != b->last) return a->last > b->last;
  if (a->size != b->size) return a->size > b->size;
  return TIE(a, b);
}

static const pbuf_before orders[NUM_ORDERS] = {by_size, by_first_use, by_lifetime, by_area, by_last_use};

/* Heap sort of index array `ix` (n entries) by `before`: no recursion, no allocation, O(n log n). */
static void sift_down(int32_t *ix, const pbuf *bufs, pbuf_before before, int32_t root, int32_t n) {
  for (;;) {
    int32_t child = 2 * root + 1;
    if (child >= n) return;
    /* max-heap on "after": the element that must come last rises to the top */
    if (child + 1 < n && before(&bufs[ix[child]], &bufs[ix[child + 1]])) ++child;
    if (!before(&bufs[ix[root]], &bufs[ix[child]])) return;
    const int32_t tmp = ix[root];
    ix[root] = ix[child];
    ix[child] = tmp;
    root = child;
  }
}

static void sort_indices(int32_t *ix, int32_t n, const pbuf *bufs, pbuf_before before) {
  for (int32_t i = n / 2 - 1; i >= 0; --i) sift_down(ix, bufs, before, i, n);
  for (int32_t end = n - 1; end > 0; --end) {
    const int32_t tmp = ix[0];
    ix[0] = ix[end];
    ix[end] = tmp;
    sift_down(ix, bufs, before, 0, end);
  }
}

/* ---- packing -------------------------------------------------------------- */

static int overlap_in_time(const pbuf *a, const pbuf *b) { return !(a->last < b->first || b->last < a->first); }

/* Overlap pairs (ek_plan_overlapped): buffer `out` may start at most `d_max` bytes (a multiple of
   EK_ARENA_ALIGN) after buffer `in` starts although both are alive at the same op; with `exact`, only exactly at
   the input's start (d = 0). */
typedef struct ppair {
  int32_t out, in; /* buffer indices */
  int32_t d_max;
  int32_t exact;
} ppair;

typedef struct pbounds { /* start s of the buffer being placed is forbidden when lo < s < hi */
  int64_t lo, hi;
} pbounds;

/* Forbidden start intervals (1 or 2) of b against placed p (time-overlapping), relaxed by a pair between them. */
static int32_t forbidden(const pbuf *b, int32_t bi, const pbuf *p, int32_t pi, const ppair *pairs, int32_t npairs,
                         pbounds *f) {
  f[0].lo = (int64_t)p->offset - b->size;
  f[0].hi = (int64_t)p->offset + p->size;
  for (int32_t k = 0; k < npairs; ++k) {
    const ppair *q = &pairs[k];
    const int b_out = q->out == bi && q->in == pi, b_in = q->out == pi && q->in == bi;
    if (!b_out && !b_in) continue;
    if (q->exact) { /* the same start is fine: split the interval around p's start */
      f[1].lo = p->offset;
      f[1].hi = f[0].hi;
      f[0].hi = p->offset;
      return 2;
    }
    if (b_out) { /* b is the output: b.start <= p.start + d_max is fine */
      const int64_t lo = (int64_t)p->offset + q->d_max;
      if (lo > f[0].lo) f[0].lo = lo;
    } else { /* b is the input: b.start >= p.start - d_max is fine */
      const int64_t hi = (int64_t)p->offset - q->d_max;
      if (hi < f[0].hi) f[0].hi = hi;
    }
    return 1;
  }
  return 1;
}

/* Places buffers in `order`; returns the arena size, or stops early (returning a value >= limit) once it
   cannot beat `limit`. `placed` holds the placed buffers sorted by offset; `iv` is work memory for n intervals. */
static int64_t pack(pbuf *bufs, const int32_t *order, int32_t n, int best_fit, int32_t *placed, int64_t limit,
                    const ppair *pairs, int32_t npairs, pbounds *iv) {
  int64_t total = 0;
  int32_t m = 0;
  for (int32_t k = 0; k < n; ++k) {
    pbuf *b = &bufs[order[k]];
    int64_t cand = 0, chosen = -1, chosen_gap = INT64_MAX;
    if (npairs == 0) {
      for (int32_t j = 0; j < m; ++j) {
        const pbuf *p = &bufs[placed[j]];
        if (!overlap_in_time(b, p)) continue;
        if ((int64_t)p->offset >= cand + b->size) {
          const int64_t gap = (int64_t)p->offset - cand;
          if (!best_fit) { chosen = cand; break; }
          if (gap < chosen_gap) { chosen_gap = gap; chosen = cand; }
        }
        const int64_t end = (int64_t)p->offset + p->size;
        if (end > cand) cand = end;
      }
    } else {
      /* forbidden start intervals, sorted by lo (insertion: nearly sorted, placed is by offset) */
      int32_t c = 0;
      for (int32_t j = 0; j < m; ++j) {
        const pbuf *p = &bufs[placed[j]];
        if (!overlap_in_time(b, p)) continue;
        pbounds f[2];
        const int32_t nf = forbidden(b, order[k], p, placed[j], pairs, npairs, f);
        for (int32_t e = 0; e < nf; ++e) {
          if (f[e].lo >= f[e].hi) continue;
          int32_t at = c++;
          while (at > 0 && iv[at - 1].lo > f[e].lo) { iv[at] = iv[at - 1]; --at; }
          iv[at] = f[e];
        }
      }
      for (int32_t j = 0; j < c; ++j) {
        if (iv[j].lo >= cand) { /* any start in [cand, lo] is free */
          const int64_t gap = iv[j].lo - cand;
          if (!best_fit) { chosen = cand; break; }
          if (gap < chosen_gap) { chosen_gap = gap; chosen = cand; }
        }
        if (iv[j].hi > cand) cand = iv[j].hi;
      }
    }
    if (chosen < 0) chosen = cand;
    if (chosen + b->size > INT32_MAX) return INT64_MAX; /* cannot be addressed with int32 offsets */
    b->offset = (int32_t)chosen;
    if (chosen + b->size > total) total = chosen + b->size;
    if (total >= limit) return total;
    /* insert into `placed`, keeping (offset, id) order */
    int32_t at = m;
    while (at > 0) {
      const pbuf *q = &bufs[placed[at - 1]];
      if (q->offset < b->offset || (q->offset == b->offset && q->id < b->id)) break;
      placed[at] = placed[at - 1];
      --at;
    }
    placed[at] = order[k];
    ++m;
  }
  return total;
}

/* Largest total size alive at any one time: no packing can do better. */
static int64_t lower_bound(const pbuf *bufs, int32_t n) {
  int64_t best = 0;
  for (int32_t i = 0; i < n; ++i) {
    int64_t live = 0;
    for (int32_t j = 0; j < n; ++j) {
      if (bufs[j].first <= bufs[i].first && bufs[i].first <= bufs[j].last) live += bufs[j].size;
    }
    if (live > best) best = live;
  }
  return best;
}

/* ---- lifetimes ------------------------------------------------------------ */

static void extend(ek_plan_entry *e, int32_t op) {
  if (e->first_op == UNUSED_OP || op < e->first_op) e->first_op = op;
  if (e->last_op == UNUSED_OP || op > e->last_op) e->last_op = op;
}

static void compute_lifetimes(ek_runtime *rt) {
  const ek_tensor *tensors = rt->ctx.tensors;
  ek_plan_entry *tp = rt->tensor_plan;
  for (int32_t t = 0; t < rt->ctx.num_tensors; ++t) {
    tp[t].offset = -1;
    tp[t].bytes = tensors[t].bytes;
    tp[t].first_op = UNUSED_OP;
    tp[t].last_op = UNUSED_OP;
    tp[t].alias_of = -1;
  }
  for (int32_t k = 0; k < rt->num_inputs; ++k) extend(&tp[rt->inputs[k]], -1);
  for (int32_t i = 0; i < rt->num_ops; ++i) {
    const ek_op *op = &rt->ops[i];
    for (int32_t k = 0; k < op->num_inputs; ++k) {
      if (op->inputs[k] >= 0) extend(&tp[op->inputs[k]], i);
    }
    for (int32_t k = 0; k < op->num_outputs; ++k) {
      if (op->outputs[k] >= 0) extend(&tp[op->outputs[k]], i);
    }
  }
  for (int32_t k = 0; k < rt->num_outputs; ++k) extend(&tp[rt->outputs[k]], rt->num_ops);
  for (int32_t k = 0; k < rt->ctx.num_var_init; ++k) { /* variables: alive over the whole graph, never shared */
    const int32_t t = rt->ctx.var_init[k].tensor;
    if (t >= 0 && t < rt->ctx.num_tensors && tp[t].first_op != UNUSED_OP) {
      extend(&tp[t], -1);
      extend(&tp[t], rt->num_ops);
    }
  }
  for (int32_t i = 0; i < rt->num_ops; ++i) {
    ek_plan_entry *sp = &rt->scratch_plan[i];
    sp->offset = -1;
    sp->first_op = i;
    sp->last_op = i;
    sp->alias_of = -1;
  }
}

/* Ops that only relabel the shape of their first input: RESHAPE, SQUEEZE, EXPAND_DIMS. */
static int is_reshape_like(int32_t opcode) {
  return opcode == EK_OP_RESHAPE || opcode == EK_OP_SQUEEZE || opcode == EK_OP_EXPAND_DIMS;
}

/* RESHAPE / SQUEEZE / EXPAND_DIMS in place: the output shares the (root of the) input's memory. */
static void alias_reshapes(ek_runtime *rt) {
  const ek_tensor *tensors = rt->ctx.tensors;
  ek_plan_entry *tp = rt->tensor_plan;
  for (int32_t i = 0; i < rt->num_ops; ++i) {
    const ek_op *op = &rt->ops[i];
    if (!is_reshape_like(op->opcode) || op->num_inputs < 1 || op->num_outputs != 1) continue;
    const int32_t in = op->inputs[0], out = op->outputs[0];
    if (in < 0 || out < 0 || in == out || tensors[in].is_constant || tensors[out].is_constant) continue;
    if (tensors[in].bytes != tensors[out].bytes || tensors[in].type != tensors[out].type) continue;
    const int32_t root = tp[in].alias_of >= 0 ? tp[in].alias_of : in;
    tp[out].alias_of = root;
    if (tp[out].first_op < tp[root].first_op) tp[root].first_op = tp[out].first_op;
    if (tp[out].last_op > tp[root].last_op) tp[root].last_op = tp[out].last_op;
  }
}

/* ---- entry ---------------------------------------------------------------- */

/* Fills bufs with every activation tensor (alias roots only) and every op scratch; returns the count or -1. */
static int32_t collect(ek_runtime *rt, pbuf *bufs) {
  const int32_t T = rt->ctx.num_tensors, N = rt->num_ops;
  int32_t n = 0;
  compute_lifetimes(rt);
  alias_reshapes(rt);
  for (int32_t t = 0; t < T; ++t) {
    const ek_plan_entry *e = &rt->tensor_plan[t];
    if (rt->ctx.tensors[t].is_constant || e->first_op == UNUSED_OP || e->alias_of >= 0) continue;
    const int64_t padded = ((int64_t)e->bytes + (EK_ARENA_ALIGN - 1)) & ~(int64_t)(EK_ARENA_ALIGN - 1);
    if (padded > INT32_MAX) {
      ek_fail(&rt->ctx, (const ek_op *)0, EK_ERR_MEMORY, "a tensor is too large for the arena");
      return -1;
    }
    if (padded == 0) { rt->tensor_plan[t].offset = 0; continue; } /* empty: needs no memory */
    bufs[n].id = t;
    bufs[n].size = (int32_t)padded;
    bufs[n].first = e->first_op;
    bufs[n].last = e->last_op;
    ++n;
  }
  for (int32_t i = 0; i < N; ++i) {
    const int64_t padded = ((int64_t)rt->scratch_plan[i].bytes + (EK_ARENA_ALIGN - 1)) & ~(int64_t)(EK_ARENA_ALIGN - 1);
    if (padded > INT32_MAX) {
      ek_fail(&rt->ctx, &rt->ops[i], EK_ERR_MEMORY, "operator scratch too large for the arena");
      return -1;
    }
    if (padded == 0) continue;
    bufs[n].id = T + i;
    bufs[n].size = (int32_t)padded;
    bufs[n].first = i;
    bufs[n].last = i;
    ++n;
  }
  return n;
}

/* Tries the order x fit combinations and writes the best offsets into the plan. */
/* Overlapped plans only (host): local search from the best combination's order, swapping two buffers at a time
   and keeping swaps that do not grow the arena (a deterministic LCG picks them). The orders above cannot see that
   an output should be placed snugly below its dying input while a third buffer is alive beside both. */
#define LOCAL_SEARCH_SMALL 128   /* up to this many buffers: LOCAL_SEARCH_STEPS_SMALL swaps */
#define LOCAL_SEARCH_STEPS_SMALL 3000
#define LOCAL_SEARCH_LARGE 512   /* up to this many: LOCAL_SEARCH_STEPS_LARGE; above, none */
#define LOCAL_SEARCH_STEPS_LARGE 300

static int64_t local_search(pbuf *bufs, int32_t n, int32_t *cur, int fit, int32_t *placed, int64_t best,
                            const ppair *pairs, int32_t npairs, pbounds *iv) {
  const int32_t steps = n <= LOCAL_SEARCH_SMALL ? LOCAL_SEARCH_STEPS_SMALL : n <= LOCAL_SEARCH_LARGE ? LOCAL_SEARCH_STEPS_LARGE : 0;
  uint32_t seed = 0x9E3779B9u;
  int64_t current = best;
  for (int32_t step = 0; step < steps && n >= 2; ++step) {
    seed = seed * 1664525u + 1013904223u;
    const int32_t i = (int32_t)((seed >> 8) % (uint32_t)n);
    seed = seed * 1664525u + 1013904223u;
    const int32_t j = (int32_t)((seed >> 8) % (uint32_t)n);
    if (i == j) continue;
    int32_t tmp = cur[i];
    cur[i] = cur[j];
    cur[j] = tmp;
    const int64_t total = pack(bufs, cur, n, fit, placed, current + 1, pairs, npairs, iv);
    if (total <= current) {
      current = total;
      if (total < best) {
        best = total;
        for (int32_t k = 0; k < n; ++k) bufs[k].best = bufs[k].offset;
      }
    } else {
      tmp = cur[i];
      cur[i] = cur[j];
      cur[j] = tmp;
    }
  }
  return best;
}

static ek_status place(ek_runtime *rt, pbuf *bufs, int32_t n, int32_t *order, int32_t *placed, const ppair *pairs,
                       int32_t npairs, pbounds *iv, int32_t *best_order) {
  const int32_t T = rt->ctx.num_tensors;
  const int all = n <= MAX_BUFFERS_ALL_STRATEGIES;
  const int64_t bound = all && npairs == 0 ? lower_bound(bufs, n) : 0;
  int64_t best = INT64_MAX;
  int best_fit = 0;
  for (int o = 0; o < (all ? NUM_ORDERS : 1) && best > bound; ++o) {
    for (int32_t k = 0; k < n; ++k) order[k] = k;
    sort_indices(order, n, bufs, orders[o]);
    for (int fit = 0; fit < NUM_FITS && best > bound; ++fit) {
      if (!all && fit == 1) continue;
      const int64_t total = pack(bufs, order, n, fit, placed, best, pairs, npairs, iv);
      if (total < best) {
        best = total;
        best_fit = fit;
        for (int32_t k = 0; k < n; ++k) bufs[k].best = bufs[k].offset;
        if (best_order)
          for (int32_t k = 0; k < n; ++k) best_order[k] = order[k];
      }
    }
  }
  if (best_order && npairs > 0 && n > 0 && best < INT64_MAX)
    best = local_search(bufs, n, best_order, best_fit, placed, best, pairs, npairs, iv);
  if (n == 0) best = 0;
  if (best > INT32_MAX) return ek_fail(&rt->ctx, (const ek_op *)0, EK_ERR_MEMORY, "arena would exceed 2 GiB");

  for (int32_t k = 0; k < n; ++k) {
    if (bufs[k].id < T) rt->tensor_plan[bufs[k].id].offset = bufs[k].best;
    else rt->scratch_plan[bufs[k].id - T].offset = bufs[k].best;
  }
  for (int32_t t = 0; t < T; ++t) {
    const int32_t root = rt->tensor_plan[t].alias_of;
    if (root >= 0) rt->tensor_plan[t].offset = rt->tensor_plan[root].offset;
  }
  rt->arena_required = (size_t)best;
  return EK_OK;
}

static int32_t num_buffers(const ek_runtime *rt) {
  int32_t cap = rt->num_ops; /* buffers: every activation tensor and every scratch at most */
  for (int32_t t = 0; t < rt->ctx.num_tensors; ++t) cap += !rt->ctx.tensors[t].is_constant;
  return cap;
}

ek_status ek_plan(ek_runtime *rt, void *work, size_t work_len) {
  const int32_t cap = num_buffers(rt);
  if (work_len < ek_plan_work_bytes(cap)) return ek_fail(&rt->ctx, (const ek_op *)0, EK_ERR_INTERNAL, "planner work memory too small");
  pbuf *bufs = (pbuf *)work;
  int32_t *order = (int32_t *)(void *)(bufs + cap);
  int32_t *placed = order + cap;
  const int32_t n = collect(rt, bufs);
  if (n < 0) return rt->ctx.status;
  return place(rt, bufs, n, order, placed, (const ppair *)0, 0, (pbounds *)0, (int32_t *)0);
}

/* ---- overlapped plan (host, after prepare) --------------------------------------------------------- */

/* Group limits tried (ops per row-streamed group; 0 = none): the smallest arena wins, ties to the earlier. */
static const int32_t group_limits[] = {0, 3, 4, 5, 6, EKS_MAX_OPS};
#define NUM_GROUP_LIMITS ((int32_t)(sizeof group_limits / sizeof group_limits[0]))

size_t ek_plan_overlapped_work_bytes(const ek_runtime *rt) {
  const size_t cap = (size_t)num_buffers(rt);
  return ek_plan_work_bytes((int32_t)cap) + 2u * cap * sizeof(pbounds) + cap * sizeof(int32_t) +
         (size_t)rt->num_ops * EK_MAX_OP_INPUTS * sizeof(ppair) + (size_t)rt->ctx.num_tensors * sizeof(int32_t) +
         2u * (size_t)rt->num_ops * sizeof(int32_t) + 16u;
}

static int32_t floor_align(int32_t v) {
  const int32_t a = EK_ARENA_ALIGN;
  return v >= 0 ? v - v % a : -(((-v) + a - 1) / a * a);
}

#ifndef EK_NO_STREAM_GROUPS
#if defined(__GNUC__)
extern int ek_dw_rows_fast(const ek_context *ctx, const ek_op *op) __attribute__((weak));
#endif

static int host_facts(const void *user, int32_t index, eks_tensor_facts *out) {
  const ek_runtime *rt = (const ek_runtime *)user;
  if (index < 0 || index >= rt->ctx.num_tensors) return 0;
  const ek_tensor *t = &rt->ctx.tensors[index];
  out->dims = t->dims;
  out->ndim = t->ndim;
  out->type = t->type;
  out->is_constant = t->is_constant;
  out->bytes = t->bytes;
  /* a constant's values as the prepared blob will reference them (in the model: ek_export_prepared's rule) */
  const uint8_t *d = (const uint8_t *)t->data;
  out->data = t->is_constant && d && d >= rt->model && d <= rt->model + rt->model_len ? (const void *)d : (const void *)0;
  return 1;
}

/* ops [s, s + n) as a group: 0 and its graph, needs and input X; -1 if they cannot stream (after collect()). */
static int group_at(const ek_runtime *rt, int32_t s, int32_t n, eks_graph *g, eks_needs *needs, int32_t *x) {
  int32_t opcodes[EKS_MAX_OPS], nin[EKS_MAX_OPS], outs[EKS_MAX_OPS];
  const int32_t *ins[EKS_MAX_OPS];
  const ek_op_params *params[EKS_MAX_OPS];
  if (n > EKS_MAX_OPS) return -1;
  for (int32_t k = 0; k < n; ++k) {
    const ek_op *op = &rt->ops[s + k];
    if (op->num_outputs != 1) return -1;
    /* a DEPTHWISE_CONV_2D whose row range would run TFLite's per-pixel loop (layers off the blocked paths; e.g.
       face_landmark's would take 3.1x the instructions, measured on QEMU) streams only with --optimize ram */
    if (op->opcode == EK_OP_DEPTHWISE_CONV_2D && rt->ctx.optimize != EK_OPTIMIZE_RAM &&
        !(ek_dw_rows_fast && ek_dw_rows_fast(&rt->ctx, op)))
      return -1;
    opcodes[k] = op->opcode;
    nin[k] = op->num_inputs;
    ins[k] = op->inputs;
    outs[k] = op->outputs[0];
    params[k] = &op->params;
  }
  if (eks_build(g, n, opcodes, ins, nin, outs, params, host_facts, rt, x) != 0) return -1;
  const ek_plan_entry *tp = rt->tensor_plan;
  for (int32_t k = 0; k + 1 < n; ++k) { /* intermediates: read only inside the group, not aliased, not graph outputs */
    const int32_t t = outs[k];
    if (tp[t].alias_of >= 0 || tp[t].last_op > s + n - 1 || tp[t].last_op >= rt->num_ops) return -1;
    for (int32_t u = 0; u < rt->ctx.num_tensors; ++u)
      if (tp[u].alias_of == t) return -1;
  }
  return eks_simulate(g, needs);
}
#else /* built without row-streamed groups: nothing streams */
static int group_at(const ek_runtime *rt, int32_t s, int32_t n, eks_graph *g, eks_needs *needs, int32_t *x) {
  (void)rt, (void)s, (void)n, (void)g, (void)needs, (void)x;
  return -1;
}
#endif

/* Chooses groups of at most `limit` ops, greedily longest first from the start; fills the stream plan; returns the
   number of groups. */
static int32_t choose_groups(ek_runtime *rt, int32_t limit, int32_t *group, int32_t *info) {
  const int32_t N = rt->num_ops;
  int32_t count = 0;
  for (int32_t i = 0; i < N; ++i) group[i] = info[i] = 0;
  if (limit < 2 || rt->ctx.optimize == EK_OPTIMIZE_SPEED) return 0;
  for (int32_t i = 0; i + 1 < N;) {
    int32_t taken = 0;
    for (int32_t n = (N - i < limit ? N - i : limit); n >= 2 && !taken; --n) {
      eks_graph g;
      eks_needs needs;
      int32_t x = -1;
      if (group_at(rt, i, n, &g, &needs, &x) != 0) continue;
      int32_t kernel_scratch = 0;
      for (int32_t k = 0; k < n; ++k)
        if (rt->scratch_plan[i + k].bytes > kernel_scratch) kernel_scratch = rt->scratch_plan[i + k].bytes;
      group[i] = n - 1;
      info[i] = needs.window_bytes + ((kernel_scratch + (EK_ARENA_ALIGN - 1)) & ~(EK_ARENA_ALIGN - 1));
      for (int32_t k = 1; k < n; ++k) {
        group[i + k] = -1;
        info[i + k] = needs.window_rows[k]; /* rows of the window of op k-1's output */
      }
      taken = n;
    }
    if (taken) ++count;
    i += taken ? taken : 1;
  }
  return count;
}

static int32_t root_of(const ek_runtime *rt, int32_t t) {
  return rt->tensor_plan[t].alias_of >= 0 ? rt->tensor_plan[t].alias_of : t;
}

/* Buffers, pairs and placement for one choice of groups (group[] all 0: none). Returns the status; the plan is
   in rt->tensor_plan / scratch_plan and rt->arena_required. */
static ek_status plan_with_groups(ek_runtime *rt, pbuf *bufs, int32_t *order, int32_t *placed, pbounds *iv, ppair *pairs,
                                  int32_t *buf_of, int32_t *best_order, const int32_t *group, const int32_t *info,
                                  ek_overlap_info *out_info, int32_t max_info) {
  const int32_t T = rt->ctx.num_tensors, N = rt->num_ops;
  int32_t n = collect(rt, bufs);
  if (n < 0) return rt->ctx.status;
  for (int32_t t = 0; t < T; ++t) buf_of[t] = -1;
  for (int32_t k = 0; k < n; ++k)
    if (bufs[k].id < T) buf_of[bufs[k].id] = k;
  int32_t npairs = 0;
  /* groups: intermediates leave the arena, X lives and Z exists through the whole group, the first op's scratch
     becomes the group's region (windows + kernel scratch) and the others' scratch goes */
  for (int32_t s = 0; s < N; ++s) {
    if (group[s] <= 0) continue;
    const int32_t e = s + group[s];
    eks_graph g;
    eks_needs needs;
    int32_t x = -1;
    if (group_at(rt, s, e - s + 1, &g, &needs, &x) != 0) return ek_fail(&rt->ctx, &rt->ops[s], EK_ERR_INTERNAL, "row-streamed group changed");
    for (int32_t k = s; k < e; ++k) {
      const int32_t b = buf_of[rt->ops[k].outputs[0]];
      if (b >= 0) bufs[b].size = 0;
    }
    for (int32_t k = s; k <= e; ++k)
      for (int32_t j = 0; j < n; ++j)
        if (bufs[j].id == T + k) bufs[j].size = 0;
    /* the region takes the first intermediate's buffer slot (never referenced by a pair: it dies in the group) */
    const int32_t slot = buf_of[rt->ops[s].outputs[0]];
    if (slot < 0) return ek_fail(&rt->ctx, &rt->ops[s], EK_ERR_INTERNAL, "row-streamed group without intermediate");
    bufs[slot].id = T + s;
    bufs[slot].size = (info[s] + (EK_ARENA_ALIGN - 1)) & ~(EK_ARENA_ALIGN - 1);
    bufs[slot].first = s;
    bufs[slot].last = e;
    const int32_t xr = root_of(rt, x), z = root_of(rt, rt->ops[e].outputs[0]);
    const int dies = rt->tensor_plan[xr].last_op <= e; /* before extending */
    if (buf_of[xr] >= 0 && bufs[buf_of[xr]].last < e) bufs[buf_of[xr]].last = e;
    if (buf_of[z] >= 0 && bufs[buf_of[z]].first > s) bufs[buf_of[z]].first = s;
    /* Z over X as far as the schedule has read X (and elementwise in place when the last op, an ADD or PRELU, reads X) */
    const eks_node *last = &g.node[g.nops - 1];
    const int last_reads_x = last->in[0] == 0 || (last->nin > 1 && last->in[1] == 0);
    if (dies && buf_of[xr] >= 0 && buf_of[z] >= 0 && (!last_reads_x || last->opcode == EK_OP_ADD || last->opcode == EK_OP_PRELU)) {
      int64_t d = needs.d_max;
      if (last_reads_x && d > 0) d = 0;
      if (d > INT32_MAX / 2) d = INT32_MAX / 2;
      if (d > -(int64_t)INT32_MAX / 2) {
        pairs[npairs].out = buf_of[z];
        pairs[npairs].in = buf_of[xr];
        pairs[npairs].exact = 0;
        pairs[npairs].d_max = floor_align((int32_t)d);
        if (out_info && npairs < max_info) {
          out_info[npairs].op = e;
          out_info[npairs].input = -1 - s; /* a group's output over its input: -1 - first op */
          out_info[npairs].d_max = pairs[npairs].d_max;
          out_info[npairs].exact = 0;
        }
        ++npairs;
      }
    }
  }
  for (int32_t i = 0; i < N; ++i) {
    const ek_op *op = &rt->ops[i];
    const ek_kernel *kern = rt->kernels[i];
    if (group[i] != 0) continue;
    if (!kern->overlap || op->num_outputs != 1 || op->outputs[0] < 0 || is_reshape_like(op->opcode)) continue;
    const int32_t out_root = root_of(rt, op->outputs[0]);
    if (buf_of[out_root] < 0) continue;
    for (int32_t k = 0; k < op->num_inputs; ++k) {
      const int32_t t = op->inputs[k];
      if (t < 0 || rt->ctx.tensors[t].is_constant) continue;
      const int32_t root = root_of(rt, t);
      if (root == out_root || buf_of[root] < 0 || rt->tensor_plan[root].last_op != i) continue; /* must die here */
      int32_t d_max = 0;
      const int kind = kern->overlap(&rt->ctx, op, k, &d_max);
      if (kind == 0) continue;
      pairs[npairs].out = buf_of[out_root];
      pairs[npairs].in = buf_of[root];
      pairs[npairs].exact = kind == EK_OVERLAP_EXACT;
      pairs[npairs].d_max = kind == EK_OVERLAP_EXACT ? 0 : floor_align(d_max);
      if (out_info && npairs < max_info) {
        out_info[npairs].op = i;
        out_info[npairs].input = k;
        out_info[npairs].d_max = pairs[npairs].d_max;
        out_info[npairs].exact = pairs[npairs].exact;
      }
      ++npairs;
    }
  }
  if (out_info && npairs < max_info) out_info[npairs].op = -1;
  /* drop the buffers that left the arena, keeping buf indices of pairs valid */
  int32_t m = 0;
  for (int32_t k = 0; k < n; ++k) {
    if (bufs[k].size == 0) continue;
    for (int32_t q = 0; q < npairs; ++q) {
      if (pairs[q].out == k) pairs[q].out = m;
      if (pairs[q].in == k) pairs[q].in = m;
    }
    bufs[m++] = bufs[k];
  }
  return place(rt, bufs, m, order, placed, pairs, npairs, iv, best_order);
}

ek_status ek_plan_overlapped(ek_runtime *rt, void *work, size_t work_len, ek_overlap_info *info, int32_t max_info) {
  if (!rt || !rt->ready || !rt->tensor_plan || !rt->scratch_plan)
    return EK_ERR_INTERNAL;
  if (work_len < ek_plan_overlapped_work_bytes(rt))
    return ek_fail(&rt->ctx, (const ek_op *)0, EK_ERR_INTERNAL, "planner work memory too small");
  const int32_t cap = num_buffers(rt), T = rt->ctx.num_tensors, N = rt->num_ops;
  pbuf *bufs = (pbuf *)work;
  int32_t *order = (int32_t *)(void *)(bufs + cap);
  int32_t *placed = order + cap;
  pbounds *iv = (pbounds *)(void *)(((uintptr_t)(placed + cap) + 7u) & ~(uintptr_t)7u);
  ppair *pairs = (ppair *)(void *)(iv + 2 * cap);
  int32_t *buf_of = (int32_t *)(void *)(pairs + (size_t)N * EK_MAX_OP_INPUTS);
  int32_t *best_order = buf_of + T;
  int32_t *group = best_order + cap, *ginfo = group + N; /* the stream plan (kept for ek_export_prepared) */
  const size_t before = rt->arena_required;
  rt->stream_group = (int32_t *)0;
  rt->stream_info = (int32_t *)0;
  rt->num_stream_groups = 0;
  /* the smallest arena over the group limits (0: no groups) */
  size_t best = (size_t)-1;
  int32_t best_limit = 0, last_limit = -1;
  for (int32_t l = 0; l < NUM_GROUP_LIMITS; ++l) {
    const int32_t count = choose_groups(rt, group_limits[l], group, ginfo);
    if (l > 0 && count == 0) continue;
    const ek_status st = plan_with_groups(rt, bufs, order, placed, iv, pairs, buf_of, best_order, group, ginfo, info, max_info);
    if (st != EK_OK) return st;
    last_limit = group_limits[l];
    if (rt->arena_required < best) {
      best = rt->arena_required;
      best_limit = group_limits[l];
    }
  }
  int32_t count = choose_groups(rt, best_limit, group, ginfo);
  ek_status st = EK_OK;
  if (last_limit != best_limit)
    st = plan_with_groups(rt, bufs, order, placed, iv, pairs, buf_of, best_order, group, ginfo, info, max_info);
  /* balanced: a group whose removal keeps the arena only costs instructions (a kernel call per row, the windows'
     memmoves, a depthwise's window rows expanded once per output row): drop such groups, in graph order */
  if (st == EK_OK && count > 0 && rt->ctx.optimize == EK_OPTIMIZE_BALANCED) {
    const size_t kept = rt->arena_required;
    int replan = 0;
    for (int32_t s = 0; s < N && st == EK_OK; ++s) {
      if (group[s] <= 0) continue;
      const int32_t n = group[s] + 1;
      int32_t saved_group[EKS_MAX_OPS], saved_info[EKS_MAX_OPS];
      for (int32_t k = 0; k < n; ++k) {
        saved_group[k] = group[s + k];
        saved_info[k] = ginfo[s + k];
        group[s + k] = ginfo[s + k] = 0;
      }
      st = plan_with_groups(rt, bufs, order, placed, iv, pairs, buf_of, best_order, group, ginfo, info, max_info);
      replan = st == EK_OK && rt->arena_required > kept;
      if (replan) { /* the group pays: keep it */
        for (int32_t k = 0; k < n; ++k) {
          group[s + k] = saved_group[k];
          ginfo[s + k] = saved_info[k];
        }
      } else {
        --count;
      }
      s += n - 1;
    }
    if (st == EK_OK && replan) /* the plan of the groups kept */
      st = plan_with_groups(rt, bufs, order, placed, iv, pairs, buf_of, best_order, group, ginfo, info, max_info);
  }
  if (st == EK_OK && rt->arena_required > before) { /* never worse than the plain plan */
    for (int32_t i = 0; i < N; ++i) group[i] = ginfo[i] = 0;
    const int32_t n = collect(rt, bufs);
    if (n < 0) return rt->ctx.status;
    st = place(rt, bufs, n, order, placed, pairs, 0, iv, (int32_t *)0);
    if (info && max_info > 0) info[0].op = -1;
  } else if (count > 0) {
    rt->stream_group = group;
    rt->stream_info = ginfo;
    rt->num_stream_groups = count;
  }
  if (st != EK_OK) return st;
  /* rebind: activations and scratch at the new offsets (prepare's results do not depend on them); a group's
     intermediates have no arena memory (their rows live in the group's windows) */
  for (int32_t t = 0; t < T; ++t) {
    ek_tensor *x = &rt->ctx.tensors[t];
    if (!x->is_constant && rt->tensor_plan[t].offset >= 0) x->data = rt->arena + rt->tensor_plan[t].offset;
  }
  for (int32_t i = 0; i < N; ++i) {
    const int32_t bytes = group[i] > 0 ? ginfo[i] : group[i] < 0 ? 0 : rt->scratch_plan[i].bytes;
    rt->scratch_plan[i].bytes = bytes; /* a group's region on its first op (what the plan reports) */
    if (group[i] < 0) rt->scratch_plan[i].offset = -1;
    rt->ops[i].scratch = bytes > 0 ? (void *)(rt->arena + rt->scratch_plan[i].offset) : (void *)0;
    if (group[i] < 0 && i + 1 < N && group[i + 1] < 0) rt->ctx.tensors[rt->ops[i].outputs[0]].data = (void *)0;
    if (group[i] > 0) rt->ctx.tensors[rt->ops[i].outputs[0]].data = (void *)0;
  }
  rt->ctx.call_once_done = 0; /* variables moved: start from their initial values */
  ek_reset_state_tensors(rt);
  return EK_OK;
}
