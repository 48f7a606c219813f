/*
 * QEMU TCG plugin: exact guest instruction counts between benchmark markers.
 *
 *   qemu-system-arm ... -plugin insn_count.so,begin=0x...,end=0x...,out=FILE
 *
 * Every executed guest instruction adds 1 to a counter (inline, no helper
 * call). The first instruction of mcu_bench_begin snapshots the counter; the
 * first instruction of mcu_bench_end writes the difference to FILE as one
 * decimal line, flushed immediately so the figure survives however QEMU
 * exits (semihosting exit, timeout kill). Counts are exact and identical run
 * to run: they depend only on the guest's control flow, not on host timing.
 *
 * Built by mcu.sim.qemu.build_plugin() with the host compiler:
 *   cc -shared -fPIC -O2 -o insn_count.so insn_count.c
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------
 * Plugin API, version 1, declared by hand: Debian ships no qemu-plugin.h.
 * These match QEMU 7.2's include/qemu/qemu-plugin.h exactly for the subset
 * used here (types, enum values and prototypes).
 * ------------------------------------------------------------------------- */
#define QEMU_PLUGIN_EXPORT __attribute__((visibility("default")))

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

enum qemu_plugin_cb_flags {
    QEMU_PLUGIN_CB_NO_REGS,
    QEMU_PLUGIN_CB_R_REGS,
    QEMU_PLUGIN_CB_RW_REGS,
};

enum qemu_plugin_op {
    QEMU_PLUGIN_INLINE_ADD_U64,
};

typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn,
                                            qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *insn,
                                                enum qemu_plugin_op op, void *ptr,
                                                uint64_t imm);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb,
                                    void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);

QEMU_PLUGIN_EXPORT int qemu_plugin_version = 1;
QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                           int argc, char **argv);

/* ---------------------------------------------------------------------------
 * Counter state. The mps2 machines have one vCPU, so a single counter is
 * exact; the inline add is not atomic across vCPUs (see qemu-plugin.h).
 * ------------------------------------------------------------------------- */
static uint64_t insn_count;
static uint64_t begin_count;
static bool in_region;
static bool have_begin;
static bool have_end;
static uint64_t begin_addr;
static uint64_t end_addr;
static FILE *out;

static void on_begin(unsigned int vcpu_index, void *userdata)
{
    (void)vcpu_index;
    (void)userdata;
    begin_count = insn_count;
    in_region = true;
}

static void on_end(unsigned int vcpu_index, void *userdata)
{
    (void)vcpu_index;
    (void)userdata;
    if (!in_region) {
        return; /* an end without a begin measures nothing */
    }
    in_region = false;
    if (out != NULL) {
        fprintf(out, "%" PRIu64 "\n", insn_count - begin_count);
        fflush(out);
    }
}

static void on_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &insn_count,
                                                   1);
        uint64_t vaddr = qemu_plugin_insn_vaddr(insn);
        if (have_begin && vaddr == begin_addr) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_begin, QEMU_PLUGIN_CB_NO_REGS, NULL);
        }
        if (have_end && vaddr == end_addr) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_end, QEMU_PLUGIN_CB_NO_REGS, NULL);
        }
    }
}

static void on_plugin_exit(qemu_plugin_id_t id, void *userdata)
{
    (void)id;
    (void)userdata;
    if (out != NULL) {
        fclose(out);
        out = NULL;
    }
}

/* Parse "0x..." (or decimal); Thumb symbol values carry bit 0, instruction
 * addresses never do. */
static bool parse_addr(const char *s, uint64_t *addr)
{
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 0);
    if (end == s || *end != '\0') {
        return false;
    }
    *addr = (uint64_t)v & ~(uint64_t)1u;
    return true;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                           int argc, char **argv)
{
    (void)info;
    const char *out_path = NULL;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "begin=", 6) == 0) {
            have_begin = parse_addr(arg + 6, &begin_addr);
            if (!have_begin) {
                fprintf(stderr, "insn_count: bad address in '%s'\n", arg);
                return -1;
            }
        } else if (strncmp(arg, "end=", 4) == 0) {
            have_end = parse_addr(arg + 4, &end_addr);
            if (!have_end) {
                fprintf(stderr, "insn_count: bad address in '%s'\n", arg);
                return -1;
            }
        } else if (strncmp(arg, "out=", 4) == 0) {
            out_path = arg + 4;
        } else {
            fprintf(stderr, "insn_count: unknown argument '%s'\n", arg);
            return -1;
        }
    }
    if (out_path != NULL) {
        out = fopen(out_path, "w");
        if (out == NULL) {
            fprintf(stderr, "insn_count: cannot open '%s' for writing\n", out_path);
            return -1;
        }
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb_trans);
    qemu_plugin_register_atexit_cb(id, on_plugin_exit, NULL);
    return 0;
}
