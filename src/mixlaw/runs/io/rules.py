"""The automatic rules that turn logged metric names (W&B, TensorBoard, Hugging Face Trainer, Lightning) into
RunTable columns, the mapping of a whole set of names with explicit ``--map`` entries first, and the "closest
names" hint of every "not found" error.

The families recognised (case-insensitive on the keywords; eval-set names keep their case) are listed in
:func:`canonical_metric_name` and in ``docs/runs.md`` ("Names people log").
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence

from mixlaw.errors import InputError

__all__ = ["canonical_metric_name", "map_metric_names", "closest_names", "closest_hint"]

_GENERIC_PARTS = {"eval", "evals", "evaluation", "val", "valid", "validation", "test", "metrics", "charts"}
_LOSS_WORDS = {"loss", "crossentropyloss", "cross_entropy", "cross_entropy_loss", "ce_loss", "xent", "nll_loss"}
_SET_SUFFIX = re.compile(r"[-_.](validation|valid|val|eval)$", flags=re.IGNORECASE)
_LR_NAMES = {"lr", "learning_rate", "learning-rate", "learningrate"}
_LR_GROUP = re.compile(r"^(?:lr|learning_rate)[-_]?(?:group|pg|param_group)(?P<g>\d+)$")
_GROUP_PART = re.compile(r"^(?:group|pg|param_group)(?P<g>\d+)$")
_TOKEN_NAMES = {
    "tokens", "num_tokens", "n_tokens", "tokens_seen", "consumed_tokens", "total_tokens", "num_input_tokens_seen",
    "total_tokens_seen", "tokens_processed", "train_tokens", "seen_tokens",
}  # fmt: skip
_STEP_NAMES = {
    "_step", "step", "global_step", "trainer/global_step", "train/global_step", "steps", "iteration", "train/step",
}  # fmt: skip
_PARAM_NAMES = {"model_params", "n_params", "num_params", "num_parameters", "n_parameters"}
_TOTAL_PARAM_NAMES = {"total_params", "num_total_params", "n_params_total", "total_parameters"}
_WEIGHT_PATH = re.compile(
    r"^(?:data|mixture|mix|weights|domain_weights|domain_weight|sampling)/(?P<d>.+?)(?:[_-](?:frac|weight|ratio|share))?$",
    flags=re.IGNORECASE,
)
_DROP_NAMES = {"_runtime", "_timestamp", "_wandb", "epoch", "trainer/epoch", "train/epoch"}
_IDENTITY_NAMES = {"run_id"}  # columns a logged metric may not take over


def _sanitize(s: str) -> str:
    out = re.sub(r"[^A-Za-z0-9_.+\-]", "_", s).strip("_")
    return out or "_"


def _unused(base: str, taken: set[str]) -> str:
    """``base``, else ``raw_<base>``, else ``raw_<base>_2``, ``_3``, …: the first not in ``taken``."""
    if base not in taken:
        return base
    name, k = "raw_" + base, 2
    while name in taken:
        name, k = f"raw_{base}_{k}", k + 1
    return name


def _set_name(parts: Sequence[str]) -> str:
    """An eval-set name from the non-generic parts of a metric path (``c4_en-validation`` -> ``c4_en``)."""
    cleaned = []
    for p in parts:
        q = _SET_SUFFIX.sub("", p) or p
        cleaned.append(q)
    return _sanitize("_".join(cleaned))


def _loss_name(rest: Sequence[str]) -> str:
    return "loss" if not rest else "loss_" + _set_name(rest)


def canonical_metric_name(name: str) -> str | None:
    """Canonical RunTable column for a logged metric name; ``None`` = not stored.

    Rules (case-insensitive on the keywords, eval-set names keep their case):

    - ``_step``, ``step``, ``global_step``, ``trainer/global_step``, ``train/global_step``, ``iteration`` ->
      ``step``; ``_runtime``, ``_timestamp``, ``_wandb*``, ``system/*``, ``epoch`` -> dropped;
    - a ``/``-path with a loss part (``loss``, ``CrossEntropyLoss``, ``cross_entropy``, ``ce_loss``, ``xent``): the
      other parts, minus generic ones (``eval``, ``val``, ``valid``, ``validation``, ``test``, ``metrics``) and
      minus a ``-validation`` / ``_val`` suffix, name the eval set: ``eval/code/loss`` -> ``loss_code``,
      ``eval/c4_en-validation/CrossEntropyLoss`` -> ``loss_c4_en``, ``loss/web`` -> ``loss_web``,
      ``train/loss`` -> ``loss_train``, ``val/loss`` -> ``loss``;
    - a last part ``<set>_loss`` or ``loss_<set>``: ``eval/general_loss`` -> ``loss_general``, ``val_loss`` /
      ``eval_loss`` -> ``loss``, ``eval_code_loss`` (Hugging Face, several eval sets) -> ``loss_code``,
      ``train_loss`` -> ``loss_train`` (a Lightning ``_step`` suffix is ignored: ``train_loss_step``);
    - last part ``lr``, ``learning_rate``, ``lr-<optimizer>``, ``learning_rate_group0``, ``lr-AdamW/pg1`` ->
      ``lr`` (other parameter groups keep their own name);
    - ``tokens``, ``num_tokens``, ``tokens_seen``, ``total_tokens`` (``throughput/total_tokens``),
      ``num_input_tokens_seen`` -> ``tokens``; ``model_params``, ``num_params``, ``num_parameters`` -> ``n_params``;
      ``total_params`` -> ``n_params_total``; ``data/<domain>_frac``, ``mixture/<domain>``, ``weights/<domain>``
      -> ``w_<domain>``;
    - anything else: characters outside ``[A-Za-z0-9_.+-]`` become ``_`` (``train/grad_norm`` ->
      ``train_grad_norm``).

    A metric whose name would be a run's identity (``run_id``) is namespaced as ``metric_run_id``: a logged
    scalar must never rename runs. An explicit ``--map canonical=foreign`` overrides every rule.
    """
    n = name.strip()
    low = n.lower()
    if low in _STEP_NAMES:
        return "step"
    if _sanitize(n) in _IDENTITY_NAMES:
        return "metric_" + _sanitize(n)
    if low in _DROP_NAMES or low.startswith("_wandb") or low.startswith("system/"):
        return None
    parts = [p for p in n.split("/") if p]
    lparts = [p.lower() for p in parts]
    if any(lp in _LOSS_WORDS for lp in lparts):
        rest = [p for p, lp in zip(parts, lparts, strict=True) if lp not in _LOSS_WORDS and lp not in _GENERIC_PARTS]
        return _loss_name(rest)
    last = parts[-1] if parts else n
    llast = last.lower()
    stem = re.sub(r"[_\-]step$", "", last, flags=re.IGNORECASE) if re.search(r"loss[_\-]step$", llast) else last
    others = [p for p, lp in zip(parts[:-1], lparts[:-1], strict=True) if lp not in _GENERIC_PARTS]
    m = re.match(r"^(.*?)[_\-]loss$", stem, flags=re.IGNORECASE)
    if m:
        return _loss_name(others + _strip_generic(m.group(1)))
    m = re.match(r"^loss[_\-](.+)$", stem, flags=re.IGNORECASE)
    if m and len(parts) >= 2:
        return _loss_name(others + _strip_generic(m.group(1)))
    if llast in _LR_NAMES or re.match(r"^lr[-_]", llast) or _LR_GROUP.match(llast):
        m = _LR_GROUP.match(llast)
        return "lr" if m is None or int(m.group("g")) == 0 else _sanitize(n)
    if len(parts) >= 2 and _GROUP_PART.match(llast) and parts[-2].lower().split("-")[0] in ("lr", "learning_rate"):
        gm = _GROUP_PART.match(llast)
        g = -1 if gm is None else int(gm.group("g"))
        first = g == 1 if llast.startswith("pg") else g == 0  # Lightning numbers pg1, pg2, ...; optimisers group0
        return "lr" if first else _sanitize(n)
    if llast in _TOKEN_NAMES:
        return "tokens"
    if low in _PARAM_NAMES or (len(parts) >= 2 and llast in _PARAM_NAMES):
        return "n_params"
    if llast in _TOTAL_PARAM_NAMES:
        return "n_params_total"
    wm = _WEIGHT_PATH.match(n)
    if wm is not None and len(parts) == 2:
        return "w_" + _sanitize(wm.group("d"))
    return _sanitize(n)


def _strip_generic(prefix: str) -> list[str]:
    """``eval_code`` -> ``["code"]``, ``val`` -> ``[]``: a leading generic word of a ``<set>_loss`` prefix goes."""
    if not prefix or prefix.lower() in _GENERIC_PARTS:
        return []
    head, sep, tail = prefix.partition("_")
    if sep and head.lower() in _GENERIC_PARTS and tail:
        return [tail]
    return [prefix]


# ---------------------------------------------------------------------------------------------- hints


def closest_names(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` candidates closest to ``name`` (difflib ratio, case-insensitive; substrings first)."""
    cands = list(dict.fromkeys(str(c) for c in candidates))
    low = name.lower()
    by_low: dict[str, str] = {}
    for c in cands:
        by_low.setdefault(c.lower(), c)
    # difflib's own cutoff: 0.45 offered 'loss_train' for a missing 'replay_ratio' (ratio 0.45)
    hits = [by_low[c] for c in difflib.get_close_matches(low, list(by_low), n=n, cutoff=0.6)]
    core = re.sub(r"^loss_?", "", low)
    if core:
        for c in cands:
            if core in c.lower() and c not in hits:
                hits.append(c)
    return hits[:n]


def closest_hint(name: str, candidates: Iterable[str], sources: Mapping[str, str] | None = None) -> str:
    """``"; closest: 'a', 'b' (logged as 'eval/x/loss')"`` for a "not found" message (empty when none is close).

    ``sources`` maps a column to the raw name it was read from, so the hint shows what the log called it and a
    raw name that matched no rule is found by its own spelling too."""
    sources = dict(sources or {})
    cands = list(candidates)
    pool = cands + [raw for raw in sources.values() if raw not in cands]
    hits = closest_names(name, pool)
    if not hits:
        return ""
    raw_of = {raw: col for col, raw in sources.items()}
    cells = []
    for h in hits:
        if h in raw_of and raw_of[h] != h:
            cells.append(f"{raw_of[h]!r} (logged as {h!r})")
        elif h in sources and sources[h] != h:
            cells.append(f"{h!r} (logged as {sources[h]!r})")
        else:
            cells.append(repr(h))
    return "; closest: " + ", ".join(dict.fromkeys(cells))


# ---------------------------------------------------------------------------------------------- mapping


def map_metric_names(
    foreign: Sequence[str],
    column_map: Mapping[str, str],
    name: str,
    drop: Iterable[str] = (),
    *,
    rules: Mapping[str, str | None] | None = None,
) -> dict[str, str | None]:
    """``{foreign: canonical or None}``: explicit ``--map`` entries first, then the rules.

    An explicit ``--map canonical=foreign`` always wins: another name that the rules would map to the same
    canonical column keeps its own (sanitised) name instead, so ``--map step=_step`` beside a
    ``trainer/global_step`` metric just works. A name in ``drop`` (raw or canonical spelling) is not stored. Two
    names the rules alone map to one column are an error that names both and the ``--map`` / ``--drop`` that
    settles it. ``rules`` are a format's own names, applied before the general rules (Hugging Face's ``loss`` is
    the training loss).
    """
    inv = {v: k for k, v in column_map.items()}
    missing = [f for f in column_map.values() if f not in foreign]
    if missing:
        f = missing[0]
        hint = closest_hint(f, foreign)
        raise InputError(f"expected metric {f!r} (from --map {inv[f]}={f}), got no such metric{hint} in {name}")
    dropped = set(drop)
    explicit = set(column_map)
    out: dict[str, str | None] = {}
    owner: dict[str, str] = {}
    for f in foreign:
        if f in inv:
            out[f] = inv[f]
            owner[inv[f]] = f
    for f in foreign:
        if f in inv:
            continue
        if f in dropped:
            out[f] = None
            continue
        canon: str | None = rules[f] if rules and f in rules else canonical_metric_name(f)
        if canon is not None and canon in explicit:
            # the explicit mapping owns the canonical name: keep this one under its own, made unique (``_step`` and
            # ``step`` both sanitise to ``step``: the second becomes ``raw_step_2``, never a "pick one" error)
            canon = _unused(_sanitize(f), explicit | owner.keys())
        out[f] = canon
        if canon is None:
            continue
        if canon in dropped:
            out[f] = None
            continue
        if canon in owner:
            raise InputError(
                f"expected one metric per column, got {owner[canon]!r} and {f!r} both mapping to {canon!r} "
                f"(pick one with --map {canon}={owner[canon]}, or --drop {f}) in {name}"
            )
        owner[canon] = f
    return out


#: The old private name (tests and readers import it).
_canonical_columns = map_metric_names
