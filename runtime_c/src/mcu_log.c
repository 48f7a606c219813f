#include "mcu/log.h"

#include "mcu/platform.h"

void mcu_log_str(const char *s)
{
    size_t n = 0;
    while (s[n] != '\0') {
        n++;
    }
    mcu_platform_write(s, n);
}

void mcu_log_u32(uint32_t v)
{
    char buf[10];
    size_t i = sizeof(buf);
    do {
        buf[--i] = (char)('0' + (v % 10u));
        v /= 10u;
    } while (v != 0u && i > 0u);
    mcu_platform_write(&buf[i], sizeof(buf) - i);
}

void mcu_log_i32(int32_t v)
{
    if (v < 0) {
        mcu_platform_write("-", 1);
        /* Negate in unsigned arithmetic so INT32_MIN does not overflow. */
        mcu_log_u32(0u - (uint32_t)v);
    } else {
        mcu_log_u32((uint32_t)v);
    }
}

void mcu_log_hex32(uint32_t v)
{
    static const char digits[] = "0123456789abcdef";
    char buf[8];
    for (int i = 7; i >= 0; i--) {
        buf[i] = digits[v & 0xfu];
        v >>= 4;
    }
    mcu_platform_write(buf, sizeof(buf));
}

void mcu_log_newline(void)
{
    mcu_platform_write("\n", 1);
}
