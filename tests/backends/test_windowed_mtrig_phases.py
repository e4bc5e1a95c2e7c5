"""The cosine's key phases: computed once per key about its own cell, turned by quarter turns.

``_phase`` must give ``cos``, ``sin`` of ``pi t / 2`` for the ``t`` the power sums use, within an
ulp or two, whichever cell's table the key is in and however the centres round; keys far from
the origin (where the centres' rounding is large against ``h``, and past ``2^-20`` the plain
``cos`` serves) keep every moment within 1e-12 of its natural size against the reference.
"""

from __future__ import annotations

import numpy as np
import pytest

from _windowed_checks import compare
from nadaraya.backends._windowed_mtrig import _phase, trig_moments
from nadaraya.kernels import get


@pytest.mark.parametrize("m", [-1, 0, 1])
@pytest.mark.parametrize("d", [0.0, 3e-16, 1e-9, 1.2e-7, 9e-7, 2e-6, 1e-3, 0.7])
def test_phase_turns_by_quarter_turns(m, d):
    rng = np.random.default_rng(int(1e9 * d) + m + 1)
    own = rng.uniform(-0.5, 0.5, 50)
    own[:3] = (-0.5, 0.0, 0.5)
    kt, kc, ks = own, np.cos(0.5 * np.pi * own), np.sin(0.5 * np.pi * own)
    for i in range(own.size):
        t = (own[i] + d) + m
        c, s = _phase(t, m, i, kt, kc, ks)
        assert abs(c - np.cos(0.5 * np.pi * t)) <= 4e-16, (i, t)
        assert abs(s - np.sin(0.5 * np.pi * t)) <= 4e-16, (i, t)


@pytest.mark.parametrize(("origin", "h"), [(1e6, 3e-4), (1e6, 2e-5), (-3e7, 1e-3), (0.0, 0.01)])
def test_far_keys_small_bandwidths_every_query(origin, h):
    """Centres whose rounding against ``h`` is below and above ``2^-20`` (1e6 with 2e-5: about
    6e-6), and near 0; degree 1, sample weights, leave-one-out for some queries."""
    rng = np.random.default_rng(3)
    n, span = 1500, 60 * h
    k = origin + np.sort(rng.uniform(0.0, span, n))
    q = np.concatenate([k[::5], origin + rng.uniform(-h, span + h, 100)])
    v = rng.normal(size=(n, 1)) + 1.0
    sw = rng.uniform(0.5, 1.5, n)
    exclude = np.full(q.size, -1, dtype=np.int64)
    exclude[: n // 5] = np.arange(0, n, 5)
    compare(q[:, None], k[:, None], v, "cosine", h, 1, sw=sw, exclude=exclude)
    # the tables served nearly every query (not the pairs)
    flag = trig_moments(q, k, 1.0 / h, v, sw, exclude, get("cosine"), h, 1)[1]
    assert flag.mean() <= 0.05
