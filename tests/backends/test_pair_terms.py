"""The dense cells' terms per pair of cells: each cut series errs by under 2^-60 / n of the largest weight."""

import math

import numpy as np
import pytest

from nadaraya.backends._truncated_grid import log_ratio
from nadaraya.backends._truncated_sums import pair_terms, terms


@pytest.mark.parametrize("r", [0, 1, 2])
@pytest.mark.parametrize("n", [1000, 200_000])
def test_each_pair_within_the_cut(r: int, n: int) -> None:
    half, rho, near = 0.75, 1.5, 1.0
    big_l = log_ratio(n)
    nts = pair_terms(half, big_l, r, rho, near)
    k0 = terms(half * half)
    assert nts[0] == k0 + 2 * r and np.all(np.diff(nts) <= 0) and np.all(nts > 2 * r)
    grid = np.linspace(-half, half, 41)
    a, b = np.meshgrid(grid, grid)
    for o in range(nts.size + 1):
        d = o * rho
        u = np.abs(d + a - b)  # the query's and the key's distance, in bandwidths
        w = np.exp(-0.5 * u**2 + 0.5 * near**2)  # each weight over the smallest possible shift
        k = (nts[o] - 2 * r) if o < nts.size else 0
        z = a * b
        tail = sum(np.abs(z) ** j / math.factorial(j) for j in range(k, k + 60))  # the series' remainder
        err = w * np.exp(np.abs(z)) * tail * np.maximum(u + 2 * half, 1.0) ** (2 * r)
        if o == nts.size:  # left out: the whole term, moments included
            err = w * np.maximum(u, 1.0) ** (2 * r)
        if k < k0:  # the absolute rule (the relative one holds by terms())
            assert err.max() <= math.exp(-big_l), (o, k)
