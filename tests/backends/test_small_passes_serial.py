"""Small passes of the windowed and taylor backends and of the closed-form local solves stay on
the calling thread (``SERIAL_WORK``); large ones use the shared pool, with the same sums."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import numba
import numpy as np
import pytest

import nadaraya
import nadaraya._support.jit as jit
from nadaraya import backends
from nadaraya.kernels import get as get_kernel


class _SpyPool:
    """Stands in for the shared thread pool: counts the tasks handed to it and runs them here."""

    def __init__(self) -> None:
        self.tasks = 0

    def submit(self, fn: Any, *args: Any) -> Future:
        self.tasks += 1
        done: Future = Future()
        done.set_result(fn(*args))
        return done


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> _SpyPool:
    pool = _SpyPool()
    monkeypatch.setattr(jit, "_POOL", (pool, 1024))
    return pool


@pytest.fixture
def two_threads(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Two threads for the pool: numba's own where it has them; else the pool's rule is told so
    (the spy runs every task on the calling thread either way)."""
    if numba.config.NUMBA_NUM_THREADS < 2:
        threads = [2]  # what the pool's rule and threads_for read and set
        shim = SimpleNamespace(get_num_threads=lambda: threads[0],
                               set_num_threads=lambda k: threads.__setitem__(0, k))
        monkeypatch.setattr(jit, "numba", shim)
        yield
        return
    old = numba.get_num_threads()
    numba.set_num_threads(2)
    yield
    numba.set_num_threads(old)


def _calls(n: int, seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 1.0, (n, 1))
    v = np.column_stack([np.sin(6 * x[:, 0]), x[:, 0] ** 2])
    x2 = np.hstack([x, x[::-1]])
    return {
        "windowed": lambda: backends.compute("windowed", x, x, v, kernel=get_kernel("epanechnikov"),
                                             bandwidth=np.array([0.05]), exclude=np.arange(n)),
        "taylor": lambda: backends.compute("taylor", x, x, v, kernel=get_kernel("gaussian"),
                                           bandwidth=np.array([0.01]), tol=1e-8),
        "taylor 2-D": lambda: backends.compute("taylor", x2, x2, v, kernel=get_kernel("gaussian"),
                                               bandwidth=np.array([0.05, 0.05]), tol=1e-8),
        "local linear": lambda: nadaraya.pool(x, x, v, bandwidth=0.05, degree=1),
        "local quadratic": lambda: nadaraya.pool(x, x, v, bandwidth=0.05, degree=2),
        "windowed moments": lambda: backends.compute("windowed", x, x, v, kernel=get_kernel("tricube"),
                                                     bandwidth=np.array([0.05]), moments=1),
    }


@pytest.mark.parametrize("name", ["windowed", "taylor", "taylor 2-D", "local linear", "local quadratic",
                                  "windowed moments"])
def test_a_tiny_call_does_not_enter_the_pool(name: str, spy: _SpyPool, two_threads: Any) -> None:
    _calls(300)[name]()
    assert spy.tasks == 0


@pytest.mark.parametrize("name", ["windowed", "taylor", "windowed moments"])
def test_a_large_call_uses_the_pool_and_gives_the_serial_sums(name: str, spy: _SpyPool,
                                                               two_threads: Any) -> None:
    call = _calls(30_000)[name]
    wide = call()
    assert spy.tasks > 0  # the spy sees the pool's tasks: the tiny calls' zero above means something
    numba.set_num_threads(1)
    one = call()
    for a, b in zip((wide.weight, wide.value, *wide.moments), (one.weight, one.value, *one.moments),
                    strict=True):
        np.testing.assert_array_equal(a, b)
