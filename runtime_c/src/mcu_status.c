#include "mcu/status.h"

const char *mcu_status_str(mcu_status status)
{
    switch (status) {
    case MCU_OK: return "ok";
    case MCU_ERR_NULL_POINTER: return "null pointer";
    case MCU_ERR_INVALID_ARG: return "invalid argument";
    case MCU_ERR_SHAPE: return "shape mismatch";
    case MCU_ERR_UNSUPPORTED: return "unsupported";
    case MCU_ERR_BUFFER_TOO_SMALL: return "buffer too small";
    case MCU_ERR_MISMATCH: return "output mismatch";
    case MCU_ERR_PROGRAM_INVALID: return "invalid program";
    case MCU_ERR_PROGRAM_TRUNCATED: return "truncated program";
    case MCU_ERR_PROGRAM_OVERSIZED: return "oversized program";
    case MCU_ERR_PROGRAM_CHECKSUM: return "program checksum mismatch";
    case MCU_ERR_PROGRAM_VERSION: return "unsupported program version";
    case MCU_ERR_WEIGHTS_MISMATCH: return "weights mismatch";
    case MCU_ERR_NOT_FOUND: return "not found";
    case MCU_ERR_DELEGATE_BACKEND: return "delegate payload for another backend";
    case MCU_ERR_DELEGATE_VERSION: return "unsupported delegate payload version";
    case MCU_ERR_DELEGATE_PAYLOAD: return "corrupt delegate payload";
    case MCU_ERR_DELEGATE_FAILED: return "delegate backend failed";
    case MCU_ERR_WEIGHTS_CORRUPT: return "weights corrupt";
    case MCU_ERR_ARENA_LIMIT: return "arena beyond the RAM limit";
    }
    return "unknown status";
}
