"""The configuration of one probe run (:class:`RunConfig`): what it trains, on what, for how long, with which
schedule; it is what a run's checkpoint fingerprint and the sweep specs are built from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from mixlaw.errors import InputError
from mixlaw.schedules import Schedule

__all__ = ["RunConfig"]


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines one probe run.

    Parameters
    ----------
    run_id
        Unique id in the store; also the checkpoint directory name under ``work_dir``.
    data_dir
        Prepared corpora (``mixlaw corpora prepare``).
    work_dir
        Checkpoints go to ``work_dir/<run_id>/``.
    size
        Named model size (:data:`mixlaw.probe.model.SIZES`).
    mixture
        Corpus -> weight for the training data.
    schedule
        LR schedule (``Schedule``, its dict, or a spec string such as ``"wsd:peak=3e-3,steps=4000,decay=800"``);
        ``total_steps`` is the run length in optimizer steps.
    phase
        ``"pt"`` or ``"cpt"``.
    parent_run, parent_checkpoint
        For CPT: the parent's run id and checkpoint file (model and optimizer state are loaded from it).
    seed
        Seeds the model init (PT), the sampler and torch's RNG.
    block_size, batch_size
        Context length and sequences per step (tokens per step = their product).
    eval_every
        Evaluate every this many steps (and at step 0 and the last step).
    eval_log_points
        Extra evaluation steps spaced geometrically over the run (resolves early dynamics such as the CPT bump).
    eval_tokens
        Tokens per eval set (fixed batches: the first tokens of each validation split).
    eval_sets
        Corpora evaluated (default: every corpus in the data) → columns ``loss_<corpus>``.
    weight_decay, betas, grad_clip
        AdamW and gradient clipping settings.
    threads
        ``torch.set_num_threads`` for this run (1 is best on shared 2-core machines: run two in parallel).
    compile, bf16
        ``torch.compile`` the model; bf16 autocast (CPU and CUDA).
    device
        ``"cpu"`` (the default), ``"cuda"``/``"cuda:<i>"``, or ``"auto"``: CUDA with bf16 autocast when a GPU is
        available, else the CPU with ``bf16`` as given (:func:`resolve_device`). The device used is stored in the
        run's metadata (``device``, ``bf16``); the config fingerprint keeps the setting as written, so a
        finished ``auto`` run is recognised on any machine.
    save_at_lr_fractions
        PT only: keep checkpoints where the LR first falls to these fractions of its peak (``lrfrac<f>.pt``).
    meta
        Extra JSON metadata stored with the run (e.g. ``domain``, ``size``).
    pool, pool_max_tokens, pool_share
        The data pool the run trains on (``[pools.<name>]`` of a spec): its name and per-corpus caps on the
        training split, in tokens or as a share of it (:func:`mixlaw.probe.data.pool_prefix`). Without a pool
        (``None``) every corpus is whole and the three are left out of :meth:`to_dict` and the fingerprint, so
        runs configured before pools existed keep their fingerprints.
    """

    run_id: str
    data_dir: str
    work_dir: str
    size: str
    mixture: Mapping[str, float]
    schedule: Any
    phase: str = "pt"
    parent_run: str | None = None
    parent_checkpoint: str | None = None
    seed: int = 0
    block_size: int = 256
    batch_size: int = 8
    eval_every: int = 100
    eval_log_points: int = 0
    eval_tokens: int = 16384
    eval_sets: tuple[str, ...] | None = None
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = 1.0
    threads: int = 1
    compile: bool = False
    bf16: bool = False
    device: str = "cpu"
    save_at_lr_fractions: tuple[float, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)
    pool: str | None = None
    pool_max_tokens: Mapping[str, int] = field(default_factory=dict)
    pool_share: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.pool is None and (self.pool_max_tokens or self.pool_share):
            raise InputError(f"run {self.run_id}: pool caps need a pool name")
        both = sorted(set(self.pool_max_tokens) & set(self.pool_share))
        if both:
            raise InputError(f"run {self.run_id}: pool {self.pool} caps corpus {both[0]!r} twice (max_tokens, share)")

    def get_schedule(self) -> Schedule:
        s = self.schedule
        if isinstance(s, Schedule):
            return s
        if isinstance(s, str):
            return Schedule.parse(s)
        if isinstance(s, Mapping):
            return Schedule.from_dict(s)
        raise InputError(f"schedule of run {self.run_id} must be a Schedule, dict or spec string, got {s!r}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["schedule"] = self.get_schedule().to_dict()
        d["mixture"] = dict(self.mixture)
        d["meta"] = dict(self.meta)
        if self.pool is None:  # the form of runs made before pools existed (their fingerprints stay the same)
            for k in ("pool", "pool_max_tokens", "pool_share"):
                del d[k]
        else:
            d["pool_max_tokens"] = {c: int(v) for c, v in self.pool_max_tokens.items()}
            d["pool_share"] = {c: float(v) for c, v in self.pool_share.items()}
        return d
