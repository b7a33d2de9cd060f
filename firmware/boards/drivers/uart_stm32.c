/* STM32 USART / LPUART (the "v2" register layout of STM32L4, L4+, H7, G4, ...), polled.
 * Registers: CR1 0x00 (UE bit0, RE bit2, TE bit3), CR2 0x04, CR3 0x08, BRR 0x0C, ISR 0x1C
 * (FE bit1, NE bit2, ORE bit3, RXNE bit5, TXE bit7), ICR 0x20, RDR 0x24, TDR 0x28.
 * Baud: USART BRR = f_ck / baud (oversampling 16); LPUART BRR = 256 * f_ck / baud (EK_UART_LPUART=1).
 * Config: EK_UART_BASE, EK_UART_BAUD, EK_UART_CLOCK_HZ (kernel clock of the U(S)ART), EK_UART_LPUART.
 * Clocks and pins are set up by soc/<soc>.c before ek_uart_init.
 */
#include "ek_board.h"

#ifndef EK_UART_LPUART
#define EK_UART_LPUART 0
#endif

#define UART_REG(off) (*(volatile uint32_t *)(EK_UART_BASE + (off)))
#define UART_CR1 UART_REG(0x00u)
#define UART_CR2 UART_REG(0x04u)
#define UART_CR3 UART_REG(0x08u)
#define UART_BRR UART_REG(0x0Cu)
#define UART_ISR UART_REG(0x1Cu)
#define UART_ICR UART_REG(0x20u)
#define UART_RDR UART_REG(0x24u)
#define UART_TDR UART_REG(0x28u)

#define ISR_ERRORS 0xEu /* FE | NE | ORE */
#define ISR_RXNE (1u << 5)
#define ISR_TXE (1u << 7)

void ek_uart_init(void) {
  UART_CR1 = 0; /* disabled while configuring */
  UART_CR2 = 0; /* 1 stop bit */
  UART_CR3 = 0;
#if EK_UART_LPUART
  UART_BRR = (uint32_t)(((uint64_t)EK_UART_CLOCK_HZ * 256u + EK_UART_BAUD / 2u) / EK_UART_BAUD);
#else
  UART_BRR = (EK_UART_CLOCK_HZ + EK_UART_BAUD / 2u) / EK_UART_BAUD;
#endif
  UART_CR1 = (1u << 3) | (1u << 2) | 1u; /* TE | RE | UE, 8 data bits, no parity */
}

void ek_uart_write(const uint8_t *data, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    while (!(UART_ISR & ISR_TXE)) {
    }
    UART_TDR = data[i];
  }
  while (!(UART_ISR & (1u << 6))) { /* TC: last byte out before anyone resets the core */
  }
}

int ek_uart_poll(uint8_t *byte) {
  uint32_t isr = UART_ISR;
  if (isr & ISR_ERRORS) UART_ICR = isr & ISR_ERRORS; /* an overrun stops reception until cleared */
  if (!(isr & ISR_RXNE)) return 0;
  *byte = (uint8_t)UART_RDR;
  return 1;
}

uint8_t ek_uart_read(void) {
  uint8_t byte;
  while (!ek_uart_poll(&byte)) {
  }
  return byte;
}
