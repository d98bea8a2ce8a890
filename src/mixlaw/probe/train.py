"""Train one probe run (pre-training or continual pre-training): read it top to bottom.

A run is a :class:`RunConfig`. :func:`train_run` builds the model (or loads the parent's checkpoint for CPT),
then loops over *chunks*: train up to the next evaluation step, evaluate every eval set on fixed batches, write
a checkpoint (model, optimizer, sampler and RNG state — all tensors or plain containers, loadable with
``weights_only=True``), then append the chunk's evaluation row to the RunStore in its own transaction. A kill at
any point loses at most the unfinished chunk; calling :func:`train_run` again resumes from the last checkpoint
and reproduces the uninterrupted run exactly (same seed, same batches, same losses).

Pre-training runs can also save checkpoints at *loss potentials*: the first steps at which the decaying LR has
fallen to given fractions of its peak (``save_at_lr_fractions``), so CPT can start from a partly annealed base.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mixlaw.errors import InputError, MixlawError
from mixlaw.probe.checkpoints import atomic_save, check_resume, checkpoint_path, config_fingerprint, load_checkpoint
from mixlaw.probe.config import RunConfig
from mixlaw.probe.data import MixtureSampler, TokenData, eval_batches
from mixlaw.probe.model import GPT, gpt_config
from mixlaw.probe.step import make_step
from mixlaw.runs.schema import Mixture, RunMeta
from mixlaw.runs.store import RunStore
from mixlaw.schedules import Schedule

__all__ = [
    "RunConfig",
    "TrainingDiverged",
    "checkpoint_path",
    "config_fingerprint",
    "eval_steps",
    "lr_fraction_steps",
    "resolve_device",
    "train_run",
]


class TrainingDiverged(MixlawError, FloatingPointError):
    """The training loss became NaN or infinite."""


def resolve_device(device: str, bf16: bool, *, cuda_available: bool | None = None) -> tuple[str, bool]:
    """``(device, bf16)`` a run trains with: ``"auto"`` takes CUDA with bf16 autocast (where the GPU supports
    bf16) when ``torch.cuda.is_available()``, else the CPU and ``bf16`` unchanged; ``"cuda"`` without a GPU is an
    :class:`InputError`. ``cuda_available`` overrides the probe (tests)."""
    has_cuda = torch.cuda.is_available() if cuda_available is None else cuda_available
    if device == "auto":
        if not has_cuda:
            return "cpu", bf16
        supported = cuda_available is not None or torch.cuda.is_bf16_supported()
        return "cuda", bool(supported or bf16)
    if device.startswith("cuda") and not has_cuda:
        raise InputError(f"expected a CUDA device for device = {device!r}, got none (torch sees no GPU); "
                         "use device = 'auto' or 'cpu'")  # fmt: skip
    return device, bf16


def eval_steps(total_steps: int, every: int, log_points: int = 0) -> list[int]:
    """Evaluation steps: 0, every ``every`` steps, the last step, plus ``log_points`` geometric ones."""
    steps = set(range(0, total_steps + 1, max(1, every))) | {0, total_steps}
    if log_points > 0 and total_steps > 1:
        steps |= {int(round(v)) for v in np.geomspace(1, total_steps, log_points)}
    return sorted(steps)


def lr_fraction_steps(schedule: Schedule, fractions: tuple[float, ...]) -> dict[float, int]:
    """For each fraction f: the first step after the LR peak where ``lr <= f * peak`` (last step if never)."""
    lrs = schedule.lr(np.arange(1, schedule.total_steps + 1))  # (T,) LR of updates 1..T
    peak_at = int(np.argmax(lrs))
    out: dict[float, int] = {}
    for f in fractions:
        hit = np.flatnonzero(lrs[peak_at:] <= f * lrs[peak_at] * (1 + 1e-9))
        out[float(f)] = int(peak_at + hit[0] + 1) if hit.size else schedule.total_steps
    return out


def _pool_stats(train: Mapping[str, np.ndarray], data: TokenData, domains: tuple[str, ...]) -> dict[str, Any]:
    """A pool's statistics beside ``pool_tokens_<c>``: ``pool_share_<c>`` of the prepared split it keeps and
    ``pool_docs_<c>``, the documents it holds (the last one may be cut at the cap)."""
    eot = int(data.manifest["tokenizer"]["eot_id"])
    out: dict[str, Any] = {}
    for c in domains:
        arr = np.asarray(train[c])
        out[f"pool_share_{c}"] = len(arr) / max(1, len(data.train[c]))
        out[f"pool_docs_{c}"] = int(np.count_nonzero(arr == eot)) + int(len(arr) > 0 and arr[0] != eot)
    return out


@torch.no_grad()
def evaluate(model: torch.nn.Module, batches: Mapping[str, list[torch.Tensor]], autocast: Any) -> dict[str, float]:
    """Mean next-token loss (nats/token) of ``model`` on each eval set's fixed batches."""
    model.eval()
    out: dict[str, float] = {}
    for name, bs in batches.items():
        total, n = 0.0, 0
        for b in bs:
            with autocast():
                _, loss = model(b[:, :-1], b[:, 1:])  # inputs (b, T), targets (b, T)
            total += float(loss) * b.shape[0]
            n += b.shape[0]
        out[f"loss_{name}"] = total / n
    model.train()
    return out


def train_run(
    cfg: RunConfig,
    store: RunStore,
    *,
    progress: Callable[[dict[str, Any]], None] | None = None,
    stop_after_step: int | None = None,
    guard: Callable[[], None] | None = None,
) -> str:
    """Run (or resume, or skip if finished) one probe run and record it in ``store``.

    Parameters
    ----------
    cfg
        The run.
    store
        RunStore receiving the run's metadata and one transaction per evaluation chunk.
    progress
        Called after every chunk with ``{"run_id", "step", "total_steps", "tokens", "tokens_per_s", ...losses}``.
    stop_after_step
        Testing hook: return after the chunk ending at this step, as if the process had been killed there.
    guard
        Called before every chunk and every store write; raises to stop the run (a sweep worker passes its
        run claim's check, so a worker that lost its claim writes nothing more).

    Returns
    -------
    str
        The run's status afterwards: ``"finished"`` or ``"stopped"`` (``stop_after_step``).

    Raises
    ------
    TrainingDiverged
        Non-finite training loss (the run is marked failed with the step and mixture).
    InputError
        The store or the checkpoint holds this run trained with another config (fingerprint), or the checkpoint
        does not continue the evaluations in the store (a work dir of another store or sweep).
    """
    check = guard or (lambda: None)
    data = TokenData(cfg.data_dir)
    fingerprint = config_fingerprint(cfg, data.hash)
    if store.has_run(cfg.run_id):
        stored_fp = store.get_run(cfg.run_id).meta.get("config_fingerprint")
        if stored_fp is not None and stored_fp != fingerprint:
            raise InputError(
                f"expected run {cfg.run_id} in {store.path} to have this run's config (fingerprint {fingerprint}), "
                f"got one trained with another config (fingerprint {stored_fp}); use a new sweep name or store"
            )
    if store.run_status(cfg.run_id) == "finished":
        return "finished"
    torch.set_num_threads(cfg.threads)
    device, bf16 = resolve_device(cfg.device, cfg.bf16)
    schedule = cfg.get_schedule()
    mixture = Mixture(dict(cfg.mixture))
    eval_sets = tuple(cfg.eval_sets) if cfg.eval_sets is not None else data.corpora
    T_total = schedule.total_steps
    tokens_per_step = cfg.block_size * cfg.batch_size
    ckpt_dir = Path(cfg.work_dir) / cfg.run_id

    # --- model, optimizer, sampler
    torch.manual_seed(cfg.seed)
    mcfg = gpt_config(cfg.size, vocab_size=data.vocab_size, block_size=cfg.block_size)
    model = GPT(mcfg).to(device)
    optim = model.configure_optimizer(lr=schedule.eta0, weight_decay=cfg.weight_decay, betas=cfg.betas)
    train = data.pool(cfg.pool_max_tokens, cfg.pool_share) if cfg.pool is not None else data.train
    sampler = MixtureSampler(
        train, mixture.to_dict(), block_size=cfg.block_size, batch_size=cfg.batch_size, seed=cfg.seed
    )
    batches = {
        c: [
            b.to(device)
            for b in eval_batches(data.val[c], block_size=cfg.block_size, n_tokens=cfg.eval_tokens, batch_size=16)
        ]  # fmt: skip
        for c in eval_sets
    }

    # --- the run's metadata first: a run refused below is still listed, with its reason
    meta = {
        "size": cfg.size,
        "tokenizer": data.manifest["tokenizer"]["kind"],
        "vocab_size": data.vocab_size,
        "data_hash": data.hash,
        "block_size": cfg.block_size,
        "batch_size": cfg.batch_size,
        "tokens_per_step": tokens_per_step,
        "threads": cfg.threads,
        "compile": cfg.compile,
        "bf16": bf16,
        "device": device,
        **{f"pool_tokens_{c}": int(len(train[c])) for c in mixture.domains},
        **({} if cfg.pool is None else {"pool": cfg.pool, **_pool_stats(train, data, mixture.domains)}),
        **dict(cfg.meta),
        "config_fingerprint": fingerprint,
    }
    if not store.has_run(cfg.run_id):
        store.put_run(
            RunMeta(
                run_id=cfg.run_id,
                phase=cfg.phase,
                n_params=model.n_params,
                n_params_total=model.n_params_total,
                mixture=mixture,
                parent_run=cfg.parent_run,
                seed=cfg.seed,
                schedule=schedule.to_dict(),
                meta=meta,
            )
        )

    # --- start: resume from our own checkpoint, else (CPT) from the parent's, else from scratch
    step = 0
    last = checkpoint_path(cfg.work_dir, cfg.run_id)
    final = checkpoint_path(cfg.work_dir, cfg.run_id, "final")
    resume_from = last if last.exists() else final if final.exists() else None
    resume_train_loss: float | None = None
    ck = None if resume_from is None else load_checkpoint(resume_from)
    evals = eval_steps(T_total, cfg.eval_every, cfg.eval_log_points)
    if resume_from is not None and ck is not None and not check_resume(cfg, ck, resume_from, fingerprint, store, evals):
        resume_from = None  # same config, but the store never saw this checkpoint's evaluations: start over
    if resume_from is not None and ck is not None:
        resume_train_loss = ck.get("train_loss")
        model.load_state_dict(ck["model"])
        optim.load_state_dict(ck["optim"])
        sampler.load_state_dict(ck["sampler"])
        torch.set_rng_state(ck["torch_rng"])
        step = int(ck["step"])
    elif cfg.phase == "cpt":
        if cfg.parent_checkpoint is None:
            raise InputError(f"CPT run {cfg.run_id} needs parent_checkpoint")
        ck = load_checkpoint(cfg.parent_checkpoint)
        if ck["model_config"] != mcfg.to_dict():
            raise InputError(
                f"parent checkpoint {cfg.parent_checkpoint} has shape {ck['model_config']}, run wants {mcfg}"
            )
        model.load_state_dict(ck["model"])
        optim.load_state_dict(ck["optim"])  # Adam moments carry over, as when a lab continues training
    for g in optim.param_groups:
        g["lr"] = float(schedule.lr([step])[0]) if step > 0 else schedule.eta0

    store.set_status(cfg.run_id, "running")

    train_step, autocast = make_step(
        model, optim, device=device, compile=cfg.compile, bf16=bf16, grad_clip=cfg.grad_clip
    )  # the fast path with compile/bf16 (probe/step.py); the plain eager fp32 step otherwise

    keep = lr_fraction_steps(schedule, cfg.save_at_lr_fractions) if cfg.phase == "pt" else {}
    stops = sorted(set(eval_steps(T_total, cfg.eval_every, cfg.eval_log_points)) | set(keep.values()))
    evals_to_write = set(eval_steps(T_total, cfg.eval_every, cfg.eval_log_points))

    def checkpoint(at: int, train_loss: float | None = None) -> dict[str, Any]:
        from mixlaw._provenance import provenance  # package version and git SHA of the code that trained

        return {
            "step": at,
            "provenance": dict(provenance()),
            "train_loss": train_loss,  # the chunk's mean: a resume that redoes this step's row keeps it
            "fingerprint": fingerprint,
            "model": model.state_dict(),
            "optim": optim.state_dict(),
            "sampler": sampler.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "model_config": mcfg.to_dict(),
            "run_config": {k: v for k, v in cfg.to_dict().items() if k != "meta"},
        }

    def record(at: int, extra: Mapping[str, float]) -> dict[str, Any]:
        row: dict[str, Any] = {
            "step": at,
            "tokens": at * tokens_per_step,
            "lr": float(schedule.lr([at])[0]),
            **evaluate(model, batches, autocast),  # eager model: no recompiles for eval mode and shapes
            **sampler.accounting(),
            **extra,
        }
        last_stored = store.last_step(cfg.run_id)
        if last_stored is None or last_stored < at:
            check()
            store.append_evals(cfg.run_id, [row])
        return row

    # an eval row may be missing after a kill between checkpoint and store write: redo it (same weights)
    stored = store.last_step(cfg.run_id)
    if step in evals_to_write and (stored is None or stored < step):
        record(step, {} if resume_train_loss is None else {"train_loss": resume_train_loss})

    # --- the loop: chunk = train up to the next stop, then checkpoint, then one store transaction
    t0, tok0 = time.perf_counter(), step * tokens_per_step
    model.train()
    for stop in stops:
        if stop <= step:
            continue
        check()
        chunk_loss, n = 0.0, 0
        while step < stop:
            step += 1
            lr = float(schedule.lr([step])[0])
            for g in optim.param_groups:
                g["lr"] = lr
            x, y = sampler.next_batch()  # (B, T), (B, T)
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss_v = float(train_step(x, y))  # the batch's loss before this update
            if not math.isfinite(loss_v):  # the run fails here: the update it just made is never saved
                msg = f"non-finite training loss {loss_v} at step {step} with mixture {mixture.to_dict()}"
                store.set_status(cfg.run_id, "failed", message=msg)
                raise TrainingDiverged(f"run {cfg.run_id}: {msg}")
            chunk_loss += loss_v
            n += 1
        for f, s in keep.items():
            if s == step:
                atomic_save(checkpoint(step), ckpt_dir / f"lrfrac{f:g}.pt")
        if step in evals_to_write:
            train_loss = chunk_loss / max(n, 1)
            atomic_save(checkpoint(step, train_loss), last)
            row = record(step, {"train_loss": train_loss})
            if progress is not None:
                dt = time.perf_counter() - t0
                progress(
                    {
                        "run_id": cfg.run_id,
                        "total_steps": T_total,
                        "tokens_per_s": (step * tokens_per_step - tok0) / max(dt, 1e-9),
                        **row,
                    }
                )
        if stop_after_step is not None and step >= stop_after_step and step < T_total:
            return "stopped"

    # --- finish: final checkpoint for children, accounting into the run's metadata
    if last.exists():
        os.replace(last, final)
    acct = sampler.accounting()
    final_meta = dict(meta)
    for c in mixture.domains:
        if f"unique_{c}" in acct:
            final_meta[f"unique_tokens_{c}"] = int(acct[f"unique_{c}"])
        final_meta[f"seen_tokens_{c}"] = int(acct[f"tokens_{c}"])
    old = store.get_run(cfg.run_id)
    store.put_run(
        RunMeta(
            run_id=old.run_id,
            phase=old.phase,
            n_params=old.n_params,
            n_params_total=old.n_params_total,
            mixture=old.mixture,
            parent_run=old.parent_run,
            seed=old.seed,
            schedule=old.schedule,
            meta=final_meta,
        ),
        replace=True,
    )
    check()
    store.set_status(cfg.run_id, "finished")
    return "finished"
