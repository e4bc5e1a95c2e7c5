"""The even pivot sweep's tables (keys added two at a time) against sums rounded once.

Each row of :func:`._windowed_meven._pivot_cols` is the sum of ``sw t^j (1, v)`` over the keys
from the pivot to the row (minus those below it): compared here with ``math.fsum`` of the same
terms, every row, every power, to a few ulps of the sum of their magnitudes (the loss test's
``B_j``), for odd and even counts on both sides of the pivot and keys far from 0.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from nadaraya.backends._windowed_meven import _pivot_cols


@pytest.mark.parametrize(("n", "piv", "origin"),
                         [(301, 150, 0.0), (300, 151, 0.0), (257, 0, 1e6), (64, 64, 0.0)])
def test_rows_within_a_few_ulps_of_their_magnitudes(n, piv, origin):
    rng = np.random.default_rng(n + piv)
    xs = origin + np.sort(rng.uniform(-1.5, 1.5, n))
    sw = rng.uniform(0.0, 3.0, n)
    values = rng.normal(size=(n, 2)) * 10.0 ** rng.integers(-3, 4, (n, 1))
    nf, p, nv, na = 9, 2, 7, 7
    T = np.full((n + 1, nf, 1 + 2 * p), np.nan)
    comp = np.empty((nf, 1 + p))
    centre = origin + 0.01
    _pivot_cols(T, comp, xs, 0, n, piv, centre, 1.0, sw, values, nf, p, nv, na)
    t = (xs - centre) * 1.0
    for row in range(n + 1):
        keys = range(piv, row) if row >= piv else range(row, piv)
        sign = 1.0 if row >= piv else -1.0
        for j in range(nf):
            for cc in range(1 + 2 * p):
                if (cc == 0 and j >= nf) or (1 <= cc <= p and j >= nv) or (cc > p and j >= na):
                    continue
                col = np.ones(n) if cc == 0 else values[:, cc - 1] if cc <= p else abs(values[:, cc - 1 - p])
                terms = [sign * sw[i] * t[i] ** j * col[i] for i in keys]
                want = math.fsum(terms)
                size = math.fsum(abs(x) for x in terms)
                ulps = 4 if cc <= p else n  # compensated; the |v| columns are plain sums (bounds only)
                assert abs(T[row, j, cc] - want) <= ulps * 2.0**-52 * size + 1e-300, (row, j, cc)
