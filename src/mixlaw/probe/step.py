"""One optimizer step of a probe run, shared by :func:`mixlaw.probe.train.train_run` and
``benchmarks/probe_speed.py`` (so the benchmark times the trainer's own code path).

The fast path (``compile`` and/or ``bf16``) differs from the default eager fp32 step only in *how* it computes:

- ``torch.compile`` of the model's forward *with* its loss (one graph: the head, softmax and cross-entropy fuse),
  returning the loss only (returned logits would get a zero gradient, 16 MiB at 1M, filled and added each step);
- under compile, GELU and cross-entropy in forms inductor compiles to faster kernels (:meth:`GPT.set_compiled_forms`);
- bf16 autocast with the attention kept in fp32 on CPU (:meth:`GPT.set_fp32_attention`: the CPU flash kernel's
  bf16 backward is the slower one at probe shapes);
- gradient clipping with the multi-tensor (``foreach``) norm.

:func:`tune_allocator` (glibc told to keep freed memory: the logits of one step, 32 MiB at 2048 tokens and vocab
4096, are above glibc's largest mmap threshold, so each step maps and page-faults them afresh) is *not* applied by
the trainer: it changes the whole process's memory behaviour, and the whole-step ablation at 1M measured no gain
(2,718 tok/s without it, 2,564 with it, on the loaded machine; re-measured on per-step CPU time: 0.99× and
1.05×, within noise). ``benchmarks/probe_speed.py`` keeps it as the opt-in ablation knob ``alloc``.

At 1M parameters the fast path trains ≈ 1.4–1.6× as many tokens per CPU-second as the nanoGPT loop users run
(SDPA, ``torch.compile``, bf16 autocast, fused AdamW); ``benchmarks/probe_speed.py`` has the figures.

The default step (``compile=False, bf16=False``) is the one every shipped spec and stored run was trained with.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, cast

import torch

from mixlaw.probe.model import GPT

__all__ = ["make_step", "tune_allocator"]

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc <malloc.h>
_tuned = False


def tune_allocator() -> bool:
    """Keep large freed blocks in this process's heap instead of returning them to the OS (glibc only).

    Sets ``M_MMAP_THRESHOLD`` to 1 GiB and ``M_TRIM_THRESHOLD`` to 2 GiB: the process then holds on to its peak
    memory (a few hundred MB for probe sizes), and a step's large temporaries reuse warm pages. Idempotent;
    returns whether the setting took effect (``False`` off glibc, e.g. macOS or musl)."""
    global _tuned
    if _tuned:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        ok = bool(libc.mallopt(_M_MMAP_THRESHOLD, 1 << 30)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, (1 << 31) - 1))
    except (OSError, AttributeError):
        return False
    _tuned = ok
    return ok


def make_step(
    model: GPT,
    optim: torch.optim.Optimizer,
    *,
    device: str,
    compile: bool,
    bf16: bool,
    grad_clip: float,
) -> tuple[Callable[[torch.Tensor, torch.Tensor], torch.Tensor], Callable[[], AbstractContextManager[Any]]]:
    """The training step ``step(x, y) -> loss`` (forward, backward, clipping, optimizer update; the LR is set by
    the caller) and the autocast context the run evaluates under.

    ``loss`` is the detached mean cross-entropy of the batch before the update. ``compile`` and ``bf16`` select
    the fast path (module docstring); both off is the plain eager fp32 step.
    """
    device_type = "cuda" if device.startswith("cuda") else "cpu"
    fast = compile or bf16
    model.set_fp32_attention(bf16 and device_type == "cpu")
    params = [p for p in model.parameters() if p.requires_grad]

    def loss_of(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        # with targets the model always returns a loss (GPT.forward). The logits are no output: no zero gradient
        # for them is made and added in the backward
        return cast(torch.Tensor, model(x, y)[1])

    fwd: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = (
        torch.compile(loss_of, dynamic=False) if compile else loss_of
    )

    def autocast() -> AbstractContextManager[Any]:
        return torch.autocast(device_type, dtype=torch.bfloat16, enabled=bf16)

    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with autocast():
            loss = fwd(x, y)
        optim.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(params, grad_clip, foreach=fast or None)
        optim.step()
        return loss.detach()

    return step, autocast
