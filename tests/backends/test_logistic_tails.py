"""The logistic backend: exact logistic sums in 1-D (near windows plus the tails' Laplacian series)
against the reference backend, the series' cut against the weight written out, and auto's choice."""

from __future__ import annotations

import numpy as np
import pytest

import nadaraya
from nadaraya.backends import choose_for_data, explain, logistic, reference
from nadaraya.kernels import get

K = get("logistic")
TOL = 1e-12


def _both(q, x, v, h, sw=None, ex=None, half_width=None):
    kw = {"kernel": K, "bandwidth": np.array([h]), "sample_weight": sw, "exclude": ex}
    return logistic.partials(q, x, v, half_width=half_width, **kw), reference.partials(q, x, v, **kw)


def _check(q, x, v, h, sw=None, ex=None, half_width=None):
    """Every query's prediction within TOL of its natural size ``sum w |y| / sum w`` (the
    reference's), and its total weight ``shift + log weight`` within TOL relative."""
    a, b = _both(q, x, v, h, sw, ex, half_width)
    size = reference.partials(q, x, np.abs(v), kernel=K, bandwidth=np.array([h]), sample_weight=sw,
                              exclude=ex).finalize()
    fa, fb = a.finalize(), b.finalize()
    assert np.array_equal(np.isnan(fa), np.isnan(fb))
    ok = ~np.isnan(fb)
    assert np.all(np.abs(fa - fb)[ok] <= TOL * size[ok] + 1e-300)
    assert np.array_equal(a.weight > 0, b.weight > 0)
    pos = b.weight > 0
    la = a.shift[pos] + np.log(a.weight[pos])
    lb = b.shift[pos] + np.log(b.weight[pos])
    assert np.all(np.abs(la - lb) <= TOL * np.maximum(1.0, np.abs(lb)))
    return a, b


def _keys(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "uniform":
        return rng.uniform(0.0, 1.0, n)
    if kind == "clustered":
        return rng.choice([0.0, 0.3, 0.31, 0.9], n) + rng.normal(0.0, 1e-3, n)
    if kind == "cauchy":
        return np.clip(rng.standard_cauchy(n), -1e4, 1e4)
    return np.round(rng.uniform(0.0, 1.0, n), 2)  # duplicates


@pytest.mark.parametrize("kind", ["uniform", "clustered", "cauchy", "duplicates"])
@pytest.mark.parametrize("scale", [1e-4, 1e-2, 1.0, 1e2])
def test_against_reference(kind, scale):
    rng = np.random.default_rng(7)
    x = _keys(kind, 400, rng)
    q = np.concatenate([_keys(kind, 200, rng), rng.uniform(x.min() - 1, x.max() + 1, 50)])
    v = rng.normal(size=(400, 2))
    h = scale * float(np.ptp(x))
    _check(q[:, None], x[:, None], v, h)
    _check(x[:, None], x[:, None], v, h, ex=np.arange(400))  # leave-one-out


@pytest.mark.parametrize("half_width", [0.25, 1.0, 3.0, 8.0])
def test_any_window_width_gives_the_same_sums(half_width):
    rng = np.random.default_rng(1)
    x = rng.uniform(0.0, 1.0, (500, 1))
    v = rng.normal(size=(500, 1))
    _check(x, x, v, 0.003, half_width=half_width)
    _check(x, x, v, 0.003, ex=np.arange(500), half_width=half_width)


def test_sample_weights_with_zeros_and_several_outputs():
    rng = np.random.default_rng(2)
    x = rng.uniform(0.0, 1.0, (300, 1))
    v = rng.normal(size=(300, 3))
    sw = rng.uniform(0.0, 5.0, 300)
    sw[::4] = 0.0
    _check(x, x, v, 0.01, sw=sw)
    _check(x, x, v, 0.01, sw=sw, ex=np.arange(300))
    sw[:] = 0.0
    sw[17] = 3.0  # one key carries all the weight
    a, _ = _check(x, x, v, 0.01, sw=sw)
    assert np.allclose(a.finalize(), v[17], rtol=1e-14, atol=0)


def test_keys_far_from_zero_with_a_small_bandwidth():
    rng = np.random.default_rng(3)
    x = 1e6 + rng.uniform(0.0, 1e-3, (400, 1))
    v = rng.normal(size=(400, 1))
    _check(x, x, v, 1e-6)
    _check(x, x, v, 1e-6, ex=np.arange(400))


def test_empty_windows_between_clusters():
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.uniform(0.0, 0.01, 200), rng.uniform(10.0, 10.01, 200)])[:, None]
    v = rng.normal(size=(400, 1))
    q = np.linspace(1.0, 9.0, 50)[:, None]  # no key within 8 bandwidths: the tails' series only
    _check(q, x, v, 0.1, half_width=8.0)
    _check(q, x, v, 0.1)


def test_far_queries_get_the_nearest_keys_value():
    x = np.array([[1.0], [2.0], [3.0]])
    v = np.array([[3.0], [5.0], [4.0]])
    far = np.array([[1e9], [-1e9], [1e300]])
    p = logistic.partials(far, x, v, kernel=K, bandwidth=np.array([0.01]))
    assert p.finalize()[:, 0].tolist() == [4.0, 3.0, 4.0]
    assert np.all(np.isfinite(p.shift)) and np.all(p.weight > 0)
    # a thousand bandwidths away the other keys still count: e^-1 and e^-2 of the nearest's weight
    _check(np.array([[1003.0], [-1000.0]]), x, v, 1.0)


def test_single_key_and_no_key_left():
    x = np.array([[0.5]])
    v = np.array([[2.0]])
    q = np.array([[0.5], [7.0], [-1e8]])
    a, _ = _check(q, x, v, 0.1)
    assert a.finalize()[:, 0].tolist() == [2.0, 2.0, 2.0]
    b, _ = _check(x, x, v, 0.1, ex=np.array([0]))  # its only key left out: empty, as the reference
    assert b.weight[0] == 0 and b.shift[0] == -np.inf


def test_left_out_key_among_the_far_ones_is_masked():
    rng = np.random.default_rng(5)
    x = rng.uniform(0.0, 1.0, (300, 1))
    v = rng.normal(size=(300, 2))
    q = rng.uniform(0.0, 1.0, (200, 1))
    _check(q, x, v, 0.002, ex=rng.integers(-1, 300, 200))


def test_float32_within_float32_rounding():
    rng = np.random.default_rng(6)
    x = rng.uniform(0.0, 1.0, (300, 1))
    v = rng.normal(size=(300, 1))
    a = logistic.partials(x.astype(np.float32), x.astype(np.float32), v.astype(np.float32), kernel=K,
                          bandwidth=np.array([0.01], dtype=np.float32))
    b = reference.partials(x, x, v, kernel=K, bandwidth=np.array([0.01]))
    size = reference.partials(x, x, np.abs(v), kernel=K, bandwidth=np.array([0.01])).finalize()
    assert a.weight.dtype == np.float32 and a.shift.dtype == np.float32
    assert np.all(np.abs(a.finalize().astype(np.float64) - b.finalize()) <= 1e-5 * size)


def test_series_cut_against_the_weight_written_out():
    """For every cut point x, the first ``terms(x)`` terms of the series give the weight
    ``e^-u / (1 + e^-u)^2`` of every key ``u >= x`` within CUT relative (50 digits)."""
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workdps(50):  # not the process-wide precision other tests may use
        for x in (0.25, 0.3, 0.5, 1.0, 2.5, 3.0, 8.0, 20.0, 45.0):
            k = logistic.terms(x)
            for u in (x, x + 1e-3, x + 0.1, x + 1.0, 2 * x + 5.0):
                a = mpmath.exp(-mpmath.mpf(u))
                exact = a / (1 + a) ** 2
                cut = sum((-1) ** (j + 1) * j * a**j for j in range(1, k + 1))
                assert abs(cut - exact) <= logistic.CUT * exact
            if k > 1:  # and one term fewer would not do at x itself
                a = mpmath.exp(-mpmath.mpf(x))
                short = sum((-1) ** (j + 1) * j * a**j for j in range(1, k))
                bound = k * a ** (k - 1) * (1 + a) ** 2  # the bound terms() solves, one term fewer
                weight = a / (1 + a) ** 2
                assert bound > logistic.CUT or abs(short - weight) <= logistic.CUT * weight
    with pytest.raises(ValueError, match=r"x=0\.1"):
        logistic.terms(0.1)


def test_auto_takes_it_in_1d_at_degree_0_and_says_why():
    rng = np.random.default_rng(8)
    x = rng.uniform(0.0, 1.0, 1000)
    y = np.sin(6 * x) + rng.normal(0.0, 0.1, 1000)
    h = np.array([0.01])
    got = choose_for_data(K, x[:, None], x[:, None], h)
    assert got is not None and got.name == "logistic"
    assert "2^-60" in got.reason
    assert explain("logistic", n=1000, m=1000, bandwidth=0.01, queries=x[:, None],
                   keys=x[:, None]).startswith("logistic:")
    local = choose_for_data(K, x[:, None], x[:, None], h, moments=1)
    assert local is not None and local.name == "logistic" and "degree-1" in local.reason
    auto = nadaraya.pool(x, x, y, kernel="logistic", bandwidth=0.01)
    ref = nadaraya.pool(x, x, y, kernel="logistic", bandwidth=0.01, backend="reference")
    assert np.allclose(auto, ref, rtol=1e-12, atol=1e-12)
    loo = nadaraya.loo_pool(x, y, kernel="logistic", bandwidth=0.01)
    loo_ref = nadaraya.loo_pool(x, y, kernel="logistic", bandwidth=0.01, backend="reference")
    assert np.allclose(loo, loo_ref, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="moments"):
        logistic.partials(x[:, None], x[:, None], y[:, None], kernel=K, bandwidth=h, moments=3)


@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("kind", ["uniform", "duplicates", "far"])
def test_moments_against_reference(degree, kind):
    """The local fits' moment sums on every query within TOL of their natural size, bounded by
    ``max|y| sum w (1 + u^(2r))`` (``|u|^j <= 1 + u^(2r)`` for ``j <= 2r``), leave-one-out and
    sample weights with zeros."""
    rng = np.random.default_rng(9)
    x = 1e6 + rng.uniform(0.0, 1e-3, 300) if kind == "far" else _keys(kind, 300, rng)
    v = rng.normal(size=(300, 2))
    sw = rng.uniform(0.0, 2.0, 300)
    sw[::5] = 0.0
    for scale in (1e-3, 3e-2, 1.0):
        h = scale * float(np.ptp(x))
        for ex in (None, np.arange(300)):
            kw = {"kernel": K, "bandwidth": np.array([h]), "sample_weight": sw, "exclude": ex,
                  "moments": degree}
            a = logistic.partials(x[:, None], x[:, None], v, **kw)
            b = reference.partials(x[:, None], x[:, None], v, **kw)
            bound = (np.abs(v).max() + 1.0) * (b.weight + b.moments[2 * degree - 1].reshape(-1))
            r = np.exp(a.shift - b.shift)
            for got, want in zip((a.weight, a.value, *a.moments), (b.weight, b.value, *b.moments)):
                shape = (-1,) + (1,) * (got.ndim - 1)
                assert np.all(np.abs(got * r.reshape(shape) - want) <= TOL * bound.reshape(shape))


@pytest.mark.parametrize("degree", [1, 2])
def test_local_fit_against_plain_weighted_least_squares(degree):
    """``pool(degree=...)`` on this backend within 1e-9 of a weighted least squares written out."""
    rng = np.random.default_rng(10)
    x = rng.uniform(0.0, 1.0, 600)
    y = np.sin(6 * x) + rng.normal(0.0, 0.1, 600)
    at = np.linspace(0.05, 0.95, 15)
    kw = {"kernel": "logistic", "bandwidth": 0.02, "degree": degree}
    got = nadaraya.pool(at, x, y, backend="logistic", **kw)
    for q, g in zip(at, got):
        u = (x - q) / 0.02
        w = np.exp(-np.abs(u)) / (1.0 + np.exp(-np.abs(u))) ** 2
        design = np.vander(x - q, degree + 1, increasing=True)
        beta = np.linalg.lstsq(design * np.sqrt(w)[:, None], y * np.sqrt(w), rcond=None)[0]
        assert abs(g - beta[0]) <= 1e-9
    loo = nadaraya.loo_pool(x, y, backend="logistic", **kw)
    ref = nadaraya.loo_pool(x, y, backend="reference", **kw)
    assert np.all(np.abs(loo - ref) <= 1e-9)
