"""``tol=None`` means exact sums everywhere: a backend that is never exact (the Taylor series,
the binned sums) refuses it by name instead of taking a tolerance of its own."""

from __future__ import annotations

import numpy as np
import pytest

import nadaraya
from nadaraya import backends
from nadaraya.kernels import get


def _data():
    rng = np.random.default_rng(5)
    x = rng.uniform(0, 5, 4000)
    return x[:300], x, np.sin(x)


@pytest.mark.parametrize(("backend", "kernel"), [("binned", "logistic"), ("taylor", "gaussian")])
def test_a_backend_within_a_tolerance_refuses_tol_none(backend, kernel):
    q, x, y = _data()
    for call in (
        lambda: nadaraya.pool(q, x, y, kernel=kernel, bandwidth=0.2, backend=backend),
        lambda: nadaraya.pool(q, x, y, kernel=kernel, bandwidth=0.2, backend=backend, tol=None),
        lambda: nadaraya.NadarayaWatson(kernel=kernel, bandwidth=0.2, backend=backend).fit(x[:, None], y)
        .predict(q[:, None]),
        lambda: backends.compute(backend, q[:, None], x[:, None], y[:, None], kernel=get(kernel),
                                 bandwidth=np.array([0.2])),
    ):
        with pytest.raises(ValueError, match=rf"backend='{backend}'.*tol=None.*exact"):
            call()


@pytest.mark.parametrize(("backend", "kernel"), [("binned", "logistic"), ("taylor", "gaussian")])
def test_with_a_tol_it_is_within_it(backend, kernel):
    q, x, y = _data()
    exact = nadaraya.pool(q, x, y, kernel=kernel, bandwidth=0.2, backend="reference")
    got = nadaraya.pool(q, x, y, kernel=kernel, bandwidth=0.2, backend=backend, tol=1e-4)
    assert np.abs(got - exact).max() <= 1e-4 * np.abs(y).max()


def test_auto_with_tol_none_is_exact_and_never_picks_them():
    q, x, y = _data()
    for kernel in ("logistic", "gaussian"):
        exact = nadaraya.pool(q, x, y, kernel=kernel, bandwidth=0.2, backend="reference")
        got = nadaraya.pool(q, x, y, kernel=kernel, bandwidth=0.2)
        np.testing.assert_allclose(got, exact, rtol=1e-12, atol=1e-13)
        for d, keys in ((1, x[:, None]), (2, np.c_[x, x[::-1]])):
            h = np.full(d, 0.2)
            pick = backends.choose_for_data(get(kernel), keys[:300], keys, h, tol=None)
            assert pick is None or pick.name not in backends.WITHIN_TOL
            assert backends.choose(get(kernel), n=10**7, m=10**7, d=d).name not in backends.WITHIN_TOL
