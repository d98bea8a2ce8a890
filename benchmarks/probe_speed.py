"""Probe training throughput: mixlaw's training step vs the *fair* plain loop, the nanoGPT loop as users run it.

Both sides train the same GPT shape (d_model / layers / heads from the named size, vocabulary 4096, context 256,
batch 8 = 2048 tokens per step, tied LM head, tanh GELU) with the same optimizer semantics (AdamW, lr 1e-3,
betas (0.9, 0.95), weight decay 0.1 on matrices only, ``fused=True``) and gradient clipping at 1.0:

- **fair loop** (written out below, self-contained, nanoGPT's ``model.py``/``train.py`` idiom):
  ``F.scaled_dot_product_attention(is_causal=True)``, ``torch.compile(model)``, bf16 autocast around the forward
  (which returns the loss), ``clip_grad_norm_`` with its defaults, random-offset batches via ``torch.randint``.
- **mixlaw**: :func:`mixlaw.probe.step.make_step` — the trainer's own step (``train_run`` calls the same function)
  with ``compile`` and ``bf16`` as in a spec; batches from :class:`mixlaw.probe.data.MixtureSampler`, the LR set
  per step and the loss read back per step as ``train_run`` does.
- optionally (``--eager-ref``) the old reference: the same plain model in eager fp32 with explicit masked
  attention and default AdamW.

Each side runs in its own worker process (an ablation knob may change process-wide settings, which must not
leak into the other side), and the parent alternates timed rounds between the workers, in the order A B, B A,
A B, … so that the load of a shared machine falls on both alike.

**The statistic** (CPU): each worker times every step in CPU time of its process (``time.process_time``);
a round's figure is its *lower-quartile* step, and ``ratio`` is the median over rounds of the paired per-round
ratios (mixlaw tokens/s over fair-loop tokens/s), printed with their IQR and range. Other jobs on a shared
machine only ever *add* time to a step (preemption, cache and memory-bandwidth contention), so the lower
quartile tracks the undisturbed speed, while the median or mean of wall time tracks the neighbours' load: at
load 4–6 on the 2-core machine, one variant's per-round lower-quartile CPU ms/step stayed within 141–148 over 9
rounds, where per-round medians had spread over 150–220. Wall tok/s and the wall ratio are printed beside.
On CUDA the ratio is on wall time. MFU = 6·N·tokens/s over the measured bf16 GEMM peak of the device (best of
20 square GEMMs in thread CPU time), N = non-embedding parameters plus the LM head (d·V, a real matmul per
token).

Usage::

    python benchmarks/probe_speed.py [--sizes 200k,1m] [--steps 10] [--rounds 7] [--threads 1]
                                     [--device cpu|cuda] [--no-compile] [--no-bf16] [--eager-ref]
                                     [--profile [--ablate noforms,noattn32,alloc,autotune]] [--numerics N]

``--profile`` prints, per size, mixlaw's step split into sampler / forward+loss / backward / clipping /
optimizer, the trainer's evaluation amortised over ``eval_every = 100`` steps, and an ablation: variants of
mixlaw's step (``--ablate`` knobs) timed against it in the same alternating rounds. The last line is
``ratio=<mixlaw / fair-loop tokens per CPU-second>`` at 1M (statistic above). Not asserted in CI.
``--device cuda`` is untested (no GPU here); without CUDA it stops with a one-line message.

**Measured** (2-vCPU Intel Xeon with AMX-bf16, 1 thread, torch 2.13 CPU, load 4–6 from other jobs, 2026-12):

=====  ========================  ========================  ==============================  =================
size   mixlaw tok/s (MFU)        fair loop tok/s (MFU)     ratio (IQR; range) over rounds  wall ratio
=====  ========================  ========================  ==============================  =================
200k   23,038 (15.7 %)           14,127 (9.6 %)            1.69 (1.48–1.77; 1.03–1.89)     1.59
1m     11,913 – 13,035           8,459 – 8,511             1.44 (1.37–1.60; 1.08–1.61),    1.32 – 1.57
       (11.2 % at peak 1,057)    (7.3 %)                   1.52 (1.48–1.53; 1.47–1.83),
                                                           1.56 (1.43–1.65; 1.12–1.73)
=====  ========================  ========================  ==============================  =================

(tok/s per CPU-second, lower-quartile step; three runs at 1m. The bf16 GEMM peak itself varied 407–1,057
GFLOP/s between runs under load, so MFU is only comparable within a run: at 1m, in one run, 11.2 % against
7.3 %.) Before this session's changes main's step measured 1.30 and 1.31 on median wall-clock rounds, and 1.42
on this statistic in one paired run (193 ms against the fair loop's 274 ms).

What the fast path's step is made of and what was tried, CPU ms/step at 1M (lower-quartile step, paired rounds
against the shipped step; the noise between two identical runs is about ±5 %):

=======================================================  ====================  ==========================
variant                                                  CPU ms/step           kept?
=======================================================  ====================  ==========================
main's fast path (compiled forward returning logits)     193 (fair loop 274)   —
compiled GELU as x·σ(2u) and cross-entropy with its      200 vs 226 without    kept (1.10×, twice: 1.099,
gradient written out (``noforms`` = without)             (0.901×)              1.110)
compile the loss alone (no zero gradient of 16 MiB       CE backward kernel    kept (removes work; whole
logits made and added per step)                          35 → 16 ms, fill_     step within noise)
                                                         20 → 3 ms (profiler)
glibc keeps freed memory (``alloc``)                     144.6 vs 144.3;       not kept (0.99×, 1.05×:
                                                         183 vs 200            noise; process-wide)
inductor autotunes GEMMs, C++/AMX template (``autotune``)  212 vs 200           not kept: training GEMMs
                                                                               stay aten::mm (1.02×)
CE gradient computed in the forward, scaled in backward  188.5 vs 171.6        not kept (0.93×)
LM head + CE fused over 512-row chunks (logits in cache)  180 vs 184            not kept (0.98×, noise)
bf16 instead of fp32 CPU flash attention (``noattn32``)  fwd+bwd per layer     not kept
                                                         21.9–28.3 vs 12.5–13.8
explicit masked attention, compiled, bf16 / fp32          17.8–27.8 / 23–31     not kept
                                                         (per layer) vs 12.5–13.8
=======================================================  ====================  ==========================

**Numerics** (``--numerics 300``: 300 steps of the 50k GPT on a learnable stream, each path in its own
process): the shipped fast path's loss is 6.24836 / 6.24782 at steps 1 / 2 against eager fp32's 6.24837 /
6.24780 (max |diff| over steps 1–5: 6.2e-5, the bf16 autocast's), and its mean over the last 50 steps 3.7495
against 3.7484 (+0.0012; standard error of that mean 0.030); without the compiled forms 3.7494 (+0.0010), so
the new forms move the curve by 1e-4, float rounding.

Where the time goes now (profiler, 1M, per step, under load): CPU flash attention fp32 forward + backward 35 %,
GEMMs 28 % (the tied LM head's three 2048×128×4096 GEMMs alone 38 ms in situ against 10.6 ms warm in
isolation), cross-entropy 8 %, GELU 8 %, LayerNorm and layout copies around the fp32 attention ~10 %, AdamW
and clipping ~4 %.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, BLOCK, BATCH = 4096, 256, 8
LR, BETAS, WD, CLIP = 1e-3, (0.9, 0.95), 0.1, 1.0


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def gemm_peak(dtype: torch.dtype, device: str, reps: int = 20) -> float:
    """Best square-GEMM FLOP/s seen at this thread count (n = 2048 on CPU, 8192 on CUDA); on CPU per second of
    this thread's CPU time, so that other jobs on a shared machine do not lower the peak."""
    cuda = device.startswith("cuda")
    n = 8192 if cuda else 2048
    clock = time.perf_counter if cuda else time.thread_time
    a, b = torch.randn(n, n, dtype=dtype, device=device), torch.randn(n, n, dtype=dtype, device=device)
    best = float("inf")
    for _ in range(reps + 2):
        sync(device)
        t = clock()
        a @ b
        sync(device)
        best = min(best, clock() - t)
    return 2 * n**3 / best


# ------------------------------------------------------------------ the fair plain loop (self-contained)
class PlainBlock(nn.Module):
    def __init__(self, d: int, h: int, explicit: bool) -> None:
        super().__init__()
        self.h, self.explicit = h, explicit
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        if self.explicit:  # the old eager reference
            att = (q @ k.transpose(-2, -1)) / (C // self.h) ** 0.5
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            y = att.masked_fill(mask, float("-inf")).softmax(-1) @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(y.transpose(1, 2).reshape(B, T, C))
        return x + self.proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class PlainGPT(nn.Module):
    def __init__(self, d: int, n_layer: int, h: int, explicit: bool = False) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, d), nn.Embedding(BLOCK, d)
        self.blocks = nn.Sequential(*[PlainBlock(d, h, explicit) for _ in range(n_layer)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, VOCAB, bias=False)
        self.head.weight = self.wte.weight  # tied, as in nanoGPT (and mixlaw)

    def forward(self, idx: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        logits = self.head(self.ln(self.blocks(x)))
        return F.cross_entropy(logits.view(-1, VOCAB), y.reshape(-1))


def plain_side(size: str, data: np.ndarray, device: str, *, eager: bool) -> Any:
    from mixlaw.probe.model import gpt_config

    cfg = gpt_config(size, vocab_size=VOCAB, block_size=BLOCK)
    torch.manual_seed(0)
    model = PlainGPT(cfg.d_model, cfg.n_layer, cfg.n_head, explicit=eager).to(device)
    dev = "cuda" if device.startswith("cuda") else "cpu"
    if eager:
        opt = torch.optim.AdamW(model.parameters(), lr=LR)
        fwd: Any = model
    else:  # nanoGPT's configure_optimizers: decay on >= 2-D tensors, fused AdamW
        decay = [p for p in model.parameters() if p.dim() >= 2]
        rest = [p for p in model.parameters() if p.dim() < 2]
        groups = [{"params": decay, "weight_decay": WD}, {"params": rest, "weight_decay": 0.0}]
        opt = torch.optim.AdamW(groups, lr=LR, betas=BETAS, fused=True)
        fwd = torch.compile(model)
    src = torch.from_numpy(data.astype(np.int64))

    def step() -> None:
        ix = torch.randint(len(src) - BLOCK - 1, (BATCH,))
        x = torch.stack([src[i : i + BLOCK] for i in ix]).to(device)
        y = torch.stack([src[i + 1 : i + 1 + BLOCK] for i in ix]).to(device)
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=not eager):
            loss = fwd(x, y)
        loss.backward()
        if not eager:
            torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


# ------------------------------------------------------------------ mixlaw's step (the trainer's code path)
def mixlaw_side(size: str, data: np.ndarray, device: str, *, compile: bool, bf16: bool, knobs: str = "") -> Any:
    from mixlaw.probe import step as step_mod
    from mixlaw.probe.data import MixtureSampler
    from mixlaw.probe.model import GPT, gpt_config

    torch.manual_seed(0)
    model = GPT(gpt_config(size, vocab_size=VOCAB, block_size=BLOCK)).to(device)
    opt = model.configure_optimizer(lr=LR, weight_decay=WD, betas=BETAS)
    if "autotune" in knobs:  # trial: inductor autotunes its GEMMs (C++/AMX template vs aten)
        import torch._inductor.config as ic

        ic.max_autotune, ic.max_autotune_gemm_backends = True, "CPP,ATEN"
    if "alloc" in knobs:  # ablation: glibc told to keep freed memory (not the trainer's default)
        step_mod.tune_allocator()
    train_step, _ = step_mod.make_step(model, opt, device=device, compile=compile, bf16=bf16, grad_clip=CLIP)
    if "noattn32" in knobs:
        model.set_fp32_attention(False)
    if "noforms" in knobs:  # ablation: compile F.gelu(tanh) and F.cross_entropy as written
        model.set_compiled_forms(False)
    sampler = MixtureSampler({"general": data}, {"general": 1.0}, block_size=BLOCK, batch_size=BATCH, seed=0)

    def step() -> None:
        for g in opt.param_groups:
            g["lr"] = LR
        x, y = sampler.next_batch()
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        float(train_step(x, y))  # train_run reads the loss back every step (divergence check)

    return step


def profile_mixlaw(size: str, data: np.ndarray, device: str, *, compile: bool, bf16: bool, steps: int) -> None:
    """Phase timers around the trainer's pieces (same code as make_step, split open) and eval amortised."""
    from mixlaw.probe.data import MixtureSampler, eval_batches
    from mixlaw.probe.model import GPT, gpt_config
    from mixlaw.probe.train import evaluate

    dev = "cuda" if device.startswith("cuda") else "cpu"
    torch.manual_seed(0)
    model = GPT(gpt_config(size, vocab_size=VOCAB, block_size=BLOCK)).to(device)
    opt = model.configure_optimizer(lr=LR, weight_decay=WD, betas=BETAS)
    model.set_fp32_attention(bf16 and dev == "cpu")
    fwd: Any = torch.compile(lambda x, y: model(x, y)[1], dynamic=False) if compile else (lambda x, y: model(x, y)[1])
    sampler = MixtureSampler({"general": data}, {"general": 1.0}, block_size=BLOCK, batch_size=BATCH, seed=0)
    params = list(model.parameters())
    phases = dict.fromkeys(("sampler", "forward+loss", "backward", "clip", "optimizer"), 0.0)

    def run(n: int, record: bool) -> None:
        for _ in range(n):
            marks = [time.perf_counter()]
            x, y = sampler.next_batch()
            x, y = x.to(device), y.to(device)
            sync(device)
            marks.append(time.perf_counter())
            with torch.autocast(dev, dtype=torch.bfloat16, enabled=bf16):
                loss = fwd(x, y)  # the loss alone, as make_step compiles it
            float(loss.detach())
            marks.append(time.perf_counter())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            sync(device)
            marks.append(time.perf_counter())
            torch.nn.utils.clip_grad_norm_(params, CLIP, foreach=(compile or bf16) or None)
            sync(device)
            marks.append(time.perf_counter())
            opt.step()
            sync(device)
            marks.append(time.perf_counter())
            if record:
                for k, a, b in zip(phases, marks, marks[1:], strict=False):
                    phases[k] += b - a

    run(3, False)
    run(steps, True)
    total = sum(phases.values())
    val = data[:200_000]
    batches = {"general": eval_batches(val, block_size=BLOCK, n_tokens=16384, batch_size=16)}
    evaluate(model, batches, lambda: torch.autocast(dev, dtype=torch.bfloat16, enabled=bf16))
    t = time.perf_counter()
    evaluate(model, batches, lambda: torch.autocast(dev, dtype=torch.bfloat16, enabled=bf16))
    ev = (time.perf_counter() - t) / 100  # one eval set of 16,384 tokens every 100 steps (RunConfig defaults)
    parts = ", ".join(f"{k} {v / steps * 1e3:.1f} ms ({v / total:.0%})" for k, v in phases.items())
    print(f"  profile {size}: step {total / steps * 1e3:.1f} ms = {parts}; "
          f"eval amortised +{ev * 1e3:.1f} ms/step per eval set ({ev / (total / steps):.1%})", flush=True)  # fmt: skip


# ------------------------------------------------------------------ numerics: the fast path's loss curve
def numerics_losses(variant: str, steps: int) -> list[float]:
    """Per-step training losses of the 50k GPT (vocab 512, context 64, batch 8, LR 3e-3) on a learnable stream
    (a random 997-token sentence repeated, 20 % of tokens replaced at random) with mixlaw's step: ``eager32``
    (the default step), ``fast`` (compile + bf16, as shipped) or ``noforms`` (fast without the compiled forms)."""
    from mixlaw.probe.data import MixtureSampler
    from mixlaw.probe.model import GPT, gpt_config
    from mixlaw.probe.step import make_step

    V, T, seed = 512, 64, 3
    rng = np.random.default_rng(seed)
    text = np.tile(rng.integers(0, V, size=997), 300)
    noise = rng.random(text.size) < 0.2
    text[noise] = rng.integers(0, V, size=int(noise.sum()))
    sampler = MixtureSampler({"g": text.astype(np.uint16)}, {"g": 1.0}, block_size=T, batch_size=8, seed=seed)
    torch.manual_seed(seed)
    model = GPT(gpt_config("50k", vocab_size=V, block_size=T))
    model.set_compiled_forms(variant != "noforms")
    optim = model.configure_optimizer(lr=3e-3, weight_decay=WD, betas=BETAS)
    fast = variant != "eager32"
    step, _ = make_step(model, optim, device="cpu", compile=fast, bf16=fast, grad_clip=CLIP)
    return [float(step(*sampler.next_batch())) for _ in range(steps)]


def numerics(args: argparse.Namespace) -> None:
    """Loss after N steps of each variant, each in a fresh process; differences against the eager fp32 path."""
    curves = {}
    for v in ("eager32", "fast", "noforms"):
        cmd = [sys.executable, __file__, "--worker", "numerics", "--knobs", v, "--steps", str(args.numerics)]
        curves[v] = np.array(json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout))
    ref = curves["eager32"]
    sd = ref[-50:].std() / np.sqrt(50)
    for v, c in curves.items():
        print(f"  {v:>8}: loss step 1 {c[0]:.5f}, step 2 {c[1]:.5f}, mean of the last 50 of {len(c)} steps "
              f"{c[-50:].mean():.4f} ({c[-50:].mean() - ref[-50:].mean():+.4f} vs eager32; its s.e. {sd:.4f}); "
              f"max |diff| steps 1-5 {np.abs(c[:5] - ref[:5]).max():.1e}", flush=True)  # fmt: skip


# ------------------------------------------------------------------ workers and the alternating parent
def worker(args: argparse.Namespace) -> None:
    torch.set_num_threads(args.threads)
    data = np.random.default_rng(0).integers(0, VOCAB, size=2_000_000).astype(np.uint16)
    side, size = args.worker, args.size
    if side == "numerics":
        print(json.dumps(numerics_losses(args.knobs, args.steps)))
        return
    if side == "profile":
        profile_mixlaw(size, data, args.device, compile=args.compile, bf16=args.bf16, steps=args.steps)
        return
    t = time.perf_counter()
    if side == "mixlaw":
        step = mixlaw_side(size, data, args.device, compile=args.compile, bf16=args.bf16, knobs=args.knobs)
    else:
        step = plain_side(size, data, args.device, eager=side == "eager")
    for _ in range(3):  # includes compilation
        step()
    sync(args.device)
    print(json.dumps({"ready": time.perf_counter() - t}), flush=True)
    for line in sys.stdin:
        n = int(line)
        sync(args.device)
        w, c = time.perf_counter(), time.process_time()
        marks = [c]
        for _ in range(n):
            step()
            marks.append(time.process_time())  # per-step CPU time (meaningful on CPU, where nothing is queued)
        sync(args.device)
        steps_cpu = [b - a for a, b in zip(marks, marks[1:], strict=False)]
        reply = {"wall": time.perf_counter() - w, "cpu": time.process_time() - c, "steps_cpu": steps_cpu}
        print(json.dumps(reply), flush=True)


def spawn(args: argparse.Namespace, side: str, size: str, knobs: str = "", pipe: bool = True) -> subprocess.Popen[str]:
    cmd = [sys.executable, __file__, "--worker", side, "--size", size, "--threads", str(args.threads),
           "--device", args.device, "--steps", str(args.steps), "--knobs", knobs]  # fmt: skip
    cmd += [] if args.compile else ["--no-compile"]
    cmd += [] if args.bf16 else ["--no-bf16"]
    io = subprocess.PIPE if pipe else None
    return subprocess.Popen(cmd, stdin=io, stdout=io, text=True)


def ask(p: subprocess.Popen[str], n: int | None) -> dict[str, Any]:
    assert p.stdin is not None and p.stdout is not None
    if n is not None:
        p.stdin.write(f"{n}\n")
        p.stdin.flush()
    line = p.stdout.readline()
    if not line:
        raise SystemExit(f"probe_speed: a worker died (exit {p.wait()})")
    return dict(json.loads(line))


def measure(args: argparse.Namespace, size: str, sides: list[tuple[str, str]]) -> dict[str, list[dict[str, float]]]:
    """Alternate ``args.rounds`` timed rounds of ``args.steps`` steps between one worker per side."""
    procs = {}
    for side, knobs in sides:  # start (and compile) one at a time: compiles are CPU-heavy
        procs[side + knobs] = p = spawn(args, side, size, knobs)
        ask(p, None)
    out: dict[str, list[dict[str, float]]] = {k: [] for k in procs}
    for i in range(args.rounds):  # A B, B A, A B, ...: a load that drifts within a round falls on both alike
        for k in list(procs)[:: -1 if i % 2 else 1]:
            r = ask(procs[k], args.steps)
            tok = args.steps * BATCH * BLOCK
            q25 = float(np.quantile(r["steps_cpu"], 0.25))  # the round's lower-quartile step (module docstring)
            out[k].append({"tok_s": tok / r["wall"], "cpu_tok_s": tok / r["cpu"], "q_tok_s": BATCH * BLOCK / q25})
    for p in procs.values():
        assert p.stdin is not None
        p.stdin.close()
        p.wait()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="200k,1m")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--no-compile", dest="compile", action="store_false")
    ap.add_argument("--no-bf16", dest="bf16", action="store_false")
    ap.add_argument("--eager-ref", action="store_true", help="also time the old eager fp32 explicit-attention loop")
    ap.add_argument("--profile", action="store_true", help="phase breakdown and ablation of mixlaw's step")
    ap.add_argument("--numerics", type=int, default=0, metavar="N",
                    help="only compare the loss after N steps of a tiny probe: fast path vs eager fp32")  # fmt: skip
    ap.add_argument("--ablate", default="noforms,noattn32,alloc",
                    help="with --profile: comma-separated variants of mixlaw's step timed against it")  # fmt: skip
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--size", help=argparse.SUPPRESS)
    ap.add_argument("--knobs", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(f"probe_speed: --device {args.device} needs a CUDA GPU, but torch sees none")
    if args.device != "cpu" and not args.device.startswith("cuda"):
        raise SystemExit(f"probe_speed: --device must be cpu or cuda[:i], got {args.device!r}")
    if args.worker:
        worker(args)
        return
    if args.numerics:
        numerics(args)
        return
    from mixlaw.probe.model import GPT, gpt_config

    torch.set_num_threads(args.threads)
    cuda = args.device.startswith("cuda")
    peak16 = gemm_peak(torch.bfloat16, args.device)
    peak32 = gemm_peak(torch.float32, args.device)
    print(f"device={args.device} threads={args.threads} mixlaw: compile={args.compile} bf16={args.bf16}; "
          f"fair loop: compile, bf16, SDPA, fused AdamW; {args.rounds} rounds x {args.steps} steps")  # fmt: skip
    print(
        f"GEMM peak: bf16 {peak16 / 1e9:.0f} GFLOP/s, fp32 {peak32 / 1e9:.0f} GFLOP/s; MFU = 6·N·tokens/s over "
        f"the bf16 peak{'' if cuda else '; tok/s, MFU, ratio per CPU-second of each worker; wall tok/s beside'}"
    )
    head = f"{'size':>5} {'N':>9} {'mixlaw tok/s':>12} {'MFU':>5} {'fair tok/s':>10} {'MFU':>5} {'ratio':>5}"
    head += f" {'IQR':>11} {'range':>11} {'mixlaw wall':>11} {'fair wall':>9} {'wall ratio':>10}"
    head += f" {'eager wall':>11}" if args.eager_ref else ""
    print(head, flush=True)
    ratio_1m = float("nan")
    for size in args.sizes.split(","):
        m = GPT(gpt_config(size, vocab_size=VOCAB, block_size=BLOCK))
        n_flop = m.n_params + VOCAB * m.cfg.d_model  # the tied LM head is a matmul per token
        sides = [("fair", ""), ("mixlaw", "")] + ([("eager", "")] if args.eager_ref else [])
        res = measure(args, size, sides)
        clock = "tok_s" if cuda else "q_tok_s"  # the statistic the ratio is taken on (module docstring)
        med = {k: statistics.median(r[clock] for r in v) for k, v in res.items()}
        wall = {k: statistics.median(r["tok_s"] for r in v) for k, v in res.items()}
        ratios = sorted(a[clock] / b[clock] for a, b in zip(res["mixlaw"], res["fair"], strict=True))
        wall_r = [a["tok_s"] / b["tok_s"] for a, b in zip(res["mixlaw"], res["fair"], strict=True)]
        r = statistics.median(ratios)
        q1, q3 = (statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1 else [r, r])[::2]
        mfu = {k: 6 * n_flop * v / peak16 for k, v in med.items()}
        line = (f"{size:>5} {m.n_params:>9,} {med['mixlaw']:>12,.0f} {mfu['mixlaw']:>5.1%} {med['fair']:>10,.0f} "
                f"{mfu['fair']:>5.1%} {r:>5.2f} {q1:>5.2f}–{q3:<5.2f} {ratios[0]:>5.2f}–{ratios[-1]:<5.2f}"
                f" {wall['mixlaw']:>11,.0f} {wall['fair']:>9,.0f} {statistics.median(wall_r):>10.2f}")  # fmt: skip
        print(line + (f" {wall['eager']:>11,.0f}" if args.eager_ref else ""), flush=True)
        if size == "1m":
            ratio_1m = r
        if args.profile:
            p = spawn(args, "profile", size, pipe=False)
            p.wait()
            knobs = [k for k in args.ablate.split(",") if k]
            abl = measure(args, size, [("mixlaw", "")] + [("mixlaw", k) for k in knobs])
            ms = {k: statistics.median(BATCH * BLOCK / x[clock] * 1e3 for x in v) for k, v in abl.items()}
            parts = []
            for k in knobs:
                rel = [a[clock] / b[clock] for a, b in zip(abl["mixlaw" + k], abl["mixlaw"], strict=True)]
                parts.append(f"{k} {ms['mixlaw' + k]:.0f} ms ({statistics.median(rel):.3f}×)")
            print(
                f"  ablation {size} ({'wall' if cuda else 'CPU'} ms/step; tokens/s relative to the shipped step, "
                f"paired median): shipped {ms['mixlaw']:.0f} ms; " + "; ".join(parts),
                flush=True,
            )
    print(f"ratio={ratio_1m:.3f}")


if __name__ == "__main__":
    main()
