"""LOWESS on heavy tails: the fits the sliding moments refuse come from the blocks' moments, exact."""

from __future__ import annotations

import numpy as np
import pytest

import nadaraya.local.lowess as lw
from nadaraya.local import _lowess_jit as jit
from nadaraya.local._lowess_blocks import BLOCK, SUPER, block_fit, block_moments


def _cauchy(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = np.sort(rng.standard_cauchy(n))
    y = np.sin(3 * np.arctan(x)) + rng.normal(0.0, 0.3, n)
    return x, y, rng.uniform(0.0, 1.0, n) ** 0.5  # robustness-like weights, some near 0


@pytest.mark.parametrize(("n", "frac"), [(6000, 0.3), (16000, 0.5)])  # blocks; superblocks too
def test_block_sums_are_within_their_bounds(n: int, frac: float) -> None:
    """Each sum against the same sum in long double over the window, key by key: off by at most
    its stated bound (``max|y|`` times it for the ``y`` sums)."""
    x, y, r = _cauchy(n, 0)
    k = lw._span(frac, x.size)
    win = lw._Windows(x, x, k, 0.0)
    blocks = (*block_moments(x, y, r, BLOCK), *block_moments(x, y, r, SUPER))
    ymax = np.abs(y).max()
    picked = np.r_[0:40, n // 3:n // 3 + 40, x.size - 40:x.size]  # both tails and the bulk
    tight = []
    for j in picked:
        v, l0, m0, h = win.q[j], win.lo[j], win.mid[j], win.rad[j]
        *sums, e0, e1, e2 = block_fit(x, y, r, v, l0, m0, l0 + k, h, *blocks)
        xs = x[l0:l0 + k].astype(np.longdouble)
        u = (xs - np.longdouble(v)) / np.longdouble(h)
        w = (1 - np.abs(u) ** 3) ** 3 * r[l0:l0 + k]
        yy = y[l0:l0 + k]
        exact = [w.sum(), (w * u).sum(), (w * u * u).sum(), (w * yy).sum(), (w * u * yy).sum()]
        bounds = [e0, e1, e2, ymax * e0, ymax * e1]
        for s, ex, b in zip(sums, exact, bounds):
            assert abs(np.longdouble(s) - ex) <= b, (j, s, ex, b)
        tight.append(e0 / float(exact[0]))
    assert np.median(tight) < 1e-13  # and the bound is tight enough to serve (FIT_TOL is 3e-11)


@pytest.mark.parametrize("frac", [0.3, 0.7])
def test_heavy_tails_take_the_blocks_and_match_the_direct_sums(frac: float) -> None:
    """Cauchy x: the fits the sliding moments refuse (the tails') come from the blocks, each within
    :data:`FIT_TOL` of ``max|y|`` of statsmodels' formula summed directly."""
    x, y, r = _cauchy(5000, 1)
    k = lw._span(frac, x.size)
    assert k >= 4 * BLOCK
    win = lw._Windows(x, x, k, 0.0)
    out, state = lw._regressions(x, y, r, win)
    blocked = np.flatnonzero(state == 4)
    assert blocked.size >= 20 and np.mean(state == 2) < 0.002  # the blocks took nearly all of them
    buf = np.empty(k)
    for j in np.r_[blocked, np.flatnonzero(state == 0)[::50]]:
        ref = jit._direct(x, y, r, win.q[j], win.lo[j], win.lo[j] + k, win.rad[j], buf)
        assert abs(out[j] - ref) <= jit.FIT_TOL * np.abs(y).max(), j


def test_heavy_tails_equal_statsmodels() -> None:
    sm = pytest.importorskip("statsmodels.nonparametric.smoothers_lowess")
    x, y, _ = _cauchy(5000, 2)
    for it in (0, 2):
        got = lw.lowess(y, x, frac=0.4, it=it)
        want = sm.lowess(y, x, frac=0.4, it=it)
        assert np.max(np.abs(got - want)) <= 1e-10 * np.abs(y).max()
