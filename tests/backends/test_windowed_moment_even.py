"""Windowed moment sums of even kernels of long expansions (biweight degree 2, triweight): the even sweep.

Every entry is compared, on every query, with the reference backend to ``rtol`` times its natural
size ``N = sum |w| |u|^j [|v|]`` (written plainly here): 1e-12 in float64, 2e-5 in float32. A spy
on the pair sums shows that the prefix moments served the queries (a regression to pair-by-pair
sums fails), and local fits built on them agree with a weighted least squares written out per
query.
"""

from __future__ import annotations

import numpy as np
import pytest

from _windowed_checks import compare as _compare
from _windowed_checks import sorted_data, spy_pair_rows
from nadaraya.backends import _windowed_msplit
from nadaraya.backends._windowed_msplit import split_moments
from nadaraya.kernels import get

#: (kernel, degree) that take the even pivot sweep (cells of h / 2)
EVEN = [("biweight", 2), ("triweight", 1), ("triweight", 2)]


@pytest.fixture
def pair_rows(monkeypatch):
    """How many queries each call sends to the 1-D pair-by-pair loop."""
    return spy_pair_rows(monkeypatch)


def _data(rng, n, origin=0.0, p=1):
    return sorted_data(rng, n, origin, p, shift=0.0)


def test_the_even_sweep_serves_them(monkeypatch):
    """The route: an even kernel of a long expansion takes :func:`even_sweep`, never the split."""
    called = []
    real = _windowed_msplit.even_sweep

    def spy(*a):
        called.append(a)
        return real(*a)

    monkeypatch.setattr(_windowed_msplit, "even_sweep", spy)
    x = np.linspace(0.0, 1.0, 200)
    none = np.empty(0, dtype=np.int64)
    for kernel, degree in EVEN:
        split_moments(x, x, 10.0, x[:, None], np.empty(0), none, get(kernel), 0.1, degree)
    split_moments(x, x, 10.0, x[:, None], np.empty(0), none, get("tricube"), 0.1, 1)
    assert [a[2:] for a in called] == [(2, 2), (1, 1), (2, 2)]  # (degree, cells per h) each


@pytest.mark.parametrize("kernel, degree", EVEN)
def test_every_query_against_the_reference(kernel, degree, pair_rows):
    """Queries inside and past the keys, sample weights (some zero), two outputs; then
    leave-one-out over unsorted keys: its own term masked out of its window."""
    rng = np.random.default_rng(40 + degree)
    n = 1200
    k, v = _data(rng, n, p=2)
    q = rng.uniform(-0.05, 1.05, (200, 1))
    sw = rng.uniform(0.2, 3.0, n)
    sw[::7] = 0.0
    _compare(q, k, v, kernel, 0.05, degree, sw=sw)
    perm = rng.permutation(n)
    _compare(k[perm], k[perm], v[perm, :1], kernel, 0.05, degree, sw=sw[perm], exclude=np.arange(n))
    assert sum(pair_rows) <= 0.03 * (200 + n)


@pytest.mark.parametrize("kernel, degree", [("triweight", 2), ("biweight", 2)])
def test_keys_far_from_the_origin(kernel, degree, pair_rows):
    """Keys near 1e6, h = 1e-3 (about 100 keys a window): the tables are centred per cell."""
    rng = np.random.default_rng(6)
    k = 1e6 + np.sort(rng.uniform(0.0, 0.02, 1500))[:, None]
    q = 1e6 + rng.uniform(0.0, 0.02, (200, 1))
    v = rng.normal(size=(1500, 1))
    sw, exclude = rng.uniform(0.5, 1.5, 1500), rng.integers(-1, 1500, 200)
    got = _compare(q, k, v, kernel, 1e-3, degree, sw=sw, exclude=exclude)
    assert np.abs(got.moments[0]).max() <= 1e-3 * got.weight.max()
    assert sum(pair_rows) <= 0.05 * 200


def test_duplicated_keys_single_key_and_empty_windows():
    """Keys on a grid of 101 values (each about 15 times), queries on them, between them and far
    from every key (empty windows: zero sums); then a single key."""
    rng = np.random.default_rng(7)
    k = np.sort(np.round(rng.uniform(0.0, 1.0, 1500) * 100.0) / 100.0)[:, None]
    v = rng.normal(size=(1500, 1))
    q = np.concatenate([k[::10], rng.uniform(0.0, 1.0, (50, 1)), [[5.0], [-3.0]]])
    exclude = np.concatenate([np.arange(0, 1500, 10), -np.ones(52, int)])
    got = _compare(q, k, v, "triweight", 0.04, 2, exclude=exclude)
    assert got.weight[-2:].tolist() == [0.0, 0.0]
    _, flag = split_moments(np.ascontiguousarray(q[:, 0]), np.ascontiguousarray(k[:, 0]), 1.0 / 0.04, v,
                            np.empty(0), np.empty(0, dtype=np.int64), get("triweight"), 0.04, 2)
    assert flag[:-2].mean() <= 0.15  # the few distinct keys of a window make the bound conservative
    _compare(np.array([[0.5], [0.52], [0.9]]), np.array([[0.51]]), np.ones((1, 1)), "biweight", 0.05, 2)


@pytest.mark.parametrize("kernel, degree", [("biweight", 2), ("triweight", 2)])
def test_float32(kernel, degree):
    rng = np.random.default_rng(32)
    k, v = (a.astype(np.float32) for a in _data(rng, 1000))
    q = rng.uniform(0.0, 1.0, (200, 1)).astype(np.float32)
    _compare(q, k, v, kernel, 0.05, degree, rtol=2e-5)
    _compare(k, k, v, kernel, 0.05, degree, exclude=np.arange(1000), rtol=2e-5)


def test_small_moments_go_pair_by_pair():
    """Keys bunched within 1e-6 h of a query at a window's edge behind a crowd: the loss test
    sends it to the pairs, and the pairs make it exact."""
    rng = np.random.default_rng(13)
    k = np.sort(np.concatenate([rng.uniform(2.0, 2.69, 3000), 3.7 + rng.uniform(-1e-6, 1e-6, 40), [10.0]]))
    q = np.array([3.7, 2.5])
    v = rng.normal(size=(k.size, 1))
    _, flag = split_moments(q, k, 1.0, v, np.empty(0), np.empty(0, dtype=np.int64), get("triweight"), 1.0, 2)
    assert flag.tolist() == [True, False]
    _compare(q[:, None], k[:, None], v, "triweight", 1.0, 2)


def _plain_wls(at, x, y, kernel, h, degree, loo):
    out = np.empty(at.size)
    for r, i in enumerate(at):
        w = get(kernel).profile((x - x[i]) / h)
        if loo:
            w[i] = 0.0
        keep = w > 0
        design = np.vander(x[keep] - x[i], degree + 1, increasing=True)
        root = np.sqrt(w[keep])
        out[r] = np.linalg.lstsq(design * root[:, None], y[keep] * root, rcond=None)[0][0]
    return out


@pytest.mark.parametrize("kernel, degree", EVEN)
def test_local_fits_match_weighted_least_squares(kernel, degree, pair_rows):
    import nadaraya

    rng = np.random.default_rng(3)
    n = 2000
    x = rng.uniform(0.0, 1.0, n)
    y = np.sin(6 * x) + x + rng.normal(0.0, 0.3, n)
    at = np.argsort(x)[np.linspace(20, n - 21, 20).astype(int)]
    fit = nadaraya.pool(x, x, y, kernel=kernel, bandwidth=0.04, degree=degree)
    loo = nadaraya.loo_pool(x, y, kernel=kernel, bandwidth=0.04, degree=degree)
    np.testing.assert_allclose(fit[at], _plain_wls(at, x, y, kernel, 0.04, degree, False), rtol=0, atol=1e-9)
    np.testing.assert_allclose(loo[at], _plain_wls(at, x, y, kernel, 0.04, degree, True), rtol=0, atol=1e-9)
    assert sum(pair_rows) <= 0.02 * 2 * n
