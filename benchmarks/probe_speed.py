"""Probe training throughput: mixlaw's training step vs a plain PyTorch GPT loop of the same shape.

For each size: tokens/s of (a) mixlaw's step — :class:`mixlaw.probe.model.GPT`, fused AdamW, optional
``torch.compile`` and bf16 autocast, batches from :class:`mixlaw.probe.data.MixtureSampler` — and (b) a plain
nanoGPT-style eager fp32 loop written out below (its own GPT with ``nn.MultiheadAttention``-free attention,
``torch.optim.AdamW`` defaults, random-offset batches), the same d_model / layers / heads / vocab / context /
batch. MFU = 6·N·tokens/s over a measured GEMM peak (bf16 peak for bf16 runs, fp32 otherwise), N = non-embedding
parameters plus the LM head (it is a real matmul per token).

Usage::

    python benchmarks/probe_speed.py [--sizes 200k,1m] [--steps 30] [--threads 1] [--no-compile] [--no-bf16]

The last line is ``ratio=<mixlaw tokens/s / plain-loop tokens/s>`` at the 1M size. Not asserted in CI.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from mixlaw.probe.data import MixtureSampler
from mixlaw.probe.model import GPT, gpt_config

VOCAB, BLOCK, BATCH = 4096, 256, 8


def gemm_peak(dtype: torch.dtype, n: int = 1024, reps: int = 10) -> float:
    """Measured square-GEMM FLOP/s at this thread count."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    t = time.perf_counter()
    for _ in range(reps):
        a @ b
    return 2 * n**3 * reps / (time.perf_counter() - t)


# ------------------------------------------------------------------ the plain loop (a self-contained reference)
class PlainBlock(nn.Module):
    def __init__(self, d: int, h: int) -> None:
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.h)  # explicit attention, as in plain nanoGPT
        att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
        x = x + self.o((att @ v).transpose(1, 2).reshape(B, T, C))
        return x + self.proj(F.gelu(self.fc(self.ln2(x))))


class PlainGPT(nn.Module):
    def __init__(self, d: int, n_layer: int, h: int) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, d), nn.Embedding(BLOCK, d)
        self.blocks = nn.Sequential(*[PlainBlock(d, h) for _ in range(n_layer)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, VOCAB, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, idx: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        logits = self.head(self.ln(self.blocks(x)))
        return F.cross_entropy(logits.view(-1, VOCAB), y.reshape(-1))


def plain_loop(size: str, steps: int, data: np.ndarray) -> float:
    cfg = gpt_config(size, vocab_size=VOCAB, block_size=BLOCK)
    torch.manual_seed(0)
    model = PlainGPT(cfg.d_model, cfg.n_layer, cfg.n_head)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)

    def step() -> None:
        ix = rng.integers(0, len(data) - BLOCK - 1, size=BATCH)
        xy = torch.from_numpy(np.stack([data[i : i + BLOCK + 1] for i in ix]).astype(np.int64))
        loss = model(xy[:, :-1], xy[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    t = time.perf_counter()
    for _ in range(steps):
        step()
    return steps * BATCH * BLOCK / (time.perf_counter() - t)


# ------------------------------------------------------------------ mixlaw's step (the same code path as train.py)
def mixlaw_loop(size: str, steps: int, data: np.ndarray, *, compile: bool, bf16: bool) -> float:
    torch.manual_seed(0)
    model = GPT(gpt_config(size, vocab_size=VOCAB, block_size=BLOCK))
    opt = model.configure_optimizer(lr=1e-3, weight_decay=0.1, betas=(0.9, 0.95))
    fwd = torch.compile(model, dynamic=False) if compile else model
    sampler = MixtureSampler({"general": data}, {"general": 1.0}, block_size=BLOCK, batch_size=BATCH, seed=0)

    def step() -> None:
        x, y = sampler.next_batch()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            _, loss = fwd(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    for _ in range(3):  # includes compilation
        step()
    t = time.perf_counter()
    for _ in range(steps):
        step()
    return steps * BATCH * BLOCK / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="200k,1m,3m")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--no-bf16", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    compile, bf16 = not args.no_compile, not args.no_bf16
    data = np.random.default_rng(0).integers(0, VOCAB, size=2_000_000).astype(np.uint16)
    peak32, peak16 = gemm_peak(torch.float32), gemm_peak(torch.bfloat16)
    print(f"threads={args.threads} compile={compile} bf16={bf16}")
    print(f"GEMM peak: fp32 {peak32 / 1e9:.0f} GFLOP/s, bf16 {peak16 / 1e9:.0f} GFLOP/s")
    print(f"{'size':>6} {'N':>10} {'mixlaw tok/s':>13} {'MFU':>6} {'plain tok/s':>12} {'MFU':>6} {'ratio':>6}")
    ratio_1m = float("nan")
    for size in args.sizes.split(","):
        m = GPT(gpt_config(size, vocab_size=VOCAB, block_size=BLOCK))
        n_flop_params = m.n_params + VOCAB * m.cfg.d_model  # the tied LM head is a matmul per token
        a = mixlaw_loop(size, args.steps, data, compile=compile, bf16=bf16)
        b = plain_loop(size, args.steps, data)
        mfu_a = 6 * n_flop_params * a / (peak16 if bf16 else peak32)
        mfu_b = 6 * n_flop_params * b / peak32
        print(
            f"{size:>6} {m.n_params:>10,} {a:>13,.0f} {mfu_a:>6.1%} {b:>12,.0f} {mfu_b:>6.1%} {a / b:>6.2f}", flush=True
        )
        if size == "1m":
            ratio_1m = a / b
    print(f"ratio={ratio_1m:.3f}")


if __name__ == "__main__":
    main()
