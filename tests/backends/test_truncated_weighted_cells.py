"""Sample weights on the truncated backend's dense cells (``nadaraya.backends._truncated_cells``): each
key's factor carries ``s / s_max``, ``L`` widened by ``log(s_max / s_min)``; every column (weight,
values, each moment of degree 1 and 2) against the reference backend on every query, within
1e-13 of that column's scale (its sum of absolute terms: ``_truncated_checks.scales``)."""

from __future__ import annotations

import numpy as np
import pytest

import nadaraya
from _spies import cells_served
from _truncated_checks import scales
from nadaraya.backends import reference, truncated
from nadaraya.kernels import get

GAUSS = get("gaussian")
#: the bandwidth: about 45 keys in a cell of 1.5 bandwidths, 75 in the moments' 2.5
H = 0.02


@pytest.fixture
def served(monkeypatch):
    """The share of queries the dense cells served in each truncated call with sample weights."""
    return cells_served(monkeypatch, weighted=True)


def _check(q, k, v, s, h, degree, ex=None, tol=1e-13, dtype=np.float64):
    """Every column of the truncated partials (inputs cast to ``dtype``) against the reference's
    (float64 inputs of the same values) on every query, within ``tol`` of each column's scale."""
    kw = {"kernel": GAUSS, "bandwidth": np.array([h]), "moments": degree, "exclude": ex, "sample_weight": s}
    a = truncated.partials(q[:, None].astype(dtype), k[:, None].astype(dtype), v.astype(dtype), **kw)
    b = reference.partials(q[:, None], k[:, None], v, **kw)
    scale = np.exp(np.asarray(a.shift, dtype=np.float64) - b.shift)
    cols = scales(q, k, v, s, h, b.shift, ex, degree)
    got = [a.weight, a.value, *a.moments]
    want = [b.weight, b.value, *b.moments]
    assert len(got) == len(cols)
    for j, (x, y, c) in enumerate(zip(got, want, cols, strict=True)):
        x = np.asarray(x, dtype=np.float64).reshape(q.size, -1) * scale[:, None]
        err = np.abs(x - y.reshape(q.size, -1)) / c.reshape(q.size, -1)
        assert err.max() <= tol, (j, float(err.max()))


def _data(n, seed, p=1, origin=0.0, width=1.0):
    rng = np.random.default_rng(seed)
    k = origin + rng.uniform(0.0, width, n)
    v = np.column_stack([np.sin(6 * (k - origin) / width), rng.normal(size=n), np.ones(n)])[:, :p]
    return k, v, rng


@pytest.mark.parametrize("degree", [0, 1, 2])
@pytest.mark.parametrize("p", [1, 3])
def test_uniform_weights(degree, p, served):
    k, v, rng = _data(2000, degree + 10 * p, p)
    q = rng.uniform(-0.02, 1.02, 1500)
    s = rng.uniform(0.5, 2.0, k.size)
    _check(q, k, v, s, H, degree)
    assert served and served[-1] > 0.9


@pytest.mark.parametrize("degree", [0, 1, 2])
def test_weights_spanning_twelve_decades_and_leave_one_out(degree, served):
    k, v, rng = _data(2000, 3 + degree, 3)
    s = np.exp(rng.uniform(np.log(1e-6), np.log(1e6), k.size))
    s[:2] = 1e-6, 1e6  # log(s_max / s_min) = 27.6, under the cut-off
    q = rng.uniform(0.0, 1.0, 1500)
    _check(q, k, v, s, H, degree)
    assert served[-1] > 0.9
    _check(k, k, v, s, H, degree, ex=np.arange(k.size))  # each key left out: masked
    assert served[-1] > 0.9


@pytest.mark.parametrize("degree", [0, 2])
def test_one_heavy_key_far_away(degree, served):
    """A key of weight 1e11 ten bandwidths past the others: near it the widened reach must hold it
    (its terms are about 1e-11 of the nearest light keys')."""
    k, v, rng = _data(2000, 7, 3)
    k[0], v[0] = 1.2, 5.0
    s = rng.uniform(0.5, 2.0, k.size)
    s[0] = 1e11
    q = np.concatenate([rng.uniform(0.0, 1.0, 1000), np.linspace(0.95, 1.0, 200)])
    _check(q, k, v, s, H, degree)
    assert served[-1] > 0.8


@pytest.mark.parametrize("degree", [0, 1])
def test_a_wider_spread_takes_bands_on_the_cells(degree, served):
    """Above CELLS_SPREAD the keys are split into bands by weight (``_truncated_bands``, tested
    there), each on the dense cells."""
    k, v, rng = _data(2000, 5, 3)
    s = np.exp(rng.uniform(np.log(1e-40), np.log(1e40), k.size))
    s[:2] = 1e-40, 1e40  # log ratio 184, above CELLS_SPREAD
    assert np.log(s.max() / s.min()) > truncated.CELLS_SPREAD
    q = rng.uniform(0.0, 1.0, 1000)
    _check(q, k, v, s, H, degree)
    assert len(served) == 2  # two bands, each offered to the cells
    _check(k, k, v, s, H, degree, ex=np.arange(k.size))


@pytest.mark.parametrize("degree", [0, 1, 2])
def test_duplicates_and_zero_weights(degree, served):
    k, v, rng = _data(2000, 11, 3)
    k = np.round(k, 3)  # about three keys at each place
    s = rng.uniform(0.5, 2.0, k.size)
    s[rng.random(k.size) < 0.1] = 0.0
    _check(k, k, v, s, H, degree, ex=np.arange(k.size))
    assert served[-1] > 0.9


@pytest.mark.parametrize("degree", [0, 1, 2])
def test_far_from_the_origin(degree, served):
    """Keys within 0.01 of 1e6 at h = 2e-4: the centres' rounding is a margin of the series."""
    k, v, rng = _data(2000, 13, 3, origin=1e6, width=0.01)
    s = np.exp(rng.uniform(-5.0, 5.0, k.size))
    q = 1e6 + rng.uniform(0.0, 0.01, 1500)
    _check(q, k, v, s, 2e-4, degree)
    assert served[-1] > 0.9


@pytest.mark.parametrize("degree", [0, 1, 2])
def test_float32(degree, served):
    k, v, rng = _data(2000, 17, 3)
    k, v = k.astype(np.float32).astype(np.float64), v.astype(np.float32).astype(np.float64)
    s = rng.uniform(0.5, 2.0, k.size)
    q = rng.uniform(0.0, 1.0, 1500).astype(np.float32).astype(np.float64)
    _check(q, k, v, s, H, degree, tol=2e-6, dtype=np.float32)
    assert served[-1] > 0.9


def _plain_wls(q, k, y, s, h, degree, loo):
    """The local weighted least squares, written out: per query, ``lstsq`` of the weighted
    polynomial in ``k - q``."""
    out = np.empty(q.size)
    for i in range(q.size):
        u = (q[i] - k) / h
        lw = np.log(s) - 0.5 * u * u
        if loo:
            lw[i] = -np.inf
        w = np.exp(lw - lw.max())
        X = np.vander(k - q[i], degree + 1, increasing=True)
        r = np.sqrt(w)
        out[i] = np.linalg.lstsq(X * r[:, None], y * r, rcond=None)[0][0]
    return out


@pytest.mark.parametrize("degree", [0, 1, 2])
def test_pool_and_loo_pool_against_weighted_least_squares(degree, served):
    k, v, rng = _data(2000, 19)
    y = v[:, 0] + 0.1 * rng.normal(size=k.size)
    s = np.exp(rng.uniform(-10.0, 10.0, k.size))
    q = rng.uniform(0.0, 1.0, 1200)
    got = nadaraya.pool(q[:, None], k[:, None], y, bandwidth=H, sample_weight=s, degree=degree,
                        backend="truncated")
    np.testing.assert_allclose(got, _plain_wls(q, k, y, s, H, degree, False), rtol=0, atol=1e-9)
    got = nadaraya.loo_pool(k[:, None], y, bandwidth=H, sample_weight=s, degree=degree, backend="truncated")
    np.testing.assert_allclose(got, _plain_wls(k, k, y, s, H, degree, True), rtol=0, atol=1e-9)
    assert len(served) == 2 and min(served) > 0.9


@pytest.mark.parametrize("degree", [0, 1])
def test_heavy_keys_reach_the_light_ones(degree, served):
    """Light keys (1e-6, values 1e-5) with heavy ones (1e6, values 1) every 15 bandwidths: a query
    among light keys, 10.5 bandwidths from a heavy key, takes about 1e-12 of its weight from it
    (1e-8 of its values, more of its moments); the cells' reach and cut, widened by
    ``log(s_max / s_min)``, must hold it (unwidened, they leave out keys that far from the query)."""
    k, v, rng = _data(2000, 23, 3)
    heavy = np.arange(0.1, 1.0, 15 * H)
    k[:heavy.size] = heavy
    v *= 1e-5
    v[:heavy.size] = 1.0
    s = np.full(k.size, 1e-6)
    s[:heavy.size] = 1e6
    q = rng.uniform(0.0, 1.0, 3000)
    _check(q, k, v, s, H, degree)
    assert served[-1] > 0.9


def test_auto_takes_the_cells_for_weights_they_take():
    """``auto`` prices sample weights by ``cells_shares``: weights within exp(CELLS_SPREAD) of each
    other ride the dense cells at a widened reach; one weight 1e-60 of the rest (log spread 138)
    puts that key in a band of its own, and the call still takes the truncated backend."""
    from nadaraya._core.call import choose_backend, prepare

    rng = np.random.default_rng(3)
    x = rng.uniform(0.0, 1.0, 10_000)
    y = np.sin(6 * x)
    near = rng.uniform(0.5, 2.0, x.size)
    far = np.r_[1e-60, np.ones(x.size - 1)]
    assert np.log(far.max() / far.min()) > truncated.CELLS_SPREAD
    assert len(truncated.cells_shares(near)) == 1 and len(truncated.cells_shares(far)) == 2
    assert truncated.cells_shares(None) == truncated.cells_shares(np.r_[0.0, 1.0, 1.0]) == ((1.0, 1.0),)
    plain = truncated.pairs(x, x, 0.05, moments=1)
    assert plain < truncated.pairs(x, x, 0.05, moments=1, sample_weight=near) < 1.1 * plain
    assert plain < truncated.pairs(x, x, 0.05, moments=1, sample_weight=far) < 1.2 * plain
    for w in (near, far):
        call = prepare(x, x, y, kernel="gaussian", bandwidth=0.05, sample_weight=w)
        got = choose_backend(call, moments=1)
        assert got.name == "truncated", got
