/*
 * Cortex-M timing model: Thumb decoder and per-core cost tables.
 *
 * Sources (docs/cycles.md quotes the rows used):
 *  - Cortex-M0+ TRM (Arm DDI 0484), "Instruction set summary": 2-stage
 *    pipeline; loads and stores 2, LDM/STM/PUSH/POP 1+N, POP with pc 3+N,
 *    B and BX 2, BL 3, taken B<cond> 2 and 1 not taken, MULS 1 (the fast
 *    multiplier the RP2040 has), barriers and MRS/MSR 3.
 *  - Cortex-M3 TRM (Arm DDI 0337), table "Cortex-M3 instruction set summary"
 *    (mirrored at os.mbed.com/media/uploads/4180_1/cortexm3_instructions.htm):
 *    MUL 1, MLA/MLS 2, SMULL/UMULL 3..5, SMLAL/UMLAL 4..7, SDIV/UDIV 2..12,
 *    LDR 2, LDRD/LDM/STM/PUSH/POP 1+N, branches 1+P with P the refill (1..3).
 *  - Cortex-M4 TRM (Arm DDI 0439), tables "Cortex-M4 instruction set summary"
 *    and "FPU instruction set" (mirrored in TI SWCU192, section "Arm Cortex-M4F
 *    instructions"), and section 3.3.2 "Load/store timings": neighbouring
 *    single loads/stores pipeline (the second takes 1 cycle), STR with an
 *    immediate offset takes 1, nothing pipelines after STR with a register
 *    offset, and a load or store whose address depends on the result of the
 *    preceding data-processing instruction stalls one cycle. All multiplies
 *    and MACs 1, SDIV/UDIV 2..12; VADD/VMUL 1, VMLA/VFMA 3, VDIV/VSQRT 14,
 *    VLDR/VSTR 2, VLDM/VSTM 1+N.
 *  - Cortex-M33 and Cortex-M55: their TRMs publish no per-instruction scalar
 *    table; the Cortex-M4 table serves for their scalar and FP instructions
 *    (same 3-stage-class integer pipeline, single-cycle MAC, same FPU rows).
 *  - Cortex-M55 Helium (MVE): a dual-beat implementation, a 128-bit vector
 *    instruction's 4 beats take 2 cycles, and instructions of different
 *    groups (memory, data processing) overlap one beat pair
 *    (Arm-Examples/Helium-Optimization, "Optimizing C functions"; Arm,
 *    "Introduction to the Arm Cortex-M55 Processor").
 *
 * Where a manual states a range that depends on data (multiply and divide
 * early termination), the model takes the upper bound: the estimate never
 * assumes favourable operands. The refill P is 2 (the middle of 1..3), 3 when
 * the target is a 32-bit instruction not aligned to a fetch word, and 3 after
 * the blocking LDR pc, POP {pc} and TBB/TBH (M4 TRM 3.3.2: "three cycles for
 * the pipeline reload"; TBB/TBH 2 for the load and 1 for the add before it).
 */
#include "cycle_model.h"

#include <stdlib.h>
#include <string.h>

cm_core cm_core_from_name(const char *name)
{
    static const struct {
        const char *name;
        cm_core core;
    } names[] = {
        {"cortex-m0plus", CM_CORE_M0PLUS}, {"cortex-m3", CM_CORE_M3}, {"cortex-m4", CM_CORE_M4},
        {"cortex-m33", CM_CORE_M33},       {"cortex-m55", CM_CORE_M55},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(name, names[i].name) == 0) {
            return names[i].core;
        }
    }
    return CM_CORE_NONE;
}

static cm_insn make(cm_op op, bool wide)
{
    cm_insn in = {.op = (uint8_t)op, .nregs = 0, .wide = wide, .dbl = false,
                  .rd = -1, .rn = -1, .rm = -1, .rt = -1};
    return in;
}

static unsigned popcount16(unsigned v)
{
    unsigned n = 0;
    for (v &= 0xffffu; v != 0; v &= v - 1) {
        n++;
    }
    return n;
}

/* ---- 16-bit encodings ------------------------------------------------- */

static cm_insn decode16(unsigned hw)
{
    unsigned top5 = hw >> 11;
    cm_insn in = make(CM_DP, false);
    if (top5 <= 0x03) { /* shift by immediate, add/sub register or imm3 */
        in.rd = (int8_t)(hw & 7);
        return in;
    }
    if (top5 <= 0x07) { /* MOV/CMP/ADD/SUB imm8 */
        if ((top5 & 3) != 1) {
            in.rd = (int8_t)((hw >> 8) & 7);
        }
        return in;
    }
    if ((hw & 0xfc00) == 0x4000) { /* data processing register */
        unsigned op = (hw >> 6) & 0xf;
        if (op == 0xd) {
            in.op = CM_MUL;
        }
        if (op != 0x8 && op != 0xa && op != 0xb) { /* TST, CMP, CMN write nothing */
            in.rd = (int8_t)(hw & 7);
        }
        return in;
    }
    if ((hw & 0xfc00) == 0x4400) { /* special data processing, branch exchange */
        unsigned op = (hw >> 8) & 3;
        if (op == 3) {
            in.op = CM_BX; /* BX, BLX register */
            return in;
        }
        unsigned rd = (hw & 7) | ((hw >> 4) & 8);
        if (op == 1) {
            return in; /* CMP high */
        }
        if (rd == 15) {
            in.op = CM_DP_PC;
            return in;
        }
        in.rd = (int8_t)rd;
        return in;
    }
    if ((hw & 0xf800) == 0x4800) { /* LDR literal */
        in.op = CM_LDR;
        in.rn = 15;
        in.rt = (int8_t)((hw >> 8) & 7);
        return in;
    }
    if ((hw & 0xf000) == 0x5000) { /* load/store register offset */
        unsigned op = (hw >> 9) & 7;
        in.rn = (int8_t)((hw >> 3) & 7);
        in.rm = (int8_t)((hw >> 6) & 7);
        if (op <= 2) {
            in.op = CM_STR_REG;
        } else {
            in.op = CM_LDR;
            in.rt = (int8_t)(hw & 7);
        }
        return in;
    }
    if (top5 >= 0x0c && top5 <= 0x11) { /* LDR/STR(B,H) immediate offset */
        bool load = (hw >> 11) & 1;
        in.op = load ? CM_LDR : CM_STR;
        in.rn = (int8_t)((hw >> 3) & 7);
        if (load) {
            in.rt = (int8_t)(hw & 7);
        }
        return in;
    }
    if (top5 == 0x12 || top5 == 0x13) { /* STR/LDR SP-relative */
        bool load = (hw >> 11) & 1;
        in.op = load ? CM_LDR : CM_STR;
        in.rn = 13;
        if (load) {
            in.rt = (int8_t)((hw >> 8) & 7);
        }
        return in;
    }
    if (top5 == 0x14 || top5 == 0x15) { /* ADR, ADD rd, SP, #imm */
        in.rd = (int8_t)((hw >> 8) & 7);
        return in;
    }
    if ((hw & 0xf000) == 0xb000) { /* miscellaneous */
        if ((hw & 0x0f00) == 0x0000) { /* ADD/SUB SP, SP, #imm */
            in.rd = 13;
            return in;
        }
        if ((hw & 0x0500) == 0x0100) { /* CBZ, CBNZ */
            in.op = CM_BCOND;
            return in;
        }
        if ((hw & 0x0600) == 0x0400) { /* PUSH, POP */
            bool pop = (hw >> 11) & 1;
            in.nregs = (uint8_t)(popcount16(hw & 0xff) + ((hw >> 8) & 1));
            in.rn = 13;
            in.op = pop ? (((hw >> 8) & 1) ? CM_LDM_PC : CM_LDM) : CM_STM;
            return in;
        }
        if ((hw & 0x0f00) == 0x0f00) {
            in.op = (hw & 0x000f) != 0 ? CM_IT : CM_DP; /* IT, or a hint (NOP, YIELD ...): 1 */
            return in;
        }
        if ((hw & 0x0f00) == 0x0200 || (hw & 0x0f00) == 0x0a00) { /* extend, reverse */
            in.rd = (int8_t)(hw & 7);
            return in;
        }
        in.op = CM_SYS; /* CPS, BKPT */
        return in;
    }
    if ((hw & 0xf000) == 0xc000) { /* STM, LDM */
        bool load = (hw >> 11) & 1;
        in.op = load ? CM_LDM : CM_STM;
        in.nregs = (uint8_t)popcount16(hw & 0xff);
        in.rn = (int8_t)((hw >> 8) & 7);
        return in;
    }
    if ((hw & 0xf000) == 0xd000) {
        unsigned cond = (hw >> 8) & 0xf;
        in.op = cond >= 0xe ? CM_SYS : CM_BCOND; /* UDF, SVC */
        return in;
    }
    in.op = CM_B; /* 11100: B */
    return in;
}

/* ---- 32-bit encodings ------------------------------------------------- */

/* Coprocessor space: the FPU (coprocessors 10, 11) and MVE (14, 15 and the
 * former Advanced SIMD space 111x 1111). */
static cm_insn decode_coproc(unsigned hw1, unsigned hw2)
{
    unsigned cp = (hw2 >> 8) & 0xf;
    cm_insn in = make(CM_FP, true);
    bool memory = (hw1 & 0x0e00) == 0x0c00 && (hw1 & 0x01a0) != 0;
    if ((hw1 & 0xef00) == 0xef00) {
        in.op = CM_VEC_DP;
        return in;
    }
    if ((cp & 0xe) == 0xe) { /* MVE */
        if (!memory) {
            in.op = CM_VEC_DP;
            return in;
        }
        in.rn = (int8_t)(hw1 & 0xf);
        bool bit12 = (hw2 >> 12) & 1;
        if ((hw1 & 0xff80) == 0xfc80 && bit12) {
            in.op = CM_VEC_INTERLEAVE;
        } else if ((hw1 & 0xef80) == 0xec80 && !bit12) {
            in.op = CM_VEC_GATHER; /* [Rn, Qm]: element size in bits 8:7 */
            in.nregs = (uint8_t)(16u >> ((hw2 >> 7) & 3));
        } else if ((hw1 & 0xf000) == 0xf000 && bit12) {
            in.op = CM_VEC_GATHER; /* [Qm, #imm]: 32- or 64-bit elements */
            in.nregs = 4;
            in.rn = -1;
        } else {
            in.op = CM_VEC_MEM;
        }
        return in;
    }
    if ((cp & 0xe) != 0xa) {
        in.op = CM_SYS; /* other coprocessors: none on these cores */
        return in;
    }
    in.dbl = (cp & 1) != 0;
    if ((hw1 & 0x0e00) == 0x0c00) { /* extension register load/store, 64-bit transfers */
        if (!memory) {
            in.op = CM_FP_MOV2;
            return in;
        }
        in.rn = (int8_t)(hw1 & 0xf);
        bool load = (hw1 >> 4) & 1;
        if ((hw1 & 0x0f20) == 0x0d00) { /* VLDR, VSTR: P=1, W=0 */
            in.op = load ? CM_FP_LDR : CM_FP_STR;
            return in;
        }
        in.op = load ? CM_FP_LDM : CM_FP_STM;
        in.nregs = (uint8_t)(hw2 & 0xff); /* words */
        return in;
    }
    if ((hw2 >> 4) & 1) { /* VMOV core <-> S / scalar, VMRS, VMSR, VDUP */
        if ((hw1 & 0xff90) == 0xee80 && cp == 0xb) {
            in.op = CM_VEC_DP; /* VDUP */
            return in;
        }
        in.op = CM_FP_MOV;
        return in;
    }
    if ((hw1 & 0xff00) != 0xee00) {
        return in; /* VSEL, VMAXNM, VRINT, VCVTA ...: single cycle */
    }
    unsigned opc1 = ((hw1 >> 4) & 0xb);
    switch (opc1) {
    case 0x0: /* VMLA, VMLS */
    case 0x1: /* VNMLA, VNMLS */
    case 0x9: /* VFNMA, VFNMS */
    case 0xa: /* VFMA, VFMS */
        in.op = CM_FP_MAC;
        break;
    case 0x8: /* VDIV */
        in.op = CM_FP_DIV;
        break;
    case 0xb: /* VSQRT is opc2 0001 with bits 7:6 = 11 */
        if ((hw1 & 0xf) == 0x1 && ((hw2 >> 6) & 3) == 3) {
            in.op = CM_FP_DIV;
        }
        break;
    default:
        break;
    }
    return in;
}

static cm_insn decode32(unsigned hw1, unsigned hw2)
{
    cm_insn in = make(CM_DP, true);
    unsigned op1 = (hw1 >> 11) & 3;
    if (op1 == 1) {
        if ((hw1 & 0x0600) == 0x0000) { /* load/store multiple, dual, exclusive, table branch */
            in.rn = (int8_t)(hw1 & 0xf);
            if ((hw1 & 0x0040) == 0) { /* LDM, STM */
                bool load = (hw1 >> 4) & 1;
                in.nregs = (uint8_t)popcount16(hw2);
                in.op = load ? (((hw2 >> 15) & 1) ? CM_LDM_PC : CM_LDM) : CM_STM;
                return in;
            }
            if ((hw1 & 0xfff0) == 0xe8d0 && (hw2 & 0xffe0) == 0xf000) {
                in.op = CM_TB;
                return in;
            }
            bool load = (hw1 >> 4) & 1;
            if ((hw1 & 0x0120) != 0) { /* LDRD, STRD: P or W set (else exclusives) */
                in.op = load ? CM_LDRD : CM_STRD;
                in.nregs = 2;
                return in;
            }
            in.op = load ? CM_LDR : CM_STR; /* exclusives */
            if (load) {
                in.rt = (int8_t)(hw2 >> 12);
            }
            return in;
        }
        if ((hw1 & 0x0600) == 0x0200) { /* data processing, shifted register */
            unsigned rd = (hw2 >> 8) & 0xf;
            in.rd = rd == 15 ? -1 : (int8_t)rd;
            return in;
        }
        return decode_coproc(hw1, hw2);
    }
    if (op1 == 2) {
        if ((hw2 & 0x8000) == 0) { /* data processing, immediate */
            unsigned rd = (hw2 >> 8) & 0xf;
            in.rd = rd == 15 ? -1 : (int8_t)rd;
            return in;
        }
        unsigned k = hw2 & 0xd000;
        if (k == 0xd000) {
            in.op = CM_BL;
        } else if (k == 0x9000) {
            in.op = CM_B;
        } else if (k == 0xc000) {
            /* BLX (immediate) does not exist on M profile: ARMv8.1-M low-overhead
             * loops and VCTP live here. */
            if ((hw2 & 0xf001) == 0xc001) {
                in.op = (hw1 & 0xffcf) == 0xf00f ? CM_LE : CM_BCOND; /* LE(TP), WLS(TP) */
            } else {
                in.op = CM_DP; /* DLS(TP), LCTP, VCTP */
            }
        } else if (((hw1 >> 7) & 7) != 7) {
            in.op = CM_BCOND;
        } else if ((hw1 & 0xfff0) == 0xf3b0) {
            unsigned opt = (hw2 >> 4) & 0xf;
            in.op = opt == 6 ? CM_ISB : (opt == 4 || opt == 5) ? CM_BARRIER : CM_SYS;
        } else {
            in.op = CM_SYS; /* MSR, MRS, hints */
        }
        return in;
    }
    /* op1 == 3 */
    if ((hw1 & 0x0e00) == 0x0800) { /* 1111 100x: load/store single */
        bool load = (hw1 >> 4) & 1;
        unsigned rt = hw2 >> 12;
        in.rn = (int8_t)(hw1 & 0xf);
        bool reg_offset = (hw1 & 0x0080) == 0 && in.rn != 15 && (hw2 & 0x0fc0) == 0;
        if (reg_offset) {
            in.rm = (int8_t)(hw2 & 0xf);
        }
        if (load) {
            if (rt == 15) {
                in.op = (hw1 & 0x0060) == 0x0040 ? CM_LDR_PC : CM_SYS; /* LDR pc, or PLD/PLI */
                return in;
            }
            in.op = CM_LDR;
            in.rt = (int8_t)rt;
        } else {
            in.op = reg_offset ? CM_STR_REG : CM_STR;
        }
        return in;
    }
    if ((hw1 & 0x0f00) == 0x0a00) { /* data processing, register (incl. parallel add/sub) */
        in.rd = (int8_t)((hw2 >> 8) & 0xf);
        return in;
    }
    if ((hw1 & 0x0f80) == 0x0b00) { /* multiply, multiply-accumulate */
        unsigned op = (hw1 >> 4) & 7;
        unsigned ra = hw2 >> 12;
        in.rd = (int8_t)((hw2 >> 8) & 0xf);
        if (op == 0) {
            in.op = (ra == 15 && ((hw2 >> 4) & 3) == 0) ? CM_MUL : CM_MLA; /* MUL, or MLA/MLS */
        } else {
            in.op = CM_DSP_MAC;
        }
        return in;
    }
    if ((hw1 & 0x0f80) == 0x0b80) { /* long multiply, divide */
        unsigned op = (hw1 >> 4) & 7;
        in.rd = (int8_t)((hw2 >> 8) & 0xf); /* RdHi (RdLo is written too) */
        if (op == 1 || op == 3) {
            in.op = CM_DIV;
        } else if (op == 0 || op == 2) {
            in.op = CM_MULL;
        } else {
            in.op = CM_MLAL;
        }
        return in;
    }
    if ((hw1 & 0x0c00) == 0x0c00) {
        return decode_coproc(hw1, hw2);
    }
    in.op = CM_SYS;
    return in;
}

size_t cm_thumb_size(const uint8_t *bytes, size_t size)
{
    unsigned hw1 = (unsigned)bytes[0] | ((unsigned)bytes[1] << 8);
    return size >= 4 && (hw1 >> 11) >= 0x1d ? 4 : 2; /* 0b11101, 0b11110, 0b11111: a 32-bit encoding */
}

cm_insn cm_decode(const uint8_t *bytes, size_t size)
{
    unsigned hw1 = (unsigned)bytes[0] | ((unsigned)bytes[1] << 8);
    if (cm_thumb_size(bytes, size) < 4) {
        return decode16(hw1);
    }
    unsigned hw2 = (unsigned)bytes[2] | ((unsigned)bytes[3] << 8);
    return decode32(hw1, hw2);
}

/* ---- costs ------------------------------------------------------------ */

/* Base cycles per op; N (nregs) is added for the 1+N rows. A branch's row
 * holds its cost when not taken; cm_refill adds the taken part. */
static const uint8_t cost_m0plus[CM_OP_COUNT] = {
    [CM_DP] = 1,     [CM_DP_PC] = 1,  [CM_IT] = 1,      [CM_MUL] = 1,     [CM_MLA] = 1,
    [CM_MULL] = 1,   [CM_MLAL] = 1,   [CM_DSP_MAC] = 1, [CM_DIV] = 1,     [CM_LDR] = 2,
    [CM_LDR_PC] = 2, [CM_STR] = 2,    [CM_STR_REG] = 2, [CM_LDRD] = 3,    [CM_STRD] = 3,
    [CM_LDM] = 1,    [CM_LDM_PC] = 1, [CM_STM] = 1,     [CM_B] = 1,       [CM_BCOND] = 1,
    [CM_BL] = 2,     [CM_BX] = 1,     [CM_TB] = 2,      [CM_LE] = 1,      [CM_BARRIER] = 3,
    [CM_ISB] = 3,    [CM_SYS] = 3,
};

/* Cortex-M3: no DSP extension, no FPU; the FPU rows only matter for M4-class cores. */
static const uint8_t cost_m3[CM_OP_COUNT] = {
    [CM_DP] = 1,      [CM_DP_PC] = 1,  [CM_IT] = 1,      [CM_MUL] = 1,     [CM_MLA] = 2,
    [CM_MULL] = 5,    [CM_MLAL] = 7,   [CM_DSP_MAC] = 1, [CM_DIV] = 12,    [CM_LDR] = 2,
    [CM_LDR_PC] = 2,  [CM_STR] = 1,    [CM_STR_REG] = 2, [CM_LDRD] = 3,    [CM_STRD] = 3,
    [CM_LDM] = 1,     [CM_LDM_PC] = 1, [CM_STM] = 1,     [CM_B] = 1,       [CM_BCOND] = 1,
    [CM_BL] = 1,      [CM_BX] = 1,     [CM_TB] = 3,      [CM_LE] = 1,      [CM_BARRIER] = 1,
    [CM_ISB] = 3,     [CM_SYS] = 1,    [CM_FP] = 1,      [CM_FP_MAC] = 3,  [CM_FP_DIV] = 14,
    [CM_FP_MOV] = 1,  [CM_FP_MOV2] = 2, [CM_FP_LDR] = 2, [CM_FP_STR] = 2,  [CM_FP_LDM] = 1,
    [CM_FP_STM] = 1,  [CM_VEC_DP] = 2, [CM_VEC_MEM] = 2, [CM_VEC_GATHER] = 0,
    [CM_VEC_INTERLEAVE] = 2,
};

/* Cortex-M4 (and the M33/M55 scalar side): single-cycle multiplier and MAC. */
static const uint8_t cost_m4[CM_OP_COUNT] = {
    [CM_DP] = 1,      [CM_DP_PC] = 1,  [CM_IT] = 1,      [CM_MUL] = 1,     [CM_MLA] = 1,
    [CM_MULL] = 1,    [CM_MLAL] = 1,   [CM_DSP_MAC] = 1, [CM_DIV] = 12,    [CM_LDR] = 2,
    [CM_LDR_PC] = 2,  [CM_STR] = 1,    [CM_STR_REG] = 2, [CM_LDRD] = 3,    [CM_STRD] = 3,
    [CM_LDM] = 1,     [CM_LDM_PC] = 1, [CM_STM] = 1,     [CM_B] = 1,       [CM_BCOND] = 1,
    [CM_BL] = 1,      [CM_BX] = 1,     [CM_TB] = 3,      [CM_LE] = 1,      [CM_BARRIER] = 1,
    [CM_ISB] = 3,     [CM_SYS] = 1,    [CM_FP] = 1,      [CM_FP_MAC] = 3,  [CM_FP_DIV] = 14,
    [CM_FP_MOV] = 1,  [CM_FP_MOV2] = 2, [CM_FP_LDR] = 2, [CM_FP_STR] = 2,  [CM_FP_LDM] = 1,
    [CM_FP_STM] = 1,  [CM_VEC_DP] = 2, [CM_VEC_MEM] = 2, [CM_VEC_GATHER] = 0,
    [CM_VEC_INTERLEAVE] = 2,
};

static bool is_single_mem(unsigned op)
{
    return op == CM_LDR || op == CM_STR || op == CM_STR_REG || op == CM_FP_LDR || op == CM_FP_STR;
}

static bool is_mem(unsigned op)
{
    return is_single_mem(op) || op == CM_LDR_PC || op == CM_LDRD || op == CM_STRD || op == CM_LDM ||
           op == CM_LDM_PC || op == CM_STM || op == CM_FP_LDM || op == CM_FP_STM || op == CM_TB;
}

static bool is_vector(unsigned op)
{
    return op == CM_VEC_DP || op == CM_VEC_MEM || op == CM_VEC_GATHER || op == CM_VEC_INTERLEAVE;
}

static bool has_multiple(unsigned op)
{
    return op == CM_LDM || op == CM_LDM_PC || op == CM_STM || op == CM_FP_LDM || op == CM_FP_STM;
}

static unsigned cycles_m0plus(const cm_insn *cur)
{
    unsigned c = cost_m0plus[cur->op];
    if (has_multiple(cur->op)) {
        c += cur->nregs;
    }
    return c == 0 ? 1 : c;
}

/* The MVE beat model: a vector instruction is 4 beats, 2 per cycle; a vector
 * memory instruction following a vector data-processing one (or the other
 * way round) overlaps its first beat pair with the previous one's last. */
static unsigned cycles_vector(const cm_insn *prev, const cm_insn *cur)
{
    if (cur->op == CM_VEC_GATHER) {
        return cur->nregs; /* one element address per cycle, no overlap */
    }
    if (cur->op == CM_VEC_INTERLEAVE || prev == NULL) {
        return 2;
    }
    bool cur_mem = cur->op == CM_VEC_MEM;
    if ((prev->op == CM_VEC_DP && cur_mem) || (prev->op == CM_VEC_MEM && !cur_mem)) {
        return 1;
    }
    return 2;
}

static unsigned cycles_v7m(cm_core core, const cm_insn *prev, const cm_insn *cur)
{
    const uint8_t *table = core == CM_CORE_M3 ? cost_m3 : cost_m4;
    unsigned op = cur->op;
    if (is_vector(op)) {
        return cycles_vector(prev != NULL && is_vector(prev->op) ? prev : NULL, cur);
    }
    unsigned c = table[op];
    if (has_multiple(op)) {
        c += cur->nregs;
    }
    if (cur->dbl && (op == CM_FP || op == CM_FP_MAC)) {
        c += 1; /* double precision on the M55's FPv5: one more cycle (assumption, docs/cycles.md) */
    } else if (cur->dbl && op == CM_FP_DIV) {
        c = 29;
    }
    if (prev == NULL) {
        return c;
    }
    /* A load pipelines with a following single load or store: the second
     * takes one cycle less, unless its address needs the loaded value.
     * Nothing pipelines after a store. */
    if ((op == CM_LDR || op == CM_STR_REG || op == CM_FP_LDR || op == CM_FP_STR) &&
        (prev->op == CM_LDR || prev->op == CM_FP_LDR)) {
        bool dependent = prev->rt >= 0 && (prev->rt == cur->rn || prev->rt == cur->rm);
        if (!dependent) {
            c -= 1;
        }
    }
    /* An address computed by the preceding data-processing instruction
     * reaches the address generator a cycle late: no forwarding path. */
    if (is_mem(op) && prev->rd >= 0 &&
        (prev->op == CM_DP || prev->op == CM_MUL || prev->op == CM_MLA || prev->op == CM_DSP_MAC) &&
        (prev->rd == cur->rn || prev->rd == cur->rm)) {
        c += 1;
    }
    return c;
}

unsigned cm_cycles(cm_core core, const cm_insn *prev, const cm_insn *cur)
{
    switch (core) {
    case CM_CORE_M0PLUS:
        return cycles_m0plus(cur);
    case CM_CORE_M3:
    case CM_CORE_M4:
    case CM_CORE_M33:
    case CM_CORE_M55:
        return cycles_v7m(core, prev, cur);
    default:
        return 1;
    }
}

bool cm_is_branch(const cm_insn *insn)
{
    switch (insn->op) {
    case CM_DP_PC:
    case CM_LDR_PC:
    case CM_LDM_PC:
    case CM_B:
    case CM_BCOND:
    case CM_BL:
    case CM_BX:
    case CM_TB:
    case CM_LE:
        return true;
    default:
        return false;
    }
}

unsigned cm_refill(cm_core core, const cm_insn *insn, uint64_t target, bool target_wide)
{
    if (core == CM_CORE_M0PLUS) {
        return insn->op == CM_LDM_PC ? 2 : 1;
    }
    if (insn->op == CM_LE) {
        return 0; /* the loop end's branch is known early: the M55 fetches the loop start in time */
    }
    if (insn->op == CM_LDR_PC || insn->op == CM_LDM_PC || insn->op == CM_TB) {
        return 3; /* blocking: the reload starts after the load (M4 TRM 3.3.2) */
    }
    return 2 + ((target_wide && (target & 2) != 0) ? 1 : 0);
}

/* ---- caches ----------------------------------------------------------- */

bool cm_cache_init(cm_cache *cache, uint32_t bytes, uint32_t ways, uint32_t line)
{
    if (line == 0 || (line & (line - 1)) != 0 || ways == 0 || bytes % (ways * line) != 0 ||
        bytes / (ways * line) == 0) {
        return false;
    }
    cache->sets = bytes / (ways * line);
    cache->ways = ways;
    cache->line_shift = 0;
    while ((1u << cache->line_shift) < line) {
        cache->line_shift++;
    }
    cache->tags = calloc((size_t)cache->sets * ways, sizeof *cache->tags);
    cache->used = calloc((size_t)cache->sets * ways, sizeof *cache->used);
    cache->clock = 0;
    return cache->tags != NULL && cache->used != NULL;
}

bool cm_cache_access(cm_cache *cache, uint64_t addr)
{
    uint64_t line = addr >> cache->line_shift;
    size_t base = (size_t)(line % cache->sets) * cache->ways;
    uint64_t *tags = &cache->tags[base];
    uint64_t *used = &cache->used[base];
    cache->clock++;
    size_t victim = 0;
    for (size_t w = 0; w < cache->ways; w++) {
        if (tags[w] == line + 1) {
            used[w] = cache->clock;
            return true;
        }
        if (used[w] < used[victim]) {
            victim = w;
        }
    }
    tags[victim] = line + 1;
    used[victim] = cache->clock;
    return false;
}
