"""float32 local fits on Dask: summed, merged and solved in float64, rounded once, as on one machine.

The NumPy path widens a float32 local fit (degree >= 1) to float64 and rounds its prediction once
(:func:`nadaraya.local.job.prepare`); the Dask path does the same per chunk
(``nadaraya.distributed.pool._Graph._widen``), so its degree rule is float64's and its prediction the
NumPy path's. Tolerance: the Dask sums equal the NumPy path's to float64 rounding of two merge orders
(amplified by the condition of the local system, at most about ``1e5`` here: about ``1e-11``
relative), far below float32's half ulp, so each Dask float32 prediction is within one float32 ulp of
the float64 prediction on the same (float32) data, on every query. Before the Dask path was widened,
queries 2.8 bandwidths outside the data (float64 reciprocal condition about ``1e-5``) fell back to
degree 1 there and were off by 0.1 to 0.2, and a constant-kernel cubic by 4.7.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import nadaraya
from _spies import solved_degrees
from nadaraya import NadarayaWatson

da = pytest.importorskip("dask.array")
pytest.importorskip("nadaraya.distributed.backend")

F32 = np.float32
H = 0.05


def _data():
    """300 float32 keys in [0, 1], sin(6x) values; queries inside, 2.8 bandwidths outside, at the
    constant kernel's far edge and far away."""
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (300, 1)).astype(F32)
    y = np.sin(6 * X[:, 0]).astype(F32)
    Q = np.array([0.5, -0.14, 1.14, 1.2, 3.0, 1e3, -2e4, 2e6], dtype=F32)[:, None]
    return Q, X, y


def _quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fn(*args, **kw)
    return np.asarray(out.compute() if hasattr(out, "compute") else out)


def _within_ulp(got, want64):
    """Each float32 prediction within one float32 ulp of the float64 one (NaN where it is NaN)."""
    assert got.dtype == F32
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want64))
    ok = ~np.isnan(want64)
    err = np.abs(got[ok].astype(np.float64) - want64[ok])
    ulp = np.spacing(np.abs(want64[ok]).astype(F32)).astype(np.float64)
    assert (err <= ulp).all(), (got[ok], want64[ok])


@pytest.mark.parametrize("kernel", ["gaussian", "constant", "laplacian", "logistic", "epanechnikov"])
@pytest.mark.parametrize("degree", [1, 2, 3])
def test_dask_float32_is_numpys(kernel, degree):
    Q, X, y = _data()
    kw = dict(kernel=kernel, bandwidth=H, degree=degree)
    got = _quiet(nadaraya.pool, da.from_array(Q, chunks=3), da.from_array(X, chunks=100),
                 da.from_array(y, chunks=100), **kw)
    want64 = _quiet(nadaraya.pool, Q.astype(np.float64), X.astype(np.float64), y.astype(np.float64), **kw)
    _within_ulp(got, want64)
    _within_ulp(_quiet(nadaraya.pool, Q, X, y, **kw), want64)  # and the NumPy path's float32


def test_dask_float32_keeps_the_degree_outside_the_data(monkeypatch):
    """The reviewer's queries 2.8 bandwidths outside: float64's rule keeps degree 2 there (reciprocal
    condition about 1e-5), so must Dask's; the degrees are recorded from the solve the call makes."""
    Q, X, y = _data()
    Q = Q[1:3]
    kw = dict(kernel="gaussian", bandwidth=H, degree=2)
    with solved_degrees(monkeypatch) as seen:
        got = _quiet(nadaraya.pool, da.from_array(Q), da.from_array(X, chunks=100),
                     da.from_array(y, chunks=100), **kw)
        np.testing.assert_array_equal(seen.pop(), [2, 2])
        _quiet(nadaraya.pool, Q.astype(np.float64), X.astype(np.float64), y.astype(np.float64), **kw)
        np.testing.assert_array_equal(seen.pop(), [2, 2])
    np.testing.assert_array_equal(got, _quiet(nadaraya.pool, Q, X, y, **kw))
    assert abs(float(got[0]) - (-0.92458)) < 1e-5 and abs(float(got[1]) - 0.70770) < 1e-5


@pytest.mark.parametrize("degree", [1, 2])
def test_dask_float32_loo_is_numpys(degree):
    _, X, y = _data()
    kw = dict(kernel="gaussian", bandwidth=H, degree=degree)
    got = _quiet(nadaraya.loo_pool, da.from_array(X, chunks=100), da.from_array(y, chunks=100), **kw)
    _within_ulp(got, _quiet(nadaraya.loo_pool, X.astype(np.float64), y.astype(np.float64), **kw))


def test_dask_estimator_predict_agrees_with_return_std():
    """A Dask-fitted float32 estimator: ``predict(Q)`` (lazy pool) and ``predict(Q, return_std=True)``
    (the single-machine path) give the same mean, up to the float32 rounding of the latter's
    float64 mean."""
    Q, X, y = _data()
    Q = Q[:3]
    model = NadarayaWatson(kernel="gaussian", bandwidth=H, degree=2)
    model.fit(da.from_array(X, chunks=100), da.from_array(y, chunks=100))
    mean = _quiet(model.predict, Q)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mu, sd = model.predict(Q, return_std=True)
    _within_ulp(mean, np.asarray(mu, dtype=np.float64))
    assert np.isfinite(np.asarray(sd)).all()
