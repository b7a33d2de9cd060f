/* The MLPerf Tiny / EEMBC energy-mode timestamp pin on STM32 (GPIO v2 register layout: L4, L4+, H7, U5).
 * The interface board watches the pin for a falling edge (MLPerf Tiny submitter_implemented.h, th_timestamp
 * with EE_CFG_ENERGY_MODE == 1: pull low, hold for at least 1 us, release). The pin is OPEN-DRAIN as the EEMBC
 * API asks (th_lib.c th_timestamp_initialize: "Set up an OPEN-DRAIN GPIO"; th_timestamp: "Since GPIO pin is
 * OPEN-DRAIN it is OK to float and let the pullup resistor drive"): released, the interface board's pull-up
 * sets the level, so a DUT and an interface board at different I/O voltages do not fight. The reference
 * submissions on NUCLEO-L4R5ZI use Arduino header D7.
 * Config (ek_config.h): EK_TS_GPIO_BASE (GPIOx), EK_TS_GPIO_PIN (0..15), EK_TS_GPIO_RCC_ENR (the RCC
 * register enabling the port clock) and EK_TS_GPIO_RCC_BIT. Registers: MODER 0x00, OTYPER 0x04,
 * OSPEEDR 0x08, BSRR 0x18 (RM0432 for STM32L4+).
 */
#include "ek_board.h"
#include "ek_config.h"
#include "ek_timestamp.h"

#define GPIO_REG(off) (*(volatile uint32_t *)(EK_TS_GPIO_BASE + (off)))
#define GPIO_MODER GPIO_REG(0x00u)
#define GPIO_OTYPER GPIO_REG(0x04u)
#define GPIO_OSPEEDR GPIO_REG(0x08u)
#define GPIO_BSRR GPIO_REG(0x18u)
#define RCC_ENR (*(volatile uint32_t *)(EK_TS_GPIO_RCC_ENR))

void ek_timestamp_pin_init(void) {
  RCC_ENR |= 1u << EK_TS_GPIO_RCC_BIT;
  (void)RCC_ENR; /* read back: the clock is on before the port is touched */
  GPIO_BSRR = 1u << EK_TS_GPIO_PIN;                 /* released (high) before it becomes an output */
  GPIO_OTYPER |= 1u << EK_TS_GPIO_PIN;              /* open-drain (OTYPER bit = 1, RM0432 GPIOx_OTYPER) */
  GPIO_OSPEEDR |= 3u << (2u * EK_TS_GPIO_PIN);
  GPIO_MODER = (GPIO_MODER & ~(3u << (2u * EK_TS_GPIO_PIN))) | (1u << (2u * EK_TS_GPIO_PIN)); /* output */
}

void ek_timestamp_pin_pulse(void) {
  GPIO_BSRR = 1u << (EK_TS_GPIO_PIN + 16u); /* low */
  /* hold >= 1 us: ~4 cycles per iteration, EK_CPU_HZ / 250000 iterations = ~16 us at any clock */
  for (volatile uint32_t i = 0; i < EK_CPU_HZ / 250000u + 8u; ++i) {
  }
  GPIO_BSRR = 1u << EK_TS_GPIO_PIN;         /* released */
}
