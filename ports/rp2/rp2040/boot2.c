/*
 * The RP2040's second-stage boot loader ("boot2") for the Pico's Winbond
 * W25Q080 flash, written for this project from the RP2040 datasheet (2.8.1:
 * the boot ROM copies the first 256 bytes of flash to SRAM at 0x20041f00,
 * checks their CRC32 and runs them; 4.10: the SSI in front of the XIP cache;
 * W25Q80DV datasheet: status register 2 bit QE, Fast Read Quad I/O 0xEB in
 * continuous-read mode).
 *
 * It sets the XIP SSI up for quad I/O reads without the command byte
 * (continuous read mode: mode bits 0xA0 keep the flash expecting only
 * addresses), so execute-in-place runs at clk_sys / 4 on four data lines:
 *   1. SSI off, clock divider 4, sample delay 1.
 *   2. Standard SPI, 8-bit frames: read status register 2 (0x35); if QE is
 *      clear, write enable (0x06), write SR1 = 0 and SR2 = QE (0x01) and wait
 *      for BUSY in status register 1 (0x05) to clear.
 *   3. Quad SPI, EEPROM-read mode: one 0xEB command with address 0 and mode
 *      0xA0 puts the flash in continuous-read mode.
 *   4. SSI reconfigured so the XIP cache sends only address + mode (0xA0)
 *      and reads 32 bits per access, then back on.
 *   5. Called by the boot ROM (LR == 0): VTOR to the vector table right
 *      after this block, SP and PC from it. Called as a function: return.
 *
 * Position independent (it runs from SRAM at an address it is not linked
 * at): only PC-relative branches and literals. Exactly 256 bytes: the code,
 * padding, and a CRC32 word that mcu/device/boot2.py fills in after the link
 * (polynomial 0x04C11DB7, initial value 0xFFFFFFFF, not reflected, no final
 * XOR: the boot ROM's parameters).
 */

/* ARMv6-M Thumb: the assembler rejects any instruction the Cortex-M0+ lacks. */
__asm__(
    "    .section .boot2, \"ax\", %progbits\n"
    "    .syntax unified\n"
    "    .thumb\n"
    "    .balign 4\n"
    "    .global mcu_rp2040_boot2\n"
    "    .type mcu_rp2040_boot2, %function\n"
    "    .thumb_func\n"
    "mcu_rp2040_boot2:\n"
    "    push {lr}\n"
    "    ldr r3, boot2_ssi_base\n"          /* XIP SSI registers, 0x18000000 */
    /* 1. off; SCK = clk_sys / 4; sample one clk_sys after the SCK edge */
    "    movs r1, #0\n"
    "    str r1, [r3, #0x08]\n"             /* SSIENR */
    "    movs r1, #4\n"
    "    str r1, [r3, #0x14]\n"             /* BAUDR */
    "    movs r1, #1\n"
    "    movs r2, #0xf0\n"
    "    str r1, [r3, r2]\n"                /* RX_SAMPLE_DLY */
    /* 2. standard SPI, transmit and receive, 8-bit frames */
    "    ldr r1, boot2_ctrlr0_spi\n"
    "    str r1, [r3, #0x00]\n"             /* CTRLR0 */
    "    movs r1, #1\n"
    "    str r1, [r3, #0x08]\n"             /* SSIENR: on */
    "    movs r0, #0x35\n"                  /* read status register 2 */
    "    bl boot2_read_status\n"
    "    movs r1, #0x02\n"                  /* QE */
    "    tst r0, r1\n"
    "    bne boot2_quad_enabled\n"
    "    movs r1, #0x06\n"                  /* write enable */
    "    str r1, [r3, #0x60]\n"
    "    bl boot2_wait_ssi\n"
    "    ldr r1, [r3, #0x60]\n"
    "    movs r1, #0x01\n"                  /* write status registers: SR1, SR2 */
    "    str r1, [r3, #0x60]\n"
    "    movs r1, #0x00\n"
    "    str r1, [r3, #0x60]\n"
    "    movs r1, #0x02\n"
    "    str r1, [r3, #0x60]\n"
    "    bl boot2_wait_ssi\n"
    "    ldr r1, [r3, #0x60]\n"
    "    ldr r1, [r3, #0x60]\n"
    "    ldr r1, [r3, #0x60]\n"
    "boot2_wait_write:\n"
    "    movs r0, #0x05\n"                  /* read status register 1 */
    "    bl boot2_read_status\n"
    "    movs r1, #0x01\n"                  /* BUSY */
    "    tst r0, r1\n"
    "    bne boot2_wait_write\n"
    "boot2_quad_enabled:\n"
    /* 3. quad I/O, EEPROM read of one 32-bit frame: 0xEB, address 0, mode 0xA0 */
    "    movs r1, #0\n"
    "    str r1, [r3, #0x08]\n"
    "    ldr r1, boot2_ctrlr0_quad\n"
    "    str r1, [r3, #0x00]\n"
    "    movs r1, #0\n"
    "    str r1, [r3, #0x04]\n"             /* CTRLR1: one data frame */
    "    ldr r1, boot2_spi_ctrlr0_cmd\n"
    "    movs r2, #0xf4\n"
    "    str r1, [r3, r2]\n"                /* SPI_CTRLR0 */
    "    movs r1, #1\n"
    "    str r1, [r3, #0x08]\n"
    "    movs r1, #0xeb\n"
    "    str r1, [r3, #0x60]\n"
    "    movs r1, #0xa0\n"
    "    str r1, [r3, #0x60]\n"
    "    bl boot2_wait_ssi\n"
    /* 4. from now on the XIP cache sends address + mode 0xA0 only */
    "    movs r1, #0\n"
    "    str r1, [r3, #0x08]\n"
    "    ldr r1, boot2_spi_ctrlr0_xip\n"
    "    movs r2, #0xf4\n"
    "    str r1, [r3, r2]\n"
    "    movs r1, #1\n"
    "    str r1, [r3, #0x08]\n"
    /* 5. into the image, or back to a caller */
    "    pop {r0}\n"
    "    cmp r0, #0\n"
    "    beq boot2_vector_into_flash\n"
    "    bx r0\n"
    "boot2_vector_into_flash:\n"
    "    ldr r0, boot2_vector_table\n"
    "    ldr r1, boot2_vtor\n"
    "    str r0, [r1]\n"
    "    ldmia r0!, {r1, r2}\n"             /* initial SP, reset handler */
    "    msr msp, r1\n"
    "    bx r2\n"
    /* Wait until the transmit FIFO is empty and the SSI idle. Clobbers r0, r1. */
    "    .thumb_func\n"
    "boot2_wait_ssi:\n"
    "    ldr r1, [r3, #0x28]\n"             /* SR */
    "    movs r0, #0x04\n"                  /* TFE */
    "    tst r1, r0\n"
    "    beq boot2_wait_ssi\n"
    "    movs r0, #0x01\n"                  /* BUSY */
    "    tst r1, r0\n"
    "    bne boot2_wait_ssi\n"
    "    bx lr\n"
    /* Send command r0 and one dummy byte; return the byte received during the dummy. */
    "    .thumb_func\n"
    "boot2_read_status:\n"
    "    push {lr}\n"
    "    str r0, [r3, #0x60]\n"
    "    str r0, [r3, #0x60]\n"
    "    bl boot2_wait_ssi\n"
    "    ldr r0, [r3, #0x60]\n"
    "    ldr r0, [r3, #0x60]\n"
    "    pop {pc}\n"
    "    .balign 4\n"
    "boot2_ssi_base:       .word 0x18000000\n"
    /* CTRLR0: DFS_32 = 7 (8-bit frames), TMOD = 0 (transmit and receive), SPI_FRF = 0 (standard) */
    "boot2_ctrlr0_spi:     .word (7 << 16)\n"
    /* CTRLR0: SPI_FRF = 2 (quad), DFS_32 = 31 (32-bit frames), TMOD = 3 (EEPROM read) */
    "boot2_ctrlr0_quad:    .word (2 << 21) | (31 << 16) | (3 << 8)\n"
    /* SPI_CTRLR0: ADDR_L = 8 (24-bit address + 8 mode bits), WAIT_CYCLES = 4, INST_L = 2 (8 bits),
     * TRANS_TYPE = 1 (command on one line, address on four) */
    "boot2_spi_ctrlr0_cmd: .word (8 << 2) | (4 << 11) | (2 << 8) | 1\n"
    /* SPI_CTRLR0: XIP_CMD = 0xA0 (sent as the mode bits after the address), ADDR_L = 8, WAIT_CYCLES = 4,
     * INST_L = 0 (no command), TRANS_TYPE = 2 (address and data on four lines) */
    "boot2_spi_ctrlr0_xip: .word (0xa0 << 24) | (8 << 2) | (4 << 11) | (0 << 8) | 2\n"
    "boot2_vector_table:   .word 0x10000100\n"
    "boot2_vtor:           .word 0xe000ed08\n"
    "    .org 252\n"
    "mcu_rp2040_boot2_crc:\n"
    "    .word 0\n"                         /* CRC32 of bytes 0..251, set by mcu/device/boot2.py */
    "    .size mcu_rp2040_boot2, . - mcu_rp2040_boot2\n"
    "    .text\n");
