/* edgekit board support: what the application sees of a board (C99, no vendor SDK).
 *
 * A board is put together from: common/startup.c (vector table, reset, faults, stack painting,
 * cycle counter, semihosting), one UART driver from drivers/, one soc/<soc>.c (clocks and pin
 * multiplexing) and a linker script plus ek_board_config.h generated from devices/<board>.yaml
 * by edgekit.firmware.boards.
 */
#ifndef EK_BOARD_H
#define EK_BOARD_H

#include <stddef.h>
#include <stdint.h>

#include "ek_board_config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Exit codes passed to the host through semihosting (QEMU exits with them). */
enum { EK_EXIT_OK = 0, EK_EXIT_MAIN_RETURNED = 2, EK_EXIT_FAULT = 3 };

/* --- UART (drivers/uart_*.c): polled, blocking, 8N1 at EK_UART_BAUD --- */
void ek_uart_init(void);
void ek_uart_write(const uint8_t *data, size_t n);
uint8_t ek_uart_read(void);           /* waits for one byte */
int ek_uart_poll(uint8_t *byte);      /* 1 and the byte if one is waiting, else 0 */

/* --- SoC (soc/<soc>.c): clocks and pins needed by the UART; called before ek_uart_init --- */
void ek_soc_init(void);

/* --- cycle counter (DWT CYCCNT where the core has it and it counts) --- */
int ek_cycles_available(void);        /* 0 when CYCCNT is absent or does not advance (QEMU) */
uint32_t ek_cycles(void);             /* free-running, wraps at 2^32 */

/* --- stack: painted with EK_STACK_PAINT at reset; the high-water mark is measured use --- */
#define EK_STACK_PAINT 0xC5AC5AC5u
uint32_t ek_stack_bytes(void);        /* size of the stack region */
uint32_t ek_stack_used(void);         /* deepest use since reset, in bytes */

/* --- semihosting (QEMU boards only; no-ops elsewhere) --- */
void ek_semihost_write(const char *text);
void ek_board_exit(int code) __attribute__((noreturn));

/* --- faults: startup.c catches HardFault/NMI/unexpected IRQs, fills this and calls
 *     ek_fault_report (weak: the default prints via semihosting), then exits (QEMU) or halts. --- */
typedef struct ek_fault_info {
  uint32_t exception;   /* IPSR exception number: 3 = HardFault, 2 = NMI, 16+ = IRQ */
  uint32_t pc, lr, xpsr;/* stacked by the exception entry (valid only if frame_valid) */
  uint32_t sp;          /* stack pointer at the fault */
  uint32_t cfsr, hfsr, mmfar, bfar;
  uint32_t exc_return;
  int frame_valid;      /* 0 when the stacked frame lies outside the stack (overflow) */
} ek_fault_info;
void ek_fault_report(const ek_fault_info *info);
/* Formats the fault as one line of text ("HardFault pc=0x... ..."); returns the length. */
size_t ek_fault_format(const ek_fault_info *info, char *out, size_t cap);

/* --- instruction-count markers (common/ek_markers.S): one distinct instruction each; the QEMU
 *     plugin records its counter when they execute. Call them around what you want to count. --- */
void ek_marker_infer_begin(void);
void ek_marker_infer_end(void);
void ek_marker_op_begin(void);
void ek_marker_op_end(void);

extern const char ek_board_name[];

#ifdef __cplusplus
}
#endif
#endif
