/* Kernel table. Weak references: only the kernels a build links are found. */
#include "ek_kernels.h"

#define EK_WEAK __attribute__((weak))
extern const ek_kernel ek_kernel_add EK_WEAK, ek_kernel_average_pool_2d EK_WEAK, ek_kernel_concatenation EK_WEAK,
    ek_kernel_conv_2d EK_WEAK, ek_kernel_depthwise_conv_2d EK_WEAK, ek_kernel_dequantize EK_WEAK,
    ek_kernel_fully_connected EK_WEAK, ek_kernel_logistic EK_WEAK, ek_kernel_max_pool_2d EK_WEAK, ek_kernel_mul EK_WEAK,
    ek_kernel_reshape EK_WEAK, ek_kernel_softmax EK_WEAK, ek_kernel_pad EK_WEAK, ek_kernel_transpose EK_WEAK,
    ek_kernel_mean EK_WEAK, ek_kernel_quantize EK_WEAK, ek_kernel_hard_swish EK_WEAK;
extern const ek_kernel ek_kernel_call_once EK_WEAK, ek_kernel_var_handle EK_WEAK, ek_kernel_read_variable EK_WEAK,
    ek_kernel_assign_variable EK_WEAK;
extern const ek_kernel ek_kernel_svdf EK_WEAK;

static const ek_kernel *const kernels[] = {
    &ek_kernel_add, &ek_kernel_average_pool_2d, &ek_kernel_concatenation, &ek_kernel_conv_2d,
    &ek_kernel_depthwise_conv_2d, &ek_kernel_dequantize, &ek_kernel_fully_connected, &ek_kernel_logistic,
    &ek_kernel_max_pool_2d, &ek_kernel_mul, &ek_kernel_reshape, &ek_kernel_softmax, &ek_kernel_pad,
    &ek_kernel_transpose, &ek_kernel_mean, &ek_kernel_quantize, &ek_kernel_hard_swish,
    &ek_kernel_call_once, &ek_kernel_var_handle, &ek_kernel_read_variable, &ek_kernel_assign_variable,
    &ek_kernel_svdf,
};

const ek_kernel *ek_find_kernel(int32_t opcode) {
  for (size_t i = 0; i < sizeof(kernels) / sizeof(kernels[0]); ++i) {
    if (kernels[i] && kernels[i]->opcode == opcode) return kernels[i];
  }
  return (const ek_kernel *)0;
}
