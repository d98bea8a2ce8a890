"""Fitted laws for CPT decisions: :class:`LawFit` (one eval set) and :class:`CptFits` (the bundle).

Laws are looked up in the registry (:func:`mixlaw.laws.get_law`) and their parameters checked against the law's
spec: every declared parameter present, finite, and inside its declared bounds.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from mixlaw.errors import InputError
from mixlaw.laws import Law, get_law


@dataclass(frozen=True)
class LawFit:
    """A fitted law ready for prediction.

    Attributes
    ----------
    law
        The registered law (with its options).
    params
        Natural-unit parameters.
    bootstrap
        ``(B, P)`` natural-unit parameters of successful bootstrap resamples (columns in ``law.param_names``
        order), or ``None``.
    target
        Name of the fitted eval column (e.g. ``loss_general``).
    max_lr
        Largest LR in the fitted data (peak-LR extrapolation guard); ``None`` when unknown.
    """

    law: Law
    params: dict[str, float]
    bootstrap: np.ndarray | None = None
    target: str = "loss"
    max_lr: float | None = None
    record: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        validate_fit(self.law, self.params, self.bootstrap)

    @classmethod
    def from_any(cls, obj: Any, *, target: str | None = None, max_lr: float | None = None) -> LawFit:
        """From a :class:`LawFit`, an engine ``FitResult`` (``law``, ``params``, ``bootstrap_params``) or a
        dict ``{"law": name, "options": {...}, "params": {...}, "bootstrap_params": [[...]] | {name: [...]},
        "target": ..., "max_lr": ...}``."""
        if isinstance(obj, LawFit):
            return obj
        if isinstance(obj, Mapping):
            if "law" not in obj or "params" not in obj:
                raise InputError("a fit needs 'law' and 'params'")
            law = get_law(obj["law"], **dict(obj.get("options") or {}))
            params = {k: float(v) for k, v in obj["params"].items()}
            boot = _boot_array(law, obj.get("bootstrap_params"))
            return cls(
                law=law,
                params=_check_params(law, params),
                bootstrap=boot,
                target=str(target or obj.get("target") or "loss"),
                max_lr=_num_or_none(obj.get("max_lr", max_lr)),
            )
        if hasattr(obj, "law") and hasattr(obj, "params"):
            law = obj.law if isinstance(obj.law, Law) else get_law(obj.law)
            boot = _boot_array(law, getattr(obj, "bootstrap_params", None))
            meta = getattr(obj, "meta", None) or {}
            to_dict = getattr(obj, "to_dict", None)
            return cls(
                law=law,
                params=_check_params(law, {k: float(v) for k, v in dict(obj.params).items()}),
                bootstrap=boot,
                target=str(target or getattr(obj, "target", None) or "loss"),
                max_lr=_num_or_none(max_lr if max_lr is not None else meta.get("max_lr")),
                record=to_dict() if callable(to_dict) else None,
            )
        raise InputError(f"cannot read a fit from {type(obj).__name__}")

    def to_dict(self) -> dict[str, Any]:
        if self.record is not None:  # keep the engine's full record (schema, starts, metrics, bootstrap)
            return {**self.record, "max_lr": self.max_lr}
        d: dict[str, Any] = {
            "law": self.law.name,
            "options": dict(self.law.options),
            "params": dict(self.params),
            "target": self.target,
            "max_lr": self.max_lr,
        }
        if self.bootstrap is not None:
            d["bootstrap_params"] = self.bootstrap.tolist()
        return d

    def param_sets(self) -> np.ndarray:
        """``(1 + B, P)``: the point estimate then the bootstrap sets."""
        point = np.array([[self.params[n] for n in self.law.param_names]])
        return point if self.bootstrap is None else np.vstack([point, self.bootstrap])

    def evaluate(self, x: Mapping[str, np.ndarray], sets: np.ndarray | None = None) -> np.ndarray:
        """``(S, n)`` predictions for parameter sets ``sets`` (default: point + bootstrap)."""
        ps = self.param_sets() if sets is None else np.atleast_2d(sets)
        missing = [c for c in self.law.inputs if c not in x]
        if missing:
            raise InputError(f"law '{self.law.name}' needs inputs {missing}")
        xt = {k: torch.from_numpy(np.array(x[k], dtype=np.float64)) for k in self.law.inputs}
        pt = {n: torch.as_tensor(ps[:, i : i + 1]) for i, n in enumerate(self.law.param_names)}
        with torch.no_grad():
            return self.law.predict(xt, pt).numpy()


def validate_fit(law: Law, params: Mapping[str, float], bootstrap: np.ndarray | None = None) -> None:
    """Check a fit against the registry and the law's spec: the law is the registered one of its name (with
    these options), every declared parameter is present, finite and inside its declared bounds, and bootstrap
    rows have one column per parameter. Raises :class:`InputError` naming the law and the parameter."""
    try:
        registered = get_law(law.name, **dict(law.options))
    except InputError as exc:
        raise InputError(f"a decision needs a registered law: {exc}") from None
    if type(registered) is not type(law):
        raise InputError(f"law '{law.name}' is not the registered law of that name ({type(law).__name__})")
    missing = [n for n in law.param_names if n not in params]
    if missing:
        raise InputError(f"fit of law '{law.name}' lacks parameters {missing}")
    for n in law.param_names:
        v, spec = float(params[n]), law.spec(n)
        if not math.isfinite(v) or not spec.lower <= v <= spec.upper:
            raise InputError(
                f"fit of law '{law.name}': parameter {n} = {v:.6g} is outside its declared range "
                f"[{spec.lower:g}, {spec.upper:g}]"
            )
    if bootstrap is not None and (bootstrap.ndim != 2 or bootstrap.shape[1] != len(law.param_names)):
        raise InputError(
            f"bootstrap parameters of law '{law.name}' must be (B, {len(law.param_names)}), got {bootstrap.shape}"
        )


def _num_or_none(v: Any) -> float | None:
    return None if v is None else float(v)


def _check_params(law: Law, params: dict[str, float]) -> dict[str, float]:
    missing = [n for n in law.param_names if n not in params]
    if missing:
        raise InputError(f"fit of law '{law.name}' lacks parameters {missing}")
    return {n: float(params[n]) for n in law.param_names}


def _boot_array(law: Law, boot: Any) -> np.ndarray | None:
    if boot is None:
        return None
    if isinstance(boot, pd.DataFrame):
        if boot.empty:
            return None
        return boot[list(law.param_names)].to_numpy(dtype=np.float64)
    if isinstance(boot, Mapping):
        return np.column_stack([np.asarray(boot[n], dtype=np.float64) for n in law.param_names])
    arr = np.asarray(boot, dtype=np.float64)
    if arr.size == 0:
        return None
    if arr.ndim != 2 or arr.shape[1] != len(law.param_names):
        raise InputError(f"bootstrap parameters must be (B, {len(law.param_names)}), got {arr.shape}")
    return arr


@dataclass(frozen=True)
class CptFits:
    """Fitted laws per eval set: ``fits[name]``; ``pt_set`` / ``cpt_set`` name the D_pt and D_cpt sets.

    ``ood`` maps an OOD eval-set name to an ``ood_combination`` fit (inputs ``loss_pt``, ``loss_cpt``),
    predicted from the D_pt and D_cpt predictions.
    """

    fits: dict[str, LawFit]
    pt_set: str
    cpt_set: str | None = None
    ood: dict[str, LawFit] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.pt_set not in self.fits:
            raise InputError(f"pt_set '{self.pt_set}' has no fit; fitted sets: {sorted(self.fits)}")
        if self.cpt_set is not None and self.cpt_set not in self.fits:
            raise InputError(f"cpt_set '{self.cpt_set}' has no fit; fitted sets: {sorted(self.fits)}")
        if self.ood and self.cpt_set is None:
            raise InputError("OOD combinations need both a pt_set and a cpt_set")

    @property
    def blackbox(self) -> bool:
        """True when no fit reads the PT history (black-box base: only CPT areas are inputs)."""
        return all(not {"s1_pt", "s2_pt", "s1", "s2"} & set(f.law.inputs) for f in self.fits.values())

    def base_assumption(self) -> str:
        """Which pre-training history the fits assume (:func:`mixlaw.laws.cpt.base_assumption`), one line; fits
        of laws without a base option read the PT history from each CPT run's parent run."""
        from mixlaw.laws.cpt import base_assumption

        said = list(dict.fromkeys(base_assumption(f.law) for f in self.fits.values()))
        return "; ".join(said)

    @property
    def max_lr(self) -> float | None:
        vals = [f.max_lr for f in self.fits.values() if f.max_lr is not None]
        return max(vals) if vals else None

    def save(self, path: str | Path) -> None:
        """Write the bundle as JSON (the ``FIT.json`` the ``mixlaw cpt`` verbs read)."""
        from mixlaw.safeio import atomic_write_text

        atomic_write_text(path, json.dumps(self.to_dict(), allow_nan=True))  # a full disk keeps the old bundle

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "cpt_fits",
            "pt_set": self.pt_set,
            "cpt_set": self.cpt_set,
            "fits": {k: v.to_dict() for k, v in self.fits.items()},
            "ood": {k: v.to_dict() for k, v in self.ood.items()},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CptFits:
        if "fits" not in d or "pt_set" not in d:
            raise InputError("a CPT fit bundle needs 'fits' and 'pt_set'")
        top = _num_or_none(d.get("max_lr"))
        return cls(
            fits={k: _load_one(v, k, top) for k, v in d["fits"].items()},
            pt_set=str(d["pt_set"]),
            cpt_set=None if d.get("cpt_set") is None else str(d["cpt_set"]),
            ood={k: _load_one(v, k, top) for k, v in (d.get("ood") or {}).items()},
        )

    @classmethod
    def from_results(
        cls,
        results: Mapping[str, Any],
        *,
        pt_set: str,
        cpt_set: str | None = None,
        ood: Mapping[str, Any] | None = None,
        max_lr: float | None = None,
    ) -> CptFits:
        """Bundle engine ``FitResult`` objects (or :class:`LawFit`) keyed by eval set; ``max_lr`` = the
        largest LR in the fitted runs (enables the peak-LR extrapolation guard)."""
        return cls(
            fits={k: _load_one(v, k, max_lr) for k, v in results.items()},
            pt_set=pt_set,
            cpt_set=cpt_set,
            ood={k: _load_one(v, k, max_lr) for k, v in (ood or {}).items()},
        )


def _load_one(obj: Any, target: str, max_lr: float | None = None) -> LawFit:
    """One fit from a FitResult, its JSON dict (``"schema"`` key), or the plain dict of
    :meth:`LawFit.to_dict`."""
    if isinstance(obj, Mapping) and "schema" in obj:
        from mixlaw.fit import FitResult

        rec = dict(obj)
        lf = LawFit.from_any(FitResult.from_dict(rec), target=target, max_lr=_num_or_none(obj.get("max_lr", max_lr)))
        return replace(lf, record=rec)
    if isinstance(obj, Mapping):
        return LawFit.from_any({**dict(obj), "max_lr": obj.get("max_lr", max_lr)}, target=target)
    return LawFit.from_any(obj, target=target, max_lr=max_lr)


def load_fits(path: str | Path) -> CptFits:
    """Read ``FIT.json``: a CPT bundle (:meth:`CptFits.to_dict`) or a single fit (then it is the D_pt set)."""
    from mixlaw.safeio import loads_json, read_text

    p = Path(path)
    d = loads_json(read_text(p, "fit JSON"), str(p))  # strict UTF-8, unique keys, bounded depth and integers
    if not isinstance(d, Mapping):
        raise InputError(f"expected a fit JSON object, got a JSON {type(d).__name__}", file=str(p))
    try:
        if "fits" in d:
            if not isinstance(d["fits"], Mapping) or not isinstance(d.get("ood") or {}, Mapping):
                raise InputError("field 'fits' (and 'ood'): expected objects of fits keyed by eval set")
            return CptFits.from_dict(d)
        one = _load_one(d, str(d.get("target", "loss")))
    except InputError as exc:
        raise exc if exc.file else InputError(str(exc), file=str(p)) from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise InputError(f"expected a fit or a CPT fit bundle, got a malformed one ({type(exc).__name__}: "
                         f"{str(exc)[:120]})", file=str(p)) from None  # fmt: skip
    return CptFits(fits={one.target: one}, pt_set=one.target)
