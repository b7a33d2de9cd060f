/* STM32L4R5 (NUCLEO-L4R5ZI): LPUART1 on PG7 (TX) / PG8 (RX), AF8, wired to the ST-LINK virtual COM port.
 * The core stays on its reset clock (MSI 4 MHz; no PLL setup): EK_UART_CLOCK_HZ must match.
 * PG2..PG15 are powered from VDDIO2, which must be declared valid (PWR_CR2.IOSV) before use.
 * Register addresses from RM0432 (STM32L4+ reference manual).
 */
#include "ek_board.h"

#define REG(addr) (*(volatile uint32_t *)(addr))
#define RCC_BASE 0x40021000u
#define RCC_AHB2ENR REG(RCC_BASE + 0x4Cu)
#define RCC_APB1ENR1 REG(RCC_BASE + 0x58u)
#define RCC_APB1ENR2 REG(RCC_BASE + 0x5Cu)
#define PWR_CR2 REG(0x40007000u + 0x04u)
#define GPIOG_BASE 0x48001800u
#define GPIOG_MODER REG(GPIOG_BASE + 0x00u)
#define GPIOG_OSPEEDR REG(GPIOG_BASE + 0x08u)
#define GPIOG_PUPDR REG(GPIOG_BASE + 0x0Cu)
#define GPIOG_AFRL REG(GPIOG_BASE + 0x20u)
#define GPIOG_AFRH REG(GPIOG_BASE + 0x24u)

void ek_soc_init(void) {
  RCC_APB1ENR1 |= 1u << 28; /* PWREN */
  (void)RCC_APB1ENR1;
  PWR_CR2 |= 1u << 9;       /* IOSV: VDDIO2 valid (PG2..PG15) */
  RCC_AHB2ENR |= 1u << 6;   /* GPIOGEN */
  RCC_APB1ENR2 |= 1u << 0;  /* LPUART1EN (clock source: PCLK1, the reset default) */
  (void)RCC_APB1ENR2;
  GPIOG_MODER = (GPIOG_MODER & ~((3u << 14) | (3u << 16))) | (2u << 14) | (2u << 16); /* PG7, PG8: AF */
  GPIOG_OSPEEDR |= (2u << 14) | (2u << 16);
  GPIOG_PUPDR = (GPIOG_PUPDR & ~(3u << 16)) | (1u << 16); /* pull-up on RX */
  GPIOG_AFRL = (GPIOG_AFRL & ~(0xFu << 28)) | (8u << 28); /* PG7 AF8 = LPUART1_TX */
  GPIOG_AFRH = (GPIOG_AFRH & ~0xFu) | 8u;                 /* PG8 AF8 = LPUART1_RX */
}
