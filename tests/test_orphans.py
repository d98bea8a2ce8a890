"""Pool workers of a sweep exit when their parent dies (killing only the parent used to leave orphans running)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

PARENT = textwrap.dedent(
    """
    import multiprocessing as mp, os, sys, time
    from concurrent.futures import ProcessPoolExecutor
    from mixlaw.probe.orphans import exit_with_parent

    if __name__ == "__main__":
        with ProcessPoolExecutor(2, mp_context=mp.get_context("spawn"), initializer=exit_with_parent,
                                 initargs=(os.getpid(),)) as pool:
            futs = [pool.submit(time.sleep, 600) for _ in range(2)]
            time.sleep(0.5)
            print(" ".join(str(p) for p in pool._processes), flush=True)
            time.sleep(600)
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by init) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_pool_workers_exit_when_the_parent_is_killed(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    workers = [int(p) for p in proc.stdout.readline().split()]
    assert len(workers) == 2 and all(_alive(p) for p in workers)
    proc.send_signal(signal.SIGKILL)  # only the parent
    proc.wait()
    proc.stdout.close()
    deadline = time.monotonic() + 60  # a liveness bound, not a timing assertion: the watchdog polls every 0.5 s
    while any(_alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [p for p in workers if _alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, f"orphaned workers {left}"
