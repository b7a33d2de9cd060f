/* STM32L4R5 (NUCLEO-L4R5ZI): core clock 120 MHz, and the UART pins of the profile's UART.
 *
 * Clock (RM0432; the sequence of ST's STM32CubeL4 Projects/STM32L4R9I-EVAL/Templates_LL SystemClock_Config, an
 * STM32L4+ at 120 MHz): voltage range 1 boost mode (PWR_CR5.R1MODE = 0, needed above 80 MHz), flash latency
 * 5 wait states (FLASH_ACR.LATENCY), main PLL from MSI 4 MHz (the reset clock): PLLM /1, PLLN x60, PLLR /2 =
 * 240 MHz VCO / 2 = 120 MHz; the switch to the PLL goes through AHB /2 held for > 1 us, then AHB /1, APB1/APB2
 * /1: HCLK = PCLK1 = PCLK2 = 120 MHz (the U(S)ART kernel clock, EK_UART_CLOCK_HZ). The MLPerf Tiny v0.5 reference
 * submission on this board ran at 120 MHz.
 *
 * UART: LPUART1 on PG7 (TX) / PG8 (RX), AF8 = the ST-LINK virtual COM port (default); or, when the profile's
 * UART is USART3 (EK_UART_BASE 0x40004800: the MLPerf Tiny energy mode, where the EEMBC IO manager is wired to
 * the Arduino header), USART3 on Arduino D1 = PD8 (TX) / D0 = PD9 (RX), AF7 (UM2179 pin assignments; Zephyr
 * boards/st/nucleo_l4r5zi/arduino_r3_connector.dtsi: D0 = PD9, D1 = PD8, arduino_serial = usart3).
 * PG2..PG15 are powered from VDDIO2, which must be declared valid (PWR_CR2.IOSV) before use.
 */
#include "ek_board.h"

#define REG(addr) (*(volatile uint32_t *)(addr))
#define RCC_BASE 0x40021000u
#define RCC_CR REG(RCC_BASE + 0x00u)
#define RCC_CFGR REG(RCC_BASE + 0x08u)
#define RCC_PLLCFGR REG(RCC_BASE + 0x0Cu)
#define RCC_AHB2ENR REG(RCC_BASE + 0x4Cu)
#define RCC_APB1ENR1 REG(RCC_BASE + 0x58u)
#define RCC_APB1ENR2 REG(RCC_BASE + 0x5Cu)
#define PWR_BASE 0x40007000u
#define PWR_CR2 REG(PWR_BASE + 0x04u)
#define PWR_CR5 REG(PWR_BASE + 0x80u)
#define FLASH_ACR REG(0x40022000u)
#define GPIO_MODER(base) REG((base) + 0x00u)
#define GPIO_OSPEEDR(base) REG((base) + 0x08u)
#define GPIO_PUPDR(base) REG((base) + 0x0Cu)
#define GPIO_AFRL(base) REG((base) + 0x20u)
#define GPIO_AFRH(base) REG((base) + 0x24u)
#define GPIOD_BASE 0x48000C00u
#define GPIOG_BASE 0x48001800u

#define USART3_BASE 0x40004800u

#define CR_PLLON (1u << 24)
#define CR_PLLRDY (1u << 25)
#define PLLCFGR_SRC_MSI 1u                /* PLLSRC [1:0] = 01 */
#define PLLCFGR_M_DIV1 (0u << 4)          /* PLLM [7:4] = M - 1 */
#define PLLCFGR_N60 (60u << 8)            /* PLLN [14:8] */
#define PLLCFGR_R_DIV2 (0u << 25)         /* PLLR [26:25] = 00: /2 */
#define PLLCFGR_REN (1u << 24)
#define CFGR_SW_PLL 3u                    /* SW [1:0], SWS [3:2] */
#define CFGR_HPRE_MASK (0xFu << 4)
#define CFGR_HPRE_DIV2 (8u << 4)
#define CFGR_PPRE_MASK ((7u << 8) | (7u << 11))

/* Pins pin_a, pin_b of the GPIO port at base to alternate function af. */
static void alternate(uint32_t base, uint32_t pin_a, uint32_t pin_b, uint32_t af, uint32_t pull_up_pin) {
  uint32_t pins[2] = {pin_a, pin_b};
  for (int i = 0; i < 2; ++i) {
    uint32_t p = pins[i];
    GPIO_MODER(base) = (GPIO_MODER(base) & ~(3u << (2u * p))) | (2u << (2u * p));
    GPIO_OSPEEDR(base) |= 2u << (2u * p);
    if (p < 8u) {
      GPIO_AFRL(base) = (GPIO_AFRL(base) & ~(0xFu << (4u * p))) | (af << (4u * p));
    } else {
      GPIO_AFRH(base) = (GPIO_AFRH(base) & ~(0xFu << (4u * (p - 8u)))) | (af << (4u * (p - 8u)));
    }
  }
  GPIO_PUPDR(base) = (GPIO_PUPDR(base) & ~(3u << (2u * pull_up_pin))) | (1u << (2u * pull_up_pin)); /* RX */
}

static void clock_120mhz(void) {
  PWR_CR5 &= ~(1u << 8);                  /* R1MODE = 0: range 1 boost mode (PWREN set by the caller) */
  FLASH_ACR = (FLASH_ACR & ~0xFu) | 5u;   /* LATENCY = 5 WS before raising the clock */
  while ((FLASH_ACR & 0xFu) != 5u) {
  }
  RCC_CR &= ~CR_PLLON;
  while (RCC_CR & CR_PLLRDY) {
  }
  RCC_PLLCFGR = PLLCFGR_SRC_MSI | PLLCFGR_M_DIV1 | PLLCFGR_N60 | PLLCFGR_R_DIV2 | PLLCFGR_REN;
  RCC_CR |= CR_PLLON;
  while (!(RCC_CR & CR_PLLRDY)) {
  }
  RCC_CFGR = (RCC_CFGR & ~CFGR_HPRE_MASK) | CFGR_HPRE_DIV2; /* intermediate AHB /2 above 80 MHz */
  RCC_CFGR = (RCC_CFGR & ~3u) | CFGR_SW_PLL;
  while (((RCC_CFGR >> 2) & 3u) != CFGR_SW_PLL) {
  }
  for (volatile uint32_t i = 0; i < 200u; ++i) { /* hold AHB /2 for > 1 us (>= 600 cycles at 60 MHz) */
  }
  RCC_CFGR &= ~(CFGR_HPRE_MASK | CFGR_PPRE_MASK); /* AHB, APB1, APB2 /1 */
}

void ek_soc_init(void) {
  RCC_APB1ENR1 |= 1u << 28; /* PWREN */
  (void)RCC_APB1ENR1;
  clock_120mhz();
#if EK_UART_BASE == USART3_BASE
  RCC_AHB2ENR |= 1u << 3;   /* GPIODEN */
  RCC_APB1ENR1 |= 1u << 18; /* USART3EN (kernel clock: PCLK1, the reset default) */
  (void)RCC_APB1ENR1;
  alternate(GPIOD_BASE, 8u, 9u, 7u, 9u); /* PD8 = USART3_TX (D1), PD9 = USART3_RX (D0), AF7 */
#else
  PWR_CR2 |= 1u << 9;       /* IOSV: VDDIO2 valid (PG2..PG15) */
  RCC_AHB2ENR |= 1u << 6;   /* GPIOGEN */
  RCC_APB1ENR2 |= 1u << 0;  /* LPUART1EN (clock source: PCLK1, the reset default) */
  (void)RCC_APB1ENR2;
  alternate(GPIOG_BASE, 7u, 8u, 8u, 8u); /* PG7 = LPUART1_TX, PG8 = LPUART1_RX, AF8 */
#endif
}
