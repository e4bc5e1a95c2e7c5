"""Spies shared by the tests: what a public call decided inside, recorded from the function that decides it.

``solved_degrees``: each query's local-fit degree, from :func:`nadaraya.local.fit.finish_local` (the
solve every local fit's prediction goes through). ``cells_served``: the share of queries the
truncated backend's dense cells served, from ``nadaraya.backends._truncated_cells.sums``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pytest

from nadaraya.backends import truncated
from nadaraya.local import fit as _fit


@contextlib.contextmanager
def solved_degrees(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[np.ndarray]]:
    """Within the block, each local fit's solve appends the degree each of its queries used."""
    seen: list[np.ndarray] = []
    real = _fit.finish_local

    def spy(*a, **k):  # type: ignore[no-untyped-def]
        fit = real(*a, **k)
        seen.append(np.array(fit.degree))
        return fit

    with monkeypatch.context() as mp:
        mp.setattr(_fit, "finish_local", spy)
        yield seen


def cells_served(monkeypatch: pytest.MonkeyPatch, weighted: bool = False) -> list[float]:
    """From now on (the test's ``monkeypatch``), each truncated call's share of queries that the dense
    cells served is appended to the list returned; ``weighted``: only the calls with sample weights."""
    shares: list[float] = []
    real = truncated._cells.sums

    def spy(*args, **kw):  # type: ignore[no-untyped-def]
        done = real(*args, **kw)
        if not weighted or kw.get("sw") is not None:
            shares.append(float(done.mean()) if done.size else 0.0)
        return done

    monkeypatch.setattr(truncated._cells, "sums", spy)
    return shares
