/* edgekit Cortex-M startup (no vendor SDK): vector table, reset, stack painting, FPU/cache enable,
 * DWT cycle counter, semihosting, fault capture. Works on ARMv7-M (M4, M7) and ARMv8-M/8.1-M
 * mainline (M33, M55; secure state on the QEMU TrustZone boards).
 *
 * Linker symbols (from the generated linker script): __stack_limit__, __stack_top__ (the stack
 * sits at the bottom of RAM, below all data), __data_load__/__data_start__/__data_end__,
 * __bss_start__/__bss_end__.
 *
 * Stack overflow faults instead of corrupting memory: ARMv8-M sets MSPLIM to the stack limit;
 * ARMv7-M (M4, M7) makes the lowest 32 bytes of the stack a no-access MPU region (when the core
 * has an MPU), so the first push below the stack raises a MemManage fault.
 */
#include <stddef.h>
#include <stdint.h>

#include "ek_board.h"

/* 32 external interrupt entries: none is enabled, so any IRQ is unexpected and reported. */
#define EK_NUM_IRQS 32
#define EK_TRAP4 ek_fault_trap, ek_fault_trap, ek_fault_trap, ek_fault_trap
#define EK_TRAP32 EK_TRAP4, EK_TRAP4, EK_TRAP4, EK_TRAP4, EK_TRAP4, EK_TRAP4, EK_TRAP4, EK_TRAP4
#ifndef EK_SEMIHOSTING
#define EK_SEMIHOSTING 0
#endif
#ifndef EK_ENABLE_CACHES
#define EK_ENABLE_CACHES 0
#endif

#if defined(__ARM_ARCH_8M_MAIN__) || defined(__ARM_ARCH_8_1M_MAIN__)
#define EK_HAS_MSPLIM 1
#else
#define EK_HAS_MSPLIM 0
#endif

#define EK_REG(addr) (*(volatile uint32_t *)(addr))
#define SCB_VTOR EK_REG(0xE000ED08u)
#define SCB_CCR EK_REG(0xE000ED14u)
#define SCB_CFSR EK_REG(0xE000ED28u)
#define SCB_HFSR EK_REG(0xE000ED2Cu)
#define SCB_MMFAR EK_REG(0xE000ED34u)
#define SCB_BFAR EK_REG(0xE000ED38u)
#define SCB_CCSIDR EK_REG(0xE000ED80u)
#define SCB_CSSELR EK_REG(0xE000ED84u)
#define SCB_CPACR EK_REG(0xE000ED88u)
#define SCB_ICIALLU EK_REG(0xE000EF50u)
#define SCB_DCISW EK_REG(0xE000EF60u)
#define MPU_TYPE EK_REG(0xE000ED90u)
#define MPU_CTRL EK_REG(0xE000ED94u)
#define MPU_RNR EK_REG(0xE000ED98u)
#define MPU_RBAR EK_REG(0xE000ED9Cu)
#define MPU_RASR EK_REG(0xE000EDA0u)
#define DEMCR EK_REG(0xE000EDFCu)
#define DWT_CTRL EK_REG(0xE0001000u)
#define DWT_CYCCNT EK_REG(0xE0001004u)
#define DWT_LAR EK_REG(0xE0001FB0u)

extern uint32_t __stack_limit__[], __stack_top__[];
extern uint32_t __data_load__[], __data_start__[], __data_end__[];
extern uint32_t __bss_start__[], __bss_end__[];

extern int main(void);
void Reset_Handler(void) __attribute__((noreturn));
void ek_fault_trap(void);
void ek_fault_entry(uint32_t *frame, uint32_t exc_return) __attribute__((noreturn, used));

const char ek_board_name[] = EK_BOARD_NAME;

/* Stack for the fault path: the main stack may be the thing that overflowed. */
uint32_t ek_fault_stack[192] __attribute__((aligned(8)));

typedef void (*ek_vector)(void);

/* Vector table: placed first in FLASH by the linker script (.vectors). */
__attribute__((section(".vectors"), used)) const ek_vector ek_vectors[16 + EK_NUM_IRQS] = {
    (ek_vector)(uintptr_t)__stack_top__, /* initial MSP */
    Reset_Handler,
    ek_fault_trap, /* NMI */
    ek_fault_trap, /* HardFault */
    ek_fault_trap, /* MemManage */
    ek_fault_trap, /* BusFault */
    ek_fault_trap, /* UsageFault */
    ek_fault_trap, /* SecureFault (ARMv8-M) */
    0, 0, 0,       /* reserved */
    ek_fault_trap, /* SVCall: unused */
    ek_fault_trap, /* DebugMonitor: unused */
    0,             /* reserved */
    ek_fault_trap, /* PendSV: unused */
    ek_fault_trap, /* SysTick: unused */
    EK_TRAP32};

/* ------------------------------------------------------------------ reset */

static void fpu_enable(void) {
#if defined(__ARM_FP) || defined(__ARM_FEATURE_MVE)
  SCB_CPACR |= 0xFu << 20; /* CP10 + CP11 full access (FPU, and Helium on M55) */
  __asm volatile("dsb\n\tisb" ::: "memory");
#endif
}

#if EK_ENABLE_CACHES
/* Cortex-M7 L1 caches: invalidate, then enable (I-cache and D-cache). */
static void caches_enable(void) {
  __asm volatile("dsb\n\tisb" ::: "memory");
  SCB_ICIALLU = 0;
  __asm volatile("dsb\n\tisb" ::: "memory");
  SCB_CCR |= 1u << 17; /* IC */
  SCB_CSSELR = 0;      /* level 1 data cache */
  __asm volatile("dsb" ::: "memory");
  uint32_t ccsidr = SCB_CCSIDR;
  uint32_t sets = (ccsidr >> 13) & 0x7FFFu;
  do {
    uint32_t ways = (ccsidr >> 3) & 0x3FFu;
    do {
      SCB_DCISW = ((sets & 0x1FFu) << 5) | ((ways & 0x3u) << 30);
    } while (ways-- != 0u);
  } while (sets-- != 0u);
  __asm volatile("dsb" ::: "memory");
  SCB_CCR |= 1u << 16; /* DC */
  __asm volatile("dsb\n\tisb" ::: "memory");
}
#endif

static int cycles_ok;
static uint32_t guard_bytes; /* bottom of the stack made inaccessible by the MPU (0 without guard) */

static void stack_guard_enable(void) {
#if !EK_HAS_MSPLIM
  if (((MPU_TYPE >> 8) & 0xFFu) == 0u) return; /* no MPU regions */
  MPU_RNR = 0;
  MPU_RBAR = (uint32_t)(uintptr_t)__stack_limit__; /* 32-byte aligned by the linker script */
  MPU_RASR = (1u << 28) | (0u << 24) | (4u << 1) | 1u; /* XN, no access, 2^(4+1) = 32 bytes, enabled */
  MPU_CTRL = (1u << 2) | 1u;                           /* PRIVDEFENA: default map elsewhere; enable */
  __asm volatile("dsb\n\tisb" ::: "memory");
  guard_bytes = 32u;
#endif
}

static void cycles_init(void) {
  DEMCR |= 1u << 24;      /* TRCENA: enable DWT */
  DWT_LAR = 0xC5ACCE55u;  /* unlock where a lock exists (Cortex-M7) */
  if (DWT_CTRL & (1u << 25)) return; /* NOCYCCNT */
  DWT_CYCCNT = 0;
  DWT_CTRL |= 1u;         /* CYCCNTENA */
  uint32_t before = DWT_CYCCNT;
  for (volatile int i = 0; i < 8; ++i) {
  }
  cycles_ok = DWT_CYCCNT != before; /* QEMU does not model DWT: stays 0 */
}

int ek_cycles_available(void) { return cycles_ok; }
uint32_t ek_cycles(void) { return cycles_ok ? DWT_CYCCNT : 0u; }

__attribute__((optimize("no-tree-loop-distribute-patterns"))) void Reset_Handler(void) {
  fpu_enable();
#if EK_HAS_MSPLIM
  __asm volatile("msr msplim, %0" ::"r"(__stack_limit__));
#endif
  /* Paint the stack below the current frame so its high-water mark can be measured. */
  uint32_t sp;
  __asm volatile("mov %0, sp" : "=r"(sp));
  for (uint32_t *p = __stack_limit__; (uintptr_t)p < sp - 64u; ++p) *p = EK_STACK_PAINT;
  for (uint32_t *src = __data_load__, *dst = __data_start__; dst < __data_end__;) *dst++ = *src++;
  for (uint32_t *dst = __bss_start__; dst < __bss_end__;) *dst++ = 0;
  SCB_VTOR = (uint32_t)(uintptr_t)ek_vectors;
  __asm volatile("dsb\n\tisb" ::: "memory");
#if EK_ENABLE_CACHES
  caches_enable();
#endif
  stack_guard_enable();
  cycles_init();
  ek_soc_init();
  ek_uart_init();
  int rc = main();
  ek_board_exit(rc == 0 ? EK_EXIT_OK : EK_EXIT_MAIN_RETURNED);
}

/* ------------------------------------------------------------------ stack */

static const uint32_t *stack_floor(void) { return __stack_limit__ + guard_bytes / 4u; }

uint32_t ek_stack_bytes(void) { return (uint32_t)((uintptr_t)__stack_top__ - (uintptr_t)stack_floor()); }

uint32_t ek_stack_used(void) {
  const uint32_t *p = stack_floor();
  while (p < __stack_top__ && *p == EK_STACK_PAINT) ++p;
  return (uint32_t)((uintptr_t)__stack_top__ - (uintptr_t)p);
}

/* ------------------------------------------------------------------ semihosting */

#if EK_SEMIHOSTING
static int semihost_call(int op, const void *arg) {
  register int r0 __asm("r0") = op;
  register const void *r1 __asm("r1") = arg;
  __asm volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}
#endif

void ek_semihost_write(const char *text) {
#if EK_SEMIHOSTING
  semihost_call(0x04, text); /* SYS_WRITE0 */
#else
  (void)text;
#endif
}

void ek_board_exit(int code) {
#if EK_SEMIHOSTING
  uint32_t block[2] = {0x20026u, (uint32_t)code}; /* ADP_Stopped_ApplicationExit, exit code */
  semihost_call(0x20, block);                       /* SYS_EXIT_EXTENDED */
#else
  (void)code;
#endif
  __asm volatile("cpsid i" ::: "memory");
  for (;;) __asm volatile("wfi");
}

/* ------------------------------------------------------------------ faults */

/* Every fault and unexpected exception lands here: pick the stacked frame, move to the fault stack
   (the main stack may have overflowed), continue in C. */
__attribute__((naked)) void ek_fault_trap(void) {
  __asm volatile(
      "tst lr, #4\n\t"
      "ite eq\n\t"
      "mrseq r0, msp\n\t"
      "mrsne r0, psp\n\t"
      "mov r1, lr\n\t"
#if EK_HAS_MSPLIM
      "movs r2, #0\n\t"
      "msr msplim, r2\n\t"
#endif
      "ldr r2, =ek_fault_stack + 768\n\t"
      "mov sp, r2\n\t"
      "b ek_fault_entry\n\t"
      ".ltorg\n\t");
}

static char *put_text(char *p, char *end, const char *s) {
  while (*s && p < end) *p++ = *s++;
  return p;
}

static char *put_hex(char *p, char *end, uint32_t v) {
  static const char digits[] = "0123456789abcdef";
  p = put_text(p, end, "0x");
  for (int shift = 28; shift >= 0 && p < end; shift -= 4) *p++ = digits[(v >> shift) & 0xFu];
  return p;
}

static const char *exception_name(uint32_t n) {
  switch (n) {
    case 2: return "NMI";
    case 3: return "HardFault";
    case 4: return "MemManage";
    case 5: return "BusFault";
    case 6: return "UsageFault";
    case 7: return "SecureFault";
    default: return n >= 16 ? "unexpected IRQ" : "unexpected exception";
  }
}

size_t ek_fault_format(const ek_fault_info *info, char *out, size_t cap) {
  if (cap == 0) return 0;
  char *p = out, *end = out + cap - 1;
  p = put_text(p, end, exception_name(info->exception));
  p = put_text(p, end, " exception=");
  p = put_hex(p, end, info->exception);
  if (info->frame_valid) {
    p = put_text(p, end, " pc=");
    p = put_hex(p, end, info->pc);
    p = put_text(p, end, " lr=");
    p = put_hex(p, end, info->lr);
    p = put_text(p, end, " xpsr=");
    p = put_hex(p, end, info->xpsr);
  } else {
    p = put_text(p, end, " (stack overflow: no exception frame)");
  }
  p = put_text(p, end, " sp=");
  p = put_hex(p, end, info->sp);
  p = put_text(p, end, " cfsr=");
  p = put_hex(p, end, info->cfsr);
  p = put_text(p, end, " hfsr=");
  p = put_hex(p, end, info->hfsr);
  p = put_text(p, end, " mmfar=");
  p = put_hex(p, end, info->mmfar);
  p = put_text(p, end, " bfar=");
  p = put_hex(p, end, info->bfar);
  *p = '\0';
  return (size_t)(p - out);
}

__attribute__((weak)) void ek_fault_report(const ek_fault_info *info) {
  char line[200];
  size_t n = ek_fault_format(info, line, sizeof line - 1);
  line[n] = '\n';
  line[n + 1] = '\0';
  ek_semihost_write(line);
}

void ek_fault_entry(uint32_t *frame, uint32_t exc_return) {
  ek_fault_info info = {0};
  uint32_t ipsr;
  __asm volatile("mrs %0, ipsr" : "=r"(ipsr));
  info.exception = ipsr & 0x1FFu;
  info.sp = (uint32_t)(uintptr_t)frame;
  info.exc_return = exc_return;
  info.cfsr = SCB_CFSR;
  /* The frame must lie in the usable stack (reading the MPU guard would fault again: lockup) and must
     have been written: not after a stacking error (MSTKERR, STKERR) or a stack-limit fault (STKOF). */
  info.frame_valid = frame >= stack_floor() && frame + 8 <= __stack_top__ &&
                     !(info.cfsr & ((1u << 4) | (1u << 12) | (1u << 20)));
  if (info.frame_valid) {
    info.lr = frame[5];
    info.pc = frame[6];
    info.xpsr = frame[7];
  }
  info.hfsr = SCB_HFSR;
  info.mmfar = SCB_MMFAR;
  info.bfar = SCB_BFAR;
  ek_fault_report(&info);
  ek_board_exit(EK_EXIT_FAULT);
}
