/* Arm MPS2/MPS3 FPGA images (and their QEMU models): the UART needs no clock or pin setup. */
#include "ek_board.h"

void ek_soc_init(void) {}
