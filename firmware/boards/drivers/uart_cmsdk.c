/* Arm CMSDK APB UART (MPS2/MPS3 FPGA images and their QEMU models), polled.
 * Registers: DATA 0x00, STATE 0x04 (bit0 TX full, bit1 RX full, bit2/3 TX/RX overrun),
 * CTRL 0x08 (bit0 TX enable, bit1 RX enable), INTSTATUS 0x0C, BAUDDIV 0x10 (>= 16).
 * Config: EK_UART_BASE, EK_UART_BAUD, EK_UART_CLOCK_HZ (the UART's PCLK).
 */
#include "ek_board.h"

#define UART_REG(off) (*(volatile uint32_t *)(EK_UART_BASE + (off)))
#define UART_DATA UART_REG(0x00u)
#define UART_STATE UART_REG(0x04u)
#define UART_CTRL UART_REG(0x08u)
#define UART_BAUDDIV UART_REG(0x10u)

#define STATE_TX_FULL 0x1u
#define STATE_RX_FULL 0x2u
#define STATE_OVERRUNS 0xCu

void ek_uart_init(void) {
  uint32_t div = EK_UART_CLOCK_HZ / EK_UART_BAUD;
  UART_BAUDDIV = div < 16u ? 16u : div;
  UART_STATE = STATE_OVERRUNS; /* write 1 to clear */
  UART_CTRL = 0x3u;            /* TX + RX enable, no interrupts */
  /* A read of DATA makes QEMU's model poll its input again: input that reached it while the receiver
     was still disabled would otherwise stay stalled (QEMU re-checks only on a DATA read). */
  (void)UART_DATA;
}

void ek_uart_write(const uint8_t *data, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    while (UART_STATE & STATE_TX_FULL) {
    }
    UART_DATA = data[i];
  }
}

int ek_uart_poll(uint8_t *byte) {
  uint32_t state = UART_STATE;
  if (state & STATE_OVERRUNS) UART_STATE = state & STATE_OVERRUNS;
  if (!(state & STATE_RX_FULL)) return 0;
  *byte = (uint8_t)UART_DATA;
  return 1;
}

uint8_t ek_uart_read(void) {
  uint8_t byte;
  while (!ek_uart_poll(&byte)) {
  }
  return byte;
}
