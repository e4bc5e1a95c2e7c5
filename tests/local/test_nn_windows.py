"""Nearest-neighbour fits over each query's window of keys equal the dense rows, query by query."""

from __future__ import annotations

import numpy as np
import pytest

import nadaraya
from nadaraya.kernels import get as get_kernel
from nadaraya.local._nn_jit import COND_MAX
from nadaraya.local.neighbours import Geometry, predictions, rows, window_rows


def _dense(geom: Geometry, Q: np.ndarray, sw, kernel, degree: int, V: np.ndarray, loo: bool) -> np.ndarray:
    out = np.empty((Q.shape[0], V.shape[1]))
    for sl, A, _, _ in rows(geom, Q, sw, kernel, degree, loo=loo):
        out[sl] = A @ V
    return out


def _data(seed: int, n: int, ties: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_cauchy(n) if seed % 2 else rng.uniform(-2, 3, n)
    if ties:
        x[: n // 4] = np.round(x[: n // 4], 1)  # duplicates and tied distances
    V = np.column_stack([np.sin(x) + rng.normal(0, 0.3, n), rng.normal(size=n)])
    Q = np.sort(rng.uniform(x.min() - 0.5, x.max() + 0.5, 60))[:, None]
    return x[:, None], V, rng.uniform(0.2, 2.0, n), Q


def _long_double(geom: Geometry, Q: np.ndarray, sw, kernel, degree: int, V: np.ndarray,
                 loo: bool) -> tuple[np.ndarray, np.ndarray]:
    """The local polynomial fit with the same float64 weights, solved in long double (normal
    equations, Gaussian elimination with partial pivoting), and the condition number of each
    query's system (NaN fits where no key has weight)."""
    x = geom.X[:, 0]
    s = np.ones(x.size) if sw is None else sw
    if geom.kind == "generalized_nn":
        H = np.broadcast_to(geom.query_h(Q, loo=loo)[0][:, :1], (Q.shape[0], x.size))
        zs = H[:, :1]
    else:
        H = (geom.donor_h(np.arange(x.size))[:, :, 0] if loo
             else np.broadcast_to(geom.key_h()[:, 0], (Q.shape[0], x.size)))
        zs = np.median(geom.key_h())
    U = (x[None] - Q) / H
    W = s * np.where(np.abs(U) <= 1, kernel.profile(np.clip(U, -1, 1)), 0.0)
    W = W / H if geom.kind == "adaptive_nn" else W
    if loo:
        np.fill_diagonal(W, 0.0)
    Z = ((x[None] - Q) / zs).astype(np.longdouble)
    Phi = np.stack([Z**p for p in range(degree + 1)], axis=2)  # (m, n, P)
    Wl = W.astype(np.longdouble)
    M = np.einsum("mnp,mn,mnq->mpq", Phi, Wl, Phi)
    b = np.einsum("mnp,mn,nc->mpc", Phi, Wl, V.astype(np.longdouble))
    cond = np.linalg.cond(M.astype(np.float64)) if degree else np.ones(M.shape[0])
    P = degree + 1
    for c in range(P):  # forward elimination with partial pivoting, all queries at once
        piv = c + np.argmax(np.abs(M[:, c:, c]), axis=1)
        r = np.arange(M.shape[0])
        M[r, c], M[r, piv] = M[r, piv].copy(), M[r, c].copy()
        b[r, c], b[r, piv] = b[r, piv].copy(), b[r, c].copy()
        for i in range(c + 1, P):
            f = M[:, i, c] / M[:, c, c]
            M[:, i] -= f[:, None] * M[:, c]
            b[:, i] -= f[:, None] * b[:, c]
    sol = np.zeros_like(b)
    for i in range(P - 1, -1, -1):
        sol[:, i] = (b[:, i] - np.einsum("mj,mjc->mc", M[:, i, i + 1:], sol[:, i + 1:])) / M[:, i, i][:, None]
    return sol[:, 0].astype(np.float64), cond


CASES = [(0, 7, False, False), (1, 12, True, True), (2, 25, True, False), (1, 40, False, True)]


@pytest.mark.parametrize("kind", ["generalized_nn", "adaptive_nn"])
@pytest.mark.parametrize("kernel", ["tricube", "epanechnikov", "boxcar", "triweight", "cosine"])
def test_window_fits_equal_the_dense_rows(kind: str, kernel: str) -> None:
    """Every query to 1e-12 of ``sum_j |a_j| |v_j|`` (the scale of the sum ``a @ v``), or to 128
    eps times the condition number of its system where that is larger (extrapolated degree-2
    fits, windows of near-duplicates: condition numbers to 1e10, where both paths round at 1e-10);
    and both paths within 64 eps times it of the fit solved in long double."""
    K = get_kernel(kernel)
    for seed, (degree, k, weighted, ties) in enumerate(CASES):
        X, V, sw, Q = _data(seed, 300, ties)
        geom = Geometry(X, np.array([k]), kind)
        s = sw if weighted else None
        for loo, at in ((False, Q), (True, X)):
            assert window_rows(geom, at, s, K, degree, loo=loo) is not None  # the windowed path ran
            got, _ = predictions(geom, at, s, K, degree, V, loo=loo)
            ref, scale = np.empty_like(got), np.empty_like(got)
            for sl, A, _, _ in rows(geom, at, s, K, degree, loo=loo):
                ref[sl], scale[sl] = A @ V, np.abs(A) @ np.abs(V)
            with np.errstate(invalid="ignore", divide="ignore"):
                exact, cond = _long_double(geom, at, s, K, degree, V, loo)
            # no key of positive weight (the nearest keys' fill) or a singular system (degree 0)
            fill = ~np.isfinite(exact).all(axis=1) | (cond >= COND_MAX)
            what = f"{kind} {kernel} degree {degree} k {k} loo {loo}"
            # a solve rounds to a few eps times the condition number, of the sum's scale
            rounding = 64 * np.finfo(float).eps * cond[~fill, None] * scale[~fill]
            for path in (got, ref):
                assert np.all(np.abs(path[~fill] - exact[~fill]) <= rounding), what
            tol = np.maximum(1e-12, 128 * np.finfo(float).eps * cond)[:, None] * scale
            assert np.all(np.abs(got - ref) <= np.where(fill[:, None], 1e-12 * scale, tol)), what


def test_an_empty_window_takes_the_dense_fill() -> None:
    """Keys of zero weight around a query: the window holds no positive weight, the dense rows'
    ``empty`` rule (the nearest keys) answers, leave-one-out too."""
    x = np.linspace(0.0, 1.0, 40)[:, None]
    sw = np.ones(40)
    sw[10:20] = 0.0
    V = np.cos(3 * x)
    K = get_kernel("tricube")
    geom = Geometry(x, np.array([4]), "generalized_nn")
    Q = np.array([[0.37], [0.8]])
    for loo, at in ((False, Q), (True, x)):
        got, _ = predictions(geom, at, sw, K, 1, V, loo=loo)
        np.testing.assert_allclose(got, _dense(geom, at, sw, K, 1, V, loo), rtol=1e-12, atol=1e-14)


def test_the_estimator_and_pool_take_the_windows() -> None:
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 5, 400)
    y = np.sin(x) + rng.normal(0, 0.2, 400)
    q = np.linspace(-0.2, 5.2, 50)
    model = nadaraya.NadarayaWatson(kernel="tricube", degree=1, bandwidth_type="generalized_nn", bandwidth=30)
    got = model.fit(x[:, None], y).predict(q[:, None])
    geom = Geometry(np.sort(x)[:, None], np.array([30]), "generalized_nn")
    ref = _dense(geom, q[:, None], None, get_kernel("tricube"), 1, y[np.argsort(x)][:, None], False)[:, 0]
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    np.testing.assert_allclose(nadaraya.pool(q, x, y, kernel="tricube", bandwidth=30, degree=1,
                                             bandwidth_type="generalized_nn"), ref, rtol=1e-12)
    # and LOWESS without robustness passes: the same fit
    np.testing.assert_allclose(got, nadaraya.lowess(y, x, frac=30 / 400, it=0, xvals=q), rtol=1e-10)


def test_lowess_fits_come_from_the_sliding_moments() -> None:
    """generalized_nn, tricube, degree 1 (LOWESS's fit) with k above the direct sums' size and
    queries as dense as the keys: the sliding moments serve most queries, each within their
    bound, 3e-11 of max|v|, of the dense rows (measured: within 1e-12); the others (singular
    systems near a cluster of near-duplicates, weights of zero, loose bounds) go to the windows."""
    from nadaraya.local.neighbours import NN_TOL, _lowess_route

    rng = np.random.default_rng(11)
    n = 800
    x = rng.uniform(0.0, 10.0, n)
    x[:40] = 3.0 + 1e-9 * rng.standard_normal(40)  # a cluster: nearly singular windows
    V = np.column_stack([np.sin(x) + rng.normal(0, 0.3, n), 50.0 + x**2])
    sw = rng.uniform(0.0, 2.0, n)
    sw[100:130] = 0.0
    K = get_kernel("tricube")
    Q = np.r_[np.linspace(-1.0, 11.0, 2000), 3.0, x[:5], x[200:210]][:, None]
    for k in (60, 300):
        geom = Geometry(x[:, None], np.array([k]), "generalized_nn")
        for s in (None, sw):
            _, ok = _lowess_route(geom, Q, s, K, 1, V)
            assert ok.mean() > 0.8
            got, _ = predictions(geom, Q, s, K, 1, V)
            ref = _dense(geom, Q, s, K, 1, V, False)
            err = np.abs(got - ref) / np.abs(V).max(axis=0)
            assert np.all(err <= NN_TOL) and err.max() <= 1e-12, (k, err.max())
