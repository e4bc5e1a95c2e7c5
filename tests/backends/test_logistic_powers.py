"""The logistic backend's moments (local fits): the tails' factors taken as powers, not an ``exp``
per term, against 50 digits, and the moments of every query against the reference backend at
hostile inputs (dense keys where every term steps, Cauchy keys, duplicates, gaps that underflow,
keys near 1e6, leave-one-out inside and outside the window, sample weights with zeros, float32)."""

from __future__ import annotations

import numpy as np
import pytest

from nadaraya.backends import _logistic_moments as lm
from nadaraya.backends import logistic, reference
from nadaraya.kernels import get

K = get("logistic")
TOL = 1e-12
U = 2.0**-53
#: gaps in bandwidths: zero (duplicates), subnormal, tiny, across SMALL at every term, past the
#: underflow of e^-x
GAPS = (0.0, 5e-324, 1e-300, 1e-16, 1e-9, 1e-4, 0.0013, 0.01, 0.1249, 0.2, 0.249999, 0.25, 0.3, 1.0,
        3.7, 40.0, 700.0, 744.0, 800.0)


@pytest.mark.parametrize("x", GAPS)
def test_factors_against_the_exponential_in_50_digits(x):
    """``one + mul`` is ``e^(-k x)`` for every term ``k <= 193`` within ``(2k + 2 + k x)`` units of
    ``2^-53`` relative (k roundings of the products, one of the ``exp``'s argument), or a
    subnormal's absolute rounding; and ``mul`` holds ``e^(-kx) - 1`` exactly where
    ``k x < SMALL`` (``one`` 1), ``e^(-kx)`` beyond (``one`` 0)."""
    mpmath = pytest.importorskip("mpmath")
    kmax = logistic.terms(0.25)
    mul, one = np.empty(kmax), np.empty(kmax)
    lm.factors(x, mul, one)
    with mpmath.workdps(50):
        for k in range(1, kmax + 1):
            small = k * x < lm.SMALL
            assert one[k - 1] == (1.0 if small else 0.0)
            exact = mpmath.exp(-k * mpmath.mpf(x))
            got = mpmath.mpf(float(one[k - 1])) + mpmath.mpf(float(mul[k - 1]))
            bound = (2 * k + 2 + k * x) * U * exact + 2.0**-1074 * k
            assert abs(got - exact) <= bound, (k, float(got), float(exact))
            if small:  # as expm1: the factor's distance from 1 within the same bound, relative to it
                m = mpmath.expm1(-k * mpmath.mpf(x))
                assert abs(mpmath.mpf(float(mul[k - 1])) - m) <= (2 * k + 2) * U * abs(m)


def _check_moments(q, x, v, h, degree, sw=None, ex=None, half_width=None, dtype=np.float64, tol=TOL):
    """Every query's value and moment sums over its weight within ``tol`` of their natural size
    ``(max|v| + 1) (1 + sum w u^(2r) / sum w)`` (the reference's), and its total weight
    ``shift + log weight`` within ``tol`` relative (the shift a million bandwidths out holds no
    more digits)."""
    kw = {"kernel": K, "bandwidth": np.array([h]), "sample_weight": sw, "exclude": ex, "moments": degree}
    a = logistic.partials(q.astype(dtype), x.astype(dtype), v.astype(dtype), half_width=half_width,
                          **{**kw, "bandwidth": np.array([h], dtype=dtype)})
    b = reference.partials(q, x, v, **kw)
    assert np.array_equal(a.weight > 0, b.weight > 0)
    pos = b.weight > 0
    wa, wb = a.weight[pos].astype(np.float64), b.weight[pos]
    la, lb = a.shift[pos] + np.log(wa), b.shift[pos] + np.log(wb)
    assert np.all(np.abs(la - lb) <= tol * np.maximum(1.0, np.abs(lb)))
    bound = (np.abs(v).max() + 1.0) * (1.0 + b.moments[2 * degree - 1].reshape(-1)[pos] / wb)
    for got, want in zip((a.value, *a.moments), (b.value, *b.moments)):
        shape = (-1,) + (1,) * (got.ndim - 1)
        err = np.abs(got[pos].astype(np.float64) / wa.reshape(shape) - want[pos] / wb.reshape(shape))
        assert np.all(err <= tol * bound.reshape(shape)), float(np.max(err / bound.reshape(shape)))


def _keys(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "dense":  # hundreds of keys a bandwidth at the scales below: the window is 0.25 wide
        return rng.uniform(0.0, 1.0, n)
    if kind == "cauchy":
        return np.clip(rng.standard_cauchy(n), -1e4, 1e4)
    if kind == "duplicates":
        return np.round(rng.uniform(0.0, 1.0, n), 2)
    if kind == "clustered":  # gaps that underflow every term between the clusters
        return rng.choice([0.0, 0.3, 0.31, 0.9], n) + rng.normal(0.0, 1e-4, n)
    return 1e6 + rng.uniform(0.0, 1e-3, n)  # far from 0


@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("kind", ["dense", "cauchy", "duplicates", "clustered", "far"])
def test_moments_at_hostile_keys(degree, kind):
    rng = np.random.default_rng(11)
    n = 600
    x = _keys(kind, n, rng)
    v = rng.normal(size=(n, 2))
    sw = rng.uniform(0.0, 2.0, n)
    sw[::7] = 0.0
    span = float(np.ptp(x))
    for scale in (1e-4, 0.1, 1e2):
        h = scale * span
        # queries outside the keys up to 50 bandwidths (beyond, the distances in bandwidths hold
        # fewer digits than the test asks: 1e7 bandwidths out, their last bit is 2e-9)
        q = np.concatenate([_keys(kind, 300, rng), rng.uniform(x.min() - 50 * h, x.max() + 50 * h, 40)])
        _check_moments(q[:, None], x[:, None], v, h, degree, sw=sw)
        _check_moments(x[:, None], x[:, None], v, h, degree, sw=sw, ex=np.arange(n))  # leave-one-out


@pytest.mark.parametrize("degree", [1, 2])
def test_every_term_steps_at_the_narrowest_window(degree):
    """n = 1200 keys at 480 a bandwidth: the window is 0.25 wide and the series takes 193 terms,
    all in the ``S + m S`` form (gaps 1/480 of a bandwidth); every window width the same sums."""
    rng = np.random.default_rng(12)
    x = rng.uniform(0.0, 1.0, 1200)
    v = rng.normal(size=(1200, 1))
    h = 0.4
    assert logistic.width(1200, h, float(np.ptp(x))) == 0.25
    for half_width in (None, 1.0, 8.0):
        _check_moments(x[:, None], x[:, None], v, h, degree, half_width=half_width)
    _check_moments(x[:, None], x[:, None], v, h, degree, ex=np.arange(1200))


@pytest.mark.parametrize("degree", [1, 2])
def test_left_out_key_among_the_far_ones_with_moments(degree):
    rng = np.random.default_rng(13)
    x = rng.uniform(0.0, 1.0, 400)
    v = rng.normal(size=(400, 2))
    q = rng.uniform(0.0, 1.0, 200)
    _check_moments(q[:, None], x[:, None], v, 0.002, degree, ex=rng.integers(-1, 400, 200))


@pytest.mark.parametrize("degree", [1, 2])
def test_moments_in_float32(degree):
    rng = np.random.default_rng(14)
    x = rng.uniform(0.0, 1.0, 500)
    v = rng.normal(size=(500, 1))
    xf = x.astype(np.float32).astype(np.float64)  # the keys float32 holds, so only the sums round
    _check_moments(xf[:, None], xf[:, None], v.astype(np.float32).astype(np.float64), 0.01, degree,
                   dtype=np.float32, tol=1e-5)
