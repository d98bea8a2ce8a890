"""The root ``mixlaw`` group: verbs are listed from a static table and imported only when run.

``mixlaw --help`` prints the table's one-line helps without importing any verb module; ``mixlaw VERB ...`` imports
just that verb's module (and so only the libraries it needs).
"""

from __future__ import annotations

import importlib
import re
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

from mixlaw.cli._laws import require_law_choices

__all__ = ["LazyGroup", "VERBS", "ALIASES", "load_verb", "plain_help", "canonical_names"]

#: verb → (module, attribute: a verb function or a typer app, one-line help shown by ``mixlaw --help``)
VERBS: dict[str, tuple[str, str, str]] = {
    "laws": ("mixlaw.cli.engine", "laws_cmd", "List the registered laws with formula and inputs."),
    "fit": (
        "mixlaw.cli.engine",
        "fit_cmd",
        "Fit a registered law robustly (Huber on log residuals, batched multi-start) with optional bootstrap.",
    ),
    "predict": (
        "mixlaw.cli.engine",
        "predict_cmd",
        "Predict with a saved fit at one point or at every row of a table (with per-run MAE / MRE).",
    ),
    "validate": (
        "mixlaw.cli.engine",
        "validate_cmd",
        "Fit on the smaller / earlier runs and report the held-out relative errors (per point and MRE).",
    ),
    "ingest": ("mixlaw.cli.runs", "ingest", "Validate a run log and add it to the RunStore (all or nothing)."),
    "runs": ("mixlaw.cli.runs", "runs", "List the runs of a store (filter with --where), or export its RunTable."),
    "cmr": (
        "mixlaw.cli.cmr",
        "cmr",
        "Largest domain share of the CPT mix that keeps the general loss within tolerance, per model size.",
    ),
    "cpt": ("mixlaw.cli.cpt", "app", "Continual pre-training: predict a plan, optimise it, critical point."),
    "probe": (
        "mixlaw.cli.probe",
        "app",
        "Probe runs: small GPTs pre-trained and continually pre-trained on real corpora.",
    ),
    "corpora": ("mixlaw.cli.probe", "corpora_app", "Probe corpora: fetch, deduplicate, split, tokenise."),
    "mix": ("mixlaw.cli.mix", "app", "Multi-domain mixtures: compare laws on held-out runs, optimise the mixture."),
    "decide": ("mixlaw.cli.decide", "decide_cmd", "Run a registered decision on a run table (`mixlaw decisions`)."),
    "decisions": ("mixlaw.cli.decide", "decisions_cmd", "List the registered decisions and their options."),
    "plan": (
        "mixlaw.cli.plan",
        "plan_cmd",
        "Which probe runs to buy for a compute budget: allocate, simulate, write a sweep.",
    ),
}


def load_verb(name: str) -> Any:
    """Import a verb's module and build its command (a group for sub-apps)."""
    module, attr, _ = VERBS[name]
    obj = getattr(importlib.import_module(module), attr)
    if not isinstance(obj, typer.Typer):
        single = typer.Typer(add_completion=False)
        single.command(name)(obj)
        obj = single
    cmd = typer.main.get_command(obj)
    cmd.name = name
    plain_help(cmd)
    canonical_names(cmd)
    require_law_choices(cmd)
    if name in CONFIG_VERBS:
        add_config_option(cmd)
    return cmd


#: Verbs whose long invocations can come from a file: ``mixlaw mix optimize --config mix.toml``.
CONFIG_VERBS = ("cmr", "mix", "plan")


def add_config_option(cmd: Any) -> None:
    """Give a command (and each sub-command) ``--config FILE.toml``: the file's keys are the verb's option names
    (``target = ["loss_a", "loss_b"]``, ``final = true``, ``weights = {loss_a = 0.5, loss_b = 0.5}`` for
    ``NAME=VALUE`` options, ``runs = "runs.csv"`` for the positional argument); options on the command line win."""
    subs = getattr(cmd, "commands", None)
    if subs:
        for sub in subs.values():
            add_config_option(sub)
        return
    if any("--config" in getattr(p, "opts", ()) for p in cmd.params):
        return
    cmd.params.insert(0, _config_param())


def _config_holder(
    config: Annotated[
        str | None,
        typer.Option(
            "--config",
            is_eager=True,
            expose_value=False,
            callback=lambda ctx, param, value: _load_config(ctx, param, value),
            help="TOML file of this verb's options (keys: option names); the command line wins.",
        ),
    ] = None,
) -> None:
    """Holder of the --config option (typer builds the parameter with its own classes)."""


def _config_param() -> Any:
    """A fresh ``--config`` parameter."""
    one = typer.Typer(add_completion=False)
    one.command()(_config_holder)
    return typer.main.get_command(one).params[0]


def _load_config(ctx: Any, param: Any, value: str | None) -> None:
    """Read ``--config`` into the context's ``default_map`` (each key checked against the verb's options)."""
    if value is None:
        return
    from mixlaw.cli.config_schema import read_config
    from mixlaw.errors import InputError

    names: dict[str, Any] = {}
    for q in ctx.command.params:
        if q.name in (None, "config"):
            continue
        names[q.name] = q
        for o in getattr(q, "opts", ()):
            names.setdefault(o.lstrip("-").replace("-", "_"), q)
    try:  # the file's schema: known keys, the option's type, finite numbers, no duplicates (one line)
        defaults = read_config(value, names)
    except InputError as exc:
        raise typer.BadParameter(str(exc), param=param) from None
    ctx.default_map = {**(ctx.default_map or {}), **defaults}


#: One name per concept across verbs: old spelling -> the name every verb shows. The old spelling keeps working
#: (a hidden alias), so scripts written against it still run.
ALIASES: dict[str, str] = {"--random-state": "--seed", "--loss-column": "--target"}
_ALIASED: dict[type, type] = {}


def _aliased_class(cls: type) -> type:
    """A subclass of an option class whose help shows only the canonical names (not the hidden aliases)."""
    if cls not in _ALIASED:
        base_help = cls.get_help_record  # type: ignore[attr-defined]

        def get_help_record(self: Any, ctx: Any) -> Any:
            saved = self.opts
            self.opts = [o for o in saved if o not in ALIASES]
            try:
                return base_help(self, ctx)
            finally:
                self.opts = saved

        new = type(f"Aliased{cls.__name__}", (cls,), {"get_help_record": get_help_record})
        _ALIASED[cls] = new
    return _ALIASED[cls]


def canonical_names(cmd: Any) -> None:
    """Give every option spelled the old way (:data:`ALIASES`) its canonical name, keeping the old one as a hidden
    alias (``--random-state`` -> ``--seed``; ``--loss-column`` -> ``--target``), in a command and its
    sub-commands. An option whose verb already has the canonical name keeps its own."""
    taken = {o for p in getattr(cmd, "params", []) for o in getattr(p, "opts", [])}
    for p in getattr(cmd, "params", []):
        olds = [o for o in getattr(p, "opts", []) if o in ALIASES and ALIASES[o] not in taken]
        if olds:
            p.opts = [ALIASES[olds[0]], *p.opts]
            p.__class__ = _aliased_class(type(p))
    for sub in getattr(cmd, "commands", {}).values():
        canonical_names(sub)


def plain_help(cmd: Any) -> None:
    """Plain click help for a command and its sub-commands: options in full (no ``…``-truncated names), flags
    without a ``<bool>`` metavar, help wrapped at word boundaries to the terminal's width (80 columns readable)."""
    if hasattr(cmd, "rich_markup_mode"):
        cmd.rich_markup_mode = None
    if getattr(cmd, "help", None):  # docstrings are RST: ``--level`` reads --level in a terminal
        cmd.help = _RST_LITERAL.sub(r"\1", cmd.help)
    for p in getattr(cmd, "params", []):
        if getattr(p, "help", None):
            p.help = _RST_LITERAL.sub(r"\1", p.help)
    for sub in getattr(cmd, "commands", {}).values():
        if not getattr(sub, "short_help", None) and getattr(sub, "help", None):
            # a group's listing shows each command's first sentence whole, wrapped (click cut it to "for the...")
            first = _RST_LITERAL.sub(r"\1", sub.help).strip().split("\n\n")[0]
            sub.short_help = " ".join(first.split(". ")[0].split()).rstrip(".") + "."
        plain_help(sub)


_RST_LITERAL = re.compile(r"``(.+?)``", re.S)


class LazyGroup(TyperGroup):
    """A typer group whose verbs in :data:`VERBS` are loaded on first use."""

    _listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        eager = super().list_commands(ctx)
        return [*eager, *(n for n in VERBS if n not in eager)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is not None or cmd_name not in VERBS:
            return cmd
        if self._listing:  # the root help lists verbs from the table: import nothing
            short = VERBS[cmd_name][2]
            return TyperCommand(cmd_name, help=short, short_help=short)
        cmd = load_verb(cmd_name)
        self.add_command(cmd, cmd_name)
        return cmd

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False
