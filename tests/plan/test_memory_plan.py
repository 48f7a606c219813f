"""Memory plans of the reference models: below the live-set bound, verified, reported and drawn."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

from cli_runner import assert_one_line_error, mcu_in_process
from compiled import lowered_model
from mcu.plan.memory import derive_allowances
from mcu.plan.planner import verify_plan
from repo import EXAMPLES, REFERENCE_MODELS, ROOT, requires_qemu

# Ceilings for the int8 arenas, every scratch buffer included.
ARENA_TARGETS = {"small_cnn": 13_600, "ds_cnn": 8_800, "mobilenet_v1": 40_000, "resnet8": 34_500,
                 "fc_autoencoder": 1_024}


@pytest.mark.slow
@pytest.mark.parametrize("name", REFERENCE_MODELS)
def test_int8_arena_within_target_and_verified(compiled, name: str) -> None:
    cm = compiled(name, quantize="int8")
    plan = cm.memory.plan
    assert plan.arena_size <= ARENA_TARGETS[name]
    # the verifier, fed contracts re-derived from the graph, accepts the plan
    verify_plan(plan, overlaps=derive_allowances(cm.graph))
    # and the generated C declares exactly that arena
    header = cm.library.files[f"{cm.library.prefix}_model.h"]
    assert f"#define {cm.library.prefix.upper()}_ARENA_SIZE {plan.arena_size}" in header


@pytest.mark.slow
@requires_qemu
@pytest.mark.parametrize("name", ["mobilenet_v1"])
def test_mobilenet_v1_small_arenas_stay_within_a_tenth_more_instructions(compiled, name: str) -> None:
    """MobileNetV1-0.25 int8 on the M33 (docs/ram-budget.md, docs/streaming.md): its fused blocks at most 30,000 B
    of arena and its input streamed at most 14,000 B, each at most 10 % more instructions than every tensor whole,
    bit-exact. A kernel made faster for whole tensors but not for the band-wise calls narrows that margin (+9.8 %
    streamed when this was written): this is where it shows."""
    whole_cm = compiled(name, quantize="int8")
    whole = whole_cm.simulate()
    assert whole.passed, whole.console[-2000:]
    lowered = lowered_model(name, "int8")
    for cm, arena in ((lowered.compile("mps2-an505", fuse_blocks=True), 30_000),
                      (lowered.compile("mps2-an505", stream_input=True), 14_000)):
        sim = cm.simulate()
        assert sim.passed, sim.console[-2000:]
        assert cm.memory.arena_size <= arena
        assert sim.instructions <= 1.10 * whole.instructions, (sim.instructions, whole.instructions)


def test_committed_mobilenet_svg_names_every_buffer(compiled) -> None:
    svg = ROOT / "docs" / "mobilenet_v1_memory_plan.svg"
    tree = ET.parse(svg)  # parses as XML
    text = " ".join(t.text or "" for t in tree.iter() if t.tag.endswith(("text", "title")))
    cm = compiled("mobilenet_v1", quantize="int8")
    for buffer in cm.memory.plan.buffers:
        assert buffer.name in text, buffer.name
    assert f"peak {cm.memory.arena_size} B" in text


@requires_qemu
def test_build_reports_breakdown_and_draws_the_plan(tmp_path: Path) -> None:
    svg = tmp_path / "plan.svg"
    proc = mcu_in_process("build", "--board", "mps2-an505", "--quantize", "int8", "--json", "-o", str(tmp_path / "o"),
                          "--memory-svg", str(svg), str(EXAMPLES / "small_cnn.py"))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    sizes = report["size_breakdown"]
    assert sum(sizes["flash"].values()) == report["flash_bytes"]
    assert sum(sizes["ram"].values()) == report["ram_bytes"]
    assert sizes["ram"]["arenas"] == report["arena_bytes"]
    assert sizes["ram"]["stack"] > 0 and sizes["flash"]["weights"] > 0 and sizes["flash"]["kernels"] > 0
    assert sizes["flash"]["model code"] > 0 and sizes["flash"]["runtime"] > 0
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg")
    text = mcu_in_process("build", "--board", "mps2-an505", "--quantize", "int8", "-o", str(tmp_path / "o"),
                          str(EXAMPLES / "small_cnn.py")).stdout
    for category in ("kernels", "weights", "arenas", "stack", "total"):
        assert category in text


def test_too_large_names_both_numbers_and_the_largest_buffer(tmp_path: Path) -> None:
    f = tmp_path / "wide.py"
    f.write_text(
        "import torch\n"
        "model = torch.nn.Sequential(torch.nn.Conv2d(3, 64, 3, padding=1), torch.nn.ReLU())\n"
        "example_inputs = (torch.randn(1, 3, 256, 256),)\n"
    )
    proc = mcu_in_process("build", "--board", "mps2-an505", "--quantize", "none", str(f))
    assert_one_line_error(proc, "does not fit", "B too many", "largest buffer")


class _Branches(torch.nn.Module):
    """The captured order computes a wide branch first and holds it while a long narrow branch runs."""

    def __init__(self) -> None:
        super().__init__()
        self.wide = torch.nn.Conv2d(4, 32, 3, padding=1)
        self.narrow = torch.nn.Sequential(*[torch.nn.Conv2d(4 if i == 0 else 8, 8, 3, padding=1)
                                            for i in range(4)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.wide(x)
        b = self.narrow(x)
        return torch.cat([a.mean(dim=(2, 3)), b.mean(dim=(2, 3))], dim=1)


def test_reordering_independent_branches_lowers_the_peak() -> None:
    import mcu
    from mcu.plan.memory import plan_memory

    torch.manual_seed(0)
    model = _Branches().eval()
    x = torch.randn(1, 4, 16, 16)
    from mcu.pipeline import to_graph
    from mcu.capture.loader import spec_from_objects

    captured = to_graph(spec_from_objects(model, (x,)), "none").ops
    cm = mcu.compile(model, (x,), board="mps2-an505", quantize="none")
    first = plan_memory(to_graph(spec_from_objects(model, (x,)), "none"), reorder=False)
    assert cm.memory.arena_size < first.arena_size  # the compiled plan took another order
    assert [op.name for op in cm.graph.ops] != [op.name for op in captured]
    got = cm.run(x)[0]
    want = model(x).detach()
    assert float((got - want).abs().max()) <= 1e-4 * float(want.abs().max())


BIG_MODEL = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
                            torch.nn.Conv2d(16, 4, 3, stride=2, padding=1), torch.nn.AdaptiveAvgPool2d(1),
                            torch.nn.Flatten(), torch.nn.Linear(4, 3))
example_inputs = (torch.randn(1, 3, 128, 128),)
"""


@requires_qemu
@pytest.mark.qemu
def test_arena_overflows_into_a_second_region(tmp_path: Path) -> None:
    """mps3-an547: a 1 MB activation does not fit the 512 KB DTCM; it goes to the SRAM arena."""
    from mcu.api import compile_file
    from mcu.device.elf import read_elf

    f = tmp_path / "big.py"
    f.write_text(BIG_MODEL)
    cm = compile_file(f, board="mps3-an547", quantize="none")
    assert [a.region for a in cm.memory.arenas] == ["ram", "sram"]
    main, extra = cm.memory.arenas
    assert main.plan.arena_size <= cm.board.ram.length - cm.board.stack_bytes < cm.memory.arena_size
    assert extra.plan.arena_size >= 16 * 128 * 128 * 4  # the wide activation moved
    sim = cm.simulate()
    assert sim.passed, sim.console[-2000:]
    symbols = {s.name: s.value for s in read_elf(cm.build().elf).symbols}
    sram = next(r for r in cm.board.extra_regions if r.name == "sram")
    assert sram.contains(symbols[f"{cm.library.prefix}_arena1"])
    assert cm.board.ram.contains(symbols[f"{cm.library.prefix}_arena"])
