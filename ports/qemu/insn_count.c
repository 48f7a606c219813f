/*
 * QEMU TCG plugin: exact guest instruction counts between benchmark markers.
 *
 *   qemu-system-arm ... -plugin insn_count.so,begin=0x...,end=0x...,out=FILE
 *                                 [,trace_begin=0x...,trace_end=0x...,trace_out=FILE2]
 *
 * Every executed guest instruction adds 1 to a counter (inline, no helper
 * call). The first instruction of mcu_bench_begin snapshots the counter; the
 * first instruction of mcu_bench_end writes the difference to FILE as one
 * decimal line, flushed immediately so the figure survives however QEMU
 * exits (semihosting exit, timeout kill). Counts are exact and identical run
 * to run: they depend only on the guest's control flow, not on host timing.
 *
 * The optional trace pair measures a second, nested set of regions the same
 * way: the event tracer's mcu_trace_op_begin/end around every op of a
 * profiling build (runtime_c/include/mcu/trace.h), one line per op in FILE2.
 *
 * Built by mcu.device.sim.qemu.build_plugin() with the host compiler:
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

/* One measured kind of region: counts from its begin marker to its end marker. */
typedef struct region {
    bool have_begin;
    bool have_end;
    bool in_region;
    uint64_t begin_addr;
    uint64_t end_addr;
    uint64_t begin_count;
    FILE *out;
} region;

enum { REGION_BENCH, REGION_TRACE, REGION_COUNT };
static region regions[REGION_COUNT];

static void on_begin(unsigned int vcpu_index, void *userdata)
{
    (void)vcpu_index;
    region *r = (region *)userdata;
    r->begin_count = insn_count;
    r->in_region = true;
}

static void on_end(unsigned int vcpu_index, void *userdata)
{
    (void)vcpu_index;
    region *r = (region *)userdata;
    if (!r->in_region) {
        return; /* an end without a begin measures nothing */
    }
    r->in_region = false;
    if (r->out != NULL) {
        fprintf(r->out, "%" PRIu64 "\n", insn_count - r->begin_count);
        fflush(r->out);
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
        for (int k = 0; k < REGION_COUNT; k++) {
            region *r = &regions[k];
            if (r->have_begin && vaddr == r->begin_addr) {
                qemu_plugin_register_vcpu_insn_exec_cb(insn, on_begin, QEMU_PLUGIN_CB_NO_REGS, r);
            }
            if (r->have_end && vaddr == r->end_addr) {
                qemu_plugin_register_vcpu_insn_exec_cb(insn, on_end, QEMU_PLUGIN_CB_NO_REGS, r);
            }
        }
    }
}

static void on_plugin_exit(qemu_plugin_id_t id, void *userdata)
{
    (void)id;
    (void)userdata;
    for (int k = 0; k < REGION_COUNT; k++) {
        if (regions[k].out != NULL) {
            fclose(regions[k].out);
            regions[k].out = NULL;
        }
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

/* "begin=", "end=" and "out=" set the bench region; the same keys with a
 * "trace_" prefix set the trace region. */
static bool parse_region_arg(const char *arg, region *r, const char **out_path)
{
    if (strncmp(arg, "begin=", 6) == 0) {
        r->have_begin = parse_addr(arg + 6, &r->begin_addr);
        return r->have_begin;
    }
    if (strncmp(arg, "end=", 4) == 0) {
        r->have_end = parse_addr(arg + 4, &r->end_addr);
        return r->have_end;
    }
    if (strncmp(arg, "out=", 4) == 0) {
        *out_path = arg + 4;
        return true;
    }
    return false;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                           int argc, char **argv)
{
    (void)info;
    const char *out_paths[REGION_COUNT] = {NULL, NULL};
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        bool trace = strncmp(arg, "trace_", 6) == 0;
        int k = trace ? REGION_TRACE : REGION_BENCH;
        if (!parse_region_arg(trace ? arg + 6 : arg, &regions[k], &out_paths[k])) {
            fprintf(stderr, "insn_count: bad or unknown argument '%s'\n", arg);
            return -1;
        }
    }
    for (int k = 0; k < REGION_COUNT; k++) {
        if (out_paths[k] != NULL) {
            regions[k].out = fopen(out_paths[k], "w");
            if (regions[k].out == NULL) {
                fprintf(stderr, "insn_count: cannot open '%s' for writing\n", out_paths[k]);
                return -1;
            }
        }
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb_trans);
    qemu_plugin_register_atexit_cb(id, on_plugin_exit, NULL);
    return 0;
}
