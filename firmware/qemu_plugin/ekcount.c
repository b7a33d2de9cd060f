/* ekcount: a QEMU TCG plugin that counts executed guest instructions exactly and records the count
 * whenever one of edgekit's marker functions runs (firmware/boards/common/ek_markers.S).
 *
 * Arguments (-plugin ekcount.so,out=FILE,ib=ADDR,ie=ADDR,ob=ADDR,oe=ADDR[,mode=tb|insn]):
 *   out   file to write (required)
 *   ib/ie addresses of ek_marker_infer_begin / ek_marker_infer_end
 *   ob/oe addresses of ek_marker_op_begin / ek_marker_op_end (optional)
 *   mode  tb (default): one inline add of the block's instruction count when a translation block starts;
 *         insn: one inline add per instruction (slower; identical counts unless a block is left half-way
 *         by a fault, where tb counts the rest of the block too).
 * Output, one event per line: "<kind> <instructions executed so far>", kinds B/E (inference begin/end),
 * b/e (operator begin/end), and "X <total>" when QEMU exits. The file is flushed after every E.
 * Right after every B and E: "C <n_0> ... <n_k>", the executed instructions per class so far (the classes are
 * named, in order, on the "# classes" header line; ek_classify below), then the conditional branches taken.
 * A cycle model (edgekit/firmware/cycle_model.py) turns these into an estimate; QEMU itself has no timing.
 *
 * Debian ships no qemu-plugin.h, so the few API declarations used are written out below, exactly as in
 * QEMU 7.2's include/qemu/qemu-plugin.h (plugin API version 1).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- QEMU 7.2 plugin API (subset) ---- */
typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t {
  const char *target_name;
  struct {
    int min;
    int cur;
  } version;
  bool system_emulation;
  union {
    struct {
      int smp_vcpus;
      int max_vcpus;
    } system;
  };
} qemu_info_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, qemu_plugin_vcpu_udata_cb_t cb,
                                          enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op, void *ptr,
                                              uint64_t imm);
void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *insn, enum qemu_plugin_op op, void *ptr,
                                                uint64_t imm);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
void qemu_plugin_outs(const char *string);
#define EK_EXPORT __attribute__((visibility("default")))
EK_EXPORT int qemu_plugin_version = 1;
EK_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv);
/* ---- end of the API subset ---- */

enum { MARK_INFER_BEGIN, MARK_INFER_END, MARK_OP_BEGIN, MARK_OP_END, MARK_COUNT };
static const char mark_kind[MARK_COUNT] = {'B', 'E', 'b', 'e'};
static const char *const mark_arg[MARK_COUNT] = {"ib", "ie", "ob", "oe"};

/* Instruction classes (Armv7-M / Armv8-M Thumb-2 encodings, as the Arm ARM groups them). Every instruction is in
 * exactly one class, except two extra tallies: multi-register transfers count their transferred registers in
 * *_REGS (cost 1 + N on Cortex-M4), and C_PC_LOADS counts the LDM/POP that load pc (a branch on top of the load). */
enum {
  C_ALU, C_LOAD, C_STORE, C_LOAD_MULTI, C_LOAD_REGS, C_STORE_MULTI, C_STORE_REGS, C_MUL, C_DIV,
  C_BRANCH, C_BRANCH_COND, C_FP, C_FP_DIV, C_FP_LOAD, C_FP_STORE, C_MVE, C_OTHER, C_PC_LOADS, C_COUNT
};
static const char *const class_name[C_COUNT] = {
    "alu", "load", "store", "load_multiple", "load_multiple_registers", "store_multiple", "store_multiple_registers",
    "multiply", "divide", "branch", "branch_conditional", "fp", "fp_divide_sqrt", "fp_load", "fp_store", "mve",
    "other", "load_multiple_pc"};

typedef struct tb_info {
  uint64_t counts[C_COUNT];
  uint64_t start;         /* address of the block's first instruction */
  uint64_t fallthrough;   /* address after the block's last instruction */
  bool ends_conditional;  /* the last instruction is a conditional branch */
} tb_info;

static uint64_t executed;              /* instructions executed so far (single vCPU) */
static uint64_t class_executed[C_COUNT];
static uint64_t branch_taken;          /* conditional branches taken */
static const tb_info *previous_tb;
static uint64_t mark_addr[MARK_COUNT];
static bool mark_set[MARK_COUNT];
static bool per_insn;
static FILE *out;

static int popcount16(unsigned v) {
  int n = 0;
  for (v &= 0xFFFFu; v; v &= v - 1) ++n;
  return n;
}

/* Class of one Thumb instruction (16- or 32-bit) into counts[]; returns 1 for a conditional branch. */
static int ek_classify(const uint8_t *bytes, size_t size, uint64_t counts[C_COUNT]) {
  const unsigned hw1 = (unsigned)bytes[0] | ((unsigned)bytes[1] << 8);
  if (size == 2) {
    const unsigned op = hw1 >> 10;
    if ((hw1 & 0xFFC0) == 0x4340) { counts[C_MUL]++; return 0; }                       /* MULS */
    if ((hw1 & 0xFF00) == 0x4700 || (hw1 & 0xFF87) == 0x4687) { counts[C_BRANCH]++; return 0; } /* BX/BLX, MOV pc */
    if ((op >> 1) == 0x09) { counts[C_LOAD]++; return 0; }                             /* LDR literal */
    if ((op >> 2) == 0x05) { counts[((hw1 >> 9) & 7) <= 2 ? C_STORE : C_LOAD]++; return 0; } /* register offset */
    if ((op >> 3) == 0x03 || (op >> 2) == 0x08 || (op >> 2) == 0x09) {              /* imm, halfword, SP-relative */
      counts[(hw1 & 0x0800) ? C_LOAD : C_STORE]++;
      return 0;
    }
    if ((hw1 & 0xFE00) == 0xB400) {                                                    /* PUSH */
      counts[C_STORE_MULTI]++;
      counts[C_STORE_REGS] += (uint64_t)(popcount16(hw1 & 0xFF) + ((hw1 >> 8) & 1));
      return 0;
    }
    if ((hw1 & 0xFE00) == 0xBC00) {                                                    /* POP (with pc: a branch) */
      counts[C_LOAD_MULTI]++;
      counts[C_LOAD_REGS] += (uint64_t)(popcount16(hw1 & 0xFF) + ((hw1 >> 8) & 1));
      if (hw1 & 0x0100) counts[C_PC_LOADS]++;
      return 0;
    }
    if ((hw1 & 0xF500) == 0xB100) { counts[C_BRANCH_COND]++; return 1; }             /* CBZ / CBNZ */
    if ((hw1 & 0xFF00) == 0xBF00) { counts[C_OTHER]++; return 0; }                    /* IT, hints */
    if ((op >> 1) == 0x18) {                                                           /* STM / LDM */
      const int load = (hw1 & 0x0800) != 0;
      counts[load ? C_LOAD_MULTI : C_STORE_MULTI]++;
      counts[load ? C_LOAD_REGS : C_STORE_REGS] += (uint64_t)popcount16(hw1 & 0xFF);
      return 0;
    }
    if ((op >> 2) == 0x0D) {                                                           /* B<c>, UDF, SVC */
      if (((hw1 >> 8) & 0xF) < 0xE) { counts[C_BRANCH_COND]++; return 1; }
      counts[C_OTHER]++;
      return 0;
    }
    if ((hw1 >> 11) == 0x1C) { counts[C_BRANCH]++; return 0; }                        /* B */
    counts[C_ALU]++;
    return 0;
  }
  const unsigned hw2 = (unsigned)bytes[2] | ((unsigned)bytes[3] << 8);
  if ((hw1 & 0xEC00) == 0xEC00) {                                  /* coprocessor space: FP (cp10/11) and MVE */
    const unsigned cp = (hw2 >> 8) & 0xF;
    if ((hw1 & 0xEF00) == 0xEF00) { counts[C_MVE]++; return 0; }    /* MVE data processing (Armv8.1-M) */
    if ((hw1 & 0xFE00) == 0xEC00) {                               /* load/store, 64-bit moves */
      if (cp != 0xA && cp != 0xB) { counts[C_MVE]++; return 0; }    /* VLDRB/VSTRB.. Q registers */
      if ((hw1 & 0xFFE0) == 0xEC40) { counts[C_FP]++; return 0; }   /* VMOV core <-> two registers */
      const int load = (hw1 & 0x0010) != 0;
      const int single = (hw1 & 0xFF20) == 0xED00;                  /* VLDR / VSTR */
      if (single) {
        counts[load ? C_FP_LOAD : C_FP_STORE]++;
      } else {                                                      /* VLDM / VSTM / VPUSH / VPOP: imm8 words */
        counts[load ? C_LOAD_MULTI : C_STORE_MULTI]++;
        counts[load ? C_LOAD_REGS : C_STORE_REGS] += (uint64_t)(hw2 & 0xFF);
      }
      return 0;
    }
    if (cp != 0xA && cp != 0xB) { counts[C_MVE]++; return 0; }
    if (((hw1 & 0xFFB0) == 0xEE80 && (hw2 & 0x0E50) == 0x0A00) ||  /* VDIV */
        ((hw1 & 0xFFBF) == 0xEEB1 && (hw2 & 0x0ED0) == 0x0AC0)) {  /* VSQRT */
      counts[C_FP_DIV]++;
      return 0;
    }
    counts[C_FP]++;
    return 0;
  }
  switch ((hw1 >> 11) & 3) {
    case 1:                                                         /* 11101 */
      if ((hw1 & 0xFE40) == 0xE800) {                               /* LDM / STM (.W), POP.W / PUSH.W */
        const int load = (hw1 & 0x0010) != 0;
        counts[load ? C_LOAD_MULTI : C_STORE_MULTI]++;
        counts[load ? C_LOAD_REGS : C_STORE_REGS] += (uint64_t)popcount16(hw2);
        if (load && (hw2 & 0x8000)) counts[C_PC_LOADS]++;
        return 0;
      }
      if ((hw1 & 0xFE40) == 0xE840) {                               /* dual, exclusive, table branch */
        if ((hw1 & 0xFFF0) == 0xE8D0 && (hw2 & 0xFFE0) == 0xF000) { counts[C_BRANCH]++; return 0; } /* TBB/TBH */
        const int load = (hw1 & 0x0010) != 0;
        if ((hw1 & 0x0120) == 0) { counts[load ? C_LOAD : C_STORE]++; return 0; }  /* LDREX / STREX */
        counts[load ? C_LOAD_MULTI : C_STORE_MULTI]++;              /* LDRD / STRD */
        counts[load ? C_LOAD_REGS : C_STORE_REGS] += 2;
        return 0;
      }
      counts[C_ALU]++;                                              /* data processing, shifted register */
      return 0;
    case 2:                                                         /* 11110 */
      if (!(hw2 & 0x8000)) { counts[C_ALU]++; return 0; }           /* data processing, immediate */
      if ((hw2 & 0xD000) == 0x8000) {                               /* B<c>.W, or MSR/MRS/barriers */
        if (((hw1 >> 6) & 0xF) < 0xE) { counts[C_BRANCH_COND]++; return 1; }
        counts[C_OTHER]++;
        return 0;
      }
      counts[C_BRANCH]++;                                           /* B.W, BL */
      return 0;
    default:                                                        /* 11111 */
      if ((hw1 & 0xFE00) == 0xF800) { counts[(hw1 & 0x0010) ? C_LOAD : C_STORE]++; return 0; }
      if ((hw1 & 0xFF80) == 0xFB00) { counts[C_MUL]++; return 0; }   /* MUL, MLA, SMLAD, SMUL.. */
      if ((hw1 & 0xFF80) == 0xFB80) {                               /* long multiply / divide */
        const unsigned op1 = (hw1 >> 4) & 7;
        counts[((op1 == 1 || op1 == 3) && (hw2 & 0x00F0) == 0x00F0) ? C_DIV : C_MUL]++;
        return 0;
      }
      counts[C_ALU]++;                                              /* data processing (register): SXTB16, QADD.. */
      return 0;
  }
}

static void write_classes(void) {
  fputs("C", out);
  for (int c = 0; c < C_COUNT; ++c) fprintf(out, " %" PRIu64, class_executed[c]);
  fprintf(out, " %" PRIu64 "\n", branch_taken);
}

static void on_marker(unsigned int vcpu_index, void *userdata) {
  (void)vcpu_index;
  int kind = (int)(uintptr_t)userdata;
  fprintf(out, "%c %" PRIu64 "\n", mark_kind[kind], executed);
  if (kind == MARK_INFER_BEGIN || kind == MARK_INFER_END) write_classes();
  if (kind == MARK_INFER_END) fflush(out);
}

/* Every executed block: its class counts, and whether the previous block's conditional branch was taken (this
 * block does not start where the previous one falls through). */
static void on_tb_exec(unsigned int vcpu_index, void *userdata) {
  (void)vcpu_index;
  const tb_info *tb = (const tb_info *)userdata;
  if (previous_tb && previous_tb->ends_conditional && tb->start != previous_tb->fallthrough) ++branch_taken;
  for (int c = 0; c < C_COUNT; ++c) class_executed[c] += tb->counts[c];
  previous_tb = tb;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
  (void)id;
  size_t n = qemu_plugin_tb_n_insns(tb);
  if (!per_insn) qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &executed, n);
  tb_info *info = (tb_info *)calloc(1, sizeof *info);  /* lives as long as QEMU may run the block */
  if (info && n > 0) {
    for (size_t i = 0; i < n; ++i) {
      struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
      const size_t size = qemu_plugin_insn_size(insn);
      const int conditional = (size == 2 || size == 4) ? ek_classify((const uint8_t *)qemu_plugin_insn_data(insn),
                                                                     size, info->counts)
                                                       : (info->counts[C_OTHER]++, 0);
      if (i == 0) info->start = qemu_plugin_insn_vaddr(insn);
      if (i + 1 == n) {
        info->fallthrough = qemu_plugin_insn_vaddr(insn) + size;
        info->ends_conditional = conditional != 0;
      }
    }
    qemu_plugin_register_vcpu_tb_exec_cb(tb, on_tb_exec, QEMU_PLUGIN_CB_NO_REGS, info);
  }
  for (size_t i = 0; i < n; ++i) {
    struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
    if (per_insn) qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &executed, 1);
    uint64_t vaddr = qemu_plugin_insn_vaddr(insn);
    for (int k = 0; k < MARK_COUNT; ++k) {
      if (mark_set[k] && vaddr == mark_addr[k])
        qemu_plugin_register_vcpu_insn_exec_cb(insn, on_marker, QEMU_PLUGIN_CB_NO_REGS, (void *)(uintptr_t)k);
    }
  }
}

static void on_qemu_exit(qemu_plugin_id_t id, void *userdata) {
  (void)id;
  (void)userdata;
  fprintf(out, "X %" PRIu64 "\n", executed);
  fclose(out);
  out = NULL;
}

static int fail(const char *message, const char *detail) {
  char line[512];
  snprintf(line, sizeof line, "ekcount: %s%s\n", message, detail ? detail : "");
  qemu_plugin_outs(line);
  fputs(line, stderr);
  return -1;
}

int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv) {
  const char *path = NULL;
  if (info->system_emulation && info->system.smp_vcpus > 1) return fail("one vCPU only", NULL);
  for (int i = 0; i < argc; ++i) {
    const char *arg = argv[i];
    const char *eq = strchr(arg, '=');
    if (!eq) return fail("argument without '=': ", arg);
    size_t key_len = (size_t)(eq - arg);
    const char *value = eq + 1;
    if (key_len == 3 && strncmp(arg, "out", 3) == 0) {
      path = value;
      continue;
    }
    if (key_len == 4 && strncmp(arg, "mode", 4) == 0) {
      if (strcmp(value, "insn") == 0) per_insn = true;
      else if (strcmp(value, "tb") == 0) per_insn = false;
      else return fail("mode must be tb or insn, got ", value);
      continue;
    }
    int k = 0;
    while (k < MARK_COUNT && !(strlen(mark_arg[k]) == key_len && strncmp(arg, mark_arg[k], key_len) == 0)) ++k;
    if (k == MARK_COUNT) return fail("unknown argument: ", arg);
    char *end = NULL;
    unsigned long long addr = strtoull(value, &end, 0);
    if (!end || *end != '\0') return fail("not an address: ", arg);
    mark_addr[k] = (uint64_t)addr & ~(uint64_t)1; /* Thumb bit */
    mark_set[k] = true;
  }
  if (!path) return fail("missing out=FILE", NULL);
  out = fopen(path, "w");
  if (!out) return fail("cannot open ", path);
  fprintf(out, "# ekcount 2 mode=%s\n# classes", per_insn ? "insn" : "tb");
  for (int c = 0; c < C_COUNT; ++c) fprintf(out, " %s", class_name[c]);
  fputs(" branch_conditional_taken\n", out);
  fflush(out);
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
  qemu_plugin_register_atexit_cb(id, on_qemu_exit, NULL);
  return 0;
}
