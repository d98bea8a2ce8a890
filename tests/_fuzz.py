"""Shared pieces of the fuzz harness (``tests/test_fuzz_*.py``): the two profiles and a tally of outcomes.

Fast profile (default, CI): seeded (``derandomize``), a few thousand cases over all fuzz tests, about a minute
on a loaded 2-core machine. Long profile: ``pytest -m fuzz_long`` (tens of thousands of cases, seeded too).
With ``MIXLAW_FUZZ_REPORT=path.json`` every fuzz test adds its outcome counts (cases, clean errors, accepted,
tracebacks, hangs, silent acceptances) to that file; ``docs/reliability.md`` quotes the long profile's figures.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings

from mixlaw.errors import InputError

FAST = settings(
    max_examples=200,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
LONG = settings(
    max_examples=2000,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
#: A case using more CPU time than this counts as a hang (and fails the test). CPU time, never wall time: the shared
#: machines run many jobs at once (under a load of 10 a 2-second fit takes 20 s of wall time). The wall time of the
#: slowest case is still tallied ("max ms") for the record.
HANG_S = 20.0

_TALLY: dict[str, Counter[str]] = {}


def scaled(profile: settings, factor: float) -> settings:
    """``profile`` with ``factor`` times its examples (cheap tests run more cases, expensive ones fewer)."""
    return settings(profile, max_examples=max(10, int(profile.max_examples * factor)))


@contextmanager
def outcome(name: str, *, must_fail: bool = False) -> Iterator[Callable[[str], None]]:
    """Count one case of fuzz test ``name``: an :class:`InputError` is a clean error (its message must be one
    bounded line); any other exception propagates (a traceback fails the test); with ``must_fail`` a case that
    raises nothing is a silent acceptance of invalid data (and fails the test). The yielded function records
    extra labels (e.g. the format)."""
    tally = _TALLY.setdefault(name, Counter())
    labels: list[str] = []
    t0, c0 = time.perf_counter(), time.process_time()
    tally["cases"] += 1
    try:
        yield labels.append
    except InputError as exc:
        msg = str(exc)
        assert "\n" not in msg and len(msg) < 2000, msg[:3000]
        tally["clean errors"] += 1
        for lab in labels:
            tally[f"{lab}: clean errors"] += 1
    except BaseException:
        tally["tracebacks"] += 1
        _flush()
        raise
    else:
        if must_fail:
            tally["silent acceptances"] += 1
            _flush()
            raise AssertionError(f"{name}: invalid input accepted ({labels})")
        tally["accepted"] += 1
    finally:
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        tally["max ms"] = max(tally["max ms"], int(dt * 1000))
        tally["max cpu ms"] = max(tally["max cpu ms"], int(cpu * 1000))
        for lab in labels:
            tally[f"{lab}: cases"] += 1
        if cpu > HANG_S:  # CPU time: a loaded machine's wall clock says nothing about this code
            tally["hangs"] += 1
            _flush()
            raise AssertionError(f"{name}: a case took {dt:.0f} s ({cpu:.0f} s CPU) ({labels})")


def _flush() -> None:
    path = os.environ.get("MIXLAW_FUZZ_REPORT")
    if not path:
        return
    p = Path(path)
    old: dict[str, Any] = json.loads(p.read_text()) if p.exists() else {}
    for name, c in _TALLY.items():
        old[name] = dict(c)
    p.write_text(json.dumps(old, indent=1, sort_keys=True))


def flush_report() -> None:
    """Write the tally (called at the end of each fuzz module)."""
    _flush()
