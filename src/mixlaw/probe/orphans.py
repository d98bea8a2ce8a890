"""Pool workers that exit when their parent dies (no orphaned sweep workers).

Killing only the parent of a ``--workers 2`` sweep used to leave its pool workers running (10 orphans of about
260 MB, still training 90 minutes later). Every worker of a sweep pool runs :func:`exit_with_parent` as its
initializer: a daemon thread that checks every :data:`POLL_S` seconds whether the process that started the pool is
still its parent, and ends the worker (``os._exit``) when it is not. A run cut off this way is resumed from its
last checkpoint by the next sweep, as after any kill (its lease expires; :mod:`mixlaw.probe.execute`).
"""

from __future__ import annotations

import os
import threading
import time

__all__ = ["POLL_S", "exit_with_parent"]

POLL_S = 0.5
"""Seconds between two checks of the parent."""


def exit_with_parent(parent_pid: int) -> None:
    """Start the watchdog of a pool worker whose parent is ``parent_pid`` (call it as the pool's initializer)."""

    def watch() -> None:
        while True:
            if os.getppid() != parent_pid:  # re-parented: the sweep process is gone
                os._exit(3)
            time.sleep(POLL_S)

    if os.getppid() != parent_pid:
        os._exit(3)
    threading.Thread(target=watch, name="mixlaw-parent-watch", daemon=True).start()
