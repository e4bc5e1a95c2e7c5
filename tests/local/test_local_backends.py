"""Local polynomial and mixed fits are the same on every backend: reference, fused, windowed.

Each backend computes the moment partial sums of a degree; one solve turns them into fits. So
the partials (normalised by the weight sum) agree to float64 rounding, the degree each query
got is the same, and the predictions agree to rounding amplified by the local system's
condition. float32 follows the flash-attention rule of the suite: at most twice the error of a
plain float32 implementation (written here), both measured against float64.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_local import design, local_fit

import nadaraya
from nadaraya import backends
from nadaraya.kernels import get
from nadaraya.local import fit as _fit
from nadaraya.local import job as job_module
from naive import naive_weights

FAST = ["fused", "windowed"]
KERNELS = ["epanechnikov", "tricube", "boxcar", "gaussian"]


def _supported(backend: str, kernel: str, d: int) -> None:
    if backend not in backends.available():
        pytest.skip(f"{backend} is not installed")
    if not backends.get(backend).supports(get(kernel), d):
        pytest.skip(f"{backend} does not support {kernel} in d={d}")


def _data(n: int, m: int, d: int, seed: int):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, d))
    V = np.column_stack([np.cos(4 * X).sum(axis=1), X[:, 0] ** 2 - X.sum(axis=1)])
    Q = rng.uniform(-0.1, 1.1, size=(m, d))
    sw = rng.uniform(0.5, 2.0, size=n)
    sw[rng.random(n) < 0.2] = 0.0  # zero weights among them
    if not sw.any():
        sw[0] = 1.0
    return Q, X, V, sw


def _job(Q, X, V, sw, kernel, h, degree, var_types=None):
    return job_module.prepare(Q, X, V, kernel=kernel, bandwidth=h, sample_weight=sw, degree=degree,
                        var_types=var_types, categorical_kernel="classic")


def _normalised(parts):
    """What the partials mean, independent of the shift: log sum w, and every sum over sum w."""
    ok = parts.weight > 0
    w = np.where(ok, parts.weight, 1.0).astype(np.float64)
    per = lambda a: a.astype(np.float64) / w.reshape((-1,) + (1,) * (a.ndim - 1))  # noqa: E731
    lse = np.where(ok, parts.shift.astype(np.float64) + np.log(w), -np.inf)
    return ok, lse, [per(parts.value)] + [per(mm) for mm in parts.moments]


def _assert_same_partials(got, want):
    ok_g, lse_g, sums_g = _normalised(got)
    ok_w, lse_w, sums_w = _normalised(want)
    np.testing.assert_array_equal(ok_g, ok_w)
    np.testing.assert_allclose(lse_g[ok_w], lse_w[ok_w], rtol=1e-12, atol=1e-12)
    for a, b in zip(sums_g, sums_w, strict=True):
        scale = np.abs(b[ok_w]).max(initial=0.0) + 1e-300
        np.testing.assert_allclose(a[ok_w], b[ok_w], rtol=1e-10, atol=1e-12 * scale)


def _fits(job, backend, exclude=None):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        parts = _fit.partials(job, exclude, backend)
        out, fit = _fit.fitted(job, parts, "nan", exclude)
    singular = [str(w.message) for w in rec if issubclass(w.category, job_module.SingularFitWarning)]
    return parts, out, fit, singular


def _assert_same_fits(job, backend, exclude=None, rtol=1e-8):
    """Same partials (to rounding), same degrees, same warning; predictions within ``rtol`` (the
    solve amplifies the partials' rounding by the condition of the local system: up to 1e10
    under nadaraya.local.solve's RCOND rule, so an arbitrary problem needs about 1e-5)."""
    want_parts, want, want_fit, want_warn = _fits(job, "reference", exclude)
    parts, got, fit, warn = _fits(job, backend, exclude)
    _assert_same_partials(parts, want_parts)
    np.testing.assert_array_equal(fit.degree, want_fit.degree)
    assert warn == want_warn
    scale = np.nanmax(np.abs(want), initial=1.0)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, equal_nan=True)
    loose = 10 * rtol
    np.testing.assert_allclose(fit.slope, want_fit.slope, rtol=loose, atol=loose * scale, equal_nan=True)


@pytest.mark.parametrize("backend", FAST)
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("degree", [0, 1, 2])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 4097])
def test_backends_agree_with_reference(backend, kernel, d, degree, n):
    """Two outputs, sample weights with zeros, queries inside and outside the data."""
    _supported(backend, kernel, d)
    Q, X, V, sw = _data(n, 37, d, seed=1000 * d + n)
    _assert_same_fits(_job(Q, X, V, sw, kernel, np.array([0.45, 0.6])[:d], degree), backend)


@pytest.mark.parametrize("backend", FAST)
@pytest.mark.parametrize("kernel", ["epanechnikov", "gaussian"])
@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("degree", [1, 2])
def test_backends_agree_on_leave_one_out(backend, kernel, d, degree):
    _supported(backend, kernel, d)
    _, X, V, sw = _data(301, 1, d, seed=d)
    X[5] = X[6]  # a repeated key
    _assert_same_fits(_job(None, X, V, sw, kernel, 0.3, degree), backend, np.arange(301))


@pytest.mark.parametrize("backend", ["reference", *FAST])
@pytest.mark.parametrize("kernel", ["epanechnikov", "gaussian"])
@pytest.mark.parametrize("degree", [0, 1, 2])
def test_public_pool_and_loo_pool_on_every_backend(backend, kernel, degree):
    """nadaraya.pool(..., backend=) against the dense oracle; loo_pool against refits."""
    _supported(backend, kernel, 1)
    Q, X, V, sw = _data(200, 30, 1, seed=3)
    h = 0.3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nadaraya.EmptyWindowWarning)
        got = nadaraya.pool(Q, X, V, kernel=kernel, bandwidth=h, sample_weight=sw, degree=degree,
                            backend=backend)
        loo = nadaraya.loo_pool(X[:40], V[:40, 0], kernel=kernel, bandwidth=h, sample_weight=sw[:40],
                                degree=degree, backend=backend)
    want, _ = local_fit(Q, X, V, naive_weights(Q, X, kernel, h, sw), h, degree)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9, equal_nan=True)
    assert loo.shape == (40,)
    for i in range(40):
        rest = np.arange(40) != i
        w = naive_weights(X[i : i + 1], X[:40][rest], kernel, h, sw[:40][rest])
        ref = local_fit(X[i : i + 1], X[:40][rest], V[:40, 0][rest], w, h, degree)[0][0, 0]
        np.testing.assert_allclose(loo[i], ref, rtol=1e-8, atol=1e-9, equal_nan=True)


@pytest.mark.parametrize("backend", FAST)
@pytest.mark.parametrize("kernel", ["epanechnikov", "gaussian"])
@pytest.mark.parametrize("degree", [0, 1])
def test_backends_agree_on_mixed_data(backend, kernel, degree):
    """Continuous columns on the backend, categorical factors merged after: same on every backend
    (queries at a category unseen in training included)."""
    _supported(backend, kernel, 1)
    rng = np.random.default_rng(29)
    n = 500
    X = np.column_stack([rng.uniform(size=n), rng.integers(0, 3, n), rng.integers(0, 4, n)]).astype(float)
    V = np.column_stack([X[:, 0] + X[:, 1], np.sin(X[:, 2])])
    Q = np.column_stack([rng.uniform(size=40), rng.integers(0, 4, 40), rng.integers(0, 5, 40)]).astype(float)
    job = _job(Q, X, V, None, kernel, np.array([0.2, 0.3, 0.4]), degree, var_types="cuo")
    _assert_same_fits(job, backend)
    _assert_same_fits(_job(None, X, V, None, kernel, np.array([0.2, 0.3, 0.4]), degree, "cuo"), backend,
                      np.arange(n))


# --- float32 ---------------------------------------------------------------------------------------


def _sum32(a: np.ndarray) -> np.ndarray:
    """Sum over the first axis in float32 by NumPy's pairwise summation (its own loop, not a
    BLAS kernel: the same order, so the same rounding, on every machine)."""
    a = np.asarray(a, dtype=np.float32)
    return np.ascontiguousarray(np.moveaxis(a, 0, -1)).sum(axis=-1)


def _solve32(M: np.ndarray, r: np.ndarray) -> np.ndarray:
    """``M x = r`` by Gaussian elimination with partial pivoting, written out in float32 (no
    LAPACK kernel, whose order of operations varies with the machine)."""
    f = np.float32
    A = np.concatenate([M, r[:, None]], axis=1).astype(f)
    P = A.shape[0]
    for c in range(P):
        piv = c + int(np.argmax(np.abs(A[c:, c])))
        A[[c, piv]] = A[[piv, c]]
        for i in range(c + 1, P):
            A[i, c:] = A[i, c:] - f(A[i, c] / A[c, c]) * A[c, c:]
    x = np.zeros(P, f)
    for i in range(P - 1, -1, -1):
        rest = _sum32(A[i, i + 1 : P] * x[i + 1 :]) if i + 1 < P else f(0.0)
        x[i] = f(A[i, P] - rest) / A[i, i]
    return x


def plain_float32(Q, X, y, kernel, h, degree):
    """The local polynomial fit written plainly in float32: dense weights, the normal equations
    in the scaled coordinates z = (k - q) / h as float32 sums, Gaussian elimination. No BLAS or
    LAPACK call, so its error (the yardstick below) is the same on every machine."""
    f = np.float32
    Q, X, y, h = Q.astype(f), X.astype(f), y.astype(f), np.asarray(h, f)
    prof = get(kernel).profile
    out = np.empty(Q.shape[0], f)
    for i, q in enumerate(Q):
        z = ((X - q) / h).astype(f)
        w = np.prod(prof(z), axis=1).astype(f)
        B = design(z, degree).astype(f)
        wB = B * w[:, None]
        M, R = _sum32(wB[:, :, None] * B[:, None, :]), _sum32(wB * y[:, None])
        out[i] = _solve32(M, R)[0]
    return out


def test_plain_float32_solves_like_float64():
    """The written-out float32 solve is a solve: a well-conditioned system to float32 rounding."""
    rng = np.random.default_rng(0)
    A = rng.normal(size=(6, 6)) + 6 * np.eye(6)
    b = rng.normal(size=6)
    np.testing.assert_allclose(_solve32(A, b), np.linalg.solve(A, b), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(_sum32(np.arange(10.0)[:, None] * np.ones((1, 2))), [45.0, 45.0])


@pytest.mark.parametrize("backend", ["reference", *FAST])
@pytest.mark.parametrize("kernel", ["epanechnikov", "gaussian"])
@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("degree", [0, 1, 2])
def test_float32_within_twice_a_plain_float32_implementation(backend, kernel, d, degree):
    _supported(backend, kernel, d)
    rng = np.random.default_rng(31 + d)
    X = rng.uniform(size=(1500, d))
    y = np.sin(3 * X).sum(axis=1) + 1.0
    Q = rng.uniform(0.02, 0.98, size=(40, d))
    h = 0.2
    exact = nadaraya.pool(Q, X, y, kernel=kernel, bandwidth=h, degree=degree, backend="reference")
    plain = plain_float32(Q, X, y, kernel, h, degree).astype(np.float64)
    f32 = [a.astype(np.float32) for a in (Q, X, y)]
    got = nadaraya.pool(*f32, kernel=kernel, bandwidth=h, degree=degree, backend=backend)
    assert got.dtype == np.float32
    err_plain = np.abs(plain - exact).max()
    err_got = np.abs(got.astype(np.float64) - exact).max()
    floor = 4 * np.finfo(np.float32).eps * np.abs(exact).max()  # where the plain fit happens to be exact
    assert err_got <= 2.0 * err_plain + floor, (err_got, err_plain)


# --- fuzzing and ties -------------------------------------------------------------------------------


@st.composite
def _problem(draw):
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    d, n, m = draw(st.integers(1, 3)), draw(st.integers(1, 60)), draw(st.integers(1, 20))
    if draw(st.booleans()):
        X = rng.integers(0, 5, size=(n, d)) * 0.25  # a grid: duplicates, keys on window edges
    else:
        X = rng.normal(size=(n, d)) * 10 ** draw(st.floats(-3, 3))
    scale = np.abs(X).max() + 1
    Q = X[rng.integers(0, n, size=m)] + draw(st.sampled_from([0.0, 0.3])) * rng.normal(size=(m, d)) * scale
    V = rng.normal(size=(n, draw(st.integers(1, 2))))
    h = np.abs(rng.normal(size=d)) * scale * 0.5 + 1e-3 * scale
    sw = rng.integers(1, 3, size=n) * (rng.random(n) < 0.8) if draw(st.booleans()) else None
    if sw is not None and not sw.any():
        sw[0] = 1
    return Q, X, V, h, sw


@settings(max_examples=60)
@given(_problem(), st.integers(0, 2), st.sampled_from(["epanechnikov", "boxcar", "triangular", "gaussian"]),
       st.sampled_from(FAST), st.booleans())
def test_backends_agree_on_random_problems(problem, degree, kernel, backend, loo):
    """Grids with duplicates and keys exactly on window edges, scales from 1e-3 to 1e3, zero
    sample weights, pool and loo_pool: each backend's answer is the reference's."""
    Q, X, V, h, sw = problem
    if not backends.get(backend).supports(get(kernel), X.shape[1]):
        return
    job = _job(None if loo else Q, X, V, sw, kernel, h, degree)
    _assert_same_fits(job, backend, np.arange(X.shape[0]) if loo else None, rtol=1e-5)


@pytest.mark.parametrize("backend", FAST)
@pytest.mark.parametrize("degree", [0, 1, 2])
@pytest.mark.parametrize("d", [1, 2, 3])
def test_boxcar_keys_on_the_window_edge(backend, degree, d):
    """A grid of keys one bandwidth apart: |u| = 1 (in or out by rounding) decides the same way."""
    _supported(backend, "boxcar", d)
    g = np.round(np.arange(0.0, 1.01, 0.1), 12)
    X = np.stack(np.meshgrid(*[g] * d, indexing="ij"), axis=-1).reshape(-1, d)[:: max(1, 3 ** (d - 1))]
    V = np.column_stack([np.sin(5 * X).sum(axis=1)])
    job = _job(X, X, V, None, "boxcar", np.array([0.1, 0.2, 0.3])[:d], degree)
    _assert_same_fits(job, backend)
