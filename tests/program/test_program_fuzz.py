"""A short libFuzzer run of the program loader, verifier and interpreter under ASan and UBSan, seeded with
real program files (the long run is scripts/fuzz_program)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcu.program.fuzz import cached_fuzzer, find_fuzz_clang, run_fuzzer, write_seeds

FUZZ_SECONDS = 6
# Ten seconds explore little beyond the seeds: three seed models (convolutions with external weights, an int8
# recurrent layer, fused-block loops) instead of every one, whose compiles took most of this test's time;
# scripts/fuzz_program seeds the long run with all of them and every example.
SEED_SUBSET = ("convs", "recurrent", "fused")

_CLANG = find_fuzz_clang()
requires_libfuzzer = pytest.mark.skipif(
    _CLANG is None, reason="no clang with libFuzzer (-fsanitize=fuzzer): sudo apt-get install clang-14 "
                           "libclang-rt-14-dev")


@requires_libfuzzer
def test_short_fuzz_run_finds_nothing(tmp_path: Path) -> None:
    binary = cached_fuzzer(_CLANG)  # built once per source content, shared with test_seams_program.py
    seeds = write_seeds(tmp_path / "seeds", models=SEED_SUBSET)
    assert len(seeds) >= 6 and all(s.stat().st_size > 256 for s in seeds)
    run = run_fuzzer(binary, tmp_path / "corpus", FUZZ_SECONDS, seeds=tmp_path / "seeds")
    print(f"fuzz: {run.executions} executions in {FUZZ_SECONDS} s, corpus {run.corpus_files} files")
    assert run.clean, run.log[-4000:]
    assert run.executions > 1000
    assert run.corpus_files >= len(seeds)
