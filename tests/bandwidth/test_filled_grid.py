"""The Gaussian's per-pass scalar search: a ratio-2 grid filled in near its best, rival basins,
and Brent's settled stop, against plain computations written here."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

import nadaraya
from nadaraya.bandwidth import BandwidthWarning, _objective, select_bandwidth
from nadaraya.bandwidth import search as search_module
from nadaraya.bandwidth.optimise import brent, fill_in, rival_minima


def plain_cv(x: np.ndarray, y: np.ndarray, h: float) -> float:
    """Leave-one-out CV of the Gaussian Nadaraya-Watson fit, dense, the diagonal masked."""
    d = x[:, None] - x[None, :]
    log_w = -0.5 * (d / h) ** 2
    np.fill_diagonal(log_w, -np.inf)
    w = np.exp(log_w - log_w.max(axis=1, keepdims=True))
    return float(np.mean((y - w @ y / w.sum(axis=1)) ** 2))


def two_basins() -> tuple[np.ndarray, np.ndarray]:
    """A slow wave plus a fast one: CV has two basins whose minima nearly tie, the lower one
    between two points of the ratio-2 grid (that grid alone ends 0.5 % above it)."""
    rng = np.random.default_rng(25)
    x = rng.uniform(0, 1, 200)
    return x, np.sin(2 * np.pi * x) + 0.2 * np.sin(40 * np.pi * x) + rng.normal(0, 0.3, 200)


def per_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """Score each bandwidth by a pass of its own, as the truncated cells do at large n."""
    monkeypatch.setattr(_objective._Objective, "fast", property(lambda self: False))


def select(x: np.ndarray, y: np.ndarray, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BandwidthWarning)
        return select_bandwidth(x, y, **kw)


def test_fill_in_scores_the_midpoints_next_to_the_near_best_points() -> None:
    ts = 2.0 ** np.arange(6.0, -7.0, -2.0)
    f = lambda t: (math.log2(t) - 0.7) ** 2  # noqa: E731
    values = np.array([f(t) for t in ts])
    asked: list[float] = []
    t, v = fill_in(lambda t: asked.append(t) or f(t), ts, values, margin=5.0)
    # written out: the points within 5 of the least value (0.49 at t = 1) are t = 4, 1, 1/4
    # (values 1.69, 0.49, 7.29 > 5.49: only 4 and 1), so the midpoints of the steps next to them
    near = [i for i in range(ts.size) if values[i] <= values.min() + 5.0]
    steps = sorted({(i - 1, i) for i in near if i > 0} | {(i, i + 1) for i in near if i + 1 < ts.size})
    expected = [math.sqrt(ts[i] * ts[j]) for i, j in steps]
    assert np.allclose(sorted(asked), sorted(expected), rtol=1e-15)
    assert np.all(np.diff(t) < 0) and t.size == ts.size + len(expected)
    assert np.array_equal(v, [f(s) for s in t])
    # a step already sqrt 2 wide is not split
    t2, _ = fill_in(f, np.array([4.0, 2.0 * math.sqrt(2.0), 1.0]), np.array([9.0, 0.0, 9.0]), 0.5)
    assert t2.size == 4 and np.isclose(t2[-2], math.sqrt(2.0 * math.sqrt(2.0)))


def test_rival_minima_are_the_other_basins_whose_parabola_may_win() -> None:
    xs = np.arange(9.0)
    # basins at 1 (the best, 1.0), 3 and 6; written out, the parabola through a basin's point
    # and neighbours, f0 + a u + c u^2 with a = (f+ - f-) / 2, c = (f+ + f- - 2 f0) / 2, falls
    # by a^2 / (4 c): basin 3 (3.0, 1.05, 3.0) by 0, 1.05 > 1.0: no rival; basin 6 (3.0, 1.05,
    # 1.1) by 0.95^2 / 4 = 0.2256, and 1.05 - 2 * 0.2256 < 1.0: a rival
    fs = np.array([4.0, 1.0, 3.0, 1.05, 3.0, 3.0, 1.05, 1.1, 5.0])
    assert rival_minima(xs, fs, 1) == [6]
    fs[7] = 2.9  # (3.0, 1.05, 2.9): falls by 0.05^2 / (4 * 1.9), far from the best: none
    assert rival_minima(xs, fs, 1) == []
    assert rival_minima(xs[::-1], fs, 1) == []  # descending abscissae alike
    fs[3] = 0.5  # basin 3 now lower than the best: a rival, ranked first
    fs[7] = 1.1
    assert rival_minima(xs, fs, 1) == [3, 6]


@pytest.mark.parametrize("x0, skew", [(0.3137, 0.2), (0.1, 1.0), (-0.12, 0.3)])
def test_settled_brent_stops_within_its_promise_with_fewer_evaluations(x0: float, skew: float) -> None:
    """A criterion as flat as CV near its minimum (curvature 1e-3 of its value in log h): the
    settled stop ends within tol of the minimiser and within the promised 1e-10 of the least
    value, in fewer evaluations than the probes on both sides and the last step."""
    def f(x: float) -> float:
        return 1.0 + 1e-3 * (math.cosh(x - x0) + skew * (x - x0) ** 3)

    calls = {0.0: 0, 1e-10: 0}
    for settled in calls:
        def g(x: float, settled: float = settled) -> float:
            calls[settled] += 1
            return f(x)

        xs = (-0.35, 0.0, 0.35)
        x, fx, ok = brent(g, xs, tuple(f(v) for v in xs), 1e-3, settled=settled)
        assert ok and abs(x - x0) < 1e-3 and fx == f(x) and fx - f(x0) <= max(settled, 1e-15)
    assert calls[1e-10] < calls[0.0]


def test_the_per_pass_search_fills_its_grid_and_finds_the_lower_basin(monkeypatch) -> None:
    x, y = two_basins()
    per_pass(monkeypatch)
    res = select(x, y)
    grid = res.search["bandwidths"][res.search["stages"] == "grid", 0]
    # every grid point on the fine lattice rule * 2**(k/2), both of its ends kept
    rule = float(np.exp(np.mean(np.log(res.rule_of_thumb))))
    k = 2.0 * np.log2(grid / rule)
    assert np.allclose(k, np.round(k), atol=1e-9)
    assert round(k.min()) == -12 and np.isclose(grid.max(), res.bounds[0, 1])
    assert grid.size < round(k.max()) + 13  # fewer than the fine grid's points
    # the minimum: a dense plain search (300 bandwidths, then Brent to 1e-9 in log h)
    hs = np.geomspace(0.003, 0.2, 300)
    cv = np.array([plain_cv(x, y, h) for h in hs])
    i = int(np.argmin(cv))
    ref = minimize_scalar(lambda v: plain_cv(x, y, math.exp(v)), method="bounded",
                          bounds=(math.log(hs[i - 1]), math.log(hs[i + 1])), options={"xatol": 1e-9}).fun
    assert res.score <= ref * (1 + 1e-6)
    assert abs(res.score - plain_cv(x, y, float(res.bandwidth[0]))) <= 1e-12 * res.score
    # without the fill, the ratio-2 grid ranks the basins wrongly
    monkeypatch.setattr(search_module, "fill_in", lambda f, ts, values, margin: (ts, values))
    assert select(x, y).score > ref * (1 + 3e-3)


def test_the_cells_search_at_n_2e4_takes_fewer_passes_than_the_fine_grid() -> None:
    """No monkeypatch: 1-D, exact, n = 2e4 rides on the truncated sums' cells (one pass per
    bandwidth). The fine grid and Brent with probes took 33 passes on the S2 data; the filled
    grid and the settled stop take 24 or fewer (23 at n = 1e5)."""
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 5, 20_000)
    y = 2 * np.sin(x) + x + rng.normal(0, 0.5, x.size)
    res = nadaraya.select_bandwidth(x, y)
    assert "Brent" in res.message and res.n_passes <= 24, (res.n_passes, res.message)
    grid = res.search["bandwidths"][res.search["stages"] == "grid", 0]
    best = grid[np.argmin(res.search["scores"][res.search["stages"] == "grid"])]
    ordered = np.sort(grid)
    j = int(np.searchsorted(ordered, best))
    assert np.allclose([ordered[j + 1] / best, best / ordered[j - 1]], math.sqrt(2))
