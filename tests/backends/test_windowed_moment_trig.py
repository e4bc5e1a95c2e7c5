"""Windowed moment sums of the cosine and parzen kernels: prefix tables of the split sweep.

Every entry is compared, on every query, with the reference backend to ``rtol`` times its natural
size ``N = sum |w| |u|^j [|v|]`` (written plainly here): 1e-12 in float64, 2e-5 in float32. A spy
on the pair sums shows that the tables served the queries (a regression to pair-by-pair sums
fails), and local fits built on them agree with a weighted least squares written out per query.
"""

from __future__ import annotations

import numpy as np
import pytest

from _windowed_checks import compare as _compare
from _windowed_checks import sorted_data, spy_pair_rows
from nadaraya.backends._windowed_mtrig import trig_coefficients, trig_moments
from nadaraya.kernels import get

TRIG = ["cosine", "parzen"]


@pytest.fixture
def pair_rows(monkeypatch):
    """How many queries each call sends to the 1-D pair-by-pair loop."""
    return spy_pair_rows(monkeypatch)


def _data(rng, n, origin=0.0, p=2):
    return sorted_data(rng, n, origin, p, shift=2.0)


def _flags(q, k, v, kernel, h, degree, sw=None, exclude=None):
    """Which queries the route leaves to the pairs (called directly, keys sorted)."""
    sw = np.empty(0) if sw is None else sw
    exclude = np.empty(0, dtype=np.int64) if exclude is None else exclude
    q, k = np.ascontiguousarray(q[:, 0]), np.ascontiguousarray(k[:, 0])
    return trig_moments(q, k, 1.0 / h, v, sw, exclude, get(kernel), h, degree)[1]


@pytest.mark.parametrize("kernel", TRIG)
@pytest.mark.parametrize("degree", [1, 2])
def test_every_query_against_the_reference(kernel, degree, pair_rows):
    rng = np.random.default_rng(degree)
    n = 1200
    k, v = _data(rng, n)
    q = rng.uniform(-0.05, 1.05, (200, 1))
    sw = rng.uniform(0.2, 3.0, n)
    sw[::7] = 0.0
    _compare(q, k, v, kernel, 0.05, degree, sw=sw)
    # leave-one-out over unsorted keys: its own term masked out of its window
    perm = rng.permutation(n)
    _compare(k[perm], k[perm], v[perm, :1], kernel, 0.05, degree, sw=sw[perm], exclude=np.arange(n))
    # the edges' few queries may go pair by pair; the tables serve the rest
    assert sum(pair_rows) <= 0.03 * (200 + n)


@pytest.mark.parametrize("kernel", TRIG)
def test_keys_far_from_the_origin(kernel, pair_rows):
    """Keys near 1e6, h = 1e-3 (about 100 keys a window): the tables are centred per bucket."""
    rng = np.random.default_rng(6)
    k = 1e6 + np.sort(rng.uniform(0.0, 0.02, 1500))[:, None]
    q = 1e6 + rng.uniform(0.0, 0.02, (200, 1))
    v = rng.normal(size=(1500, 1))
    sw, exclude = rng.uniform(0.5, 1.5, 1500), rng.integers(-1, 1500, 200)
    got = _compare(q, k, v, kernel, 1e-3, 2, sw=sw, exclude=exclude)
    assert np.abs(got.moments[0]).max() <= 1e-3 * got.weight.max()
    assert sum(pair_rows) <= 0.05 * 200


@pytest.mark.parametrize("kernel", TRIG)
def test_duplicated_keys_single_key_and_empty_windows(kernel):
    """Keys on a grid of 101 values (each about 15 times), queries on them, between them and far
    outside (empty windows: zero sums); then a single key."""
    rng = np.random.default_rng(7)
    k = np.sort(np.round(rng.uniform(0.0, 1.0, 1500) * 100.0) / 100.0)[:, None]
    v = rng.normal(size=(1500, 1))
    q = np.concatenate([k[::10], rng.uniform(0.0, 1.0, (50, 1)), [[-5.0], [7.0]]])
    exclude = np.concatenate([np.arange(0, 1500, 10), -np.ones(52, int)])
    got = _compare(q, k, v, kernel, 0.04, 1, exclude=exclude)
    assert got.weight[-2:].tolist() == [0.0, 0.0] and np.all(got.moments[1][-2:] == 0.0)
    assert _flags(q, k, v, kernel, 0.04, 1).mean() <= 0.05
    _compare(np.array([[0.0], [0.3]]), np.array([[0.1]]), np.ones((1, 1)), kernel, 0.5, 2)


@pytest.mark.parametrize("kernel", TRIG)
def test_float32(kernel):
    rng = np.random.default_rng(32)
    k, v = (a.astype(np.float32) for a in _data(rng, 1000, p=1))
    q = rng.uniform(0.0, 1.0, (200, 1)).astype(np.float32)
    _compare(q, k, v, kernel, 0.05, 1, rtol=2e-5)
    _compare(k, k, v, kernel, 0.05, 2, exclude=np.arange(1000), rtol=2e-5)


@pytest.mark.parametrize("kernel", TRIG)
def test_small_moments_go_pair_by_pair(kernel):
    """Keys bunched within 1e-6 h of a query behind a crowd: the loss test sends it to the pairs."""
    rng = np.random.default_rng(13)
    k = np.sort(np.concatenate([rng.uniform(2.0, 2.69, 3000), 3.7 + rng.uniform(-1e-6, 1e-6, 40), [10.0]]))
    q = np.array([3.7, 2.5])
    v = rng.normal(size=(k.size, 1))
    assert _flags(q[:, None], k[:, None], v, kernel, 1.0, 1).tolist() == [True, False]
    _compare(q[:, None], k[:, None], v, kernel, 1.0, 1)


def test_coefficients_match_the_profiles():
    u = np.linspace(0.0, 1.0, 101)
    c = trig_coefficients(get("parzen"))
    polyval = np.polynomial.polynomial.polyval
    pieces = np.where(u <= 0.5, polyval(u, c[0]), polyval(u, c[1]))
    np.testing.assert_allclose(pieces, get("parzen").profile(u), rtol=0, atol=1e-14)
    assert trig_coefficients(get("cosine"))[0, 0] == pytest.approx(np.pi / 4)
    assert trig_coefficients(get("epanechnikov")) is None


def _plain_wls(at, x, y, sw, kernel, h, degree, loo):
    out = np.empty(at.size)
    for r, i in enumerate(at):
        w = get(kernel).profile((x - x[i]) / h) * sw
        if loo:
            w[i] = 0.0
        keep = w > 0
        design = np.vander(x[keep] - x[i], degree + 1, increasing=True)
        root = np.sqrt(w[keep])
        out[r] = np.linalg.lstsq(design * root[:, None], y[keep] * root, rcond=None)[0][0]
    return out


@pytest.mark.parametrize("kernel", TRIG)
@pytest.mark.parametrize("degree", [1, 2])
def test_local_fits_match_weighted_least_squares(kernel, degree, pair_rows):
    import nadaraya

    rng = np.random.default_rng(3)
    n = 2000
    x = rng.uniform(0.0, 1.0, n)
    y = np.sin(6 * x) + x + rng.normal(0.0, 0.3, n)
    sw = rng.uniform(0.5, 2.0, n)
    at = np.argsort(x)[np.linspace(20, n - 21, 20).astype(int)]
    kw = dict(kernel=kernel, bandwidth=0.04, degree=degree, sample_weight=sw)
    fit = nadaraya.pool(x, x, y, **kw)
    loo = nadaraya.loo_pool(x, y, **kw)
    for got, loo_ in ((fit, False), (loo, True)):
        want = _plain_wls(at, x, y, sw, kernel, 0.04, degree, loo_)
        np.testing.assert_allclose(got[at], want, rtol=0, atol=1e-9)
    assert sum(pair_rows) <= 0.02 * 2 * n
