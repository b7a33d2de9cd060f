/* Kernel table. Weak references: only the kernels a build links are found. A firmware build may instead give the
   exact list (-DEK_KERNEL_LIST with ek_kernel_list.h defining EK_LINKED_KERNELS as `&ek_kernel_conv_2d, ...`, written
   by the generator): then the table holds only the model's kernels (4 bytes of flash per entry). */
#include "ek_kernels.h"

#ifdef EK_KERNEL_LIST
#include "ek_kernel_list.h"
static const ek_kernel *const kernels[] = {EK_LINKED_KERNELS};
#else
#define EK_WEAK __attribute__((weak))
extern const ek_kernel ek_kernel_add EK_WEAK, ek_kernel_average_pool_2d EK_WEAK, ek_kernel_concatenation EK_WEAK,
    ek_kernel_conv_2d EK_WEAK, ek_kernel_depthwise_conv_2d EK_WEAK, ek_kernel_dequantize EK_WEAK,
    ek_kernel_fully_connected EK_WEAK, ek_kernel_logistic EK_WEAK, ek_kernel_max_pool_2d EK_WEAK, ek_kernel_mul EK_WEAK,
    ek_kernel_reshape EK_WEAK, ek_kernel_softmax EK_WEAK, ek_kernel_pad EK_WEAK, ek_kernel_transpose EK_WEAK,
    ek_kernel_mean EK_WEAK, ek_kernel_quantize EK_WEAK, ek_kernel_hard_swish EK_WEAK;
extern const ek_kernel ek_kernel_relu EK_WEAK, ek_kernel_relu6 EK_WEAK, ek_kernel_relu_n1_to_1 EK_WEAK,
    ek_kernel_leaky_relu EK_WEAK, ek_kernel_prelu EK_WEAK, ek_kernel_tanh EK_WEAK, ek_kernel_exp EK_WEAK,
    ek_kernel_log EK_WEAK, ek_kernel_sqrt EK_WEAK, ek_kernel_gelu EK_WEAK, ek_kernel_abs EK_WEAK, ek_kernel_neg EK_WEAK,
    ek_kernel_rsqrt EK_WEAK, ek_kernel_elu EK_WEAK;
extern const ek_kernel ek_kernel_sub EK_WEAK;
extern const ek_kernel ek_kernel_squared_difference EK_WEAK;
extern const ek_kernel ek_kernel_maximum EK_WEAK;
extern const ek_kernel ek_kernel_minimum EK_WEAK;
extern const ek_kernel ek_kernel_equal EK_WEAK;
extern const ek_kernel ek_kernel_not_equal EK_WEAK;
extern const ek_kernel ek_kernel_less EK_WEAK;
extern const ek_kernel ek_kernel_less_equal EK_WEAK;
extern const ek_kernel ek_kernel_greater EK_WEAK;
extern const ek_kernel ek_kernel_greater_equal EK_WEAK;
extern const ek_kernel ek_kernel_logical_and EK_WEAK;
extern const ek_kernel ek_kernel_logical_or EK_WEAK;
extern const ek_kernel ek_kernel_select EK_WEAK;
extern const ek_kernel ek_kernel_select_v2 EK_WEAK;
extern const ek_kernel ek_kernel_sum EK_WEAK;
extern const ek_kernel ek_kernel_reduce_max EK_WEAK;
extern const ek_kernel ek_kernel_reduce_min EK_WEAK;
extern const ek_kernel ek_kernel_arg_max EK_WEAK;
extern const ek_kernel ek_kernel_arg_min EK_WEAK;
extern const ek_kernel ek_kernel_div EK_WEAK;
extern const ek_kernel ek_kernel_l2_normalization EK_WEAK;
extern const ek_kernel ek_kernel_batch_matmul EK_WEAK;
extern const ek_kernel ek_kernel_log_softmax EK_WEAK;
extern const ek_kernel ek_kernel_split EK_WEAK;
extern const ek_kernel ek_kernel_split_v EK_WEAK;
extern const ek_kernel ek_kernel_unpack EK_WEAK;
extern const ek_kernel ek_kernel_pack EK_WEAK;
extern const ek_kernel ek_kernel_strided_slice EK_WEAK;
extern const ek_kernel ek_kernel_slice EK_WEAK;
extern const ek_kernel ek_kernel_squeeze EK_WEAK;
extern const ek_kernel ek_kernel_expand_dims EK_WEAK;
extern const ek_kernel ek_kernel_gather EK_WEAK;
extern const ek_kernel ek_kernel_depth_to_space EK_WEAK;
extern const ek_kernel ek_kernel_space_to_depth EK_WEAK;
extern const ek_kernel ek_kernel_resize_nearest_neighbor EK_WEAK;
extern const ek_kernel ek_kernel_resize_bilinear EK_WEAK;
extern const ek_kernel ek_kernel_cast EK_WEAK;
extern const ek_kernel ek_kernel_fill EK_WEAK;
extern const ek_kernel ek_kernel_shape EK_WEAK;
extern const ek_kernel ek_kernel_zeros_like EK_WEAK;
extern const ek_kernel ek_kernel_transpose_conv EK_WEAK;
extern const ek_kernel ek_kernel_space_to_batch_nd EK_WEAK;
extern const ek_kernel ek_kernel_batch_to_space_nd EK_WEAK;
extern const ek_kernel ek_kernel_broadcast_to EK_WEAK;
extern const ek_kernel ek_kernel_gather_nd EK_WEAK;
extern const ek_kernel ek_kernel_padv2 EK_WEAK;
extern const ek_kernel ek_kernel_mirror_pad EK_WEAK;
extern const ek_kernel ek_kernel_call_once EK_WEAK, ek_kernel_var_handle EK_WEAK, ek_kernel_read_variable EK_WEAK,
    ek_kernel_assign_variable EK_WEAK;
extern const ek_kernel ek_kernel_svdf EK_WEAK;
extern const ek_kernel ek_kernel_unidirectional_sequence_lstm EK_WEAK;

static const ek_kernel *const kernels[] = {
    &ek_kernel_add, &ek_kernel_average_pool_2d, &ek_kernel_concatenation, &ek_kernel_conv_2d,
    &ek_kernel_depthwise_conv_2d, &ek_kernel_dequantize, &ek_kernel_fully_connected, &ek_kernel_logistic,
    &ek_kernel_max_pool_2d, &ek_kernel_mul, &ek_kernel_reshape, &ek_kernel_softmax, &ek_kernel_pad,
    &ek_kernel_transpose, &ek_kernel_mean, &ek_kernel_quantize, &ek_kernel_hard_swish,
    &ek_kernel_relu, &ek_kernel_relu6, &ek_kernel_relu_n1_to_1, &ek_kernel_leaky_relu, &ek_kernel_prelu,
    &ek_kernel_tanh, &ek_kernel_exp, &ek_kernel_log, &ek_kernel_sqrt, &ek_kernel_gelu, &ek_kernel_abs, &ek_kernel_neg,
    &ek_kernel_rsqrt, &ek_kernel_elu,
    &ek_kernel_sub,
    &ek_kernel_squared_difference,
    &ek_kernel_maximum,
    &ek_kernel_minimum,
    &ek_kernel_equal,
    &ek_kernel_not_equal,
    &ek_kernel_less,
    &ek_kernel_less_equal,
    &ek_kernel_greater,
    &ek_kernel_greater_equal,
    &ek_kernel_logical_and,
    &ek_kernel_logical_or,
    &ek_kernel_select,
    &ek_kernel_select_v2,
    &ek_kernel_sum,
    &ek_kernel_reduce_max,
    &ek_kernel_reduce_min,
    &ek_kernel_arg_max,
    &ek_kernel_arg_min,
    &ek_kernel_div,
    &ek_kernel_l2_normalization,
    &ek_kernel_batch_matmul,
    &ek_kernel_log_softmax,
    &ek_kernel_split,
    &ek_kernel_split_v,
    &ek_kernel_unpack,
    &ek_kernel_pack,
    &ek_kernel_strided_slice,
    &ek_kernel_slice,
    &ek_kernel_squeeze,
    &ek_kernel_expand_dims,
    &ek_kernel_gather,
    &ek_kernel_depth_to_space,
    &ek_kernel_space_to_depth,
    &ek_kernel_resize_nearest_neighbor,
    &ek_kernel_resize_bilinear,
    &ek_kernel_cast,
    &ek_kernel_fill,
    &ek_kernel_shape,
    &ek_kernel_zeros_like,
    &ek_kernel_transpose_conv,
    &ek_kernel_space_to_batch_nd,
    &ek_kernel_batch_to_space_nd,
    &ek_kernel_broadcast_to,
    &ek_kernel_gather_nd,
    &ek_kernel_padv2,
    &ek_kernel_mirror_pad,
    &ek_kernel_call_once, &ek_kernel_var_handle, &ek_kernel_read_variable, &ek_kernel_assign_variable,
    &ek_kernel_svdf,
    &ek_kernel_unidirectional_sequence_lstm,
};
#endif

const ek_kernel *ek_find_kernel(int32_t opcode) {
  for (size_t i = 0; i < sizeof(kernels) / sizeof(kernels[0]); ++i) {
    if (kernels[i] && kernels[i]->opcode == opcode) return kernels[i];
  }
  return (const ek_kernel *)0;
}
