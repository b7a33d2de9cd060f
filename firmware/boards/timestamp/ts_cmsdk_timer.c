/* Microsecond timestamps from an Arm CMSDK APB timer (MPS2/MPS3 FPGA images; QEMU models them).
 * Registers (Arm CMSDK technical reference, APB timer): CTRL 0x00 (bit0 enable), VALUE 0x04 (counts down),
 * RELOAD 0x08 (loaded when VALUE reaches 0), INTSTATUS 0x0C.
 * Config (ek_config.h): EK_TS_TIMER_BASE, EK_TS_TIMER_CLOCK_HZ (the timer's clock in Hz: the 25 MHz PCLK of the
 * MPS2 timers, or the 32 kHz slow clock of the SSE-300 s32ktimer on MPS3 AN547, 31.25 us per tick).
 * Under QEMU the timer follows QEMU's virtual clock, i.e. host time while the guest runs: the counts are
 * "emulated time", not the FPGA's real speed. The 32-bit down-counter is extended in software, so reads
 * must come at least every 2^32 / clock seconds (171 s at 25 MHz, 37 h at 32 kHz).
 */
#include "ek_config.h"
#include "ek_timestamp.h"

#define TIMER_REG(off) (*(volatile uint32_t *)(EK_TS_TIMER_BASE + (off)))
#define TIMER_CTRL TIMER_REG(0x00u)
#define TIMER_VALUE TIMER_REG(0x04u)
#define TIMER_RELOAD TIMER_REG(0x08u)

static uint32_t g_last;      /* VALUE at the previous read */
static uint64_t g_ticks;     /* ticks since init */

void ek_timestamp_init(void) {
  TIMER_CTRL = 0u;
  TIMER_RELOAD = 0xFFFFFFFFu;
  TIMER_VALUE = 0xFFFFFFFFu;
  TIMER_CTRL = 1u; /* enable, no interrupt, internal clock */
  g_last = TIMER_VALUE;
  g_ticks = 0u;
}

uint32_t ek_timestamp_us(void) {
  uint32_t now = TIMER_VALUE;
  g_ticks += (uint32_t)(g_last - now); /* down-counter: elapsed = previous - now (mod 2^32) */
  g_last = now;
  /* ticks * 1e6 / clock: exact floor for any clock (equals ticks / 25 at 25 MHz); no overflow for 2^64 / 1e6 ticks */
  return (uint32_t)((g_ticks * 1000000u) / (uint64_t)EK_TS_TIMER_CLOCK_HZ);
}

const char *ek_timestamp_source(void) { return "emulated time (CMSDK APB timer at " EK_TS_TIMER_CLOCK_TEXT ")"; }
