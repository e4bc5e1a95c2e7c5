"""The truncated backend's dense cells (one exact series per pair of cells) against the reference.

Every check is on every query: predictions within ``1e-13`` of the size of their terms
(``_compare`` of ``test_truncated``), the log weights to ``1e-12``. A spy records which queries
the cells served, so that each case also shows it exercised them (or, where the cells cannot
pay, that they stood aside).
"""

from __future__ import annotations

import math
import time
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_truncated import _compare, _run

import nadaraya
from _spies import cells_served
from nadaraya.backends import _truncated_cells as cells
from nadaraya.backends import choose_for_data, truncated
from nadaraya.bandwidth import score_bandwidth
from nadaraya.kernels import get


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The share of queries the cells served in each call of the truncated backend."""
    return cells_served(monkeypatch)


def _dense(kind: str, n: int, m: int, p: int, seed: int):
    """Keys and queries on ``[0, 5]`` (uniform, few distinct values, or a dense core with Cauchy
    tails), values of mixed sign and size; some queries far away."""
    rng = np.random.default_rng(seed)
    if kind == "duplicates":
        k = np.round(rng.uniform(0.0, 5.0, n) * 40) / 40
    elif kind == "core+cauchy":
        k = np.where(rng.random(n) < 0.8, rng.uniform(0.0, 5.0, n), 2.5 + rng.standard_cauchy(n))
    else:
        k = rng.uniform(0.0, 5.0, n)
    q = rng.uniform(-0.5, 5.5, m)
    on = rng.random(m) < 0.2
    q[on] = rng.choice(k, int(on.sum()))
    if m >= 3:
        q[:3] = (-1e4, 7.0, 1e6)
    v = rng.normal(size=(n, p)) * 10.0 ** rng.uniform(-3, 3, (n, 1)) + k[:, None]
    return q[:, None], k[:, None], v


def _check(q, k, v, h, exclude=None) -> None:
    want = _run("reference", q, k, v, h, exclude=exclude)
    abs_want = _run("reference", q, k, np.abs(v), h, exclude=exclude)
    vmax = float(np.abs(v).max()) if v.size else 1.0
    _compare(_run("truncated", q, k, v, h, exclude=exclude), want, abs_want, vmax)


@pytest.mark.parametrize("kind", ["uniform", "duplicates", "core+cauchy"])
@pytest.mark.parametrize("p", [0, 1, 3])
def test_cells_match_the_reference_on_every_query(kind: str, p: int, served: list[float]) -> None:
    q, k, v = _dense(kind, 6000, 2500, p, seed=p + 7 * len(kind))
    for h in (2e-3, 0.01, 0.05, 0.3, 2.0, 50.0, 5e3):
        _check(q, k, v, h)
    assert max(served) > 0.5  # the cells took most queries at some bandwidth


@pytest.mark.parametrize(("n", "m"), [(5000, 1), (5000, 7), (40, 5000), (3000, 3000)])
def test_awkward_sizes(n: int, m: int) -> None:
    q, k, v = _dense("uniform", n, m, 2, seed=n + m)
    for h in (0.01, 0.2, 3.0):
        _check(q, k, v, h)


def test_leave_one_out_never_adds_the_left_out_term(served: list[float]) -> None:
    """Queries on their own keys, each leaving its key out: in the pair of cells holding it the
    series runs over the keys before it and those after it (two walks), never adding its term."""
    rng = np.random.default_rng(3)
    k = rng.uniform(0.0, 5.0, 6000)
    k[:300] = np.round(k[:300], 1)  # duplicates: the left-out key's twins stay in
    v = np.column_stack([np.sin(k), rng.normal(size=k.size) * 1e3])
    for h in (0.01, 0.1, 1.0):
        _check(k[:, None], k[:, None], v, h, exclude=np.arange(k.size))
    assert min(served[1:]) > 0.5  # at h = 0.01 (18 keys per cell) the windows cost less
    # any key left out, not the query's own (often in another cell, or none: -1, or out of range)
    ex = rng.integers(-1, k.size + 2, k.size)
    for h in (0.05, 1.0):
        _check(k[:, None], k[:, None], v, h, exclude=ex)
    assert min(served[3:]) > 0.5


def test_float32_inputs_round_once(served: list[float]) -> None:
    q, k, v = _dense("uniform", 6000, 6000, 2, seed=11)
    h = 0.05
    exact = _run("reference", q, k, v, h).finalize()
    got = _run("truncated", q.astype(np.float32), k.astype(np.float32), v.astype(np.float32), h)
    ref32 = _run("reference", q.astype(np.float32), k.astype(np.float32), v.astype(np.float32), h)
    assert got.value.dtype == np.float32 and max(served) > 0.5
    both = np.isfinite(ref32.finalize()) & np.isfinite(exact)
    err_got = np.abs(got.finalize().astype(np.float64) - exact)[both].max()
    err_ref = np.abs(ref32.finalize().astype(np.float64) - exact)[both].max()
    assert err_got <= 2.0 * err_ref + 4 * np.finfo(np.float32).eps * float(np.abs(v).max())


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), log_h=st.floats(-2.7, 1.0), n=st.integers(200, 3000),
       m=st.integers(1, 1500))
def test_random_dense_problems(seed: int, log_h: float, n: int, m: int) -> None:
    q, k, v = _dense("uniform", n, m, 1, seed=seed)
    _check(q, k, v, 10.0**log_h)


def test_sparse_keys_leave_the_cells_aside(served: list[float]) -> None:
    """Cells holding a few keys each cannot pay: every query takes its window, and the average
    rule skips the grid before it is built."""
    rng = np.random.default_rng(5)
    k = rng.standard_cauchy(4000)
    q = rng.standard_cauchy(4000)
    v = rng.normal(size=(4000, 1))
    _check(q[:, None], k[:, None], v, 1e-4)
    assert served == [] or max(served) < 0.05


def _remainder(z: Fraction, terms: int) -> Fraction:
    """``sum_{k >= terms} z^k / k!``, to far below ``2^-70``: exact rationals."""
    total, term = Fraction(0), Fraction(1)
    for j in range(1, terms + 80):
        term = term * z / j
        if j >= terms:
            total += term
    return total


@pytest.mark.parametrize("t", [1e-3, 0.1, cells.RHO**2 / 4, 1.0, 2.25])
def test_the_series_remainder_is_below_2_to_the_minus_60_of_each_cross_term(t: float) -> None:
    k = cells.terms(t)
    for frac in (-1.0, -0.7, -0.3, 0.2, 0.9, 1.0):
        z = Fraction(t) * Fraction(frac)
        exp_z = math.exp(float(z))
        assert abs(float(_remainder(z, k))) <= 2.0**-60 * exp_z * (1 - 1e-12)
    # one term fewer breaks it at an end of the interval (the count is not wasteful)
    worst = max(abs(float(_remainder(Fraction(t) * s, k - 1))) / math.exp(s * t) for s in (-1, 1))
    assert worst > 2.0**-60


def test_auto_takes_the_cells_where_the_windows_would_be_100x_slower() -> None:
    """n = m = 2e5 on [0, 5] at h = 1: each window holds every key (4e10 pairs); the cells cost
    about 2e3 pairs' worth per query. ``auto`` must take the truncated backend, and it must be
    fast (a coarse guard: the windows alone would take about a minute here)."""
    rng = np.random.default_rng(0)
    x = rng.uniform(0.0, 5.0, 200_000)
    y = np.sin(x)
    q = rng.uniform(0.0, 5.0, 200_000)
    est = truncated.pairs(q, x, 1.0)
    assert est < 200_000 * 200_000 / 50
    how = choose_for_data(get("gaussian"), q[:, None], x[:, None], np.array([1.0]))
    assert how is not None and how.name == "truncated" and "dense cells" in how.reason
    nadaraya.pool(q[:100], x[:3000], y[:3000], bandwidth=1.0)
    start = time.perf_counter()
    got = nadaraya.pool(q, x, y, bandwidth=1.0)
    assert time.perf_counter() - start < 6.0
    idx = rng.integers(0, q.size, 20)
    want = nadaraya.pool(q[idx], x, y, bandwidth=1.0, backend="reference")
    np.testing.assert_allclose(got[idx], want, rtol=1e-13, atol=1e-14)


def test_sample_weights_stay_exact(served: list[float]) -> None:
    """(Local fits' moments ride the cells: tests/backends/test_fast_moments_cells.py; sample
    weights too: tests/backends/test_truncated_weighted_cells.py.)"""
    q, k, v = _dense("uniform", 3000, 500, 1, seed=2)
    sw = np.random.default_rng(2).uniform(0.5, 2.0, 3000)
    want = _run("reference", q, k, v, 0.05, sw)
    _compare(_run("truncated", q, k, v, 0.05, sw), want, _run("reference", q, k, np.abs(v), 0.05, sw),
             float(np.abs(v).max()))


def test_far_from_the_origin_the_series_takes_the_rounding_of_the_centres(served: list[float]) -> None:
    """Keys within 0.01 of 1e9 at h = 1e-4: an ulp of the data (1.2e-7) is 1e-3 bandwidths, which
    the series' terms take as a margin; near 1e12 (an ulp of 1.2 bandwidths) the margin would
    pass the cell, and no cells serve, though the keys are as dense."""
    rng = np.random.default_rng(8)
    base = rng.uniform(0.0, 0.01, 5000)
    v = np.column_stack([np.sin(base * 2000), rng.normal(size=5000)])
    for offset in (1e9, 1e12):
        k = (offset + base)[:, None]
        _check(k, k, v, 1e-4)
    assert served[0] > 0.5 and served[1] == 0.0


@pytest.mark.parametrize("method", ["cv", "aicc"])
def test_the_exact_search_in_1d_rides_on_the_cells_and_finds_the_compiled_passes_minimum(method: str) -> None:
    """n = 20 000 in 1-D, no tol: ``auto`` scores each bandwidth by one leave-one-out pass of
    the truncated sums (about 35 passes, their cells exact) instead of the compiled passes over
    all pairs (``backend="fused"`` keeps those: 4e8 pairs each). Both are exact, so both find
    the same minimum: bandwidths within the refinement's 1e-3, scores equal to 1e-9."""
    rng = np.random.default_rng(4)
    x = rng.uniform(0.0, 5.0, 20_000)
    y = 2 * np.sin(x) + x + rng.normal(0, 0.3, x.size)
    cells_way = nadaraya.select_bandwidth(x[:, None], y, method=method)
    compiled = nadaraya.select_bandwidth(x[:, None], y, method=method, backend="fused")
    assert cells_way.n_passes > 15 and compiled.n_passes < 8
    h1, h2 = float(cells_way.bandwidth[0]), float(compiled.bandwidth[0])
    assert abs(h1 / h2 - 1) < 3e-3
    s1, s2 = (score_bandwidth(x[:, None], y, h, method=method, backend="fused") for h in (h1, h2))
    assert abs(s1 - s2) <= 1e-9 * abs(s2) + abs(float(cells_way.score) - s1)
    assert abs(float(cells_way.score) - s1) <= 1e-12 * abs(s1)  # the cells' score is the exact score
    # with sample weights the cells do not serve: the compiled passes again
    assert nadaraya.select_bandwidth(x[:, None], y, sample_weight=np.ones(x.size), method=method).n_passes < 8
