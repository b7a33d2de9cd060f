/* nRF52840 (nRF52840-DK): the CPU runs from the 64 MHz internal oscillator at reset; UARTE0 selects
 * its pins through PSEL (drivers/uart_nrf_uarte.c), so no pin multiplexing is needed here.
 * The DK wires P0.06 (TX) and P0.08 (RX) to the J-Link/interface MCU virtual COM port.
 */
#include "ek_board.h"

void ek_soc_init(void) {}
