"""mix optimize --report compares each target with the law the decision kept for it (cli.mix._report_models)."""

from __future__ import annotations

from mixlaw.cli.mix import _report_models


def test_report_models_follow_camel_reduction() -> None:
    out = {"law": "camel", "targets": ["a", "b", "c"], "camel_k": {"a": {"k": 1}, "b": {"k": 2}, "c": {"k": 1}}}
    assert _report_models(out) == {"camel:k=1": ["a", "c"], "camel:k=2": ["b"]}
    assert _report_models({"law": "mixture_joint", "targets": ["a", "b"]}) == {"mixture_joint": ["a", "b"]}
