"""``mixlaw`` command line: a thin typer layer over :mod:`mixlaw.api`, one module per verb group.

- :mod:`mixlaw.cli.engine`: ``laws``, ``fit``, ``predict``, ``validate``;
- :mod:`mixlaw.cli.runs`: ``ingest``, ``runs``;
- :mod:`mixlaw.cli.probe`: ``probe run|status|plan``, ``corpora prepare``;
- ``cmr`` and ``cpt`` are mounted from :mod:`mixlaw.cli.cmr` and :mod:`mixlaw.cli.cpt`.

Verbs are imported only when run (:class:`mixlaw.cli._group.LazyGroup`), and every verb imports its heavy
libraries inside, so ``mixlaw --help`` stays fast. User errors exit 1 with one line on stderr and no traceback
(:func:`mixlaw.cli._common.verb`); ``--json`` prints one JSON object for machines.
"""

from __future__ import annotations

import typer

from mixlaw.cli._group import LazyGroup

__all__ = ["app", "main"]

app = typer.Typer(
    name="mixlaw",
    cls=LazyGroup,
    help="Scaling laws for data mixtures and continual pre-training: fit probe runs, decide mixtures, with intervals.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,  # plain click help: full option names, no <bool> metavars, word-wrapped at 80 columns
)


def _print_version(value: bool) -> None:
    if value:
        from mixlaw._provenance import package_version

        typer.echo(f"mixlaw {package_version()}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the mixlaw version and exit."
    ),
) -> None:
    """Scaling laws for data mixtures and continual pre-training: fit probe runs, decide mixtures, with intervals."""


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
