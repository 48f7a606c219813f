"""Building exported libraries in throwaway projects: a checked subprocess, a CMake configure and build
with warnings as errors, the example's PASS lines, and a stand-in Pico SDK (the few tool targets and
headers the Pico output touches, running on the host)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

WARNINGS = ["-Wall", "-Wextra", "-Werror"]

def run_checked(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None,
                timeout: float = 300) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def run_logged(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 300) -> str:
    """run_checked for a build: its stdout and stderr (where compilers, linkers and CMake warn), in that order."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr


def cmake_build(src: Path, build: Path, *defs: str, env: dict[str, str] | None = None) -> None:
    run_checked(["cmake", "-S", str(src), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                 "-DCMAKE_C_FLAGS=" + " ".join(WARNINGS), *defs], env=env)
    run_checked(["cmake", "--build", str(build)], env=env)


def header_macro(header: Path, name: str) -> int:
    """The integer a generated header #defines as ``name``."""
    m = re.search(rf"^#define {name} (\d+)$", header.read_text(), re.MULTILINE)
    assert m, f"{name} not in {header}"
    return int(m.group(1))


def expect_pass(output: str, vectors: int) -> None:
    assert f"RESULT PASS 0/{vectors}" in output, output


PICO_SDK_INIT = r"""
# Stand-in for the Pico SDK's pico_sdk_init.cmake: the targets and functions the export uses, on the host.
function(pico_sdk_init)
    add_library(pico_stdlib STATIC ${PICO_SDK_PATH}/stand_in.c)
    target_include_directories(pico_stdlib PUBLIC ${PICO_SDK_PATH}/include)
    add_library(pico_multicore STATIC ${PICO_SDK_PATH}/multicore_stand_in.c)
    target_include_directories(pico_multicore PUBLIC ${PICO_SDK_PATH}/include)
    find_package(Threads REQUIRED)
    target_link_libraries(pico_multicore PUBLIC Threads::Threads)
endfunction()
function(pico_enable_stdio_usb target on)
endfunction()
function(pico_enable_stdio_uart target on)
endfunction()
function(pico_add_extra_outputs target)
endfunction()
"""

PICO_STDLIB_H = r"""
#ifndef STAND_IN_PICO_STDLIB_H
#define STAND_IN_PICO_STDLIB_H
#include <stdbool.h>
#include <stdint.h>
bool stdio_init_all(void);
uint32_t time_us_32(void);
void sleep_ms(uint32_t ms);
#endif
"""

PICO_CLOCKS_H = r"""
#ifndef STAND_IN_HARDWARE_CLOCKS_H
#define STAND_IN_HARDWARE_CLOCKS_H
#include <stdint.h>
typedef enum clock_num { clk_ref = 4, clk_sys = 5 } clock_num_t;
uint32_t clock_get_hz(clock_num_t clock);
#endif
"""

PICO_STAND_IN_C = r"""
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "hardware/clocks.h"
#include "pico/stdlib.h"
bool stdio_init_all(void) { return true; }
uint32_t time_us_32(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint32_t)(t.tv_sec * 1000000 + t.tv_nsec / 1000);
}
/* The example sleeps after each report: the stand-in ends the program at the first one. */
void sleep_ms(uint32_t ms) { (void)ms; fflush(stdout); exit(0); }
uint32_t clock_get_hz(clock_num_t clock) { return clock == clk_sys ? 125000000u : 12000000u; }
"""


PICO_MULTICORE_H = r"""
#ifndef STAND_IN_PICO_MULTICORE_H
#define STAND_IN_PICO_MULTICORE_H
#include <stddef.h>
#include <stdint.h>
void multicore_launch_core1_with_stack(void (*entry)(void), uint32_t *stack_bottom, size_t stack_size_bytes);
void multicore_fifo_push_blocking(uint32_t data);
uint32_t multicore_fifo_pop_blocking(void);
#endif
"""

# Core 1 as a thread, the two inter-core FIFOs as one-word mailboxes guarded by semaphores.
PICO_MULTICORE_C = r"""
#include <pthread.h>
#include <semaphore.h>
#include "pico/multicore.h"
static void (*core1_entry)(void);
static pthread_t core1;
static sem_t to_core1, to_core0;
static uint32_t box_core1, box_core0;
static void *core1_thread(void *arg) { (void)arg; core1_entry(); return NULL; }
void multicore_launch_core1_with_stack(void (*entry)(void), uint32_t *stack_bottom, size_t stack_size_bytes)
{
    (void)stack_bottom;
    (void)stack_size_bytes;
    core1_entry = entry;
    sem_init(&to_core1, 0, 0);
    sem_init(&to_core0, 0, 0);
    pthread_create(&core1, NULL, core1_thread, NULL);
}
static int on_core1(void) { return pthread_equal(pthread_self(), core1); }
void multicore_fifo_push_blocking(uint32_t data)
{
    if (on_core1()) { box_core0 = data; sem_post(&to_core0); } else { box_core1 = data; sem_post(&to_core1); }
}
uint32_t multicore_fifo_pop_blocking(void)
{
    if (on_core1()) { sem_wait(&to_core1); return box_core1; }
    sem_wait(&to_core0);
    return box_core0;
}
"""


def pico_stand_in(root: Path) -> Path:
    sdk = root / "pico-sdk-stand-in"
    (sdk / "include" / "pico").mkdir(parents=True)
    (sdk / "include" / "hardware").mkdir(parents=True)
    (sdk / "pico_sdk_init.cmake").write_text(PICO_SDK_INIT)
    (sdk / "include" / "pico" / "stdlib.h").write_text(PICO_STDLIB_H)
    (sdk / "include" / "hardware" / "clocks.h").write_text(PICO_CLOCKS_H)
    (sdk / "stand_in.c").write_text(PICO_STAND_IN_C)
    (sdk / "include" / "pico" / "multicore.h").write_text(PICO_MULTICORE_H)
    (sdk / "multicore_stand_in.c").write_text(PICO_MULTICORE_C)
    return sdk
