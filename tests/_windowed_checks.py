"""Checks shared by the windowed moment tests: every entry against the reference to its natural size.

``compare`` holds each sum of ``windowed.partials`` (weights, values and every moment) within
``rtol`` times its natural size ``N = sum |w| |u|^j [|v|]`` of the reference backend's, on every
query; ``spy_pair_rows`` counts the queries each call leaves to the 1-D pair-by-pair loop.
"""

from __future__ import annotations

import numpy as np

from nadaraya._support import jit as _jit
from nadaraya.backends import _windowed_moments, reference, windowed
from nadaraya.kernels import get


def natural(q, k, v, kernel, h, sw, exclude, degree):
    """The natural sizes, written plainly: ``[sum |w|, |w| @ |v|, sum |w| u^j ..., |w| u^j @ |v| ...]``."""
    q, k = np.asarray(q, dtype=np.float64)[:, 0], np.asarray(k, dtype=np.float64)[:, 0]
    w = np.abs(get(kernel).profile((q[:, None] - k[None, :]) / h))
    if sw is not None:
        w = w * sw[None, :]
    if exclude is not None:
        rows = np.nonzero(exclude >= 0)[0]
        w[rows, exclude[rows]] = 0.0
    u = np.abs(k[None, :] - q[:, None])
    av = np.abs(np.asarray(v, dtype=np.float64))
    return ([w.sum(axis=1), w @ av] + [(w * u**j).sum(axis=1)[:, None] for j in range(1, 2 * degree + 1)]
            + [(w * u**j) @ av for j in range(1, degree + 1)])


def compare(q, k, v, kernel, h, degree, sw=None, exclude=None, rtol=1e-12):
    """``windowed.partials`` against the reference, every field and query within ``rtol`` of its size."""
    kw = dict(kernel=get(kernel), bandwidth=np.array([h]), sample_weight=sw, exclude=exclude, moments=degree)
    ref = reference.partials(q, k, v, **kw)
    got = windowed.partials(q, k, v, **kw)
    assert all(a.dtype == q.dtype for a in (got.weight, got.value, *got.moments))
    pairs = zip((got.weight, got.value, *got.moments), (ref.weight, ref.value, *ref.moments),
                natural(q, k, v, kernel, h, sw, exclude, degree))
    for j, (a, b, n) in enumerate(pairs):
        bad = np.abs(a.astype(float) - b.astype(float)).reshape(n.shape) > rtol * n + 1e-300
        assert not bad.any(), f"field {j}: queries {np.argwhere(bad)[:3, 0].tolist()}"
    return got


def spy_pair_rows(monkeypatch) -> list[int]:
    """A list that gets the number of queries of each call of the 1-D pair-by-pair loop."""
    seen: list[int] = []
    real = _jit.run_ranges

    def spy(task, args, m, outputs, *a, **kw):
        if task is _windowed_moments._one_d_loop:
            seen.append(m)
        return real(task, args, m, outputs, *a, **kw)

    monkeypatch.setattr(_jit, "run_ranges", spy)
    return seen


def sorted_data(rng, n, origin=0.0, p=2, shift=0.0):
    """Sorted keys on ``origin + U(0, 1)`` and ``p`` noisy value columns of a sine plus ``shift``."""
    k = origin + np.sort(rng.uniform(0.0, 1.0, n))[:, None]
    v = np.sin(6.0 * k[:, :1] - origin) + rng.normal(0.0, 0.3, (n, p)) + shift
    return k, v
