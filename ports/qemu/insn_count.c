/*
 * QEMU TCG plugin: exact guest instruction counts between benchmark markers,
 * and an estimate of the core's cycles over the same regions.
 *
 *   qemu-system-arm ... -plugin insn_count.so,begin=0x...,end=0x...,out=FILE
 *                                 [,trace_begin=0x...,trace_end=0x...,trace_out=FILE2]
 *                                 [,core=cortex-m4,cycles_out=FILE3,trace_cycles_out=FILE4]
 *                                 [,mem=ORIGIN:LENGTH:FETCH:DATA ...]
 *                                 [,cache=ORIGIN:LENGTH:BYTES:WAYS:LINE:MISS ...]
 *                                 [,dcache=ORIGIN:LENGTH:BYTES:WAYS:LINE:MISS ...]
 *                                 [,l1i=BYTES:WAYS:LINE,l1d=BYTES:WAYS:LINE,l1=ORIGIN:LENGTH:MISS ...]
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
 * With core=, every instruction is also charged the cycles of that core's
 * timing model (cycle_model.c) when it executes: its base cost and its
 * neighbour effects are fixed at translation time and added inline; a taken
 * branch's refill is added when the next translation block starts anywhere
 * but at the branch's fall-through (a deterministic test: the guest's control
 * flow alone decides it). Each mem= names a memory region and the wait
 * states it costs, in thousandths of a cycle: FETCH per 32-bit instruction
 * fetch word (charged by instruction size at translation time), DATA per data
 * access QEMU reports (a memory callback, registered only when some region
 * charges data accesses; one per data-path-wide granule an instruction
 * touches). Each cache= names a memory behind a set-associative LRU cache:
 * every data access and, when a block starts, every line of its code goes
 * through the cache, and only misses cost (MISS each). A dcache= gives the
 * same memory a separate cache for its data accesses (a flash accelerator's
 * instruction and data caches); then cache= serves the fetches alone. l1i= and
 * l1d= are the core's own instruction and data caches (the Cortex-M55's L1),
 * one of each for every memory an l1= puts behind them, whose misses cost
 * MISS. The cycle regions are written to cycles_out and
 * trace_cycles_out like the instruction counts, rounded to whole cycles.
 *
 * Built by mcu.device.sim.qemu.build_plugin() with the host compiler:
 *   cc -shared -fPIC -O2 -o insn_count.so insn_count.c cycle_model.c
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cycle_model.h"

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
typedef uint32_t qemu_plugin_meminfo_t;
typedef void (*qemu_plugin_vcpu_mem_cb_t)(unsigned int vcpu_index, qemu_plugin_meminfo_t info,
                                          uint64_t vaddr, void *userdata);

enum qemu_plugin_mem_rw {
    QEMU_PLUGIN_MEM_R = 1,
    QEMU_PLUGIN_MEM_W,
    QEMU_PLUGIN_MEM_RW,
};

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
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, qemu_plugin_vcpu_udata_cb_t cb,
                                          enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_mem_cb_t cb,
                                      enum qemu_plugin_cb_flags flags, enum qemu_plugin_mem_rw rw,
                                      void *userdata);

QEMU_PLUGIN_EXPORT int qemu_plugin_version = 1;
QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                           int argc, char **argv);

/* ---------------------------------------------------------------------------
 * Counter state. The mps2 machines have one vCPU, so a single counter is
 * exact; the inline add is not atomic across vCPUs (see qemu-plugin.h).
 * ------------------------------------------------------------------------- */
static uint64_t insn_count;
static uint64_t cycle_mc; /* estimated cycles, in thousandths */

/* One measured kind of region: counts from its begin marker to its end marker. */
typedef struct region {
    bool have_begin;
    bool have_end;
    bool in_region;
    uint64_t begin_addr;
    uint64_t end_addr;
    uint64_t begin_count;
    uint64_t begin_cycle_mc;
    FILE *out;
    FILE *cycles_out;
} region;

enum { REGION_BENCH, REGION_TRACE, REGION_COUNT };
static region regions[REGION_COUNT];

/* ---------------------------------------------------------------------------
 * Timing model state.
 * ------------------------------------------------------------------------- */
static cm_core core = CM_CORE_NONE;

/* A memory region's wait states, in thousandths of a cycle. */
typedef struct mem_cost {
    uint64_t origin;
    uint64_t end;
    uint32_t fetch_mc; /* per 32-bit fetch word */
    uint32_t data_mc;  /* per data access */
    cm_cache *cache;   /* when a cache fronts the memory: only its misses cost, miss_mc each */
    uint32_t miss_mc;
    cm_cache *dcache;  /* when data accesses have a cache of their own: its misses cost dmiss_mc */
    uint32_t dmiss_mc;
} mem_cost;

enum { MAX_MEM = 8 };
static mem_cost mems[MAX_MEM];
static int n_mems;
static bool charge_data;

/* What a translation block's start needs to settle its predecessor's branch, or its neighbour effect. */
typedef struct block_info {
    uint64_t vaddr;
    uint64_t bytes;          /* its code's length, fetched through `code`'s cache */
    const mem_cost *code;    /* the cached memory the block's code is in, if any */
    bool first_wide;     /* its first instruction is 32-bit */
    bool ends_in_branch; /* its last instruction may transfer control */
    uint64_t fallthrough;
    cm_insn first;
    cm_insn last;
} block_info;

/* The last executed block's branch, until the next block starts. */
static const block_info *pending;
/* The last executed block. */
static const block_info *previous;

static const mem_cost *mem_at(uint64_t addr)
{
    for (int i = 0; i < n_mems; i++) {
        if (addr >= mems[i].origin && addr < mems[i].end) {
            return &mems[i];
        }
    }
    return NULL;
}

/* The lines a block's code spans go through the cache each time it runs. */
static void fetch_through_cache(const block_info *b)
{
    cm_cache *cache = b->code->cache;
    uint64_t line = (uint64_t)1 << cache->line_shift;
    for (uint64_t a = b->vaddr & ~(line - 1); a < b->vaddr + b->bytes; a += line) {
        if (!cm_cache_access(cache, a)) {
            cycle_mc += b->code->miss_mc;
        }
    }
}

static void on_block(unsigned int vcpu_index, void *userdata)
{
    (void)vcpu_index;
    const block_info *b = (const block_info *)userdata;
    if (pending != NULL && b->vaddr != pending->fallthrough) {
        cycle_mc += 1000u * cm_refill(core, &pending->last, b->vaddr, b->first_wide);
    }
    /* Entered by falling through (QEMU ends a block at a 1 kB page and at its size limit, not only at a
     * branch): the first instruction, costed alone at translation, gets the neighbour effect of the
     * previous block's last instruction, as inside a block (modulo 2^64: the effect may be negative). */
    if (previous != NULL && b->vaddr == previous->fallthrough) {
        cycle_mc += 1000u * ((uint64_t)cm_cycles(core, &previous->last, &b->first) -
                             (uint64_t)cm_cycles(core, NULL, &b->first));
    }
    previous = b;
    pending = b->ends_in_branch ? b : NULL;
    if (b->code != NULL) {
        fetch_through_cache(b);
    }
}

/* QEMU reports a vector or multiple transfer element by element, the bus moves
 * a data-path width at a time: an instruction's accesses within one aligned
 * granule (4 bytes, 8 on the M55's 64-bit data path) are one access. The
 * executed-instruction counter tells one execution from the next. */
static unsigned granule_shift = 2;
static uint64_t last_exec = UINT64_MAX;
static uint64_t last_granule;

static void on_mem(unsigned int vcpu_index, qemu_plugin_meminfo_t info, uint64_t vaddr,
                   void *userdata)
{
    (void)vcpu_index;
    (void)info;
    (void)userdata;
    uint64_t granule = vaddr >> granule_shift;
    if (last_exec == insn_count && last_granule == granule) {
        return;
    }
    last_exec = insn_count;
    last_granule = granule;
    const mem_cost *m = mem_at(vaddr);
    if (m == NULL) {
        return;
    }
    if (m->dcache != NULL) {
        if (!cm_cache_access(m->dcache, vaddr)) {
            cycle_mc += m->dmiss_mc;
        }
    } else if (m->cache == NULL) {
        cycle_mc += m->data_mc;
    } else if (!cm_cache_access(m->cache, vaddr)) {
        cycle_mc += m->miss_mc;
    }
}

static void on_begin(unsigned int vcpu_index, void *userdata)
{
    (void)vcpu_index;
    region *r = (region *)userdata;
    r->begin_count = insn_count;
    r->begin_cycle_mc = cycle_mc;
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
    if (r->cycles_out != NULL) {
        fprintf(r->cycles_out, "%" PRIu64 "\n", (cycle_mc - r->begin_cycle_mc + 500u) / 1000u);
        fflush(r->cycles_out);
    }
}

/* Charge the block's instructions their static cost, and watch its end. */
static void time_block(struct qemu_plugin_tb *tb, size_t n)
{
    block_info *b = calloc(1, sizeof *b); /* lives as long as the translation may run */
    if (b == NULL) {
        return;
    }
    b->vaddr = qemu_plugin_tb_vaddr(tb);
    cm_insn prev = {0};
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        const uint8_t *bytes = (const uint8_t *)qemu_plugin_insn_data(insn);
        size_t size = cm_thumb_size(bytes, qemu_plugin_insn_size(insn));
        uint64_t vaddr = qemu_plugin_insn_vaddr(insn);
        cm_insn cur = cm_decode(bytes, size);
        uint64_t mc = 1000u * (uint64_t)cm_cycles(core, i == 0 ? NULL : &prev, &cur);
        const mem_cost *m = mem_at(vaddr);
        if (m != NULL && m->cache == NULL) {
            mc += (uint64_t)m->fetch_mc * size / 4u;
        }
        if (m != NULL && m->cache != NULL && i == 0) {
            b->code = m;
        }
        b->bytes += size;
        qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &cycle_mc, mc);
        if (charge_data) {
            qemu_plugin_register_vcpu_mem_cb(insn, on_mem, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW,
                                             NULL);
        }
        if (i == 0) {
            b->first_wide = size == 4;
            b->first = cur;
        }
        if (i + 1 == n) {
            b->ends_in_branch = cm_is_branch(&cur);
            b->fallthrough = vaddr + size;
            b->last = cur;
        }
        prev = cur;
    }
    qemu_plugin_register_vcpu_tb_exec_cb(tb, on_block, QEMU_PLUGIN_CB_NO_REGS, b);
}

static void on_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    if (core != CM_CORE_NONE && n > 0) {
        time_block(tb, n);
    }
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
        if (regions[k].cycles_out != NULL) {
            fclose(regions[k].cycles_out);
            regions[k].cycles_out = NULL;
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

/* "mem=ORIGIN:LENGTH:FETCH:DATA", each a number strtoull reads. */
static bool parse_mem(const char *s)
{
    unsigned long long v[4];
    for (int i = 0; i < 4; i++) {
        char *end = NULL;
        v[i] = strtoull(s, &end, 0);
        if (end == s || *end != (i < 3 ? ':' : '\0')) {
            return false;
        }
        s = end + 1;
    }
    if (n_mems == MAX_MEM || v[1] == 0 || v[2] > UINT32_MAX || v[3] > UINT32_MAX) {
        return false;
    }
    mems[n_mems++] = (mem_cost){.origin = v[0], .end = v[0] + v[1], .fetch_mc = (uint32_t)v[2],
                                .data_mc = (uint32_t)v[3]};
    charge_data = charge_data || v[3] != 0;
    return true;
}

/* "ORIGIN:LENGTH:BYTES:WAYS:LINE:MISS" into v[6] and a cache of that geometry. */
static cm_cache *parse_cache_spec(const char *s, unsigned long long v[6])
{
    for (int i = 0; i < 6; i++) {
        char *end = NULL;
        v[i] = strtoull(s, &end, 0);
        if (end == s || *end != (i < 5 ? ':' : '\0')) {
            return NULL;
        }
        s = end + 1;
    }
    if (v[1] == 0 || v[2] > UINT32_MAX || v[3] > UINT32_MAX || v[4] > UINT32_MAX || v[5] > UINT32_MAX) {
        return NULL;
    }
    cm_cache *cache = calloc(1, sizeof *cache);
    if (cache == NULL || !cm_cache_init(cache, (uint32_t)v[2], (uint32_t)v[3], (uint32_t)v[4])) {
        free(cache);
        return NULL;
    }
    return cache;
}

/* The region at exactly ORIGIN:LENGTH, made (costing nothing else) if none is. */
static mem_cost *region_at(uint64_t origin, uint64_t length)
{
    for (int i = 0; i < n_mems; i++) {
        if (mems[i].origin == origin && mems[i].end == origin + length) {
            return &mems[i];
        }
    }
    if (n_mems == MAX_MEM) {
        return NULL;
    }
    mems[n_mems] = (mem_cost){.origin = origin, .end = origin + length};
    return &mems[n_mems++];
}

/* "cache=ORIGIN:LENGTH:BYTES:WAYS:LINE:MISS": a memory behind a cache of that
 * geometry, whose misses cost MISS thousandths of a cycle; "dcache=" the same
 * for the memory's data accesses alone. */
static bool parse_cache(const char *s, bool data_only)
{
    unsigned long long v[6];
    cm_cache *cache = parse_cache_spec(s, v);
    mem_cost *m = cache == NULL ? NULL : region_at(v[0], v[1]);
    if (m == NULL || (data_only ? m->dcache : m->cache) != NULL) {
        free(cache);
        return false;
    }
    if (data_only) {
        m->dcache = cache;
        m->dmiss_mc = (uint32_t)v[5];
    } else {
        m->cache = cache;
        m->miss_mc = (uint32_t)v[5];
    }
    charge_data = true;
    return true;
}

/* The core's L1 caches (l1i=, l1d=), shared by every memory behind them (l1=). */
static cm_cache *l1_icache;
static cm_cache *l1_dcache;

/* "l1i=BYTES:WAYS:LINE" or "l1d=BYTES:WAYS:LINE": the core's cache of that geometry, once. */
static bool parse_l1_cache(const char *s, cm_cache **slot)
{
    unsigned long long v[3];
    for (int i = 0; i < 3; i++) {
        char *end = NULL;
        v[i] = strtoull(s, &end, 0);
        if (end == s || *end != (i < 2 ? ':' : '\0') || v[i] > UINT32_MAX) {
            return false;
        }
        s = end + 1;
    }
    if (*slot != NULL) {
        return false;
    }
    cm_cache *cache = calloc(1, sizeof *cache);
    if (cache == NULL || !cm_cache_init(cache, (uint32_t)v[0], (uint32_t)v[1], (uint32_t)v[2])) {
        free(cache);
        return false;
    }
    *slot = cache;
    return true;
}

/* "l1=ORIGIN:LENGTH:MISS": a memory behind the core's L1 caches (given before
 * it), whose misses cost MISS thousandths of a cycle. */
static bool parse_l1_mem(const char *s)
{
    unsigned long long v[3];
    for (int i = 0; i < 3; i++) {
        char *end = NULL;
        v[i] = strtoull(s, &end, 0);
        if (end == s || *end != (i < 2 ? ':' : '\0')) {
            return false;
        }
        s = end + 1;
    }
    if (l1_icache == NULL || l1_dcache == NULL || v[1] == 0 || v[2] > UINT32_MAX) {
        return false;
    }
    mem_cost *m = region_at(v[0], v[1]);
    if (m == NULL || m->cache != NULL || m->dcache != NULL) {
        return false;
    }
    m->cache = l1_icache;
    m->miss_mc = (uint32_t)v[2];
    m->dcache = l1_dcache;
    m->dmiss_mc = (uint32_t)v[2];
    charge_data = true;
    return true;
}

/* "begin=", "end=", "out=" and "cycles_out=" set the bench region; the same
 * keys with a "trace_" prefix set the trace region. */
static bool parse_region_arg(const char *arg, region *r, const char **out_path,
                             const char **cycles_path)
{
    if (strncmp(arg, "cycles_out=", 11) == 0) {
        *cycles_path = arg + 11;
        return true;
    }
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
    const char *cycle_paths[REGION_COUNT] = {NULL, NULL};
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "core=", 5) == 0) {
            core = cm_core_from_name(arg + 5);
            granule_shift = core == CM_CORE_M55 ? 3 : 2;
            if (core == CM_CORE_NONE) {
                fprintf(stderr, "insn_count: no timing model for core '%s'\n", arg + 5);
                return -1;
            }
            continue;
        }
        if (strncmp(arg, "cache=", 6) == 0 || strncmp(arg, "dcache=", 7) == 0) {
            bool data_only = arg[0] == 'd';
            if (!parse_cache(arg + (data_only ? 7 : 6), data_only)) {
                fprintf(stderr, "insn_count: bad cache '%s'\n", arg);
                return -1;
            }
            continue;
        }
        if (strncmp(arg, "l1i=", 4) == 0 || strncmp(arg, "l1d=", 4) == 0) {
            if (!parse_l1_cache(arg + 4, arg[2] == 'i' ? &l1_icache : &l1_dcache)) {
                fprintf(stderr, "insn_count: bad L1 cache '%s'\n", arg);
                return -1;
            }
            continue;
        }
        if (strncmp(arg, "l1=", 3) == 0) {
            if (!parse_l1_mem(arg + 3)) {
                fprintf(stderr, "insn_count: bad L1-cached memory '%s' (l1i= and l1d= first)\n", arg);
                return -1;
            }
            continue;
        }
        if (strncmp(arg, "mem=", 4) == 0) {
            if (!parse_mem(arg + 4)) {
                fprintf(stderr, "insn_count: bad memory region '%s'\n", arg);
                return -1;
            }
            continue;
        }
        bool trace = strncmp(arg, "trace_", 6) == 0;
        int k = trace ? REGION_TRACE : REGION_BENCH;
        if (!parse_region_arg(trace ? arg + 6 : arg, &regions[k], &out_paths[k], &cycle_paths[k])) {
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
        if (cycle_paths[k] != NULL) {
            if (core == CM_CORE_NONE) {
                fprintf(stderr, "insn_count: cycles_out needs core=\n");
                return -1;
            }
            regions[k].cycles_out = fopen(cycle_paths[k], "w");
            if (regions[k].cycles_out == NULL) {
                fprintf(stderr, "insn_count: cannot open '%s' for writing\n", cycle_paths[k]);
                return -1;
            }
        }
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb_trans);
    qemu_plugin_register_atexit_cb(id, on_plugin_exit, NULL);
    return 0;
}
