"""The constant kernel's one-polynomial local fits with float32 inputs: float64's, rounded once.

float32 calls of degree 1 and 2 in one feature are widened to float64 by the call
(:func:`nadaraya.local.job.prepare`), fitted and decided there by :func:`constant.local_fit`, and
rounded once. Checked on every query (far ones too, where float32 moments would leave the degree
to rounding noise), through ``nadaraya.pool`` and ``loo_pool`` on the constant backend: the
prediction is the float64 call's on the same (float32) inputs rounded to float32, bit for bit; the
one polynomial's degree equals the general rule's on the float64 partials; and the prediction is
within 1e-6 (relative to ``max(1, |fit|)``) of a plainly written float64 weighted least squares at
that degree where that fit is well posed. ``local_fit`` itself is float64 only.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("numba")

import nadaraya
from nadaraya.backends import constant
from nadaraya.kernels import get
from nadaraya.local.solve import RCOND, solve

F32 = np.float32


def _case(name, seed=0):
    rng = np.random.default_rng(seed)
    n = 400
    if name == "uniform":
        k = rng.uniform(0, 1, n)
    elif name == "skewed":
        k = rng.exponential(1.0, n)
    elif name == "duplicates":
        k = rng.integers(0, 7, n).astype(float)
    else:  # keys far from 0, a small spread
        k = 1e6 + rng.uniform(0, 1e-1, n)
    v = np.sin(3 * k) + rng.normal(0, 0.1, n)
    w = rng.uniform(0.1, 4.0, n)
    lo, hi = k.min(), k.max()
    span = max(hi - lo, 1.0)
    far = lo + span * np.array([40.0, -3e3])
    q = np.concatenate([np.linspace(lo - 0.5 * span, hi + 0.5 * span, 50), far])
    return q.astype(F32), k.astype(F32), v.astype(F32), w.astype(F32)


def _plain(q, k, v, w, degrees, exclude=None):
    """One float64 lstsq per query at its degree (keys about the query, every key, weights)."""
    q, k, v, w = (np.asarray(a, dtype=np.float64) for a in (q, k, v, w))
    out = np.empty(q.size)
    for i in range(q.size):
        ww = w.copy()
        if exclude is not None:
            ww[exclude[i]] = 0.0
        design = np.vander(k - q[i], degrees[i] + 1, increasing=True)
        root = np.sqrt(ww)
        out[i] = np.linalg.lstsq(design * root[:, None], v * root, rcond=None)[0][0]
    return out


def _pool(q, k, v, w, degree, loo):
    kw = dict(kernel="constant", bandwidth=1.0, degree=degree, sample_weight=w, backend="constant")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nadaraya.loo_pool(k, v, **kw) if loo else nadaraya.pool(q, k, v, **kw)


@pytest.mark.parametrize("name", ["uniform", "skewed", "duplicates", "far"])
@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("loo", [False, True])
def test_float32_degrees_are_the_rules_and_fits_the_plain_ones(name, degree, loo):
    q, k, v, w = _case(name, degree)
    if loo:
        q = k
    ex = np.arange(k.size) if loo else None
    got = _pool(q, k, v, w, degree, loo)
    q64, k64, v64, w64 = (a.astype(np.float64) for a in (q, k, v, w))
    assert got.dtype == F32
    np.testing.assert_array_equal(got, _pool(q64, k64, v64, w64, degree, loo).astype(F32))
    kern = get("constant")
    h = np.ones(1)
    parts = constant.partials(q64[:, None], k64[:, None], v64[:, None], kernel=kern, bandwidth=h,
                              sample_weight=w64, exclude=ex, moments=degree)
    rule = solve(parts, degree, h)
    _, (est64, _, used, _) = constant.local_fit(
        q64[:, None], k64[:, None], v64[:, None], kernel=kern, degree=degree, rcond=RCOND,
        solve=lambda parts: solve(parts, degree, h), sample_weight=w64, exclude=ex, slopes=False)
    assert est64.dtype == np.float64
    np.testing.assert_array_equal(np.asarray(used), rule.degree)
    degs = np.maximum(np.asarray(used), 0)
    want = _plain(q, k, v, w, degs, ex)
    # the far queries' systems are nearly singular (rcond near 1e-10 at degree 1): compare where
    # the plain fit is itself well posed, the queries within the keys' span and half of it again
    lo, hi = float(k.min()), float(k.max())
    span = max(hi - lo, 1.0)
    near = (q >= lo - span) & (q <= hi + span)
    err = np.abs(got[near].astype(np.float64) - want[near])
    assert np.all(err <= 1e-6 * np.maximum(1.0, np.abs(want[near]))), float(err.max())


@pytest.mark.parametrize("degree", [1, 2])
def test_float32_pool_takes_the_polynomial_and_returns_float32(degree):
    """``pool`` with float32 inputs (auto backend): float32, the float64 call of the same inputs
    rounded once, on every query, far ones too."""
    q, k, v, w = _case("uniform", 5)
    kw = {"kernel": "constant", "bandwidth": 0.5, "degree": degree, "sample_weight": w}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = nadaraya.pool(q, k, v, **kw)
        wide = nadaraya.pool(*(a.astype(np.float64) for a in (q, k, v)),
                             **{**kw, "sample_weight": w.astype(float)})
    assert got.dtype == F32
    np.testing.assert_array_equal(got, wide.astype(F32))
    assert np.all(np.isfinite(got))


def test_narrow_shift_is_the_formula_written_out():
    """The float32 rounding's one pass against its NumPy form: rows of equal and differing
    binades and shifts, zero weights, weights far below float32's range, a shift past it."""
    rng = np.random.default_rng(3)
    odd = [0.0, 1e-300, 1e-40, 7e300, 2.5, 2.5]
    weight = np.concatenate([np.full(5, 3.0), rng.uniform(0.1, 9.0, 20), odd])
    shift = np.full(weight.size, 1.234567)
    shift[weight == 0] = -np.inf
    shift[-1] = 1e39
    shift[-2] = -800.0
    got_shift, got_factor = constant._narrow_shift(weight, shift)
    expo = np.where(weight > 0, np.frexp(weight)[1], 0)
    wide = shift + expo * np.log(2.0)
    with np.errstate(over="ignore", invalid="ignore"):
        want_shift = wide.astype(F32)
        gap = wide - want_shift.astype(np.float64)
    want_factor = np.ldexp(np.exp(np.where(np.isfinite(gap), gap, 0.0)), -expo)
    np.testing.assert_array_equal(got_shift, want_shift)
    np.testing.assert_allclose(got_factor, want_factor, rtol=4e-16, atol=0)
