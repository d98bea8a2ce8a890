"""The sweep spec as a typed schema: every key checked at load, one error format naming the key.

A spec is TOML with the tables ``[sweep]``, ``[pt]`` and (optionally) ``[cpt]`` (see :mod:`mixlaw.probe.sweep`
for an annotated example). :func:`validate_spec` turns the parsed TOML into a frozen :class:`Spec` or raises one
:class:`~mixlaw.errors.InputError` such as::

    expected [pt].evals to be an integer >= 1, got 0 in spec.toml
    expected [sweep].compile to be true or false, got 'false' in spec.toml
    expected [cpt].ratios to be a list, got 0.5 in spec.toml

Types are strict (``seed = "abc"`` or ``compile = "false"`` is refused, never converted); ranges are explicit
(``threads`` 1..256, batch sizes >= 1, LR fractions in (0, 1], mixture weights summing to 1); unknown keys are
errors (a typo must not silently fall back to a default); names that become paths (``name``, ``parent``) cannot
leave the work directory.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError

from mixlaw.errors import InputError

__all__ = ["Spec", "SweepSection", "PtSection", "CptSection", "PoolSection", "validate_spec", "MAX_THREADS"]

#: Most threads a run may ask for (libgomp crashes on absurd counts such as 1,000,000).
MAX_THREADS = 256
_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.+\-]*$"  # a path component that cannot climb out of the work dir
_PARENT = re.compile(r"^(final|lrfrac(?P<f>[0-9.eE+\-]+))$")

_DEVICE = r"^(auto|cpu|cuda(:[0-9]{1,2})?)$"
_PATTERNS = {
    _NAME: "a plain name of letters, digits, '_', '.', '+' or '-' (no '/', no leading '.')",
    _DEVICE: "'cpu', 'cuda', 'cuda:<index>' or 'auto'",
}

Number = StrictInt | Annotated[StrictFloat, Field(allow_inf_nan=False)]
PosNumber = Annotated[Number, Field(gt=0)]
MAX_TOKENS = 10**13
"""Most training tokens a probe run may ask for (2^63 − 1 used to plan 7.2e16 steps)."""
Tokens = Annotated[Number, Field(gt=0, le=MAX_TOKENS)]
PathText = Annotated[StrictStr, Field(min_length=1, max_length=4096, pattern=r"^[^\x00]*$")]
Name = Annotated[StrictStr, Field(pattern=_NAME, max_length=100)]
ScheduleTable = dict[StrictStr, Any] | StrictStr


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class SweepSection(_Section):
    """``[sweep]``: where data and checkpoints live, and the settings every run shares."""

    name: Name = "sweep"
    data_dir: PathText = "data"
    work_dir: PathText = "runs"
    seed: Annotated[StrictInt, Field(ge=0, lt=2**53)] = 0
    block_size: Annotated[StrictInt, Field(ge=2, le=65536)] = 256
    batch_size: Annotated[StrictInt, Field(ge=1, le=65536)] = 8
    threads: Annotated[StrictInt, Field(ge=1, le=MAX_THREADS)] = 1
    compile: StrictBool = False
    bf16: StrictBool = False
    eval_tokens: Annotated[StrictInt, Field(ge=1, le=2**40)] = 16384
    device: Annotated[StrictStr, Field(pattern=_DEVICE)] = "cpu"
    eval_sets: Annotated[list[Name], Field(min_length=1)] | None = None


class _Phase(_Section):
    tokens: Tokens | dict[StrictStr, Tokens] | None = None
    tokens_per_param: PosNumber | None = None
    evals: Annotated[StrictInt, Field(ge=1, le=100_000)] = 10
    eval_log_points: Annotated[StrictInt, Field(ge=0, le=10_000)] = 0


Weights = dict[Name, Annotated[Number, Field(ge=0)]]


class PtSection(_Phase):
    """``[pt]``: one pre-training run per model size, or (``mixtures``) one per size and listed mixture.

    ``mixtures`` names n-domain mixtures (``{m000 = {general = 0.4, code = 0.6}, ...}``) and ``runs`` lists the
    mixtures each size trains from scratch (``{"25k" = ["m000", "m001"], ...}``; a name listed twice is a seed
    replicate; default: every mixture at every size). Without them, ``mixture`` is the one PT mixture.
    """

    sizes: Annotated[list[StrictStr], Field(min_length=1)]
    mixture: Weights = {"general": 1.0}
    mixtures: Annotated[dict[Name, Weights], Field(min_length=1)] | None = None
    runs: dict[StrictStr, Annotated[list[Name], Field(min_length=1)]] | None = None
    schedule: ScheduleTable = {"kind": "constant", "peak_lr": 3e-3}
    save_at_lr_fractions: list[Annotated[Number, Field(gt=0, le=1)]] = []


class CptSection(_Phase):
    """``[cpt]``: continual pre-training of every PT run per domain × ratio × schedule."""

    domains: Annotated[list[Name], Field(min_length=1)]
    ratios: Annotated[list[Annotated[Number, Field(ge=0, le=1)]], Field(min_length=1)] = [0.5]
    replay: Name = "general"
    schedules: Annotated[list[ScheduleTable], Field(min_length=1)] | None = None
    schedule: ScheduleTable | None = None
    parent: StrictStr = "final"
    evals: Annotated[StrictInt, Field(ge=1, le=100_000)] = 16


class PoolSection(_Section):
    """``[pools.<name>]``: one data pool, a cap on some corpora's training split (corpora not named are whole).

    ``max_tokens = {code = 32000}`` keeps that many tokens of a corpus' prepared training split, ``share = {code =
    0.01}`` that share of them; the kept tokens are whole documents in a fixed hash order, the last one cut at the
    cap (:func:`mixlaw.probe.data.pool_prefix`). Every PT run is trained once per pool.
    """

    max_tokens: dict[Name, Tokens] = {}
    share: dict[Name, Annotated[Number, Field(gt=0, le=1)]] = {}


class Spec(_Section):
    """A whole sweep spec."""

    sweep: SweepSection = SweepSection()
    pt: PtSection
    cpt: CptSection | None = None
    pools: Annotated[dict[Name, PoolSection], Field(min_length=1)] | None = None


def _describe(err: Mapping[str, Any]) -> str:
    """What a pydantic error expected, in words."""
    kind, ctx = str(err.get("type", "")), err.get("ctx") or {}
    words = {
        "int_type": "an integer",
        "int_parsing": "an integer",
        "float_type": "a number",
        "bool_type": "true or false",
        "string_type": "a string",
        "list_type": "a list",
        "dict_type": "a table",
        "model_type": "a table",
        "missing": "given (it is required)",
        "extra_forbidden": "a known key (unknown key; check its spelling)",
        "too_short": "non-empty",
        "string_too_long": f"at most {ctx.get('max_length')} characters",
    }
    if kind == "string_pattern_mismatch":
        return _PATTERNS.get(str(ctx.get("pattern")), f"text matching {ctx.get('pattern')}")
    if kind in words:
        return words[kind]
    for op, word in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
        if op in ctx and kind.endswith(("greater_than", "greater_than_equal", "less_than", "less_than_equal")):
            return f"{word} {ctx[op]}"
    return str(err.get("msg", "valid")).lower()


def _key(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if not str(p).startswith(("function-", "constrained-", "[key]"))]
    # drop pydantic's union-branch labels ("int", "dict[str,...]") that follow a field name
    clean = [p for p in parts if not re.match(r"^(int|float|str|bool|dict\[.*\]|list\[.*\]|is-instance\[.*\])$", p)]
    if not clean:
        return "the spec"
    head, *rest = clean
    if head == "pools" and rest:
        head, *rest = f"pools.{rest[0]}", *rest[1:]
    out = f"[{head}]" if head.startswith(("sweep", "pt", "cpt", "pools")) else head
    for p in rest:
        out += f"[{p}]" if p.isdigit() else f".{p}"
    return out


def _short(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


def validate_spec(raw: Mapping[str, Any], path: str | Path | None = None) -> Spec:
    """The typed spec of a parsed TOML document (``tomllib.loads``); one :class:`InputError` naming the key."""
    file = str(path) if path is not None else None
    try:
        spec = Spec.model_validate(dict(raw))
    except ValidationError as exc:
        errs = exc.errors(include_url=False)
        # a value of the wrong shape fails every branch of a union: report the first branch only
        err = errs[0]
        got = "nothing" if err.get("type") == "missing" else _short(err.get("input"))
        raise InputError(f"expected {_key(tuple(err['loc']))} to be {_describe(err)}, got {got}", file=file) from None
    _cross_checks(spec, file)
    return spec


def _check_mixtures(spec: Spec, fail: Any) -> None:
    """``[pt].mixtures`` / ``[pt].runs``: each mixture sums to 1, runs name known sizes and mixtures, no CPT."""
    pt = spec.pt
    if pt.mixtures is None:
        if pt.runs is not None:
            fail("[pt].runs", "given with [pt].mixtures (the mixtures it names)", pt.runs)
        return
    if "mixture" in pt.model_fields_set:
        fail("[pt].mixture", "given without [pt].mixtures (one of the two)", pt.mixture)
    if spec.cpt is not None:
        fail("[cpt]", "absent with [pt].mixtures (CPT continues one base per size)", "a [cpt] table")
    for name, w in pt.mixtures.items():
        if abs(math.fsum(float(v) for v in w.values()) - 1.0) > 1e-9 or not w:
            fail(f"[pt].mixtures.{name}", "weights summing to 1", w)
    missing = [z for z in pt.sizes if pt.runs is not None and z not in pt.runs]
    if missing:
        fail("[pt].runs", f"a list of mixtures for every size (missing {missing})", pt.runs)
    for size, names in (pt.runs or {}).items():
        if size not in pt.sizes:
            fail(f"[pt].runs.{size}", f"a size of [pt].sizes {pt.sizes}", size)
        unknown = [n for n in names if n not in pt.mixtures]
        if unknown:
            fail(f"[pt].runs.{size}", f"names of [pt].mixtures (unknown {unknown[0]!r})", names)


def _check_pools(spec: Spec, fail: Any) -> None:
    """``[pools]``: PT only, one cap per corpus, a cap of at least one training sequence."""
    if spec.pools is None:
        return
    if spec.cpt is not None:
        fail("[cpt]", "absent with [pools] (pools apply to PT runs)", "a [cpt] table")
    least = spec.sweep.block_size + 2
    for name, pool in spec.pools.items():
        both = sorted(set(pool.max_tokens) & set(pool.share))
        if both:
            fail(f"[pools.{name}].share.{both[0]}", "absent where max_tokens caps the corpus (one cap)", pool.share)
        for c, t in pool.max_tokens.items():
            if t < least:
                fail(f"[pools.{name}].max_tokens.{c}", f">= block_size + 2 = {least} (one training sequence)", t)


def _cross_checks(spec: Spec, file: str | None) -> None:
    """Checks between keys and of known model sizes (corpora are checked by :func:`mixlaw.probe.sweep.plan`,
    against the prepared data)."""

    def fail(key: str, expected: str, got: Any) -> None:
        raise InputError(f"expected {key} to be {expected}, got {_short(got)}", file=file)

    from mixlaw.probe.model import SIZES

    pt, cpt, sw = spec.pt, spec.cpt, spec.sweep
    bad = [s for s in pt.sizes if s not in SIZES]
    if bad:
        raise InputError(f"unknown sizes {bad}; expected some of {list(SIZES)} at [pt].sizes", file=file)
    if len(set(pt.sizes)) != len(pt.sizes):
        fail("[pt].sizes", "distinct sizes", pt.sizes)
    if sw.eval_sets is not None and len(set(sw.eval_sets)) != len(sw.eval_sets):
        fail("[sweep].eval_sets", "distinct corpora", sw.eval_sets)
    if sw.eval_tokens < sw.block_size + 1:
        fail("[sweep].eval_tokens", f"at least block_size + 1 = {sw.block_size + 1} (one evaluation sequence)",
             sw.eval_tokens)  # fmt: skip
    for name, sec in (("pt", pt), ("cpt", cpt)):
        if sec is None:
            continue
        if sec.tokens is not None and sec.tokens_per_param is not None:
            fail(f"[{name}].tokens", "given without tokens_per_param (one token budget, not two)", sec.tokens)
        if sec.tokens is None and sec.tokens_per_param is None:
            fail(f"[{name}].tokens", "given (or tokens_per_param)", None)
        if isinstance(sec.tokens, dict):
            missing = [s for s in pt.sizes if s not in sec.tokens]
            if missing:
                fail(f"[{name}].tokens", f"a table with an entry for every size (missing {missing})", sec.tokens)
    total = math.fsum(float(w) for w in pt.mixture.values())
    if not pt.mixture or abs(total - 1.0) > 1e-9:
        fail("[pt].mixture", "weights summing to 1", pt.mixture)
    _check_mixtures(spec, fail)
    _check_pools(spec, fail)
    if len(set(map(float, pt.save_at_lr_fractions))) != len(pt.save_at_lr_fractions):
        fail("[pt].save_at_lr_fractions", "distinct fractions", pt.save_at_lr_fractions)
    if cpt is None:
        return
    if len(set(cpt.domains)) != len(cpt.domains):
        fail("[cpt].domains", "distinct corpora", cpt.domains)
    if len(set(map(float, cpt.ratios))) != len(cpt.ratios):
        fail("[cpt].ratios", "distinct ratios", cpt.ratios)
    if cpt.replay in cpt.domains:
        fail("[cpt].replay", f"a corpus other than the domains {cpt.domains} (it fills 1 - R)", cpt.replay)
    if cpt.schedules is not None and cpt.schedule is not None:
        fail("[cpt].schedule", "given without schedules (one of the two)", cpt.schedule)
    m = _PARENT.match(cpt.parent)
    fractions = {float(f) for f in pt.save_at_lr_fractions}
    if m is None:
        fail("[cpt].parent", "'final' or 'lrfrac<f>' for f in [pt].save_at_lr_fractions", cpt.parent)
    elif m.group("f") is not None:
        try:
            f = float(m.group("f"))
        except ValueError:
            f = math.nan
        if f not in fractions or cpt.parent != f"lrfrac{f:g}":
            fail("[cpt].parent", f"one of {['final'] + [f'lrfrac{x:g}' for x in sorted(fractions)]}", cpt.parent)
