/* edgekit runtime: row-streamed op groups (fused tiling, as MCUNetV2's patch-based inference does by patches).
 *
 * A group is a run of consecutive ops (CONV_2D, DEPTHWISE_CONV_2D, MAX_POOL_2D, AVERAGE_POOL_2D, PAD / PADV2 of height,
 * width and channels, same-shape ADD, per-channel PRELU; NHWC int8, batch 1) fed by one activation X from outside and
 * producing one activation Z; every tensor between them is used only inside the group. The ops may form branches
 * (X -> {main branch, skip branch} -> ADD -> Z, in any graph order of the branch ops): each op's activation inputs
 * are X or outputs of earlier ops of the group. Row dependencies: a (depthwise) convolution or a pooling reads
 * input rows r*stride - pad .. + (kh-1)*dilation for output row r (pooling: its filter, dilation 1), PAD's output
 * row r is input row r - top padding (rows inside the top or bottom padding read none: PAD's paddings are read
 * from its constant input), ADD and PRELU row r read row r. Instead of
 * running op after op on whole tensors, the group produces Z row by row: for each Z row, a backward pass finds which
 * rows of every intermediate tensor are needed, and a forward pass computes just those rows, op after op. An
 * intermediate tensor therefore never exists whole: it lives in a window of a few rows (e.g. 3 rows for a 3x3
 * convolution's input), slid down by a memmove when new rows are produced. Z is written row by row and may be
 * placed over X, as far as the schedule has finished reading X's rows (d_max).
 *
 * The same schedule code runs in three places: the host planner simulates it (window sizes, d_max), the device
 * simulates it again when it accepts a prepared model (every window access is then bounded by construction), and
 * the prepared runner executes it. Results are bit-exact with running the ops one by one: every output row is
 * computed by the same kernel code from the same input values.
 */
#ifndef EK_NO_STREAM_GROUPS /* a firmware whose prepared model has no groups leaves them out of flash */
#include <string.h>

#include "ek_internal.h"
#include "ek_stream_group.h"

#define EKS_ALIGN 16

static int64_t align16(int64_t v) { return (v + (EKS_ALIGN - 1)) & ~(int64_t)(EKS_ALIGN - 1); }

int64_t eks_window_bytes(const eks_graph *g, const int32_t *window_rows) {
  int64_t bytes = 0;
  for (int32_t t = 1; t < g->nops; ++t) bytes += align16((int64_t)window_rows[t] * g->row_bytes[t]);
  return bytes;
}

/* Input rows [lo, hi] (clamped to the input) that op n reads for its output rows [r0, r1]; hi < lo: none. */
static void input_rows(const eks_node *n, int32_t in_h, int32_t r0, int32_t r1, int32_t *lo, int32_t *hi) {
  /* every node: rows r*stride - pad + [0, (kh-1)*dilation] (elementwise ops: stride 1, pad 0, kh 1; PAD: its top
     padding as pad, so rows inside the top or bottom padding read none) */
  const int32_t a = r0 * n->stride - n->pad, b = r1 * n->stride - n->pad + (n->kh - 1) * n->dilation;
  *lo = a < 0 ? 0 : a;
  *hi = b > in_h - 1 ? in_h - 1 : b;
  if (*lo > *hi) *hi = *lo - 1; /* none (also when the range lies below the input's last row) */
}

/* The activation inputs of an op a group can stream: 1, 2 (ADD), or 0 (not streamable). */
static int32_t activation_inputs(int32_t opcode) {
  switch (opcode) {
    case EK_OP_CONV_2D: case EK_OP_DEPTHWISE_CONV_2D: case EK_OP_PRELU: case EK_OP_MAX_POOL_2D:
    case EK_OP_AVERAGE_POOL_2D: case EK_OP_PAD: case EK_OP_PADV2:
      return 1;
    case EK_OP_ADD:
      return 2;
    default:
      return 0;
  }
}

/* PAD's top padding from its constant [4, 2] int32 / int64 paddings (the rows it shifts by), or -1 if it pads the
   batch or its paddings are not such a constant. */
static int32_t pad_top(const eks_tensor_facts *pads) {
  if (!pads->is_constant || !pads->data || pads->ndim != 2 || pads->dims[0] != 4 || pads->dims[1] != 2) return -1;
  const int32_t elem = pads->type == EK_INT32 ? 4 : pads->type == EK_INT64 ? 8 : 0;
  if (elem == 0 || pads->bytes != 8 * elem) return -1;
  int64_t v[4];
  for (int32_t i = 0; i < 4; ++i) { /* batch before/after, height before/after (little-endian, low word first) */
    int32_t w32;
    int64_t w64;
    if (elem == 4) {
      memcpy(&w32, (const uint8_t *)pads->data + 4 * i, 4);
      v[i] = w32;
    } else {
      memcpy(&w64, (const uint8_t *)pads->data + 8 * i, 8);
      v[i] = w64;
    }
  }
  if (v[0] != 0 || v[1] != 0 || v[2] < 0 || v[2] > INT32_MAX / 2 || v[3] < 0) return -1;
  return (int32_t)v[2];
}

/* Lowest row of tensor t that a consumer in the group will still read (its next output row's first input row),
   `none` when no consumer will read it again. */
static int32_t lowest_pending(const eks_graph *g, const int32_t *next, int32_t t, int32_t none) {
  int32_t low = none;
  for (int32_t j = 0; j < g->nops; ++j) {
    const eks_node *n = &g->node[j];
    if (next[j + 1] >= g->rows[j + 1]) continue; /* finished */
    for (int32_t i = 0; i < n->nin; ++i) {
      if (n->in[i] != t) continue;
      int32_t lo, hi;
      input_rows(n, g->rows[t], next[j + 1], next[j + 1], &lo, &hi);
      if (hi >= lo && lo < low) low = lo;
    }
  }
  return low;
}

int eks_build(eks_graph *g, int32_t nops, const int32_t *opcodes, const int32_t *const *inputs, const int32_t *num_inputs,
              const int32_t *outputs, const ek_op_params *const *params, eks_tensor_fn tensor, const void *user,
              int32_t *x_tensor) {
  if (nops < 2 || nops > EKS_MAX_OPS) return -1;
  memset(g, 0, sizeof *g);
  g->nops = nops;
  int32_t x = -1;
  eks_tensor_facts f;
  for (int32_t k = 0; k < nops; ++k) {
    eks_node *n = &g->node[k];
    n->opcode = opcodes[k];
    const int32_t nact = activation_inputs(n->opcode);
    if (nact == 0 || num_inputs[k] < nact) return -1;
    if (!tensor(user, outputs[k], &f) || f.ndim != 4 || f.dims[0] != 1 || f.type != EK_INT8 || f.is_constant)
      return -1;
    const int32_t out_h = f.dims[1], out_w = f.dims[2], out_c = f.dims[3];
    g->rows[k + 1] = out_h;
    g->row_bytes[k + 1] = out_w * out_c;
    if (out_h < 1 || (int64_t)out_w * out_c != (int64_t)f.bytes / out_h) return -1;
    n->nin = nact;
    for (int32_t i = 0; i < nact; ++i) {
      const int32_t t = inputs[k][i];
      int32_t local = -1;
      for (int32_t j = 0; j < k; ++j)
        if (outputs[j] == t) local = j + 1;
      if (local < 0) { /* from outside the group: must be the one input X */
        if (t < 0 || (x >= 0 && t != x)) return -1;
        if (!tensor(user, t, &f) || f.ndim != 4 || f.dims[0] != 1 || f.type != EK_INT8 || f.is_constant) return -1;
        if (f.dims[1] < 1 || (int64_t)f.dims[2] * f.dims[3] != (int64_t)f.bytes / f.dims[1]) return -1;
        x = t;
        g->rows[0] = f.dims[1];
        g->row_bytes[0] = f.dims[2] * f.dims[3];
        local = 0;
      }
      n->in[i] = local;
    }
    if (n->opcode == EK_OP_ADD) { /* same shape, no broadcasting */
      eks_tensor_facts a, b, o;
      if (!tensor(user, inputs[k][0], &a) || !tensor(user, inputs[k][1], &b) || !tensor(user, outputs[k], &o)) return -1;
      for (int32_t d = 0; d < 4; ++d)
        if (a.dims[d] != o.dims[d] || b.dims[d] != o.dims[d]) return -1;
      n->stride = 1;
      n->kh = 1;
      n->dilation = 1;
    } else if (n->opcode == EK_OP_PRELU) { /* same shape, alpha a constant per channel ([C], [1, 1, C], ... or one) */
      eks_tensor_facts in, a, o;
      if (!tensor(user, inputs[k][0], &in) || !tensor(user, inputs[k][1], &a) || !tensor(user, outputs[k], &o) ||
          in.ndim != 4 || !a.is_constant || a.ndim < 1 || a.ndim > 4)
        return -1;
      for (int32_t d = 0; d < 4; ++d)
        if (in.dims[d] != o.dims[d]) return -1;
      for (int32_t d = 0; d + 1 < a.ndim; ++d)
        if (a.dims[d] != 1) return -1;
      if (a.dims[a.ndim - 1] != 1 && a.dims[a.ndim - 1] != o.dims[3]) return -1;
      n->stride = 1;
      n->kh = 1;
      n->dilation = 1;
    } else if (n->opcode == EK_OP_PAD || n->opcode == EK_OP_PADV2) { /* output row r is input row r - top */
      eks_tensor_facts in, pads;
      if (!tensor(user, inputs[k][0], &in) || !tensor(user, inputs[k][1], &pads) || in.ndim != 4) return -1;
      const int32_t top = pad_top(&pads);
      if (top < 0 || (int64_t)in.dims[1] + top > out_h) return -1;
      n->stride = 1;
      n->kh = 1;
      n->dilation = 1;
      n->pad = top;
    } else { /* CONV_2D, DEPTHWISE_CONV_2D: filter [., kh, kw, .]; pooling: its filter_h */
      const ek_op_params *p = params[k];
      eks_tensor_facts in, w;
      const int pool = n->opcode == EK_OP_MAX_POOL_2D || n->opcode == EK_OP_AVERAGE_POOL_2D;
      if (!tensor(user, inputs[k][0], &in) || in.ndim != 4) return -1;
      if (!pool && (!tensor(user, inputs[k][1], &w) || w.ndim != 4 || !w.is_constant)) return -1;
      n->stride = p->stride_h;
      n->dilation = pool ? 1 : p->dilation_h;
      n->kh = pool ? p->filter_h : w.dims[1];
      if (n->stride < 1 || n->dilation < 1 || n->kh < 1) return -1;
      /* TFLite's ComputePaddingHeightWidth (both paddings: VALID gives 0) */
      const int32_t eff = (n->kh - 1) * n->dilation + 1;
      const int32_t total = (out_h - 1) * n->stride + eff - in.dims[1];
      n->pad = total > 0 ? total / 2 : 0;
    }
  }
  if (x < 0) return -1;
  /* every intermediate output must be read inside the group (else it would not be a tensor of its own), and its rows
     keep the arena's 16-byte alignment inside a window (kernels rely on aligned tensor starts) */
  for (int32_t t = 1; t < nops; ++t) {
    if (g->row_bytes[t] % EKS_ALIGN != 0) return -1;
    int used = 0;
    for (int32_t j = t; j < nops; ++j)
      for (int32_t i = 0; i < g->node[j].nin; ++i) used |= g->node[j].in[i] == t;
    if (!used) return -1;
  }
  *x_tensor = x;
  return 0;
}

/* The schedule. With region == NULL it only simulates (filling needs); otherwise it slides the windows and runs. */
static ek_status schedule(const eks_graph *g, eks_needs *needs, uint8_t *region, eks_run_fn run_op, void *user) {
  const int32_t N = g->nops, Z = N;
  int32_t next[EKS_MAX_OPS + 1], base[EKS_MAX_OPS + 1], need[EKS_MAX_OPS + 1];
  uint8_t *win[EKS_MAX_OPS + 1];
  const int simulate = region == (uint8_t *)0;
  int32_t at = 0;
  for (int32_t t = 0; t <= N; ++t) {
    next[t] = 0;
    base[t] = 0;
    win[t] = (uint8_t *)0;
    if (t >= 1 && t < N && !simulate) {
      win[t] = region + at;
      at += (int32_t)align16((int64_t)needs->window_rows[t] * g->row_bytes[t]); /* eks_window_bytes' layout */
    }
  }
  next[0] = g->rows[0]; /* X is whole */
  for (int32_t r = 0; r < g->rows[Z]; ++r) {
    for (int32_t t = 0; t <= N; ++t) need[t] = -1;
    need[Z] = r;
    for (int32_t k = N - 1; k >= 0; --k) { /* backward: rows each tensor must have for this Z row */
      const eks_node *n = &g->node[k];
      if (need[k + 1] < next[k + 1]) continue;
      for (int32_t i = 0; i < n->nin; ++i) {
        int32_t lo, hi;
        input_rows(n, g->rows[n->in[i]], next[k + 1], need[k + 1], &lo, &hi);
        if (hi >= lo && hi > need[n->in[i]]) need[n->in[i]] = hi;
      }
    }
    for (int32_t k = 0; k < N; ++k) { /* forward: produce them */
      const int32_t out = k + 1;
      if (need[out] < next[out]) continue;
      const int32_t a = next[out], b = need[out];
      if (out < Z) {
        int32_t keep = lowest_pending(g, next, out, a);
        if (keep > a) keep = a;
        if (simulate) {
          if (b - keep + 1 > needs->window_rows[out]) needs->window_rows[out] = b - keep + 1;
        } else {
          const int32_t R = needs->window_rows[out], row = g->row_bytes[out];
          const int32_t nb = b - R + 1 > base[out] ? b - R + 1 : base[out];
          if (nb > keep || a < nb || b - nb >= R) return EK_ERR_INTERNAL; /* cannot happen after eks_simulate */
          if (nb > base[out]) {
            const int32_t shift = nb - base[out], valid = a - nb; /* rows [nb, a) move to the window's start */
            if (valid > 0) memmove(win[out], win[out] + (size_t)shift * row, (size_t)valid * row);
            base[out] = nb;
          }
        }
      }
      if (!simulate) {
        const ek_status st = run_op(user, k, a, b + 1, win, base);
        if (st != EK_OK) return st;
      }
      next[out] = b + 1;
      if (out == Z) { /* Z rows [0, b] are written: X's rows still to be read must lie above them */
        const int32_t low = lowest_pending(g, next, 0, g->rows[0]);
        const int64_t d = (int64_t)low * g->row_bytes[0] - (int64_t)(b + 1) * g->row_bytes[Z];
        if (d < needs->d_max) needs->d_max = d;
      }
    }
    if (next[Z] <= r) return EK_ERR_INTERNAL; /* no progress: not streamable */
  }
  return EK_OK;
}

int eks_simulate(const eks_graph *g, eks_needs *needs) {
  memset(needs, 0, sizeof *needs);
  needs->d_max = INT64_MAX;
  if (schedule(g, needs, (uint8_t *)0, (eks_run_fn)0, (void *)0) != EK_OK) return -1;
  for (int32_t t = 1; t < g->nops; ++t)
    if (needs->window_rows[t] < 1) needs->window_rows[t] = 1;
  const int64_t bytes = eks_window_bytes(g, needs->window_rows);
  if (bytes > INT32_MAX / 2) return -1;
  needs->window_bytes = (int32_t)bytes;
  return 0;
}

ek_status eks_execute(const eks_graph *g, const eks_needs *needs, uint8_t *region, eks_run_fn run_op, void *user) {
  eks_needs copy = *needs; /* schedule() lowers d_max while running: keep the caller's */
  return schedule(g, &copy, region, run_op, user);
}
#endif /* EK_NO_STREAM_GROUPS */
