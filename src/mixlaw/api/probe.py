"""The probe verbs of the facade (``mixlaw probe``, ``mixlaw corpora``); re-exported by :mod:`mixlaw.api`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["plan_sweep", "prepare_corpora", "run_sweep", "sweep_status"]


def prepare_corpora(
    out: str | Path,
    *,
    source: str = "fetch",
    cache: str | Path | None = None,
    tokenizer: str = "bpe",
    vocab_size: int = 4096,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Build the probe corpora and their manifest (:func:`mixlaw.probe.corpora.prepare`, whose arguments these are;
    ``mixlaw corpora prepare``)."""
    from mixlaw.probe.corpora import prepare

    return prepare(Path(out), source=source, cache=cache, tokenizer=tokenizer, vocab_size=vocab_size, log=log)


def plan_sweep(
    spec: str | Path, *, data_dir: str | Path | None = None, work_dir: str | Path | None = None
) -> list[Any]:
    """The runs a sweep spec (TOML) expands to, in dependency order (``mixlaw probe plan``)."""
    from mixlaw.probe.sweep import load_spec, plan

    return plan(load_spec(Path(spec), data_dir=data_dir, work_dir=work_dir))


def sweep_status(jobs: Sequence[Any], store: str | Path) -> list[dict[str, Any]]:
    """Status of every planned run in a store: pending / running / finished / failed (``mixlaw probe status``)."""
    from mixlaw.probe.sweep import sweep_status as status

    # A store that does not exist yet holds no run: every run is pending, and a status query creates no file.
    return status(list(jobs), store if Path(store).exists() else ":memory:")


def run_sweep(
    jobs: Sequence[Any],
    store: str | Path,
    *,
    workers: int = 1,
    ray_address: str | None = None,
    log_path: str | Path | None = None,
    on_event: Callable[[str, str, str | None], None] | None = None,
    on_tick: Callable[[], None] | None = None,
) -> dict[str, str]:
    """Run (or resume) planned runs into a store (:func:`mixlaw.probe.sweep.run_sweep`, whose arguments these are;
    ``mixlaw probe run``)."""
    from mixlaw.probe.sweep import run_sweep as run

    return run(list(jobs), store, workers=workers, ray_address=ray_address, log_path=log_path, on_event=on_event,
               on_tick=on_tick)  # fmt: skip
