/* edgekit board hooks for benchmark timestamps (used by the MLPerf Tiny harness, app/mlperf_harness.c).
 *
 * Performance mode: a free-running microsecond count, printed by the harness as `m-lap-us-N`
 * (MLPerf Tiny api/submitter_implemented.h, th_timestamp: "m-lap-us-%lu" from a microsecond timer).
 * Energy mode: a pulse on the board's timestamp GPIO, which the EEMBC/MLPerf Tiny interface board
 * timestamps (th_timestamp with EE_CFG_ENERGY_MODE == 1: pull the pin low, hold it >= 1 us, release).
 *
 * Drivers (firmware/boards/timestamp/): ts_cmsdk_timer.c (CMSDK APB timer: MPS2 FPGA images and their
 * QEMU models, where it counts emulated time), ts_dwt.c (DWT CYCCNT / core clock: real Cortex-M3/4/7/33/55),
 * ts_gpio_stm32.c (the timestamp pin of STM32 boards). Which ones a board uses comes from its profile
 * (devices/<board>.yaml, key `mlperf`), and their macros from ek_config.h.
 */
#ifndef EK_TIMESTAMP_H
#define EK_TIMESTAMP_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

void ek_timestamp_init(void);      /* start the microsecond timer */
uint32_t ek_timestamp_us(void);    /* microseconds since ek_timestamp_init, wraps at 2^32 */
const char *ek_timestamp_source(void); /* what the count is, e.g. "emulated time (CMSDK APB timer)" */

void ek_timestamp_pin_init(void);  /* configure the timestamp GPIO as output, released (high) */
void ek_timestamp_pin_pulse(void); /* pull low for >= 1 us, then release */

#ifdef __cplusplus
}
#endif
#endif
