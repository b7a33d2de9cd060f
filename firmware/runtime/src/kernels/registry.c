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

static const ek_kernel *const kernels[] = {
    &ek_kernel_add, &ek_kernel_average_pool_2d, &ek_kernel_concatenation, &ek_kernel_conv_2d,
    &ek_kernel_depthwise_conv_2d, &ek_kernel_dequantize, &ek_kernel_fully_connected, &ek_kernel_logistic,
    &ek_kernel_max_pool_2d, &ek_kernel_mul, &ek_kernel_reshape, &ek_kernel_softmax, &ek_kernel_pad,
    &ek_kernel_transpose, &ek_kernel_mean, &ek_kernel_quantize, &ek_kernel_hard_swish,
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
};
#endif

const ek_kernel *ek_find_kernel(int32_t opcode) {
  for (size_t i = 0; i < sizeof(kernels) / sizeof(kernels[0]); ++i) {
    if (kernels[i] && kernels[i]->opcode == opcode) return kernels[i];
  }
  return (const ek_kernel *)0;
}
