"""C source for the kernel test firmwares: constant arrays of test data and the firmware's main."""

from __future__ import annotations

import numpy as np


def c_array(name: str, ctype: str, values, aligned: int = 0) -> str:
    """``static const <ctype> <name>[] = {...};`` (one zero when there are no values: C has no empty
    initializer), aligned to `aligned` bytes when given."""
    body = ", ".join(str(int(v)) for v in np.asarray(values).reshape(-1)) or "0"
    attr = f" __attribute__((aligned({aligned})))" if aligned else ""
    return f"static const {ctype} {name}[]{attr} = {{{body}}};\n"


def harness_main(label: str, runs: list[str]) -> str:
    """The firmware's main: every case's run line, then "<label> cases failed: N" and N as the exit status."""
    return ("int main(void)\n{\n    int bad = 0;\n" + "".join(runs) +
            f'    mcu_log_str("{label} cases failed: ");\n    mcu_log_i32(bad);\n    mcu_log_newline();\n'
            "    return bad;\n}\n")
