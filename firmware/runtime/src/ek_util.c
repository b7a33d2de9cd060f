/* edgekit runtime core: small helpers shared by the core and the kernels. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ek_internal.h"
#include "ek_kernels.h"

const char ek_path_missing[] = "operator path not built into this firmware (EK_MODEL_PATHS): regenerate it for this model";

ek_status ek_fail(ek_context *ctx, const ek_op *op, ek_status status, const char *message) {
  if (status == EK_OK) status = EK_ERR_INTERNAL; /* a failure must never read as success */
  if (ctx->status == EK_OK) {
    ctx->status = status;
    ctx->error_op = op ? op->index : -1;
    ctx->error_message = message ? message : "unknown error";
  }
  return status;
}

int32_t ek_num_elements(const ek_tensor *t) {
  int64_t n = 1;
  if (t->ndim < 0 || t->ndim > EK_MAX_DIMS) return 0;
  for (int32_t i = 0; i < t->ndim; ++i) {
    if (t->dims[i] <= 0) return 0;
    n *= t->dims[i];
    if (n > INT32_MAX) n = INT32_MAX; /* saturate: dims are int32, so n * dim fits int64 */
  }
  return (int32_t)n;
}

int ek_same_shape(const ek_tensor *a, const ek_tensor *b) {
  if (a->ndim != b->ndim || a->ndim < 0 || a->ndim > EK_MAX_DIMS) return 0;
  for (int32_t i = 0; i < a->ndim; ++i) {
    if (a->dims[i] != b->dims[i]) return 0;
  }
  return 1;
}

int32_t ek_type_size(int32_t type) {
  switch (type) {
    case EK_FLOAT32: case EK_INT32: return 4;
    case EK_FLOAT16: case EK_INT16: return 2;
    case EK_INT64: return 8;
    case EK_UINT8: case EK_INT8: case EK_BOOL: return 1;
    default: return 0;
  }
}

#ifndef EK_COMPACT_OP_NAMES
/* BuiltinOperator names of the TFLite schema, indexed by code (210 codes, 0..209). */
static const char *const op_names[] = {
    "ADD", "AVERAGE_POOL_2D", "CONCATENATION", "CONV_2D", "DEPTHWISE_CONV_2D", "DEPTH_TO_SPACE", "DEQUANTIZE",
    "EMBEDDING_LOOKUP", "FLOOR", "FULLY_CONNECTED", "HASHTABLE_LOOKUP", "L2_NORMALIZATION", "L2_POOL_2D",
    "LOCAL_RESPONSE_NORMALIZATION", "LOGISTIC", "LSH_PROJECTION", "LSTM", "MAX_POOL_2D", "MUL", "RELU",
    "RELU_N1_TO_1", "RELU6", "RESHAPE", "RESIZE_BILINEAR", "RNN", "SOFTMAX", "SPACE_TO_DEPTH", "SVDF", "TANH",
    "CONCAT_EMBEDDINGS", "SKIP_GRAM", "CALL", "CUSTOM", "EMBEDDING_LOOKUP_SPARSE", "PAD",
    "UNIDIRECTIONAL_SEQUENCE_RNN", "GATHER", "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND", "TRANSPOSE", "MEAN", "SUB",
    "DIV", "SQUEEZE", "UNIDIRECTIONAL_SEQUENCE_LSTM", "STRIDED_SLICE", "BIDIRECTIONAL_SEQUENCE_RNN", "EXP", "TOPK_V2",
    "SPLIT", "LOG_SOFTMAX", "DELEGATE", "BIDIRECTIONAL_SEQUENCE_LSTM", "CAST", "PRELU", "MAXIMUM", "ARG_MAX",
    "MINIMUM", "LESS", "NEG", "PADV2", "GREATER", "GREATER_EQUAL", "LESS_EQUAL", "SELECT", "SLICE", "SIN",
    "TRANSPOSE_CONV", "SPARSE_TO_DENSE", "TILE", "EXPAND_DIMS", "EQUAL", "NOT_EQUAL", "LOG", "SUM", "SQRT", "RSQRT",
    "SHAPE", "POW", "ARG_MIN", "FAKE_QUANT", "REDUCE_PROD", "REDUCE_MAX", "PACK", "LOGICAL_OR", "ONE_HOT",
    "LOGICAL_AND", "LOGICAL_NOT", "UNPACK", "REDUCE_MIN", "FLOOR_DIV", "REDUCE_ANY", "SQUARE", "ZEROS_LIKE", "FILL",
    "FLOOR_MOD", "RANGE", "RESIZE_NEAREST_NEIGHBOR", "LEAKY_RELU", "SQUARED_DIFFERENCE", "MIRROR_PAD", "ABS",
    "SPLIT_V", "UNIQUE", "CEIL", "REVERSE_V2", "ADD_N", "GATHER_ND", "COS", "WHERE", "RANK", "ELU",
    "REVERSE_SEQUENCE", "MATRIX_DIAG", "QUANTIZE", "MATRIX_SET_DIAG", "ROUND", "HARD_SWISH", "IF", "WHILE",
    "NON_MAX_SUPPRESSION_V4", "NON_MAX_SUPPRESSION_V5", "SCATTER_ND", "SELECT_V2", "DENSIFY", "SEGMENT_SUM",
    "BATCH_MATMUL", "PLACEHOLDER_FOR_GREATER_OP_CODES", "CUMSUM", "CALL_ONCE", "BROADCAST_TO", "RFFT2D", "CONV_3D",
    "IMAG", "REAL", "COMPLEX_ABS", "HASHTABLE", "HASHTABLE_FIND", "HASHTABLE_IMPORT", "HASHTABLE_SIZE", "REDUCE_ALL",
    "CONV_3D_TRANSPOSE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "BROADCAST_ARGS", "RANDOM_STANDARD_NORMAL",
    "BUCKETIZE", "RANDOM_UNIFORM", "MULTINOMIAL", "GELU", "DYNAMIC_UPDATE_SLICE", "RELU_0_TO_1",
    "UNSORTED_SEGMENT_PROD", "UNSORTED_SEGMENT_MAX", "UNSORTED_SEGMENT_SUM", "ATAN2", "UNSORTED_SEGMENT_MIN", "SIGN",
    "BITCAST", "BITWISE_XOR", "RIGHT_SHIFT", "STABLEHLO_LOGISTIC", "STABLEHLO_ADD", "STABLEHLO_DIVIDE",
    "STABLEHLO_MULTIPLY", "STABLEHLO_MAXIMUM", "STABLEHLO_RESHAPE", "STABLEHLO_CLAMP", "STABLEHLO_CONCATENATE",
    "STABLEHLO_BROADCAST_IN_DIM", "STABLEHLO_CONVOLUTION", "STABLEHLO_SLICE", "STABLEHLO_CUSTOM_CALL",
    "STABLEHLO_REDUCE", "STABLEHLO_ABS", "STABLEHLO_AND", "STABLEHLO_COSINE", "STABLEHLO_EXPONENTIAL",
    "STABLEHLO_FLOOR", "STABLEHLO_LOG", "STABLEHLO_MINIMUM", "STABLEHLO_NEGATE", "STABLEHLO_OR", "STABLEHLO_POWER",
    "STABLEHLO_REMAINDER", "STABLEHLO_RSQRT", "STABLEHLO_SELECT", "STABLEHLO_SUBTRACT", "STABLEHLO_TANH",
    "STABLEHLO_SCATTER", "STABLEHLO_COMPARE", "STABLEHLO_CONVERT", "STABLEHLO_DYNAMIC_SLICE",
    "STABLEHLO_DYNAMIC_UPDATE_SLICE", "STABLEHLO_PAD", "STABLEHLO_IOTA", "STABLEHLO_DOT_GENERAL",
    "STABLEHLO_REDUCE_WINDOW", "STABLEHLO_SORT", "STABLEHLO_WHILE", "STABLEHLO_GATHER", "STABLEHLO_TRANSPOSE",
    "DILATE", "STABLEHLO_RNG_BIT_GENERATOR", "REDUCE_WINDOW", "STABLEHLO_COMPOSITE", "STABLEHLO_SHIFT_LEFT",
    "STABLEHLO_CBRT", "STABLEHLO_CASE",
};

const char *ek_op_name(int32_t opcode) {
  if (opcode < 0 || (size_t)opcode >= sizeof(op_names) / sizeof(op_names[0])) return "UNKNOWN";
  return op_names[opcode];
}
#else
/* -DEK_COMPACT_OP_NAMES (saves ~4 KB of flash): names of the operators this runtime implements only. */
const char *ek_op_name(int32_t opcode) {
  switch (opcode) {
    case EK_OP_ADD: return "ADD";
    case EK_OP_AVERAGE_POOL_2D: return "AVERAGE_POOL_2D";
    case EK_OP_CONCATENATION: return "CONCATENATION";
    case EK_OP_CONV_2D: return "CONV_2D";
    case EK_OP_DEPTHWISE_CONV_2D: return "DEPTHWISE_CONV_2D";
    case EK_OP_DEQUANTIZE: return "DEQUANTIZE";
    case EK_OP_FULLY_CONNECTED: return "FULLY_CONNECTED";
    case EK_OP_LOGISTIC: return "LOGISTIC";
    case EK_OP_MAX_POOL_2D: return "MAX_POOL_2D";
    case EK_OP_MUL: return "MUL";
    case EK_OP_RESHAPE: return "RESHAPE";
    case EK_OP_SOFTMAX: return "SOFTMAX";
    case EK_OP_PAD: return "PAD";
    case EK_OP_TRANSPOSE: return "TRANSPOSE";
    case EK_OP_MEAN: return "MEAN";
    case EK_OP_QUANTIZE: return "QUANTIZE";
    case EK_OP_HARD_SWISH: return "HARD_SWISH";
    case EK_OP_RELU: return "RELU";
    case EK_OP_RELU_N1_TO_1: return "RELU_N1_TO_1";
    case EK_OP_RELU6: return "RELU6";
    case EK_OP_TANH: return "TANH";
    case EK_OP_EXP: return "EXP";
    case EK_OP_PRELU: return "PRELU";
    case EK_OP_NEG: return "NEG";
    case EK_OP_LOG: return "LOG";
    case EK_OP_SQRT: return "SQRT";
    case EK_OP_RSQRT: return "RSQRT";
    case EK_OP_LEAKY_RELU: return "LEAKY_RELU";
    case EK_OP_ABS: return "ABS";
    case EK_OP_ELU: return "ELU";
    case EK_OP_GELU: return "GELU";
    case EK_OP_SUB: return "SUB";
    case EK_OP_SQUARED_DIFFERENCE: return "SQUARED_DIFFERENCE";
    case EK_OP_MAXIMUM: return "MAXIMUM";
    case EK_OP_MINIMUM: return "MINIMUM";
    case EK_OP_EQUAL: return "EQUAL";
    case EK_OP_NOT_EQUAL: return "NOT_EQUAL";
    case EK_OP_LESS: return "LESS";
    case EK_OP_LESS_EQUAL: return "LESS_EQUAL";
    case EK_OP_GREATER: return "GREATER";
    case EK_OP_GREATER_EQUAL: return "GREATER_EQUAL";
    case EK_OP_LOGICAL_AND: return "LOGICAL_AND";
    case EK_OP_LOGICAL_OR: return "LOGICAL_OR";
    case EK_OP_SELECT: return "SELECT";
    case EK_OP_SELECT_V2: return "SELECT_V2";
    case EK_OP_SUM: return "SUM";
    case EK_OP_REDUCE_MAX: return "REDUCE_MAX";
    case EK_OP_REDUCE_MIN: return "REDUCE_MIN";
    case EK_OP_ARG_MAX: return "ARG_MAX";
    case EK_OP_ARG_MIN: return "ARG_MIN";
    case EK_OP_DIV: return "DIV";
    case EK_OP_L2_NORMALIZATION: return "L2_NORMALIZATION";
    case EK_OP_BATCH_MATMUL: return "BATCH_MATMUL";
    case EK_OP_LOG_SOFTMAX: return "LOG_SOFTMAX";
    case EK_OP_SVDF: return "SVDF";
    case EK_OP_UNIDIRECTIONAL_SEQUENCE_LSTM: return "UNIDIRECTIONAL_SEQUENCE_LSTM";
    case EK_OP_CALL_ONCE: return "CALL_ONCE";
    case EK_OP_VAR_HANDLE: return "VAR_HANDLE";
    case EK_OP_READ_VARIABLE: return "READ_VARIABLE";
    case EK_OP_ASSIGN_VARIABLE: return "ASSIGN_VARIABLE";
    case 32: return "CUSTOM";
    default: return "UNKNOWN";
  }
}
#endif

const char *ek_status_name(ek_status status) {
  switch (status) {
    case EK_OK: return "OK";
    case EK_ERR_MODEL: return "MODEL";
    case EK_ERR_UNSUPPORTED: return "UNSUPPORTED";
    case EK_ERR_SHAPE: return "SHAPE";
    case EK_ERR_TYPE: return "TYPE";
    case EK_ERR_MEMORY: return "MEMORY";
    case EK_ERR_INTERNAL: return "INTERNAL";
    default: return "UNKNOWN";
  }
}

/* A prepared model's tensor record (in flash) decoded into a RAM slot (ek_kernels.h: ek_input / ek_output). */
ek_tensor *ek_prepared_tensor(const ek_context *ctx, int32_t index, int32_t slot) {
  const ekp_tensor *r = (const ekp_tensor *)(const void *)ctx->prep_tensors + index;
  ek_tensor *t = &ctx->slots[slot];
  t->data = r->where == EKP_WHERE_ARENA   ? (void *)(ctx->prep_arena + r->offset)
            : r->where == EKP_WHERE_MODEL ? (void *)(uintptr_t)(ctx->prep_model + r->offset)
                                      : (void *)0;
  memcpy(t->dims, r->dims, sizeof t->dims);
  t->bytes = r->bytes;
  t->scale = r->scale;
  t->zero_point = r->zero_point;
  t->scales = r->scales_off >= 0 ? (const float *)(const void *)(ctx->prep_model + r->scales_off) : (const float *)0;
  t->zero_points =
      r->zero_points_off >= 0 ? (const int64_t *)(const void *)(ctx->prep_model + r->zero_points_off) : (const int64_t *)0;
  t->num_scales = r->num_scales;
  t->ndim = r->ndim;
  t->type = r->type;
  t->quantized_dimension = r->quantized_dimension;
  t->is_constant = r->is_constant;
  return t;
}
