/*
 * Timing model of the Cortex-M cores, applied to the instruction stream the
 * QEMU plugin (insn_count.c) sees. Pure functions of instruction bytes: no
 * QEMU API here, so the model reads as a table of costs.
 *
 * Units are cycles of the core clock at zero wait states; memory wait states
 * are added by the plugin from the board's memory map. docs/cycles.md lists
 * the sources and every assumption made where a manual states a range.
 */
#ifndef MCU_CYCLE_MODEL_H
#define MCU_CYCLE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum cm_core {
    CM_CORE_NONE = 0,
    CM_CORE_M0PLUS,
    CM_CORE_M3,
    CM_CORE_M4,
    CM_CORE_M33,
    CM_CORE_M55,
} cm_core;

/* What the timing tables distinguish; one row of the TRMs' tables each. */
typedef enum cm_op {
    CM_DP,          /* data processing, moves, shifts, compares, extends, saturation, SIMD add */
    CM_DP_PC,       /* data processing that writes the PC (MOV pc / ADD pc) */
    CM_IT,
    CM_MUL,         /* MUL(S) 32x32 -> 32 */
    CM_MLA,         /* MLA, MLS */
    CM_MULL,        /* SMULL, UMULL */
    CM_MLAL,        /* SMLAL, UMLAL, UMAAL, SMLALxy, SMLALD */
    CM_DSP_MAC,     /* SMLAD, SMLABB, SMMUL, SMUAD, USAD8 ... (ARMv7E-M) */
    CM_DIV,
    CM_LDR,         /* single load, any size */
    CM_LDR_PC,      /* LDR pc, [...] */
    CM_STR,         /* single store, immediate offset */
    CM_STR_REG,     /* single store, register offset */
    CM_LDRD,
    CM_STRD,
    CM_LDM,         /* LDM, POP without pc */
    CM_LDM_PC,      /* LDM, POP with pc */
    CM_STM,         /* STM, PUSH */
    CM_B,           /* B */
    CM_BCOND,       /* B<cond>, CBZ, CBNZ, WLS */
    CM_BL,
    CM_BX,          /* BX, BLX register */
    CM_TB,          /* TBB, TBH */
    CM_LE,          /* low-overhead loop end (LE, LETP) */
    CM_BARRIER,     /* DMB, DSB */
    CM_ISB,
    CM_SYS,         /* MRS, MSR, CPS, hints, SVC, BKPT */
    CM_FP,          /* VADD, VSUB, VMUL, VABS, VNEG, VCVT, VCMP, VMOV immediate, VMAXNM ... */
    CM_FP_MAC,      /* VMLA, VMLS, VNMLA, VNMLS, VFMA, VFMS, VFNMA, VFNMS */
    CM_FP_DIV,      /* VDIV, VSQRT */
    CM_FP_MOV,      /* VMOV core <-> S, VMRS, VMSR */
    CM_FP_MOV2,     /* VMOV two core registers <-> D or two S */
    CM_FP_LDR,
    CM_FP_STR,
    CM_FP_LDM,      /* VLDM, VPOP (nregs words) */
    CM_FP_STM,      /* VSTM, VPUSH */
    CM_VEC_DP,      /* MVE data processing, including VDUP and reductions */
    CM_VEC_MEM,     /* MVE contiguous VLDR/VSTR */
    CM_VEC_GATHER,  /* MVE gather loads and scatter stores */
    CM_VEC_INTERLEAVE, /* MVE VLD2x/VLD4x/VST2x/VST4x */
    CM_OP_COUNT,
} cm_op;

typedef struct cm_insn {
    uint8_t op;       /* cm_op */
    uint8_t nregs;    /* registers (words) a multiple transfer moves; elements of a gather */
    bool wide;        /* 32-bit encoding */
    bool dbl;         /* double-precision FP data processing */
    int8_t rd;        /* general register a DP or multiply writes; -1 none */
    int8_t rn;        /* base register of a memory access; -1 none */
    int8_t rm;        /* offset register of a memory access; -1 none */
    int8_t rt;        /* general register a single load writes; -1 none */
} cm_insn;

cm_core cm_core_from_name(const char *name);

/* Decode one Thumb instruction (2 or 4 bytes, little-endian halfwords). */
cm_insn cm_decode(const uint8_t *bytes, size_t size);

/* The Thumb instruction's own length (2 or 4) from its first halfword, at most the `size` bytes QEMU
 * reports: QEMU 7.2 reports 4 bytes for a 16-bit instruction whose successor ends at a page boundary
 * (the translator's look at the next halfword is appended to its bytes). */
size_t cm_thumb_size(const uint8_t *bytes, size_t size);

/* Cycles of `cur` when it follows `prev` in the same translation block (NULL
 * at the block's start): the base cost of the core's table plus the
 * neighbour effects the TRMs state (load/store pipelining, address
 * generation stalls, MVE beat overlap). Branch refill is not included. */
unsigned cm_cycles(cm_core core, const cm_insn *prev, const cm_insn *cur);

/* Whether `insn` may change the flow of control, so that a next executed
 * instruction other than its fall-through means it was taken. */
bool cm_is_branch(const cm_insn *insn);

/* Refill cycles charged when the branch `insn` was taken to a target whose
 * first instruction is `target_wide` (32-bit) at address `target`. */
unsigned cm_refill(cm_core core, const cm_insn *insn, uint64_t target, bool target_wide);

/* A set-associative cache with LRU replacement, for memories behind one
 * (XIP flash caches): which accesses hit, exactly, for the address stream
 * the simulator sees. */
typedef struct cm_cache {
    uint32_t sets;
    uint32_t ways;
    uint32_t line_shift;
    uint64_t *tags; /* sets * ways; a line's number plus one, 0 when empty */
    uint64_t *used; /* when each way was last used */
    uint64_t clock;
} cm_cache;

/* False when the geometry is not bytes = sets * ways * line with a power-of-two line. */
bool cm_cache_init(cm_cache *cache, uint32_t bytes, uint32_t ways, uint32_t line);

/* Look the line of `addr` up; on a miss, fill it into the least recently used way. */
bool cm_cache_access(cm_cache *cache, uint64_t addr);

#endif
