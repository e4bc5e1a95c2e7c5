"""Sample weights spread beyond ``exp(CELLS_SPREAD)`` on the 1-D truncated backend: bands of keys by
weight (``nadaraya.backends._truncated_bands``), each on the dense cells, merged exactly. Every column
(weight, values, each moment of degree 1 and 2) against the reference backend on every query,
within 1e-13 of that column's sum of absolute terms: the skipped keys (inside a band, or a whole
band a query skips) weigh less than 2^-60 of each query's largest term together."""

from __future__ import annotations

import numpy as np
import pytest

from _truncated_checks import scales
from nadaraya.backends import _truncated_bands as bands
from nadaraya.backends import reference, truncated
from nadaraya.kernels import get

GAUSS = get("gaussian")
H = 0.02


@pytest.fixture
def calls(monkeypatch):
    """Per band summed: (its keys, its queries, the share of them the dense cells served)."""
    seen = []
    real_rows, real_sums = truncated._rows, truncated._cells.sums
    served = []

    def sums(*args, **kw):
        done = real_sums(*args, **kw)
        served.append(float(done.mean()) if done.size else 0.0)
        return done

    def rows(st, h, r, p):
        served.clear()
        got = real_rows(st, h, r, p)
        seen.append((st.ks.size, st.qs.size, served[-1] if served else 0.0))
        return got

    monkeypatch.setattr(truncated, "_rows", rows)
    monkeypatch.setattr(truncated._cells, "sums", sums)
    return seen


def _check(q, k, v, s, h, degree, ex=None, tol=1e-13, dtype=np.float64):
    """Every column of the truncated partials against the reference's on every query, within ``tol``
    of each column's scale."""
    kw = {"kernel": GAUSS, "bandwidth": np.array([h]), "moments": degree, "exclude": ex, "sample_weight": s}
    a = truncated.partials(q[:, None].astype(dtype), k[:, None].astype(dtype), v.astype(dtype), **kw)
    b = reference.partials(q[:, None], k[:, None], v, **kw)
    assert np.all(np.asarray(a.shift, dtype=np.float64) >= b.shift - 1e-9 * np.abs(b.shift))
    scale = np.exp(np.asarray(a.shift, dtype=np.float64) - b.shift)
    cols = scales(q, k, v, s, h, b.shift, ex, degree)
    got, want = [a.weight, a.value, *a.moments], [b.weight, b.value, *b.moments]
    assert len(got) == len(cols)
    for j, (x, y, c) in enumerate(zip(got, want, cols, strict=True)):
        x = np.asarray(x, dtype=np.float64).reshape(q.size, -1) * scale[:, None]
        err = np.abs(x - y.reshape(q.size, -1)) / c.reshape(q.size, -1)
        assert err.max() <= tol, (j, float(err.max()))


def _data(n, seed, p=2):
    rng = np.random.default_rng(seed)
    k = rng.uniform(0.0, 1.0, n)
    v = np.column_stack([np.sin(6 * k), rng.normal(size=n)])[:, :p]
    return k, v, rng


@pytest.mark.parametrize("degree", [0, 1, 2])
@pytest.mark.parametrize("decades", [40, 120, 600])
def test_log_uniform_weights_and_leave_one_out(degree, decades, calls):
    """Weights log-uniform over ``decades`` (1e-300 .. 1e300 at 600): one band at 40 (92 of log,
    within CELLS_SPREAD), several above; the heaviest band's cells serve nearly every query."""
    k, v, rng = _data(3000, degree + decades)
    s = np.exp(rng.uniform(-0.5, 0.5, k.size) * decades * np.log(10.0))
    s[:2] = 10.0 ** (-decades / 2), 10.0 ** (decades / 2)
    q = rng.uniform(-0.05, 1.05, 1500)
    _check(q, k, v, s, H, degree)
    assert (len(calls) == 1) == (decades * np.log(10.0) <= truncated.CELLS_SPREAD)
    assert calls[0][1] == q.size  # the heaviest band: every query
    if calls[0][0] >= 1000:  # and, where its keys are dense, on the cells
        assert calls[0][2] > 0.7
    if len(calls) > 1:  # the light bands: only where the heavy one leaves room
        assert min(c[1] for c in calls[1:]) < 0.5 * q.size
    _check(k, k, v, s, H, degree, ex=np.arange(k.size))  # each key left out: never added


@pytest.mark.parametrize("degree", [0, 1, 2])
def test_zero_weights_and_far_queries_among_a_wide_spread(degree, calls):
    """Zero weights dropped; far queries (log weights near -1e21) skip the bands whose nearest key is
    farther, computed as the reference computes each log weight (so its rounding agrees)."""
    k, v, rng = _data(3000, 7 + degree)
    s = np.exp(rng.uniform(-200.0, 200.0, k.size))
    s[rng.random(k.size) < 0.3] = 0.0
    q = np.concatenate([rng.uniform(0.0, 1.0, 1000), [-3.0, 1.4, 2e3, -1e9]])
    _check(q, k, v, s, H, degree)
    _check(k, k, v, s, H, degree, ex=np.arange(k.size))
    assert len(calls) > 2


@pytest.mark.parametrize("degree", [0, 1, 2])
def test_a_single_huge_weight_key(degree, calls):
    """One key of weight 1e300 among weights 1: near it only it counts (the light band skipped),
    far from it (past about 37 bandwidths) the light keys take over."""
    k, v, rng = _data(3000, 11 + degree)
    k[0] = 0.5
    s = np.ones(k.size)
    s[0] = 1e300
    q = np.concatenate([rng.uniform(0.0, 1.0, 1000), 0.5 + np.linspace(-0.9, 0.9, 400) * 40 * H])
    _check(q, k, v, s, H, degree)
    _check(k, k, v, s, H, degree, ex=np.arange(k.size))  # the huge key left out of its own query
    assert any(c[0] == 1 for c in calls)
    assert any(c[0] == k.size - 1 and c[1] < q.size for c in calls)  # some queries skip the light band


@pytest.mark.parametrize("degree", [0, 1])
def test_a_skipped_band_would_matter_past_the_margin(degree, calls):
    """Heavy keys (1e60) on the left half, light ones (1) everywhere: past the heavy keys' edge the
    light band's terms climb from far below ``2^-60`` of the largest to all of it, so a query that
    skipped it with a margin 25 nats short of ``L`` would be off by more than 1e-13 (checked)."""
    k, v, rng = _data(4000, 5 + degree)
    s = np.where((k < 0.5) & (rng.random(k.size) < 0.5), 1e60, 1.0)
    q = 0.5 + np.linspace(0.0, 25.0, 2000) * H
    _check(q, k, v, s, H, degree)
    assert len(calls) == 2 and 0 < calls[1][1] < q.size



@pytest.mark.parametrize("u", [35.0, 50.0])
def test_a_far_heavy_band_counts_in_the_moments(u):
    """A query on two light keys (e^-740), a heavy one ``u`` bandwidths away whose weight term is
    just below the band-skip margin (``L + 1``) but whose ``w u^4`` is not: the degree-2 moments
    keep it (the band's bound carries ``|u|^(2r)``, as the cells' reach does; the review measured
    5.4e-13 of the M_4 column's scale where the band was skipped on its weight alone)."""
    from nadaraya.backends._truncated_grid import log_ratio

    h, lo = 0.01, -740.0
    heavy = u * u / 2 - log_ratio(3) - 1.2 + lo
    k = np.array([0.3, 0.3 + u * h, 0.9])
    _check(np.array([0.3]), k, k[:, None], np.exp([lo, heavy, lo]), h, 2)

def test_float32(calls):
    """float32 inputs (the weights at most 1: a float32 shift near 0 rounds finely)."""
    k, v, rng = _data(3000, 21)
    k, v = k.astype(np.float32).astype(np.float64), v.astype(np.float32).astype(np.float64)
    s = np.exp(rng.uniform(-600.0, 0.0, k.size))
    q = rng.uniform(0.0, 1.0, 1000).astype(np.float32).astype(np.float64)
    _check(q, k, v, s, H, 1, tol=2e-6, dtype=np.float32)


def test_split_and_merge():
    """Bands within ``limit - 1/2`` of log each, the heaviest first; a merge is the exact sum."""
    ls = np.random.default_rng(0).uniform(-500.0, 500.0, 1000)
    band, count = bands.split(ls, float(ls.max() - ls.min()), truncated.CELLS_SPREAD)
    for b in range(count):
        part = ls[band == b]
        assert part.max() - part.min() <= truncated.CELLS_SPREAD - 0.5
    assert np.all(np.diff([ls[band == b].max() for b in range(count)]) < 0)
    shift, out = np.array([0.0, -np.inf, 5.0]), np.array([[1.0, 2.0], [0.0, 0.0], [3.0, 1.0]])
    bands.merge_rows(shift, out, np.array([0, 1, 2]), np.array([1.0, 2.0, -np.inf]),
                     np.array([[1.0, 1.0], [4.0, 5.0], [9.0, 9.0]]))
    want = np.array([[np.exp(-1.0) + 1.0, 2.0 * np.exp(-1.0) + 1.0], [4.0, 5.0], [3.0, 1.0]])
    assert shift.tolist() == [1.0, 2.0, 5.0] and np.allclose(out, want, rtol=1e-15)


def test_the_price_counts_the_bands():
    """``pairs`` prices each band a query takes: a wider spread costs more than none, and no more
    than the bands a query takes times the widest reach."""
    x = np.linspace(0.0, 1.0, 100_000)
    s = np.exp(np.random.default_rng(1).uniform(-300.0, 300.0, x.size))
    plain, wide = truncated.pairs(x, x, 0.01), truncated.pairs(x, x, 0.01, sample_weight=s)
    shares = truncated.cells_shares(s)
    assert 2 <= len(shares) <= 3 and plain < wide <= plain * sum(r for _, r in shares) * 1.0001
    assert truncated.pairs(x, x, 0.01, sample_weight=np.ones(x.size)) == plain
