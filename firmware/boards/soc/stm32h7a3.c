/* STM32H7A3 (NUCLEO-H7A3ZI-Q): USART3 on PD8 (TX) / PD9 (RX), AF7, wired to the ST-LINK virtual COM port.
 * The core stays on its reset clock (HSI 64 MHz, all bus prescalers 1; no PLL or SMPS/VOS change):
 * USART3's kernel clock is then rcc_pclk1 = 64 MHz (EK_UART_CLOCK_HZ).
 * Register addresses from RM0455 and ST's stm32h7a3xxq.h (RCC AHB4ENR 0xE0, APB1LENR 0xE8).
 */
#include "ek_board.h"

#define REG(addr) (*(volatile uint32_t *)(addr))
#define RCC_BASE 0x58024400u
#define RCC_AHB4ENR REG(RCC_BASE + 0xE0u)
#define RCC_APB1LENR REG(RCC_BASE + 0xE8u)
#define GPIOD_BASE 0x58020C00u
#define GPIOD_MODER REG(GPIOD_BASE + 0x00u)
#define GPIOD_OSPEEDR REG(GPIOD_BASE + 0x08u)
#define GPIOD_PUPDR REG(GPIOD_BASE + 0x0Cu)
#define GPIOD_AFRH REG(GPIOD_BASE + 0x24u)

void ek_soc_init(void) {
  RCC_AHB4ENR |= 1u << 3;   /* GPIODEN */
  RCC_APB1LENR |= 1u << 18; /* USART3EN */
  (void)RCC_APB1LENR;
  GPIOD_MODER = (GPIOD_MODER & ~((3u << 16) | (3u << 18))) | (2u << 16) | (2u << 18); /* PD8, PD9: AF */
  GPIOD_OSPEEDR |= (2u << 16) | (2u << 18);
  GPIOD_PUPDR = (GPIOD_PUPDR & ~(3u << 18)) | (1u << 18); /* pull-up on RX */
  GPIOD_AFRH = (GPIOD_AFRH & ~0xFFu) | (7u << 0) | (7u << 4); /* PD8, PD9 AF7 = USART3 */
}
