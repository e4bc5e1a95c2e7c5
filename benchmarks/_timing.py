"""Timing shared by the benchmark scripts: best of a few runs, one run for slow calls."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def timed(fn: Callable[[], Any], repeat: int = 3, slow: float = 1.0) -> tuple[float, Any]:
    """Best wall time of ``repeat`` calls of ``fn`` and the last result.

    Stops after the first call that takes more than ``slow`` seconds: repeating a long call buys
    little accuracy and costs a lot of benchmark time.

    Examples
    --------
    >>> seconds, out = timed(lambda: sum(range(10)))
    >>> out, seconds >= 0
    (45, True)
    """
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t
        best = min(best, dt)
        if dt > slow:
            break
    return best, out
