"""Resampling and data movement through the whole compiler: every ATen overload of the family in small
models, fp32 against eager PyTorch and int8 against the Python integer reference (zero differences,
no op left in fp32), through the program interpreter and the generated C on the host; a U-Net-lite
fragment (convolution, max pooling, upsampling, skip concatenation) on the simulated Cortex-M33."""

from __future__ import annotations


import numpy as np
import pytest
import torch
import torch.nn.functional as F

from repo import requires_qemu  # noqa: E402


def _conv(cin: int, cout: int) -> torch.nn.Conv2d:
    return torch.nn.Conv2d(cin, cout, 3, padding=1)


class Upsampling(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = _conv(3, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = torch.relu(self.conv(x))
        return (F.interpolate(y, scale_factor=2, mode="nearest"),
                F.interpolate(y, scale_factor=(1.5, 2.5), mode="nearest"),
                F.interpolate(y, size=(7, 4), mode="nearest"),
                F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False),
                F.interpolate(y, size=(9, 13), mode="bilinear", align_corners=True),
                F.interpolate(y, scale_factor=0.5, mode="bilinear", align_corners=False),
                torch.nn.Upsample(scale_factor=3, mode="nearest")(x),
                F.interpolate(y, scale_factor=1.5, mode="nearest-exact"),  # constant aten.index.Tensor
                F.interpolate(y, size=(4, 3), mode="area"))  # adaptive average pooling


class PoolingAndPadding(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = _conv(3, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = self.conv(x)
        seq = y.flatten(2)  # (N, C, L) for the 1-D ops
        return (F.adaptive_avg_pool2d(y, (3, 4)), F.adaptive_avg_pool2d(y, (5, 2)),
                F.adaptive_avg_pool1d(seq, 5),
                F.pad(y, (1, 2, 2, 1), mode="reflect"), F.pad(y, (3, 0, 1, 1), mode="replicate"),
                F.pad(seq, (2, 3), mode="reflect"), F.pad(seq, (0, 4), mode="replicate"),
                torch.flip(y, (1, 3)), F.interpolate(seq, scale_factor=2.5, mode="nearest"),
                F.interpolate(seq, scale_factor=1.5, mode="linear"),
                F.interpolate(seq, size=40, mode="linear", align_corners=True))


class Moves(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = _conv(3, 8)
        self.register_buffer("pick", torch.tensor([5, 0, 7, 7]))
        self.register_buffer("order", torch.tensor([[2, 0, 1, 0, 3]]).expand(8, 5).contiguous())

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = self.conv(x)
        a, b = torch.chunk(y, 2, dim=1)
        flat = y.flatten(2)
        return (F.pixel_shuffle(y, 2), F.pixel_unshuffle(y, 2), y.repeat(2, 1, 1, 2), x.repeat(1, 2, 1, 1, 1),
                a[:, :, :1].expand(-1, -1, 4, -1) + b, torch.stack([a, b], dim=2),
                torch.index_select(y, 1, self.pick), torch.gather(flat[0], 1, self.order))


class RunTimeIndices(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(6, 6)

    def forward(self, x: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = self.fc(x)
        return torch.index_select(y, 1, idx), torch.gather(y, 1, idx.view(1, -1).expand(y.shape[0], -1))


class RunTimeIndices4d(torch.nn.Module):
    """Run-time indices into a channels-last activation: along C (the innermost physical dim) and W."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = _conv(3, 6)

    def forward(self, x: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = self.conv(x)
        return torch.index_select(y, 1, idx), torch.index_select(y, 3, idx[:2]), y[:, :, idx]


class BiLSTM(torch.nn.Module):
    """A bidirectional LSTM: its reversed direction is aten.flip."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn, self.head = torch.nn.LSTM(8, 8, batch_first=True, bidirectional=True), torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.rnn(x)
        return self.head(y[:, -1])


MODELS = {
    "upsampling": (Upsampling, [(1, 3, 6, 4)]),
    "pooling_padding": (PoolingAndPadding, [(1, 3, 7, 9)]),
    "moves": (Moves, [(1, 3, 4, 6)]),
}


def _inputs(name: str, seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*s, generator=g) for s in MODELS[name][1])


@pytest.fixture(scope="module")
def compiled():
    import mcu

    cache: dict = {}

    def get(name: str, quantize: str):
        if (name, quantize) not in cache:
            torch.manual_seed(0)
            model = MODELS[name][0]().eval()
            calib = [_inputs(name, s) for s in range(8)] if quantize == "int8" else None
            cache[(name, quantize)] = (model, mcu.compile(model, _inputs(name, 100), quantize=quantize,
                                                          calibration=calib, name=name))
        return cache[(name, quantize)]
    return get


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_fp32_equals_eager(compiled, name: str) -> None:
    model, cm = compiled(name, "none")
    for seed in (1, 2):
        x = _inputs(name, seed)
        with torch.no_grad():
            want = model(*x)
        got = cm.run(*x)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            assert float((g - w).abs().max()) <= 1e-5 * max(1.0, float(w.abs().max()))
        for g, c in zip(cm.run_raw(*x), cm.run_raw_c(*x)):  # program interpreter and generated C
            assert np.array_equal(g, c)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_int8_equals_the_integer_reference(compiled, name: str) -> None:
    model, cm = compiled(name, "int8")
    assert cm.graph.fallbacks == []  # every op int8: the outputs keep their inputs' quantization
    assert cm.reference_is_exact
    for seed in (1, 2, 3):
        x = _inputs(name, seed)
        ref = cm.reference_raw(*x)
        for got in (cm.run_raw(*x), cm.run_raw_c(*x)):
            for g, r in zip(got, ref):
                assert np.array_equal(g, r)
        with torch.no_grad():
            want = model(*x)
        for g, w in zip(cm.run(*x), want):  # and close to eager: a few quantization steps at most
            assert float((g - w).abs().max()) <= 0.1 * float(w.abs().max()) + 0.05


def test_every_new_kernel_is_used(compiled) -> None:
    """The models above, as the parity tests compile them, reach every kernel of this area (so the parity
    tests cover them all)."""
    from mcu.emit.kernels import emit_call

    used = set()
    for name, q in [(n, q) for n in MODELS for q in ("none", "int8")]:
        _, cm = compiled(name, q)
        used |= {emit_call(op, lambda t: "x").function for op in cm.graph.ops if emit_call(op, lambda t: "x")}
    want = {"mcu_remap", "mcu_gather", "mcu_resize_bilinear_f32", "mcu_resize_bilinear_s8",
            "mcu_adaptive_avg_pool_f32", "mcu_adaptive_avg_pool_s8"}
    assert want <= used, want - used


@pytest.mark.parametrize("quantize", ["none", "int8"])
@pytest.mark.parametrize("cls,shape", [(RunTimeIndices, (3, 6)), (RunTimeIndices4d, (1, 3, 6, 6))])
def test_run_time_indices(cls: type, shape: tuple[int, ...], quantize: str) -> None:
    import mcu

    torch.manual_seed(0)
    model = cls().eval()
    example = (torch.randn(*shape), torch.tensor([4, 0, 5, 5]))
    calib = [(torch.randn(*shape), torch.tensor([1, 2, 3, 0])) for _ in range(8)] if quantize == "int8" else None
    cm = mcu.compile(model, example, quantize=quantize, calibration=calib, name=f"{cls.__name__}_{quantize}")
    kinds = {op.kind for op in cm.graph.ops}
    assert "index_select" in kinds and (cls is not RunTimeIndices or "gather" in kinds)
    if quantize == "int8":
        assert cm.graph.fallbacks == []
    for idx in ([4, 0, 5, 5], [0, 1, 2, 3], [5, 5, 3, 5]):
        x = (torch.randn(*shape), torch.tensor(idx))
        if quantize == "none":
            with torch.no_grad():
                want = model(*x)
            for g, w in zip(cm.run(*x), want):
                assert float((g - w).abs().max()) <= 1e-5 * max(1.0, float(w.abs().max()))
        else:
            for g, r in zip(cm.run_raw(*x), cm.reference_raw(*x)):
                assert np.array_equal(g, r)


def test_an_index_outside_the_tensor_fails_the_run() -> None:
    """index_select checks its run-time indices: a bad one is an error, not a read outside the input."""
    import mcu

    torch.manual_seed(0)
    cm = mcu.compile(RunTimeIndices().eval(), (torch.randn(3, 6), torch.tensor([4, 0, 5, 5])),
                     name="runtime_index_bad")
    with pytest.raises(Exception, match="(?i)invalid|argument|status"):
        cm.run(torch.randn(3, 6), torch.tensor([6, 0, 0, 0]))


# --- a U-Net-lite fragment on the simulated M33 -------------------------------------------------------


class UNetLite(torch.nn.Module):
    """Encoder conv, max pool, bottleneck conv, bilinear and nearest upsampling, skip concatenation."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = torch.nn.Sequential(_conv(3, 8), torch.nn.ReLU())
        self.mid = torch.nn.Sequential(_conv(8, 16), torch.nn.ReLU())
        self.deep = torch.nn.Sequential(_conv(16, 16), torch.nn.ReLU())
        self.up1 = torch.nn.Sequential(_conv(32, 8), torch.nn.ReLU())
        self.dec = torch.nn.Sequential(_conv(16, 8), torch.nn.ReLU())
        self.head = torch.nn.Conv2d(8, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = self.enc(x)                                       # 16x16
        m = self.mid(F.max_pool2d(e, 2))                      # 8x8
        d = self.deep(F.max_pool2d(m, 2))                     # 4x4
        u = F.interpolate(d, scale_factor=2, mode="nearest")  # 8x8
        u = self.up1(torch.cat([u, m], dim=1))
        u = F.interpolate(u, scale_factor=2, mode="bilinear", align_corners=False)  # 16x16
        return self.head(self.dec(torch.cat([u, e], dim=1)))


@requires_qemu
@pytest.mark.parametrize("quantize", ["none", "int8"])
def test_unet_lite_on_the_simulated_m33(quantize: str) -> None:
    import mcu

    torch.manual_seed(0)
    model = UNetLite().eval()
    g = torch.Generator().manual_seed(1)
    inputs = [(torch.randn(1, 3, 16, 16, generator=g),) for _ in range(2)]
    calib = [(torch.randn(1, 3, 16, 16, generator=g),) for _ in range(16)] if quantize == "int8" else None
    cm = mcu.compile(model, inputs[0], board="mps2-an505", quantize=quantize, calibration=calib,
                     test_inputs=inputs, name=f"unet_lite_{quantize.replace('8', '8')}")
    kinds = {op.kind for op in cm.graph.ops}
    assert {"remap", "resize_bilinear", "concat", "max_pool2d"} <= kinds
    run = cm.simulate()
    assert run.passed, run.console[-1500:]
    fw = cm.build()
    print(f"\nunet_lite {quantize}: {run.instructions} instructions, flash {fw.flash_bytes} B, "
          f"arena {cm.memory.arena_size} B")
    for v, x in enumerate(inputs):
        with torch.no_grad():
            want = model(*x).numpy()
        if quantize == "none":
            assert np.max(np.abs(run.outputs[v][0] - want)) <= 1e-4 * np.max(np.abs(want))
        else:
            assert cm.graph.fallbacks == []
            ref = cm.raw_outputs(cm.reference_raw(*x))  # logical shape, as the run reports them
            assert np.array_equal(run.outputs_raw[v][0], ref[0])


# --- clear errors and the program loader's checks ------------------------------------------------------


class _Indexing(torch.nn.Module):
    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how

    def forward(self, x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        if self.how == "two_runtime":
            return x[i, i]
        return x[torch.tensor([[0, 1], [1, 0]]), torch.tensor([[0, 1], [2, 2]])] * 2


@pytest.mark.parametrize("how", ["two_runtime", "not_outer_product"])
def test_unsupported_indexing_is_a_clear_error_with_the_source_line(how: str) -> None:
    import mcu
    from mcu.errors import McuError

    with pytest.raises(McuError, match=r"index.*test_ops_shape_models\.py:\d+"):
        mcu.compile(_Indexing(how).eval(), (torch.randn(3, 3), torch.tensor([0, 2])), name=f"index_{how}")


class _Flip(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.flip(x, (1,)), F.interpolate(x, scale_factor=2, mode="bilinear")


@pytest.mark.parametrize("kind,field", [("remap", "in_shape"), ("remap", "size"), ("resize_bilinear", "in_h"),
                                        ("resize_bilinear", "out_w")])
def test_the_loader_refuses_params_that_reach_past_an_operand(monkeypatch, kind: str, field: str) -> None:
    """The interpreter checks at load what each new kernel would touch (mcu_program_kernels.c)."""
    import mcu
    from mcu.backends.portable import core as portable
    from mcu.program.host import Program, ProgramError

    cm = mcu.compile(_Flip().eval(), (torch.randn(1, 3, 4, 5),), name="flip_loader")
    Program.load(cm.program_image().program)  # as emitted: loads
    original = portable.EMITTERS[(kind, "float32")]

    def tampered(op, ref):
        call = original(op, ref)
        if field == "size":
            call.scalars = [1]  # an element size other than the output's
        elif field == "in_shape":
            call.params["in_shape"][0] += 1
        else:
            call.params[field] += 1
        return call

    monkeypatch.setitem(portable.EMITTERS, (kind, "float32"), tampered)
    with pytest.raises(ProgramError, match="(?i)invalid"):
        Program.load(cm.program_image().program)


def test_bidirectional_lstm_equals_eager() -> None:
    import mcu

    torch.manual_seed(0)
    model = BiLSTM().eval()
    x = torch.randn(1, 6, 8)
    cm = mcu.compile(model, (x,), name="bilstm")
    assert "remap" in {op.kind for op in cm.graph.ops}
    for seed in (1, 2):
        x = torch.randn(1, 6, 8, generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():
            want = model(x)
        assert float((cm.run(x)[0] - want).abs().max()) <= 1e-5 * max(1.0, float(want.abs().max()))


class _Table(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(10, 4))
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.fc(self.table[idx])


def test_a_constant_table_indexed_at_run_time() -> None:
    """table[idx] (aten.index.Tensor with a run-time index) reads the rows from flash: no copy of the table."""
    import mcu

    torch.manual_seed(0)
    model = _Table().eval()
    cm = mcu.compile(model, (torch.tensor([3, 9, 0]),), name="table_lookup")
    select = next(op for op in cm.graph.ops if op.kind == "index_select")
    assert select.inputs[0].is_constant
    for idx in ([3, 9, 0], [9, 9, 9]):
        x = torch.tensor(idx)
        with torch.no_grad():
            want = model(x)
        assert float((cm.run(x)[0] - want).abs().max()) <= 1e-5 * max(1.0, float(want.abs().max()))
        assert np.array_equal(cm.run_raw(x)[0], cm.run_raw_c(x)[0])


def test_mcu_ops_lists_the_new_overloads() -> None:
    from mcu.frontend.lower import supported_ops

    listed = set(supported_ops())
    for name in ("upsample_nearest2d.vec", "upsample_nearest2d.default", "upsample_bilinear2d.vec",
                 "upsample_bilinear2d.default", "_adaptive_avg_pool2d.default", "flip.default", "repeat.default",
                 "expand.default", "index_select.default", "index.Tensor", "gather.default"):
        assert f"aten.{name}" in listed, name


def test_linear_1d_interpolation_runs_as_exported_at_fp32() -> None:
    """upsample_linear1d decomposes into two constant-index remaps and elementwise arithmetic."""
    import mcu

    class Linear1d(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return (F.interpolate(x, scale_factor=2, mode="linear"),
                    F.interpolate(x, size=7, mode="linear", align_corners=True))

    x = torch.randn(1, 3, 5)
    cm = mcu.compile(Linear1d().eval(), (x,), name="linear1d")
    for g, w in zip(cm.run(x), Linear1d()(x)):
        assert float((g - w).abs().max()) <= 1e-6
