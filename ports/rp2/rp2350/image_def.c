/*
 * The RP2350 boot ROM only runs a flash image that carries a valid IMAGE_DEF
 * block in its first 4 KB (RP2350 datasheet 5.9.5). This is the minimal one
 * for an Arm Secure executable: one IMAGE_TYPE item and nothing else. With
 * no ENTRY_POINT or VECTOR_TABLE item the ROM takes the initial SP and the
 * reset vector from the vector table at the start of the image.
 *
 * The linker script keeps every `.vectors.*` input section right after the
 * vector table, so these 20 bytes sit at 0x10000040.
 */
#include <stdint.h>

#define PICOBIN_BLOCK_MARKER_START 0xffffded3u
#define PICOBIN_BLOCK_MARKER_END 0xab123579u
/* Item IMAGE_TYPE (0x42), size 1 word, flags 0x1021: EXE | CPU Arm |
 * Arm Secure | chip RP2350. */
#define IMAGE_TYPE_ARM_SECURE_EXE 0x10210142u
/* Item LAST (0xff) with the size of the items before it (1 word). */
#define ITEM_LAST_SIZE_1 0x000001ffu
/* Offset to the next block in the loop; 0 = this block links to itself. */
#define BLOCK_LOOP_SELF 0x00000000u

__attribute__((section(".vectors.image_def"), used, aligned(4))) const uint32_t mcu_rp2350_image_def[5] = {
    PICOBIN_BLOCK_MARKER_START,
    IMAGE_TYPE_ARM_SECURE_EXE,
    ITEM_LAST_SIZE_1,
    BLOCK_LOOP_SELF,
    PICOBIN_BLOCK_MARKER_END,
};
