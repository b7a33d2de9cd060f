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

static uint64_t executed;              /* instructions executed so far (single vCPU) */
static uint64_t mark_addr[MARK_COUNT];
static bool mark_set[MARK_COUNT];
static bool per_insn;
static FILE *out;

static void on_marker(unsigned int vcpu_index, void *userdata) {
  (void)vcpu_index;
  int kind = (int)(uintptr_t)userdata;
  fprintf(out, "%c %" PRIu64 "\n", mark_kind[kind], executed);
  if (kind == MARK_INFER_END) fflush(out);
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
  (void)id;
  size_t n = qemu_plugin_tb_n_insns(tb);
  if (!per_insn) qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &executed, n);
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
  fprintf(out, "# ekcount 1 mode=%s\n", per_insn ? "insn" : "tb");
  fflush(out);
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
  qemu_plugin_register_atexit_cb(id, on_qemu_exit, NULL);
  return 0;
}
