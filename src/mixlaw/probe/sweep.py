"""Sweeps: a TOML spec → the list of runs → executed locally (sequentially or in a process pool) or on Ray.

Spec (every key but ``[pt].sizes`` and a token budget has a default; :mod:`mixlaw.probe.spec` validates every
key at load, so ``evals = 0`` or ``compile = "false"`` is an error naming the key, never a crash or a guess)::

    [sweep]
    name = "cmr_probe"
    data_dir = "/work/probe_work/data"      # relative paths are relative to the spec file
    work_dir = "/work/probe_work/runs"      # checkpoints
    seed = 0
    block_size = 256
    batch_size = 8
    threads = 1                              # per run
    compile = true
    bf16 = true
    eval_tokens = 32768                      # per eval set

    [pt]
    sizes = ["50k", "100k", "200k", "450k"]
    tokens_per_param = 40                    # or: tokens = 2e6, or tokens = {"50k" = 2e6, ...}
    mixture = {general = 1.0}
    schedule = {kind = "wsd", peak_lr = 3e-3, warmup_fraction = 0.05, decay_fraction = 0.2, final_lr = 3e-4}
    evals = 10                               # evaluations along the run
    save_at_lr_fractions = []                # extra "loss potential" checkpoints

    [cpt]
    domains = ["legal", "code"]
    ratios = [0, 0.125, 0.25, 0.5, 0.75, 1]   # domain share R of the CPT mixture
    replay = "general"                          # the corpus that fills 1 - R
    tokens = 1e6                                # CPT length (or tokens_per_param)
    schedules = [{kind = "constant", peak_lr = 3e-4, warmup_fraction = 0.02, start_lr = 3e-4}]
    parent = "final"                            # or "lrfrac0.1": start from a loss-potential checkpoint
    evals = 16
    eval_log_points = 6

A schedule table holds :class:`mixlaw.schedules.Schedule` fields except ``total_steps`` (from the token budget);
``warmup_fraction`` / ``decay_fraction`` are shares of the run's steps. Run ids are
``<name>-<size>-pt`` and ``<name>-<size>-cpt-<domain>-r<R>[-s<k>]``.

Multi-domain PT sweeps (what ``mixlaw plan`` writes) replace ``[pt].mixture`` by named n-domain mixtures and the
list each size trains from scratch; they have no ``[cpt]``. Run ids are ``<name>-<size>-pt-<mixture>[-rep<k>]``::

    [pt]
    sizes = ["25k", "50k"]
    tokens_per_param = 20
    mixtures = { m000 = { general = 0.2, legal = 0.2, code = 0.6 }, m001 = { general = 0.5, legal = 0.3, code = 0.2 } }
    runs = { "25k" = ["m000", "m001"], "50k" = ["m000"] }

Data pools (PT only, no ``[cpt]``): every PT run is trained once per ``[pools.<name>]``, on the corpora's training
splits capped as the pool says (whole documents in a fixed hash order, the last one cut at the cap; corpora not
named are whole). Run ids gain ``-<pool>``; the run's metadata records ``pool``, ``pool_tokens_<c>`` (the capped
size), ``pool_share_<c>`` and ``pool_docs_<c>``::

    [pools.full]                              # every corpus whole
    [pools.code_small]
    max_tokens = { code = 16000 }             # or: share = { code = 0.01 } of the prepared split
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mixlaw.errors import InputError
from mixlaw.probe.corpora import CORPORA
from mixlaw.probe.execute import Job, estimate_seconds, run_sweep, sweep_status
from mixlaw.probe.model import GPT, SIZES, gpt_config
from mixlaw.probe.spec import CptSection, PoolSection, PtSection, Spec, validate_spec
from mixlaw.probe.train import RunConfig, checkpoint_path
from mixlaw.schedules import Schedule

__all__ = ["Job", "SweepSpec", "estimate_seconds", "load_spec", "plan", "run_sweep", "sweep_status"]


@dataclass(frozen=True)
class SweepSpec:
    """A parsed sweep spec (see the module docstring): the TOML document and its typed, validated form."""

    raw: Mapping[str, Any]
    path: Path | None = None

    def section(self, name: str) -> Mapping[str, Any]:
        sec = self.raw.get(name, {})
        if not isinstance(sec, Mapping):
            raise InputError(f"expected a table [{name}]", file=str(self.path) if self.path else None)
        return sec

    @property
    def model(self) -> Spec:
        """The validated spec (:func:`mixlaw.probe.spec.validate_spec`)."""
        return validate_spec(self.raw, self.path)


def load_spec(path: str | Path, *, data_dir: str | Path | None = None, work_dir: str | Path | None = None) -> SweepSpec:
    """Read and validate a TOML sweep spec; ``data_dir`` / ``work_dir`` override ``[sweep]`` (absolute paths).

    Every key is checked here (types, ranges, unknown keys) with one error naming it, e.g.
    ``expected [pt].evals to be >= 1, got 0 in spec.toml``."""
    from mixlaw.safeio import loads_toml, read_text

    p = Path(path)
    if not p.exists():
        raise InputError("sweep spec not found", file=str(p))
    raw = loads_toml(read_text(p, "sweep spec"), str(p))  # strict UTF-8, bounded size and nesting
    sweep = raw.get("sweep", {})
    if not isinstance(sweep, dict):
        raise InputError(f"expected [sweep] to be a table, got {sweep!r:.60}", file=str(p))
    sweep = dict(sweep)
    if data_dir is not None:
        sweep["data_dir"] = str(Path(data_dir).resolve())
    if work_dir is not None:
        sweep["work_dir"] = str(Path(work_dir).resolve())
    raw["sweep"] = sweep
    spec = SweepSpec(raw, p)
    _ = spec.model  # validate now: a bad key fails at load, not half-way through a sweep
    return spec


def _schedule(table: Mapping[str, Any] | str, steps: int, where: str, file: str | None) -> Schedule:
    try:
        if isinstance(table, str):
            return Schedule.parse(table + ("," if ":" in table else ":") + f"steps={steps}")
        d = dict(table)
        if "spec" in d:
            spec = str(d.pop("spec"))
            if d:
                raise InputError(f"a schedule with 'spec' takes no other keys, got {sorted(d)}")
            return Schedule.parse(spec + ("," if ":" in spec else ":") + f"steps={steps}")
        if "total_steps" in d:
            raise InputError("total_steps comes from the token budget; give tokens instead")
        for key, steps_key in (("warmup_fraction", "warmup_steps"), ("decay_fraction", "decay_steps")):
            f = d.pop(key, None)
            if f is None:
                continue
            if isinstance(f, bool) or not isinstance(f, int | float) or not 0 <= f <= 1:
                raise InputError(f"{key} must be a number in [0, 1], got {f!r}")
            # a warm-up share of 0 means none; any decay has at least one step
            d[steps_key] = 0 if (f == 0 and key == "warmup_fraction") else max(1, int(round(f * steps)))
        d["total_steps"] = steps
        return Schedule(**d)
    except (InputError, TypeError, ValueError) as e:
        got = _short(dict(table) if isinstance(table, Mapping) else table)
        raise InputError(f"expected a valid schedule at {where}, got {got} ({e})", file=file) from None


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 80 else r[:77] + "..."


def _tokens(sec: PtSection | CptSection, size: str, n_params: int) -> int:
    if sec.tokens is not None:
        t = sec.tokens[size] if isinstance(sec.tokens, dict) else sec.tokens
        return int(t)
    if sec.tokens_per_param is None:  # validate_spec guarantees one of the two
        raise InputError(f"expected [pt] tokens or tokens_per_param for size {size}")
    return int(sec.tokens_per_param * n_params)


def _ratio_tag(r: float) -> str:
    return f"{r:.4g}"


def _known_corpora(data_dir: str) -> tuple[str, ...]:
    """The corpora of the prepared data (its manifest) or, before it is prepared, every corpus mixlaw prepares."""
    manifest = Path(data_dir) / "manifest.json"
    if manifest.exists():
        try:
            return tuple(json.loads(manifest.read_text(encoding="utf-8"))["corpora"])
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a broken manifest is reported by the run that reads it
    return CORPORA


def _mixture_jobs(
    m: Spec, size: str, pt_id: str, steps: int, schedule: dict[str, Any], common: Mapping[str, Any]
) -> list[Job]:
    """PT runs from scratch, one per mixture listed for ``size`` (``[pt].mixtures``/``runs``): run ids
    ``<name>-<size>-pt-<mixture>``, and ``-rep<k>`` with seed ``seed + k`` for the k-th repeat of a mixture."""
    pt = m.pt
    mixtures = pt.mixtures or {}
    names = (pt.runs or {}).get(size, list(mixtures))
    seen: dict[str, int] = {}
    jobs = []
    for mix in names:
        rep = seen.get(mix, 0)
        seen[mix] = rep + 1
        args = dict(common)
        args["seed"] = int(common["seed"]) + rep
        jobs.append(
            Job(
                RunConfig(
                    run_id=f"{pt_id}-{mix}" + (f"-rep{rep}" if rep else ""),
                    size=size,
                    mixture={k: float(v) for k, v in mixtures[mix].items()},
                    schedule=schedule,
                    phase="pt",
                    eval_every=max(1, steps // pt.evals),
                    eval_log_points=pt.eval_log_points,
                    save_at_lr_fractions=tuple(float(f) for f in pt.save_at_lr_fractions),
                    meta={
                        "sweep": m.sweep.name,
                        "domain": "none",
                        "ratio": 0.0,
                        "mixture_name": mix,
                        "replicate": rep,
                    },  # fmt: skip
                    **args,
                )
            )
        )
    return jobs


def _in_pool(job: Job, name: str, pool: PoolSection) -> Job:
    """``job`` trained on the data pool ``name``: run id ``<id>-<name>``, the pool's caps and name in its config
    (fingerprinted) and ``pool`` in its metadata."""
    cfg = job.config
    return Job(
        replace(
            cfg,
            run_id=f"{cfg.run_id}-{name}",
            pool=name,
            pool_max_tokens={c: int(v) for c, v in pool.max_tokens.items()},
            pool_share={c: float(v) for c, v in pool.share.items()},
            meta={**dict(cfg.meta), "pool": name},
        ),
        depends_on=job.depends_on,
    )


def plan(spec: SweepSpec) -> list[Job]:
    """Expand a spec into jobs: PT per size; CPT per size × domain × ratio × schedule."""
    m = spec.model
    sw, pt, cpt = m.sweep, m.pt, m.cpt
    file = str(spec.path) if spec.path is not None else None
    base_dir = spec.path.parent if spec.path is not None else Path.cwd()

    def path_of(value: str) -> str:
        p = Path(value)
        return str(p if p.is_absolute() else (base_dir / p).resolve())

    name = sw.name
    data_dir, work_dir = path_of(sw.data_dir), path_of(sw.work_dir)
    bad = [s for s in pt.sizes if s not in SIZES]
    if bad:
        raise InputError(f"unknown sizes {bad}; expected some of {list(SIZES)}", file=file)
    corpora = _known_corpora(data_dir)
    named = [("[pt].mixture", c) for c in pt.mixture] + [("[sweep].eval_sets", c) for c in sw.eval_sets or ()]
    named += [(f"[pt].mixtures.{m}", c) for m, w in (pt.mixtures or {}).items() for c in w]
    for p, pool in (m.pools or {}).items():
        named += [(f"[pools.{p}].{k}", c) for k in ("max_tokens", "share") for c in getattr(pool, k)]
    if cpt is not None:
        named += [("[cpt].domains", c) for c in cpt.domains] + [("[cpt].replay", cpt.replay)]
    for key, c in named:
        if c not in corpora:
            raise InputError(f"expected {key} to name corpora of {list(corpora)}, got unknown {c!r}", file=file)
    common: dict[str, Any] = {
        "data_dir": data_dir,
        "work_dir": work_dir,
        "seed": sw.seed,
        "block_size": sw.block_size,
        "batch_size": sw.batch_size,
        "threads": sw.threads,
        "compile": sw.compile,
        "bf16": sw.bf16,
        "eval_tokens": sw.eval_tokens,
        "device": sw.device,
    }
    if sw.eval_sets is not None:
        common["eval_sets"] = tuple(sw.eval_sets)
    tps = sw.block_size * sw.batch_size
    jobs: list[Job] = []
    for size in pt.sizes:
        n_params = GPT(gpt_config(size, vocab_size=8, block_size=8)).n_params  # independent of the vocabulary
        pt_steps = max(1, _tokens(pt, size, n_params) // tps)
        pt_id = f"{name}-{size}-pt"
        sched = _schedule(pt.schedule, pt_steps, "[pt].schedule", file)
        if pt.mixtures is not None:
            jobs += _mixture_jobs(m, size, pt_id, pt_steps, sched.to_dict(), common)
            continue
        jobs.append(
            Job(
                RunConfig(
                    run_id=pt_id,
                    size=size,
                    mixture={k: float(v) for k, v in pt.mixture.items()},
                    schedule=sched.to_dict(),
                    phase="pt",
                    eval_every=max(1, pt_steps // pt.evals),
                    eval_log_points=pt.eval_log_points,
                    save_at_lr_fractions=tuple(float(f) for f in pt.save_at_lr_fractions),
                    meta={"sweep": name, "domain": "none", "ratio": 0.0},
                    **common,
                )
            )
        )
        if cpt is None:
            continue
        parent_ck = str(checkpoint_path(work_dir, pt_id, cpt.parent))
        scheds = cpt.schedules or [cpt.schedule or {"kind": "constant", "peak_lr": 3e-4}]
        cpt_steps = max(1, _tokens(cpt, size, n_params) // tps)
        for domain in cpt.domains:
            for r in map(float, cpt.ratios):
                mixture = {cpt.replay: 1.0 - r, domain: r}
                for k, st in enumerate(scheds):
                    sid = f"{name}-{size}-cpt-{domain}-r{_ratio_tag(r)}" + (f"-s{k}" if len(scheds) > 1 else "")
                    where = "[cpt].schedules" + (f"[{k}]" if cpt.schedules else "")
                    jobs.append(
                        Job(
                            RunConfig(
                                run_id=sid,
                                size=size,
                                mixture=mixture,
                                schedule=_schedule(st, cpt_steps, where, file).to_dict(),
                                phase="cpt",
                                parent_run=pt_id,
                                parent_checkpoint=parent_ck,
                                eval_every=max(1, cpt_steps // cpt.evals),
                                eval_log_points=cpt.eval_log_points,
                                meta={"sweep": name, "domain": domain, "ratio": r, "schedule_index": k},
                                **common,
                            ),
                            depends_on=pt_id,
                        )
                    )
    if m.pools is not None:  # pool outermost: a sweep cut short has whole pools
        jobs = [_in_pool(j, p, pool) for p, pool in m.pools.items() for j in jobs]
    ids = [j.run_id for j in jobs]
    if len(set(ids)) != len(ids):
        raise InputError("the spec expands to duplicate run ids (ratios equal to 4 significant digits?)", file=file)
    return jobs
