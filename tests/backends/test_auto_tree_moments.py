"""``auto``'s choice between the k-d tree (``windowed``) and the fused loop for compact kernels in
2-3 features with local-fit moments, against the cost model written out here.

The model: the fused loop costs ``cost("fused")`` (its moments ``FUSED_MOMENTS``), or, where its
tree of key boxes serves (supports over at most 5 % of the keys' box), ``fused_compact_cost`` of
the pairs near the queries; the k-d tree costs
``cost("windowed")`` (its moments ``1 + TREE_MOMENTS degree`` per point) plus its windows' pairs
at ``TREE_PAIR_NS (1 + TREE_PAIR_MOMENTS degree)`` each. The pairs are counted exactly here (every
query's box window); ``auto`` samples them, so cells whose two modelled costs lie within 30 % of
each other are not checked. Measured one thread, n = 2e4 in 2-D (2026-12-06, shared machine):
Epanechnikov h = 0.01, degree 1: tree 0.18 s, fused 0.35 s; h = 0.04: tree 1.0 s, fused 0.35 s.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("scipy")

from scipy.spatial import cKDTree

from nadaraya._core.call import choose_backend, prepare
from nadaraya.backends import _capabilities as cap
from nadaraya.backends import _choose
from nadaraya.kernels import get


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("degree", [0, 1, 2])
def test_the_moments_factors_are_the_models(d, degree):
    k = get("epanechnikov")
    base = {b: cap.cost(b, k, n=10**4, m=10**4, d=d, degree=0) for b in ("fused", "windowed")}
    assert cap.cost("fused", k, n=10**4, m=10**4, d=d, degree=degree) == pytest.approx(
        base["fused"] * cap.FUSED_MOMENTS[degree], rel=1e-12)
    assert cap.cost("windowed", k, n=10**4, m=10**4, d=d, degree=degree) == pytest.approx(
        base["windowed"] * (1 + cap.TREE_MOMENTS * degree), rel=1e-12)


def _modelled(kernel, x, h, degree):
    n, d = x.shape
    tree = cKDTree(x / h)
    pairs = float(tree.query_ball_point(x / h, 1.0 + 1e-9, p=np.inf, return_length=True).sum())
    k = get(kernel)
    windowed = cap.cost("windowed", k, n=n, m=n, d=d, degree=degree)
    windowed += pairs * _choose.TREE_PAIR_NS * (1 + _choose.TREE_PAIR_MOMENTS * degree)
    cover = float(np.prod(np.minimum(1.0, 2 * h / np.ptp(x, axis=0))))
    if cover <= 0.05:  # the fused backend's tree of key boxes: the pairs near each query
        return windowed, cap.fused_compact_cost(n=n, m=n, d=d, degree=degree, pairs=pairs)
    return windowed, cap.cost("fused", k, n=n, m=n, d=d, degree=degree)


CELLS = [(kernel, 2, h, degree) for kernel in ("epanechnikov", "tricube") for h in (0.01, 0.04)
         for degree in (0, 1, 2)] + [("epanechnikov", 3, h, degree) for h in (0.05, 0.2) for degree in (1, 2)]


@pytest.mark.parametrize(("kernel", "d", "h", "degree"), CELLS)
def test_auto_takes_the_cheaper_modelled_backend(kernel, d, h, degree):
    n = 20000 if d == 2 else 10000
    x = np.random.default_rng(d).uniform(0.0, 1.0, (n, d))
    hh = h * np.sqrt(np.arange(1, d + 1))
    windowed, fused = _modelled(kernel, x, hh, degree)
    if max(windowed, fused) < 1.3 * min(windowed, fused):
        pytest.skip("the two modelled costs are too close for a sampled count to rank")
    want = "windowed" if windowed < fused else "fused"
    got = choose_backend(prepare(x, x, x[:, 0], kernel=kernel, bandwidth=hh), moments=degree).name
    assert got == want, (windowed / 1e9, fused / 1e9)


def test_small_windows_of_a_local_linear_fit_go_to_the_fused_tree_of_key_boxes():
    """2-D Epanechnikov, degree 1, n = 2e4: with 2e4 queries the fused backend's tree of key boxes
    (measured 15 ms against the k-d tree's 98 ms at n = 5e4, m = 5e3, h = 0.01, one thread; before
    it, the fused loop over all pairs took twice the k-d tree's time); fewer queries than
    ``_fused_compact.SORT_FROM``: tests/backends/test_auto_tree.py."""
    x = np.random.default_rng(0).uniform(0.0, 1.0, (20000, 2))
    h = 0.01 * np.sqrt(np.arange(1, 3))

    def pick(q, bw):
        return choose_backend(prepare(q, x, x[:, 0], kernel="epanechnikov", bandwidth=bw), moments=1)

    many = pick(x, h)
    assert many.name == "fused" and "tree of key boxes" in many.reason
    assert pick(x, 4 * h).name == "fused"
