/* Microsecond timestamps from the DWT cycle counter (CYCCNT) and the core clock EK_CPU_HZ.
 * Real Cortex-M3/M4/M7/M33/M55 cores; startup.c enables CYCCNT. The 32-bit count is extended in software,
 * so reads must come at least every 2^32 / EK_CPU_HZ seconds (1073 s at the 4 MHz reset clock of the
 * NUCLEO-L4R5ZI as edgekit leaves it, 35 s at 120 MHz).
 */
#include "ek_board.h"
#include "ek_timestamp.h"

static uint32_t g_last;
static uint64_t g_cycles;

void ek_timestamp_init(void) {
  g_last = ek_cycles();
  g_cycles = 0u;
}

uint32_t ek_timestamp_us(void) {
  uint32_t now = ek_cycles();
  g_cycles += (uint32_t)(now - g_last);
  g_last = now;
  return (uint32_t)(g_cycles / (EK_CPU_HZ / 1000000u));
}

const char *ek_timestamp_source(void) { return "DWT cycle counter / core clock"; }
