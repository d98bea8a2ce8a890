"""Probe checkpoints: where they live, how they are written (atomically, per-process temp files), and the checks
that let a run resume from one only when it continues this very run (config fingerprint) and the evaluations the
store holds (so a fresh store pointed at an old work dir never marks runs finished from a stale checkpoint)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from mixlaw.errors import InputError

if TYPE_CHECKING:
    from mixlaw.probe.config import RunConfig
    from mixlaw.runs.store import RunStore

__all__ = ["checkpoint_path", "config_fingerprint", "check_resume", "atomic_save", "load_checkpoint"]

_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+\-]*$")
# RunConfig fields that do not change what a run computes (paths, speed settings, free-form metadata).
_NOT_FINGERPRINTED = ("data_dir", "work_dir", "parent_checkpoint", "threads", "compile", "meta")


def checkpoint_path(work_dir: str | Path, run_id: str, name: str = "last") -> Path:
    """``work_dir/<run_id>/<name>.pt`` (``last``: resume point; ``final``: end of run; ``lrfrac<f>``).

    ``run_id`` and ``name`` must be plain path components: nothing is ever written outside ``work_dir``."""
    for what, part in (("run id", run_id), ("checkpoint name", name)):
        if not isinstance(part, str) or not _SAFE_ID.match(part):
            raise InputError(
                f"expected a {what} of letters, digits, '_', '.', '+' or '-' (a path component), got {part!r}"
            )
    return Path(work_dir) / run_id / f"{name}.pt"


def config_fingerprint(cfg: RunConfig, data_hash: str | None) -> str:
    """SHA-256 of everything that determines a run's numbers: its config except paths and speed settings,
    the parent checkpoint's name (not its directory) and the prepared data's hash."""
    d = {k: v for k, v in cfg.to_dict().items() if k not in _NOT_FINGERPRINTED}
    d["parent_checkpoint"] = None if cfg.parent_checkpoint is None else Path(cfg.parent_checkpoint).name
    d["data_hash"] = data_hash
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]


def atomic_save(obj: Any, path: Path) -> None:
    """Write to a temp file of this process (two processes never share one), then rename over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        torch.save(obj, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise InputError(f"checkpoint not found: {path}") from None


def check_resume(
    cfg: RunConfig, ck: Mapping[str, Any], path: Path, fingerprint: str, store: RunStore, evals: list[int]
) -> bool:
    """Whether the checkpoint at ``path`` may continue this run in ``store`` (``evals``: the run's evaluation
    steps).

    Returns ``True`` when it comes from this run's config and the store holds exactly the evaluations before its
    step (or those and its own: a kill between checkpoint and store write). Returns ``False`` when the config is
    the same but the store's evaluations do not match (a fresh store pointed at an old work dir): the run must
    start from scratch, which reproduces the same checkpoints, instead of being marked finished from a
    checkpoint whose evaluations the store never saw. Raises :class:`InputError` when the checkpoint comes from
    another config: the work dir belongs to another sweep, and nothing of it is overwritten.
    """
    ck_fp = ck.get("fingerprint")
    if ck_fp is None:  # a checkpoint written before fingerprints: compare the configs it recorded
        mine = {k: v for k, v in cfg.to_dict().items() if k not in _NOT_FINGERPRINTED}
        theirs = {k: v for k, v in dict(ck.get("run_config", {})).items() if k not in _NOT_FINGERPRINTED}
        same = all(_same_value(mine[k], theirs.get(k)) for k in mine)
    else:
        same = ck_fp == fingerprint
    if not same:
        raise InputError(
            f"expected the checkpoint {path} to come from this run's config (fingerprint {fingerprint}), got "
            f"{ck_fp or 'an older config'}: the work dir belongs to another sweep; point --work-dir at a fresh "
            f"directory or delete {path.parent}"
        )
    step = int(ck["step"])
    before = [e for e in evals if e < step]
    return store.steps(cfg.run_id) in (before, [*before, step])


def _same_value(a: Any, b: Any) -> bool:
    """Equality across a checkpoint round trip (tuples come back as lists)."""
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)
