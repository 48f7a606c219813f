"""Parse what the test-harness firmware prints (see codegen/firmware_main.c.j2)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

_OUT = re.compile(r"^OUT (\d+) (\d+)((?: [0-9a-f]{8})*)\s*$")
_VECTOR = re.compile(r"^VECTOR (\d+) (PASS|FAIL)\s*$")
_CYCLES = re.compile(r"^CYCLES (\d+)\s*$")
_RESULT = re.compile(r"^RESULT (PASS|FAIL) (\d+)/(\d+)\s*$")
_ERROR = re.compile(r"^ERROR (\d+) (.*)$")


@dataclass
class HarnessReport:
    outputs: dict[tuple[int, int], bytes] = field(default_factory=dict)  # (vector, output) -> raw bytes
    vector_passed: dict[int, bool] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    cycles: int | None = None
    passed: bool | None = None  # None: the firmware never printed a RESULT line
    failed_vectors: int | None = None

    def output_array(self, vector: int, output: int, dtype: np.dtype, count: int) -> np.ndarray:
        raw = self.outputs[(vector, output)]
        itemsize = np.dtype(dtype).itemsize
        return np.frombuffer(raw[: count * itemsize], dtype=dtype).copy()


def parse_harness(text: str) -> HarnessReport:
    report = HarnessReport()
    for line in text.splitlines():
        line = line.strip("\r")
        if m := _OUT.match(line):
            words = [int(w, 16) for w in m.group(3).split()]
            report.outputs[(int(m.group(1)), int(m.group(2)))] = b"".join(w.to_bytes(4, "little") for w in words)
        elif m := _VECTOR.match(line):
            report.vector_passed[int(m.group(1))] = m.group(2) == "PASS"
        elif m := _CYCLES.match(line):
            report.cycles = int(m.group(1))
        elif m := _RESULT.match(line):
            report.passed = m.group(1) == "PASS"
            report.failed_vectors = int(m.group(2))
        elif m := _ERROR.match(line):
            report.errors.append(f"vector {m.group(1)}: {m.group(2)}")
    return report
