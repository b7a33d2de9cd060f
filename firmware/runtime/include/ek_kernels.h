/* edgekit int8 runtime: the contract between the interpreter core and the kernels.
 *
 * The core (ek_reader.c / ek_plan.c / ek_interp.c) parses and validates the
 * flatbuffer, fills one ek_tensor per tensor and one ek_op per operator, plans
 * the arena, and then calls, per operator, kernel->prepare once and
 * kernel->eval per inference.  Kernels never touch the flatbuffer.
 *
 * Safety rule for every kernel: prepare() must check every type, rank, shape
 * and parameter that eval() relies on, so that eval() cannot read or write
 * outside the tensors' bytes whatever the (possibly corrupt) model says.
 * A failing check returns ek_fail(ctx, op, EK_ERR_*, "static message").
 *
 * Arithmetic rule: bit-exact with TFLite's reference kernels
 * (LiteRT OpResolverType.BUILTIN_REF) for int8.
 */
#ifndef EK_KERNELS_H
#define EK_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EK_MAX_DIMS 6
#define EK_MAX_OP_INPUTS 24  /* UNIDIRECTIONAL_SEQUENCE_LSTM (24 inputs) is the widest op we support */
#define EK_MAX_OP_OUTPUTS 16  /* SPLIT / SPLIT_V / UNPACK (read in place from the model: no RAM per output); ASSIGN_VARIABLE and CALL_ONCE have none */

/* Tensor element types: the TFLite schema's TensorType numbers. */
enum {
  EK_FLOAT32 = 0, EK_FLOAT16 = 1, EK_INT32 = 2, EK_UINT8 = 3, EK_INT64 = 4,
  EK_BOOL = 6, EK_INT16 = 7, EK_INT8 = 9,
  EK_RESOURCE = 13 /* a resource variable's handle (VAR_HANDLE output): its bytes are the variable's memory */
};

/* Builtin operator codes we implement: the TFLite schema's BuiltinOperator numbers. */
enum {
  EK_OP_ADD = 0, EK_OP_AVERAGE_POOL_2D = 1, EK_OP_CONCATENATION = 2, EK_OP_CONV_2D = 3,
  EK_OP_DEPTHWISE_CONV_2D = 4, EK_OP_DEQUANTIZE = 6, EK_OP_FULLY_CONNECTED = 9,
  EK_OP_LOGISTIC = 14, EK_OP_MAX_POOL_2D = 17, EK_OP_MUL = 18, EK_OP_RESHAPE = 22,
  EK_OP_SOFTMAX = 25, EK_OP_PAD = 34, EK_OP_TRANSPOSE = 39, EK_OP_MEAN = 40,
  EK_OP_QUANTIZE = 114, EK_OP_HARD_SWISH = 117,
  EK_OP_RELU = 19, /* unary activations (issue 25): relu.c, abs_neg.c, lut_math.c, prelu.c */
  EK_OP_RELU_N1_TO_1 = 20,
  EK_OP_RELU6 = 21,
  EK_OP_TANH = 28,
  EK_OP_EXP = 47,
  EK_OP_PRELU = 54,
  EK_OP_NEG = 59,
  EK_OP_LOG = 73,
  EK_OP_SQRT = 75,
  EK_OP_RSQRT = 76,
  EK_OP_LEAKY_RELU = 98,
  EK_OP_ABS = 101,
  EK_OP_GELU = 150,
  EK_OP_ELU = 111,
  EK_OP_SUB = 41,
  EK_OP_SQUARED_DIFFERENCE = 99,
  EK_OP_MAXIMUM = 55,
  EK_OP_MINIMUM = 57,
  EK_OP_EQUAL = 71,
  EK_OP_NOT_EQUAL = 72,
  EK_OP_LESS = 58,
  EK_OP_LESS_EQUAL = 63,
  EK_OP_GREATER = 61,
  EK_OP_GREATER_EQUAL = 62,
  EK_OP_LOGICAL_AND = 86,
  EK_OP_LOGICAL_OR = 84,
  EK_OP_SELECT = 64,
  EK_OP_SELECT_V2 = 123,
  EK_OP_SUM = 74,
  EK_OP_REDUCE_MAX = 82,
  EK_OP_REDUCE_MIN = 89,
  EK_OP_ARG_MAX = 56,
  EK_OP_ARG_MIN = 79,
  EK_OP_DIV = 42,
  EK_OP_L2_NORMALIZATION = 11,
  EK_OP_BATCH_MATMUL = 126,
  EK_OP_LOG_SOFTMAX = 50,
  EK_OP_SPLIT = 49,
  EK_OP_SPLIT_V = 102,
  EK_OP_UNPACK = 88,
  EK_OP_PACK = 83,
  EK_OP_STRIDED_SLICE = 45,
  EK_OP_SLICE = 65,
  EK_OP_SQUEEZE = 43,
  EK_OP_EXPAND_DIMS = 70,
  EK_OP_GATHER = 36,
  EK_OP_DEPTH_TO_SPACE = 5,
  EK_OP_SPACE_TO_DEPTH = 26,
  EK_OP_RESIZE_NEAREST_NEIGHBOR = 97,
  EK_OP_RESIZE_BILINEAR = 23,
  EK_OP_CAST = 53,
  EK_OP_FILL = 94,
  EK_OP_SHAPE = 77,
  EK_OP_ZEROS_LIKE = 93,
  EK_OP_TRANSPOSE_CONV = 67,
  EK_OP_SPACE_TO_BATCH_ND = 38,
  EK_OP_BATCH_TO_SPACE_ND = 37,
  EK_OP_BROADCAST_TO = 130,
  EK_OP_GATHER_ND = 107,
  EK_OP_PADV2 = 60,
  EK_OP_MIRROR_PAD = 100,
  EK_OP_UNIDIRECTIONAL_SEQUENCE_LSTM = 44,
  EK_OP_SVDF = 27, EK_OP_CALL_ONCE = 129, EK_OP_VAR_HANDLE = 142, EK_OP_READ_VARIABLE = 143, EK_OP_ASSIGN_VARIABLE = 144
};

/* Where RAM and speed trade (ek_init_opt): SPEED = the fastest variants; BALANCED = a kernel takes its small-scratch
   variant when the fast one's scratch would exceed the smaller of the op's input and output bytes; RAM = the smallest scratch everywhere. */
enum { EK_OPTIMIZE_SPEED = 0, EK_OPTIMIZE_BALANCED = 1, EK_OPTIMIZE_RAM = 2 };
#define EK_OPTIMIZE_FOR_MVE 0x100 /* or-ed into ek_init_opt's optimize: plan overlaps for a Helium device */
/* or-ed into ek_init_opt's optimize: the init prepares a model for ek_export_prepared, so per-op data will live in
   flash (kernels may then keep re-laid-out weights there, e.g. CONV_2D's expanded int16 weights on Cortex-M4) */
#define EK_OPTIMIZE_FOR_EXPORT 0x200
/* or-ed into ek_init_opt's optimize: the weights must stay int8 (no re-laid-out copies: FULLY_CONNECTED then dots the
   int8 weights, SXTB16 on the fly on Cortex-M4) */
#define EK_OPTIMIZE_INT8_WEIGHTS 0x400

enum { EK_OVERLAP_NONE = 0, EK_OVERLAP_UPTO = 1, EK_OVERLAP_EXACT = 2 };

/* Fused activations: the TFLite schema's ActivationFunctionType numbers. */
enum { EK_ACT_NONE = 0, EK_ACT_RELU = 1, EK_ACT_RELU_N1_TO_1 = 2, EK_ACT_RELU6 = 3, EK_ACT_TANH = 4, EK_ACT_SIGN_BIT = 5 };

/* Padding: the TFLite schema's Padding numbers. */
enum { EK_PAD_SAME = 0, EK_PAD_VALID = 1 };

typedef enum {
  EK_OK = 0,
  EK_ERR_MODEL = 1,       /* malformed / truncated / inconsistent flatbuffer */
  EK_ERR_UNSUPPORTED = 2, /* op, type or option we do not implement */
  EK_ERR_SHAPE = 3,       /* shapes inconsistent with the op */
  EK_ERR_TYPE = 4,        /* tensor types inconsistent with the op */
  EK_ERR_MEMORY = 5,      /* arena / state / scratch too small */
  EK_ERR_INTERNAL = 6
} ek_status;

/* Small fields are narrow (the runtime state holds one per tensor): read them as ints, never take their address. */
typedef struct ek_tensor {
  void *data;                 /* arena (activations) or model buffer (constants, read-only) */
  int32_t dims[EK_MAX_DIMS];
  int32_t bytes;              /* element count * element size, checked by the reader */
  float scale;                /* per-tensor scale (the first one if per-channel); 0 if none */
  int32_t zero_point;         /* per-tensor zero point (the first one if per-channel) */
  const float *scales;        /* all scales (num_scales of them), 4-byte aligned, or NULL */
  const int64_t *zero_points; /* all zero points (num_scales), 8-byte aligned, or NULL */
  int32_t num_scales;         /* 0: not quantized, 1: per-tensor, >1: per-channel */
  int8_t ndim;                /* 0..EK_MAX_DIMS */
  int8_t type;                /* EK_INT8, ... */
  int8_t quantized_dimension; /* in [0, ndim) when per-channel; 0 for scalars */
  uint8_t is_constant;        /* data lives in the model */
} ek_tensor;

/* Builtin options the supported ops use, decoded by the reader (absent options keep the schema defaults).
   Narrow fields (the runtime state holds one per op): the reader rejects a model whose 32-bit option does not
   fit in 16 bits; byte-sized schema fields (enums, bools) are stored as read. Read them as ints. */
typedef struct ek_op_params {
  float beta;                 /* SOFTMAX (0.0 when the options table is absent, as in TFLite) */
  int16_t stride_w, stride_h;
  int16_t dilation_w, dilation_h; /* default 1 */
  int16_t filter_w, filter_h;     /* pools */
  int16_t depth_multiplier;
  int16_t axis;               /* CONCATENATION */
  uint8_t padding;            /* EK_PAD_* */
  uint8_t activation;         /* EK_ACT_* */
  uint8_t keep_dims;          /* MEAN */
  uint8_t keep_num_dims;      /* FULLY_CONNECTED */
  uint8_t weights_format;     /* FULLY_CONNECTED: 0 = DEFAULT only */
  uint8_t pot_scale_int16;    /* ADD/SUB: unused for int8 */
  float alpha;                /* LEAKY_RELU (schema default 0.0) */
  uint8_t approximate;        /* GELU (schema default false) */
  uint8_t adj_x, adj_y;       /* BATCH_MATMUL */
  /* STRIDED_SLICE masks: the low 8 bits (the reader rejects more than 8 begin/end/stride indices, so no higher bit
     is ever read) */
  uint8_t begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask;
  uint8_t flags;              /* EK_FLAG_*: STRIDED_SLICE offset, RESIZE_* align_corners / half_pixel_centers,
                                 MIRROR_PAD mode */
  int8_t batch_dims;          /* GATHER */
  uint8_t block_size;         /* DEPTH_TO_SPACE / SPACE_TO_DEPTH (the reader rejects > 255) */
  int16_t rank;               /* SVDF */
  uint8_t time_major;         /* UNIDIRECTIONAL_SEQUENCE_LSTM */
  uint8_t num_intermediates;  /* UNIDIRECTIONAL_SEQUENCE_LSTM: the operator's intermediates count (saturated at 255) */
  float cell_clip;            /* UNIDIRECTIONAL_SEQUENCE_LSTM (0: no clipping) */
  int32_t intermediate_hidden; /* UNIDIRECTIONAL_SEQUENCE_LSTM: tensor index of intermediates[4] (the hidden scale), or -1 */
} ek_op_params;
enum { EK_FLAG_OFFSET = 1, EK_FLAG_ALIGN_CORNERS = 2, EK_FLAG_HALF_PIXEL_CENTERS = 4, EK_FLAG_MIRROR_SYMMETRIC = 8 };

typedef struct ek_op {
  int32_t opcode;             /* EK_OP_* */
  int32_t index;              /* position in the subgraph (for error messages and per-op counts) */
  int32_t version;            /* operator_codes[].version */
  int32_t num_inputs, num_outputs;  /* <= EK_MAX_OP_INPUTS; 1..EK_MAX_OP_OUTPUTS */
  const int32_t *inputs;      /* num_inputs tensor indices (-1 = optional input absent), read in place from the
                                 model (validated: each in [-1, num_tensors)); index only below num_inputs */
  const int32_t *outputs;     /* num_outputs tensor indices, in place likewise */
  ek_op_params params;
  void *user_data;            /* persistent per-op data (persistent_bytes of it), 8-byte aligned */
  void *scratch;              /* scratch_bytes of per-invoke scratch, 8-byte aligned, or NULL */
} ek_op;

/* One resource variable (kernels/variables.c): its handle tensor in the main graph (whose bytes are the variable's
   memory) and its initial value: `src` bytes at that model offset (the CALL_ONCE init subgraph's constant) or, when
   src is -1, `bytes` copies of `fill` (TFLM's default: the first assigned value's zero point). 16 bytes. */
typedef struct ek_var_init {
  int32_t tensor, src, bytes, fill;
} ek_var_init;

typedef struct ek_context {
  ek_tensor *tensors;         /* one record per tensor (.tflite path); NULL for a prepared model (below) */
  int32_t num_tensors;
  /* Prepared model (ek_prepared.c): tensor records stay in flash; ek_input/ek_output decode the ones an op
     asks for into `slots` (inputs at 0.., output i at out_slot + i). */
  const uint8_t *prep_tensors; /* ekp_tensor records in the prepared blob, or NULL */
  const uint8_t *prep_blob;
  const uint8_t *prep_model;
  uint8_t *prep_arena;
  ek_tensor *slots;
  int32_t out_slot;
  int32_t optimize;           /* EK_OPTIMIZE_*: which kernel variants prepare picks where RAM and speed trade */
  int32_t plan_mve;           /* overlaps are planned for a Helium (MVE) device build (its kernels read some windows
                                 in place), also when planned on the host */
  /* Row-streamed groups (ek_stream_group.c): while row_end > 0, an op computes only output rows [row_begin, row_end)
     (kernels with a row contract: CONV_2D, DEPTHWISE_CONV_2D, MAX_POOL_2D, AVERAGE_POOL_2D, PAD / PADV2 (4-D), ADD without
     broadcasting, PRELU with a per-channel alpha), and with `frozen` ek_input/ek_output return
     the prepared slots as the group runner filled them (tensor views whose data point at row windows). */
  int32_t row_begin, row_end;
  int32_t frozen;
  /* Resource variables (kernels/variables.c): the reader's init table (in-place path; NULL for a prepared model,
     whose CALL_ONCE carries its copy in the blob), the model (both paths) and whether CALL_ONCE has run since init
     or the last reset (ek_reset_variables / ek_prepared_reset). */
  const struct ek_var_init *var_init;
  int32_t num_var_init;
  const uint8_t *model;
  int32_t call_once_done;
  /* error reporting: first failure wins */
  ek_status status;
  int32_t error_op;           /* op index or -1 */
  const char *error_message;  /* static string */
#ifndef EK_PREPARED_ONLY
  int32_t for_export;         /* EK_OPTIMIZE_FOR_EXPORT was given: per-op data goes to a prepared blob (flash) */
  int32_t int8_weights;       /* EK_OPTIMIZE_INT8_WEIGHTS was given */
  /* Per-op choice (ek_init_opt_ops; NULL: none): int8_ops[i] != 0 keeps op i's weights int8 as if
     EK_OPTIMIZE_INT8_WEIGHTS were given for that op only (the others take their re-laid-out copies) */
  const uint8_t *int8_ops;
  int32_t num_int8_ops;
#endif
} ek_context;

/* Whether prepare runs for a prepared-model export (host only; a prepared-only device build never prepares). */
static inline int ek_for_export(const ek_context *ctx) {
#ifdef EK_PREPARED_ONLY
  (void)ctx;
  return 0;
#else
  return ctx->for_export;
#endif
}

/* Whether op's weights must stay int8 (EK_OPTIMIZE_INT8_WEIGHTS, or this op's int8_ops entry; host only, as
   ek_for_export). */
static inline int ek_int8_weights(const ek_context *ctx, const ek_op *op) {
#ifdef EK_PREPARED_ONLY
  (void)ctx;
  (void)op;
  return 0;
#else
  return ctx->int8_weights ||
         (ctx->int8_ops && op->index >= 0 && op->index < ctx->num_int8_ops && ctx->int8_ops[op->index] != 0);
#endif
}

typedef struct ek_kernel {
  int32_t opcode;
  const char *name;           /* "CONV_2D", as in the TFLite schema */
  /* Bytes of persistent per-op data (e.g. per-channel multipliers). May inspect tensors
     (validated by the reader: indices in range) but must not trust shapes beyond bounds checks. */
  size_t (*persistent_bytes)(const ek_context *ctx, const ek_op *op);
  /* Bytes of scratch needed during eval (planned in the arena, alive only during this op). NULL = 0. */
  size_t (*scratch_bytes)(const ek_context *ctx, const ek_op *op);
  /* Validate everything and fill op->user_data. Called once after planning. */
  ek_status (*prepare)(ek_context *ctx, ek_op *op);
  /* Compute. Must not fail for inputs that passed prepare (the data values cannot make it misbehave). */
  ek_status (*eval)(ek_context *ctx, ek_op *op);
  /* Optional (NULL: never overlap). Called after prepare. Returns 1 and sets *d_max when the output may be placed
     at output_offset - input_offset <= *d_max bytes over input `input_index` if that input dies at this op
     (the kernel access contract in firmware/runtime/README.md; helpers in kernels/ek_stream.h). */
  int (*overlap)(const ek_context *ctx, const ek_op *op, int input_index, int32_t *d_max);
  /* Returns EK_OVERLAP_NONE, EK_OVERLAP_UPTO (any difference <= *d_max) or EK_OVERLAP_EXACT (only exactly on the
     input: difference 0, e.g. in-place depthwise by channel groups). */
} ek_kernel;

/* Kernels whose eval may leave a constant input unread (it uses a re-laid-out or folded copy in its per-op data):
   1 when eval, given this per-op data (never NULL), reads neither the data nor the quantization arrays of input
   `input_index`. On the device too. ek_export_prepared leaves a constant that every reader skips out of the blob's
   model references (EKP_UNREAD, so a compacted model drops its bytes) and ek_prepared_init refuses a blob whose op
   would read such a constant. ek_prepared.c references them weakly (by opcode): a kernel not linked has none. */
int ek_fully_connected_skips_input(const void *user_data, int input_index);
int ek_conv_2d_skips_input(const void *user_data, int input_index);

/* Implemented by the core. */
ek_status ek_fail(ek_context *ctx, const ek_op *op, ek_status status, const char *message);
/* Optional kernel paths: a device build for one model defines EK_MODEL_PATHS and one EK_NEED_<PATH> per optional
   path its model uses (edgekit/firmware/kernel_paths.py); a kernel compiles such a path only without EK_MODEL_PATHS
   (host runtime, make check: every path) or with its EK_NEED_ macro, and otherwise refuses the op: prepare() with
   EK_ERR_UNSUPPORTED and its own message, eval() (a blob prepared by a full runtime) with this one. */
extern const char ek_path_missing[];
/* Decodes tensor `index` of a prepared model into ctx->slots[slot] (ek_prepared.c). */
ek_tensor *ek_prepared_tensor(const ek_context *ctx, int32_t index, int32_t slot);
static inline ek_tensor *ek_input(ek_context *ctx, const ek_op *op, int i) {
  if (i >= op->num_inputs || op->inputs[i] < 0) return (ek_tensor *)0;
  if (ctx->tensors) return &ctx->tensors[op->inputs[i]];
  return ctx->frozen ? &ctx->slots[i] : ek_prepared_tensor(ctx, op->inputs[i], i);
}
static inline ek_tensor *ek_output(ek_context *ctx, const ek_op *op, int i) {
  if (i >= op->num_outputs || op->outputs[i] < 0) return (ek_tensor *)0;
  if (ctx->tensors) return &ctx->tensors[op->outputs[i]];
  return ctx->frozen ? &ctx->slots[ctx->out_slot + i] : ek_prepared_tensor(ctx, op->outputs[i], ctx->out_slot + i);
}
int32_t ek_num_elements(const ek_tensor *t);   /* product of dims (0 if any dim is 0), saturating */
int ek_same_shape(const ek_tensor *a, const ek_tensor *b);
int32_t ek_type_size(int32_t type);            /* bytes per element of an EK_* type, 0 if unknown */

/* The kernel table (kernels/registry.c). Kernels are weak references: a firmware build links only
   the kernel files of the ops its model uses, and ek_find_kernel() returns NULL for the rest. */
const ek_kernel *ek_find_kernel(int32_t opcode);
const char *ek_op_name(int32_t opcode); /* schema name for any builtin code, "UNKNOWN" otherwise */

/* Kernel table members only the host needs for a prepared model (persistent_bytes, scratch_bytes, prepare,
   overlap): a device build with -DEK_PREPARED_ONLY runs prepared models only and leaves them (and their error
   strings) out of flash. */
#ifdef EK_PREPARED_ONLY
#define EK_HOST_FN(f) 0
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunused-function"
#endif
#else
#define EK_HOST_FN(f) f
#endif

/* Row-streamed groups, host planner (ek_plan.c): whether a row range of this prepared DEPTHWISE_CONV_2D runs on a
   blocked path (kernels/depthwise_conv_2d.c; else TFLite's per-pixel loop, which only --optimize ram streams). Weak
   in the planner: a build without the depthwise kernel file has no such op. */
#if !defined(EK_NO_STREAM_GROUPS) && !defined(EK_PREPARED_ONLY)
int ek_dw_rows_fast(const ek_context *ctx, const ek_op *op);
#endif

/* One object per kernel file, e.g. `const ek_kernel ek_kernel_conv_2d = {EK_OP_CONV_2D, "CONV_2D", ...};` */
extern const ek_kernel ek_kernel_add, ek_kernel_average_pool_2d, ek_kernel_concatenation, ek_kernel_conv_2d,
    ek_kernel_depthwise_conv_2d, ek_kernel_dequantize, ek_kernel_fully_connected, ek_kernel_logistic,
    ek_kernel_max_pool_2d, ek_kernel_mul, ek_kernel_reshape, ek_kernel_softmax, ek_kernel_pad,
    ek_kernel_transpose, ek_kernel_mean, ek_kernel_quantize, ek_kernel_hard_swish;
extern const ek_kernel ek_kernel_relu, ek_kernel_relu6, ek_kernel_relu_n1_to_1, ek_kernel_leaky_relu, ek_kernel_prelu,
    ek_kernel_tanh, ek_kernel_exp, ek_kernel_log, ek_kernel_sqrt, ek_kernel_gelu, ek_kernel_abs, ek_kernel_neg,
    ek_kernel_rsqrt, ek_kernel_elu;
extern const ek_kernel ek_kernel_sub;
extern const ek_kernel ek_kernel_squared_difference;
extern const ek_kernel ek_kernel_maximum;
extern const ek_kernel ek_kernel_minimum;
extern const ek_kernel ek_kernel_equal;
extern const ek_kernel ek_kernel_not_equal;
extern const ek_kernel ek_kernel_less;
extern const ek_kernel ek_kernel_less_equal;
extern const ek_kernel ek_kernel_greater;
extern const ek_kernel ek_kernel_greater_equal;
extern const ek_kernel ek_kernel_logical_and;
extern const ek_kernel ek_kernel_logical_or;
extern const ek_kernel ek_kernel_select;
extern const ek_kernel ek_kernel_select_v2;
extern const ek_kernel ek_kernel_sum;
extern const ek_kernel ek_kernel_reduce_max;
extern const ek_kernel ek_kernel_reduce_min;
extern const ek_kernel ek_kernel_arg_max;
extern const ek_kernel ek_kernel_arg_min;
extern const ek_kernel ek_kernel_div;
extern const ek_kernel ek_kernel_l2_normalization;
extern const ek_kernel ek_kernel_batch_matmul;
extern const ek_kernel ek_kernel_log_softmax;
/* shape and data-movement ops (h-shape) */
extern const ek_kernel ek_kernel_split;
extern const ek_kernel ek_kernel_split_v;
extern const ek_kernel ek_kernel_unpack;
extern const ek_kernel ek_kernel_pack;
extern const ek_kernel ek_kernel_strided_slice;
extern const ek_kernel ek_kernel_slice;
extern const ek_kernel ek_kernel_squeeze;
extern const ek_kernel ek_kernel_expand_dims;
extern const ek_kernel ek_kernel_gather;
extern const ek_kernel ek_kernel_depth_to_space;
extern const ek_kernel ek_kernel_space_to_depth;
extern const ek_kernel ek_kernel_resize_nearest_neighbor;
extern const ek_kernel ek_kernel_resize_bilinear;
extern const ek_kernel ek_kernel_cast;
extern const ek_kernel ek_kernel_fill;
extern const ek_kernel ek_kernel_shape;
extern const ek_kernel ek_kernel_zeros_like;
extern const ek_kernel ek_kernel_transpose_conv;
extern const ek_kernel ek_kernel_space_to_batch_nd;
extern const ek_kernel ek_kernel_batch_to_space_nd;
extern const ek_kernel ek_kernel_broadcast_to;
extern const ek_kernel ek_kernel_gather_nd;
extern const ek_kernel ek_kernel_padv2;
extern const ek_kernel ek_kernel_mirror_pad;
extern const ek_kernel ek_kernel_svdf;
extern const ek_kernel ek_kernel_unidirectional_sequence_lstm;
extern const ek_kernel ek_kernel_call_once, ek_kernel_var_handle, ek_kernel_read_variable, ek_kernel_assign_variable;

#ifdef __cplusplus
}
#endif
#endif
