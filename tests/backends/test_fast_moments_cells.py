"""Local linear and quadratic fits on the truncated backend's dense cells (the exact series),
against a plainly written weighted least squares on every query; and the small-pass threads rule."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import nadaraya
from _spies import cells_served
from nadaraya.backends import compute, truncated
from nadaraya.kernels import get


def plain_wls(xq, xk, y, h, degree, sw=None, loo=False):
    """The local polynomial estimate at each query, written out: Gaussian weights, one lstsq each."""
    out = np.empty(xq.size)
    for i, q in enumerate(xq):
        w = np.exp(-0.5 * ((xk - q) / h) ** 2)
        if sw is not None:
            w = w * sw
        if loo:
            w[i] = 0.0
        design = np.vander(xk - q, degree + 1, increasing=True)
        root = np.sqrt(w)
        beta = np.linalg.lstsq(design * root[:, None], y * root, rcond=None)[0]
        out[i] = beta[0]
    return out


@pytest.fixture
def served(monkeypatch):
    """The share of queries the dense cells served in each truncated call."""
    return cells_served(monkeypatch)


def data(n, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 1.0, n)
    return x, np.sin(6 * x) + x + rng.normal(0.0, 0.3, n)


@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("h", [0.01, 0.3])
def test_pool_matches_plain_wls_on_every_query(served, degree, h):
    x, y = data(2000)
    q = np.linspace(0.0, 1.0, 2000)  # as dense as the keys: the cells pay
    got = nadaraya.pool(q, x, y, bandwidth=h, degree=degree, backend="truncated")
    assert served and served[-1] > 0.9  # the cells, not the key-by-key windows, did the sums
    want = plain_wls(q, x, y, h, degree)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)


@pytest.mark.parametrize("degree", [0, 1, 2])
def test_loo_matches_plain_wls_on_every_query(served, degree):
    x, y = data(2000, seed=1)
    got = nadaraya.loo_pool(x, y, bandwidth=0.02, degree=degree, backend="truncated")
    assert served and served[-1] > 0.9
    want = plain_wls(x, x, y, 0.02, degree, loo=True)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)


def test_auto_takes_the_cells_for_local_fits():
    x = data(20000)[0][:, None]
    choice = nadaraya.backends.choose_for_data(get("gaussian"), x, x, np.array([0.3]), moments=1)
    assert choice is not None and choice.name == "truncated" and "dense cells" in choice.reason


def test_moments_of_several_columns_match_reference():
    """The value moments of every column, and each moment sum itself (not only the fit)."""
    from nadaraya.backends import reference

    x, _ = data(2000, seed=2)
    v = np.random.default_rng(3).normal(size=(2000, 3))
    kw = {"kernel": get("gaussian"), "bandwidth": np.array([0.02]), "moments": 2, "exclude": np.arange(2000)}
    a = truncated.partials(x[:, None], x[:, None], v, **kw)
    b = reference.partials(x[:, None], x[:, None], v, **kw)
    scale = np.exp(a.shift - b.shift)
    for ma, mb in zip(a.moments, b.moments, strict=True):
        ma, mb = ma.reshape(2000, -1) * scale[:, None], mb.reshape(2000, -1)
        np.testing.assert_allclose(ma, mb, rtol=0, atol=1e-13 * np.abs(mb).max())


def test_sample_weights_take_the_windows_exactly():
    x, y = data(2000, seed=4)
    sw = np.random.default_rng(5).uniform(0.5, 2.0, x.size)
    got = nadaraya.pool(x[:300], x, y, bandwidth=0.03, degree=2, sample_weight=sw, backend="truncated")
    np.testing.assert_allclose(got, plain_wls(x[:300], x, y, 0.03, 2, sw=sw), rtol=0, atol=1e-9)


def test_bad_moments_are_refused():
    x, y = data(100)
    with pytest.raises(ValueError, match="truncated"):
        compute("truncated", x[:, None], x[:, None], y[:, None], kernel=get("gaussian"), bandwidth=np.ones(1),
                moments=3)
    with pytest.raises(ValueError, match="truncated"):
        compute("truncated", np.ones((3, 2)), np.ones((3, 2)), np.ones((3, 1)), kernel=get("gaussian"),
                bandwidth=np.ones(2), moments=3)
    with pytest.raises(ValueError, match="degree"):
        nadaraya.pool(x, x, y, bandwidth=0.1, degree=4)


def test_mixed_loo_serial_equals_parallel():
    import numba

    from nadaraya.bandwidth._mixed_pass import mixed_loo

    rng = np.random.default_rng(6)
    n = 1200  # above SERIAL_WORK: the pool's threads run it
    xc, y = rng.uniform(size=(n, 1)), rng.normal(size=(n, 1))
    group = rng.integers(0, 3, n)
    table = np.log(np.array([[1.0, 0.3, 0.3], [0.3, 1.0, 0.3], [0.3, 0.3, 1.0]]))
    args = (xc, np.array([0.1]), np.zeros(n), group, table, y, 1)
    wide = mixed_loo(*args)
    old = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        one = mixed_loo(*args)
    finally:
        numba.set_num_threads(old)
    for a, b in zip((wide.shift, wide.weight, wide.value, *wide.moments),
                    (one.shift, one.weight, one.value, *one.moments), strict=True):
        assert np.array_equal(a, b)


def test_small_work_stays_on_the_calling_thread():
    from nadaraya._support.jit import SERIAL_WORK, run_ranges

    seen = set()

    def task(a, b, out):
        seen.add(threading.get_ident())
        out[a:b] = 1.0

    out = np.zeros(10_000)
    run_ranges(task, (), out.size, (out,), grain=1, work=SERIAL_WORK / 2)
    assert seen == {threading.get_ident()} and out.all()
